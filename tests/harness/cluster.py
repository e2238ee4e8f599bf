"""The cluster fixtures (tests/cluster's conftest.py imports them): a real ZooKeeper process and three
``moldau broker`` processes on loopback, each with its own data dir under the test's temporary folder
(``moldau.broker.cluster.local.LocalCluster``). Every process is stopped at the end of the test, also when it
fails; the folder goes with pytest's tmp_path.

Skipped (with the reason) where ZooKeeper is not installed: ``scripts/setup.sh --test`` installs it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from moldau.broker.cluster.local import LocalCluster, free_port, zookeeper_installed

# quick failure detection for tests: sessions expire after 4 s, followers leave the ISR after 3 s
FAST = [
    "zookeeper.session.timeout.ms=4000",
    "replica.lag.time.max.ms=3000",
    "replica.fetch.wait.max.ms=200",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=6",
    "transaction.state.log.num.partitions=6",
    "offsets.topic.replication.factor=3",
    "transaction.state.log.replication.factor=3",
    "transaction.state.log.min.isr=2",
]


def wait_formed(c: LocalCluster, timeout: float = 30.0) -> None:
    """Every broker knows every broker and the controller (the controller's UpdateMetadata arrived)."""
    from harness.clusterutil import wait_until

    n = len(c.brokers)
    for b in c.brokers:
        if b.running:
            wait_until(
                lambda b=b: _sees_cluster(b.address, n), timeout, f"broker {b.node_id} to see the cluster"
            )


def _sees_cluster(address: str, n: int) -> bool:
    from harness.clusterutil import admin

    md = admin(address).list_topics(timeout=5)
    return len(md.brokers) == n and md.controller_id > 0


def require_zookeeper() -> None:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (scripts/setup.sh --test installs Debian's zookeeper)")


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    require_zookeeper()
    made: list[LocalCluster] = []

    def make(brokers: int = 3, configs: list[str] | None = None, metrics: bool = False,
             per_broker: dict[int, list[str]] | None = None) -> LocalCluster:
        """``per_broker``: more settings for some brokers only (node id -> ["key=value", ..])."""
        c = LocalCluster(
            str(tmp_path / f"cluster{len(made)}"), brokers, broker_configs=FAST + (configs or [])
        )
        for node_id, extra in (per_broker or {}).items():
            c.broker(node_id).extra.extend(extra)
        if metrics:  # each broker's Prometheus endpoint on a port of its own: b.metrics_port
            for b in c.brokers:
                b.metrics_port = free_port()
                b.extra.append(f"metrics.listener=127.0.0.1:{b.metrics_port}")
        made.append(c)
        c.start()
        wait_formed(c)
        return c

    try:
        yield make
    finally:
        gc.collect()  # librdkafka clients dropped by the test go before their brokers do
        for c in made:
            c.stop(graceful=False)  # the data goes with tmp_path; graceful stops are tested on their own
        for c in made:  # the brokers' logs help when a test failed
            for b in c.brokers:
                try:
                    tail = Path(b.log_path).read_text(errors="replace").splitlines()[-15:]
                except OSError:
                    continue
                print(f"--- broker {b.node_id} log tail ---", *tail, sep="\n")


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster of three brokers shared by a module's tests (they must leave it whole)."""
    yield from shared_cluster(tmp_path_factory.mktemp("module-cluster"), ["default.replication.factor=3"])


def shared_cluster(folder: Path, configs: list[str]) -> Iterator[LocalCluster]:
    """A module-scoped cluster fixture's body: three brokers with FAST + ``configs``, stopped at the end."""
    require_zookeeper()
    c = LocalCluster(str(folder), 3, broker_configs=FAST + configs)
    try:
        c.start()
        wait_formed(c)
        yield c
    finally:
        gc.collect()  # librdkafka clients dropped by the tests go before their brokers do
        c.stop(graceful=False)


@pytest.fixture
def cluster(cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    return cluster_factory(3)
