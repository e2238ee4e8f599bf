"""Small helpers shared by the Spark tests."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterable
from typing import Any

from harness.kafkautil import produce_confluent


def reader(spark: Any, bootstrap: str, stream: bool = False, **options: str) -> Any:
    r = (
        (spark.readStream if stream else spark.read)
        .format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r


def produce_values(bootstrap: str, topic: str, n: int, partitions: int, prefix: bytes = b"v",
                   start: int = 0) -> None:
    produce_confluent(bootstrap, topic, (
        {"value": prefix + b"%07d" % i, "key": b"k%d" % i, "partition": i % partitions}
        for i in range(start, start + n)))


def random_records(n: int, partitions: int, seed: int = 7) -> list[dict]:
    """Records with binary values (some empty, some null), null keys, and headers (some null values)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r: dict = {"partition": i % partitions}
        r["key"] = None if i % 4 == 0 else rng.randbytes(rng.randint(0, 20))
        r["value"] = None if i % 97 == 0 else (b"" if i % 53 == 0 else os.urandom(rng.randint(1, 300)))
        if i % 3 == 0:
            r["headers"] = [
                ("trace", rng.randbytes(8)),
                ("empty", b""),
                ("none", None),
                ("ü-key", b"\x00\xff"),
            ]
        out.append(r)
    return out


def rows_by_position(rows: Iterable[Any]) -> dict[tuple[int, int], Any]:
    out = {}
    for r in rows:
        k = (r["partition"], r["offset"])
        assert k not in out, f"duplicate row at partition {k[0]} offset {k[1]}"
        out[k] = r
    return out


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value of the topic up to its end, read by confluent-kafka with ``isolation``
    (read_committed: up to the last stable offset, without aborted records)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                  "fetch.wait.max.ms": 50})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        eof: set[int] = set()
        for _ in range(600):
            for msg in c.consume(num_messages=10000, timeout=0.1):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                        continue
                    raise AssertionError(msg.error())
                eof.discard(msg.partition())
                out.append(msg.value())
            if len(eof) == partitions:
                return out
        raise AssertionError(f"no end of partition on all partitions of {topic}")
    finally:
        c.close()
