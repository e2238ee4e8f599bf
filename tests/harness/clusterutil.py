"""Helpers for the cluster tests: waiting on the cluster's metadata, producing and reading back."""

from __future__ import annotations

import logging
import time
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
