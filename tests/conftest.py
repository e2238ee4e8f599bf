"""Root test configuration: markers and hypothesis profiles shared by unit and integration tests, and the
broker markers' effect (skip or xfail per broker under test) on every collected test.

The helpers and fixtures every test directory shares are the package ``harness`` (tests/harness), importable
because pyproject.toml's ``[tool.pytest.ini_options] pythonpath`` puts tests/ on sys.path."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from harness.fixtures import apply_broker_markers, report_header

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "moldau_only(reason): needs a moldau broker feature the reference broker (tansu) lacks; "
        "reported as skipped when MOLDAU_TEST_BROKER=tansu (the three-broker cluster is moldau: it runs "
        "them)",
    )
    config.addinivalue_line(
        "markers",
        "single_broker(reason): needs exactly one broker process (kills or restarts it, reads its data dir, "
        "sends raw requests to its one address, puts a proxy in front of it); the reason says why it does "
        "not apply to a cluster; reported as skipped when MOLDAU_TEST_BROKER=cluster",
    )
    config.addinivalue_line(
        "markers",
        "tansu_gap(reason): the reference broker (tansu) is known to fail this (a broker defect, not a "
        "test defect); reported as xfail when MOLDAU_TEST_BROKER=tansu (not run unless "
        "MOLDAU_TEST_RUN_GAPS=1)",
    )
    config.addinivalue_line(
        "markers",
        "durable(reason): tests what the log keeps across a broker restart or crash; reported as skipped "
        "when MOLDAU_TEST_BROKER=memory (log.dirs=:memory: keeps nothing past the broker's process)",
    )
    config.addinivalue_line(
        "markers",
        "kafka_differs(reason): moldau differs from Apache Kafka here on purpose (docs/compat.md); "
        "reported as skipped when MOLDAU_TEST_BROKER=kafka",
    )
    config.addinivalue_line(
        "markers",
        "kafka_bug(reason): Apache Kafka fails this by a bug of its own, named with its upstream issue "
        "(docs/compat.md); run and reported as xfail when MOLDAU_TEST_BROKER=kafka",
    )
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    # registered here, not in tests/jvm/conftest.py, whose module-level params use it before its own hooks run
    config.addinivalue_line(
        "markers", "jvm_full: part of the whole JVM matrix only (run with MOLDAU_JVM_FULL=1)")
    config.addinivalue_line(
        "markers", "registry_full: the longer schema registry tests (run with MOLDAU_REGISTRY_FULL=1)")
    # kafka-python loads its JSON schemas with importlib.resources' legacy API
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.protocol.schemas.load_json")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")


def pytest_report_header(config: pytest.Config) -> str:
    return report_header()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apply_broker_markers(items)
