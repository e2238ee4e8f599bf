"""Consumer groups in the cluster: the group coordinator is the leader of the group's __consumer_offsets
partition (replication factor 3); a group of three confluent-kafka consumers keeps consuming through a kill
-9 of
the broker that hosts its coordinator, and no committed offset is lost."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.clusterutil import QUIET, admin, create_topic, fully_replicated, wait_until

pytestmark = pytest.mark.timeout(180)

TOPIC = "work"
GROUP = "workers"


def _coordinator(bootstrap: str) -> int:
    """The leader of the group's __consumer_offsets partition (Kafka's hash of the group id)."""
    from moldau.protocol.consumer_offsets import partition_for

    parts = (
        admin(bootstrap).list_topics("__consumer_offsets", timeout=5).topics["__consumer_offsets"].partitions
    )
    return parts[partition_for(GROUP, len(parts))].leader


def _known(node: int) -> int | None:
    return node if node > 0 else None


def _produce(bootstrap: str, start: int, n: int) -> None:
    p = Producer({"logger": QUIET, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(TOPIC, key=b"%d" % i, value=b"%d" % i)
    assert p.flush(30) == 0


def test_group_of_three_survives_coordinator_kill(cluster):
    bs = cluster.bootstrap
    create_topic(bs, TOPIC, partitions=6, rf=3, configs={"min.insync.replicas": "2"})
    wait_until(lambda: fully_replicated(bs, TOPIC, 3), 20, "ISR of 3")
    _produce(bs, 0, 300)
    seen: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []

    def consume(n: int) -> None:
        c = Consumer(
            {
                "logger": QUIET,
                "bootstrap.servers": bs,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "client.id": f"c{n}",
            }
        )
        c.subscribe([TOPIC])
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    errors.append(str(m.error()))
                    continue
                with lock:
                    seen.append(m.value())
                try:
                    c.commit(message=m, asynchronous=False)
                except Exception as e:  # noqa: BLE001 - retriable commit errors during the failover
                    errors.append(f"commit: {e}")
        finally:
            c.close()

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: len(set(seen)) >= 300, 60, "the first 300 records consumed")
    coord = wait_until(lambda: _known(_coordinator(bs)), 10, "the coordinator")
    cluster.broker(coord).kill()
    live = ",".join(b.address for b in cluster.brokers if b.node_id != coord)
    wait_until(lambda: _coordinator(live) not in (coord, -1), 30, "a new coordinator")
    _produce(live, 300, 300)
    wait_until(lambda: len(set(seen)) >= 600, 90, "the next 300 records consumed after the failover")
    stop.set()
    for t in threads:
        t.join(30)
    assert set(seen) == {b"%d" % i for i in range(600)}
    # committed offsets: every partition's committed offset is its end (nothing consumed twice on restart)
    c = Consumer({"logger": QUIET, "bootstrap.servers": live, "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(TOPIC, p) for p in range(6)], timeout=20)
        ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(6)}
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in committed} == ends
    assert sum(ends.values()) == 600
