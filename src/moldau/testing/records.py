"""Assertions on a topic's contents that hold whatever client wrote them: the topic is read back with
moldau's own consumer (no group: every partition assigned, from the beginning), so a test of an application
that uses confluent-kafka, kafka-python, aiokafka or moldau checks what actually reached the broker."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["expect_records", "read_topic"]


def read_topic(bootstrap_servers: str, topic: str, *, timeout: float = 10.0, min_records: int = 0,
               isolation_level: str = "read_committed", **client_config: Any) -> list[Any]:
    """Every record of ``topic`` up to its end (the last stable offset with ``read_committed``), in partition
    then offset order; waits up to ``timeout`` for the topic to exist and for at least ``min_records``.
    ``client_config``: more moldau consumer settings (e.g. ``security_protocol``)."""
    from moldau.client import Consumer, TopicPartition

    deadline = time.monotonic() + timeout
    records: list[Any] = []
    # short long-polls: the end offsets' request waits behind a fetch parked at the broker (one connection,
    # answered in order), up to fetch.max.wait.ms (Kafka's 500 ms would be paid by every read)
    client_config.setdefault("fetch_max_wait_ms", 50)
    with Consumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                  auto_offset_reset="earliest", isolation_level=isolation_level, **client_config) as consumer:
        parts: list[int] = []
        while not parts:
            try:
                parts = consumer.partitions_for(topic, timeout=max(deadline - time.monotonic(), 0.1))
            except Exception:  # noqa: BLE001 - not created yet (or not yet in metadata): wait for it
                parts = []
            if not parts:
                if time.monotonic() > deadline:
                    raise AssertionError(f"topic {topic!r} does not exist (waited {timeout:g} s)")
                time.sleep(0.05)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends: dict[Any, int] | None = None
        while True:
            remaining = deadline - time.monotonic()
            if len(records) >= min_records:
                if ends is None:  # enough: now read up to the end offsets as they are at this moment
                    ends = consumer.end_offsets(tps, timeout=max(remaining, 0.1))
                if all(consumer.position(tp) >= ends[tp] for tp in tps):
                    break
            if remaining <= 0:
                break
            records.extend(consumer.poll(timeout=min(remaining, 0.2)))
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def expect_records(bootstrap_servers: str, topic: str, n: int, timeout: float = 10.0, *, exact: bool = True,
                   isolation_level: str = "read_committed", **client_config: Any) -> list[Any]:
    """Wait up to ``timeout`` seconds until ``topic`` holds ``n`` records and return them
    (``ConsumerRecord``: ``key``, ``value``, ``headers``, ``partition``, ``offset``, ``timestamp``), in
    partition then offset order.

    Raises ``AssertionError`` naming what was found when fewer arrive in time, or (``exact``, the default)
    when the topic holds more. Records of aborted transactions do not count (``read_committed``)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    records = read_topic(bootstrap_servers, topic, timeout=timeout, min_records=n,
                         isolation_level=isolation_level, **client_config)
    if len(records) < n or (exact and len(records) != n):
        shown = ", ".join(f"{r.partition}:{r.offset} {r.key!r}={r.value!r}" for r in records[:10])
        more = f" (first 10: {shown})" if records else ""
        want = f"exactly {n}" if exact else f"at least {n}"
        raise AssertionError(f"topic {topic!r}: expected {want} records within {timeout:g} s, "
                             f"found {len(records)}{more}")
    return records
