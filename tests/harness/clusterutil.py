"""Helpers for the cluster tests: waiting on the cluster's metadata, producing and reading back."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

# librdkafka's own log lines (disconnects from the brokers the tests kill on purpose) go through Python
# logging, captured by pytest, instead of stderr
QUIET = logging.getLogger("tests.cluster.clients")


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as e:  # noqa: BLE001 - a broker may be on its way
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"logger": QUIET, "bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def create_topic(
    bootstrap: str, name: str, partitions: int = 3, rf: int = 3, configs: dict[str, str] | None = None
) -> None:
    a = admin(bootstrap)  # kept alive until the result is in
    fs = a.create_topics(
        [NewTopic(name, partitions, rf, config=configs or {})], operation_timeout=15, request_timeout=20
    )
    fs[name].result(30)


def partitions(bootstrap: str, topic: str) -> dict[int, Any]:
    """{partition: PartitionMetadata(leader, replicas, isrs)} from one broker's Metadata answer."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        raise AssertionError(f"metadata error {t.error}")
    return dict(t.partitions)


def fully_replicated(bootstrap: str, topic: str, n: int) -> bool:
    ps = partitions(bootstrap, topic)
    return bool(ps) and all(p.leader >= 0 and len(p.isrs) == n for p in ps.values())


def read_partition(
    bootstrap: str, topic: str, partition: int, timeout: float = 30.0
) -> list[tuple[int, bytes]]:
    """Every (offset, value) of one partition up to its end, with kafka-python (no group)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
        request_timeout_ms=15000,
    )
    tp = TopicPartition(topic, partition)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while c.position(tp) < end and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=1000).values():
                out.extend((r.offset, r.value) for r in recs)
        return out
    finally:
        c.close()


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    from confluent_kafka import TopicCollection

    a = admin(bootstrap)  # kept alive until the result is in
    tid = a.describe_topics(TopicCollection([topic]))[topic].result(15).topic_id
    return uuid.UUID(int=((tid.get_most_significant_bits() & (2**64 - 1)) << 64)
                     | (tid.get_least_significant_bits() & (2**64 - 1)))


def restart_share_coordinator_and_kill_leader(c: Any, group: str, topic: str, state_partitions: int
                                              ) -> tuple[int, str, int, int]:
    """In the local cluster ``c`` (a ``LocalCluster``): restart (SIGTERM) the broker of the share coordinator
    of ``group`` on ``topic``-0 (``__share_group_state`` has ``state_partitions`` partitions, replication
    factor 3), then kill -9 the share-partition leader (the caller starts it again): (the killed leader, the
    other brokers' addresses, the new leader, the share coordinator now)."""
    from moldau.protocol.share_state import ShareKey, state_partition

    bs = c.bootstrap
    # the share coordinator of this share-partition: the leader of its __share_group_state partition
    sp = state_partition(ShareKey(group, topic_id(bs, topic), 0), state_partitions)
    coord = partitions(bs, "__share_group_state")[sp].leader
    c.broker(coord).stop()
    c.broker(coord).start()
    c.broker(coord).wait_listening()
    wait_until(lambda: fully_replicated(bs, "__share_group_state", 3), 40, "__share_group_state ISR of 3")
    leader = partitions(bs, topic)[0].leader
    c.broker(leader).kill()  # kill -9 of the share-partition leader
    others = ",".join(b.address for b in c.brokers if b.node_id != leader)
    new_leader = wait_until(
        lambda: (n := partitions(others, topic)[0].leader) not in (-1, leader) and n, 30, "a new leader")
    return leader, others, new_leader, partitions(others, "__share_group_state")[sp].leader
