"""The JVM peer tests' brokers and fixtures (tests/jvm's conftest.py imports them): Kafka's Java clients and
command-line tools against moldau, run with ``java -cp``.

The harness (``harness.jvm``) resolves each module's jars with Maven into a cache outside the repository;
``scripts/setup.sh --test`` warms it so that no test downloads anything.

Fixtures:
* ``target`` (module): the broker under test, one per parameter: ``moldau`` (one broker process) in the
  default run; ``cluster`` (three moldau brokers and a ZooKeeper, replication factor 3) and ``kafka`` (the
  Apache Kafka broker of the same version as the clients, KRaft, one node: the control that checks the
  tests themselves) with the whole matrix only (marked ``jvm_full``; tests/jvm's conftest.py skips them
  unless ``MOLDAU_JVM_FULL=1``).
  A test module may give the brokers settings of its own: ``BROKER_SETTINGS = {kind: {name: value}}``.
* ``jtopic``: ``jtopic(partitions=1, config=None)`` creates a topic on ``target``.
* ``jrun``: ``jrun(main_class, *args, timeout=120)`` runs a program of the ``clients`` module against
  ``target`` to its end and returns its JSON lines (a non-zero exit fails the test with its output).
* ``jstart``: ``jstart(main_class, *args)`` starts one (``jvm.JsonProcess``), finished at teardown.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Callable, Iterator

import pytest

from harness.brokerproc import BrokerProcess, ClusterProcess, KafkaProcess
from harness.kafkautil import unique_topic

# the moldau test brokers' settings (as harness.fixtures'): a new group's first join is answered at once
MOLDAU_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


def make_broker(kind: str, base: Path, settings: dict[str, str] | None = None) -> BrokerProcess:
    """A started broker of ``kind`` (moldau, cluster or kafka) with its files under ``base``."""
    merged = dict(MOLDAU_SETTINGS) if kind in ("moldau", "cluster") else {}
    merged.update(settings or {})
    b: BrokerProcess
    if kind == "cluster":
        b = ClusterProcess(base / "data", settings=merged, log_dir=base)
    elif kind == "kafka":
        b = KafkaProcess(base / "data", settings=merged, log_dir=base)
    else:
        b = BrokerProcess(kind, base / "data", settings=merged, log_dir=base)
    try:
        b.start(timeout=90.0)
    except BaseException:
        b.close()
        raise
    return b


@pytest.fixture(scope="module", params=[
    "moldau",
    pytest.param("cluster", marks=pytest.mark.jvm_full),
    pytest.param("kafka", marks=pytest.mark.jvm_full),
])
def target(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # a test module's own broker settings: BROKER_SETTINGS = {kind: {name: value}}
    settings = getattr(request.module, "BROKER_SETTINGS", {}).get(request.param)
    b = make_broker(request.param, tmp_path_factory.mktemp(f"jvm-{request.param}"), settings)
    try:
        yield b
    finally:
        gc.collect()
        b.close()


def replication_factor(b: BrokerProcess) -> int:
    return 3 if b.kind == "cluster" else 1


@pytest.fixture
def jtopic(target: BrokerProcess, request: pytest.FixtureRequest) -> Callable[..., str]:
    from confluent_kafka.admin import NewTopic

    from harness.kafkautil import admin, wait_for_topic

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = unique_topic(request.node.name)
        client = admin(target.bootstrap)
        fut = client.create_topics([NewTopic(name, num_partitions=partitions,
                                             replication_factor=replication_factor(target),
                                             config=config or {})], request_timeout=30)
        fut[name].result(timeout=30)
        wait_for_topic(target.bootstrap, name, partitions, timeout=30, client=client)
        return name

    return make


@pytest.fixture
def jrun(target: BrokerProcess) -> Callable[..., list[dict[str, object]]]:
    from harness import jvm

    def run(main_class: str, *args: str, timeout: float = 120.0,
            check: bool = True) -> list[dict[str, object]]:
        done = jvm.run("clients", f"moldau.jvm.{main_class}", ["--bootstrap", target.bootstrap, *args],
                       timeout=timeout, check=check)
        return jvm.json_lines(done.stdout)

    return run


@pytest.fixture
def jstart(target: BrokerProcess, tmp_path: Path) -> Iterator[Callable[..., object]]:
    from harness import jvm

    started: list[jvm.JsonProcess] = []

    def start(main_class: str, *args: str) -> jvm.JsonProcess:
        p = jvm.JsonProcess("clients", f"moldau.jvm.{main_class}", ["--bootstrap", target.bootstrap, *args],
                            stderr_path=tmp_path / f"{main_class}-{len(started)}.stderr")
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            p.finish(timeout=30)
