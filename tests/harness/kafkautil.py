"""Small helpers shared by the integration tests (real clients against a real broker)."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_TIMEOUT = 20.0


def unique_topic(prefix: str = "t") -> str:
    prefix = re.sub(r"[^a-zA-Z0-9._-]", "-", prefix)[:150].strip("-") or "t"
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin(bootstrap: str, **conf: object) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **conf})


def replication_factor() -> int:
    """The replication factor of the tests' topics: one replica on each broker of the test cluster."""
    from harness.brokerproc import broker_kind

    return 3 if broker_kind() == "cluster" else 1


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """Create a topic with confluent-kafka's AdminClient and wait until every partition has a leader. Its
    replication factor is 3 on the test cluster (MOLDAU_TEST_BROKER=cluster), else 1."""
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor(),
                  config=config or {})],
        request_timeout=timeout,
    )
    futures[name].result(timeout=timeout)
    wait_for_topic(bootstrap, name, partitions, timeout=timeout, client=client)
    return name


def wait_for_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    timeout: float = DEFAULT_TIMEOUT,
    client: AdminClient | None = None,
) -> None:
    client = client or admin(bootstrap)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = client.list_topics(topic=name, timeout=5)
        tmd = md.topics.get(name)
        last = tmd
        if (
            tmd is not None
            and tmd.error is None
            and len(tmd.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in tmd.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last!r}")


@dataclass(slots=True)
class Rec:
    """A record as read back: what every client test compares against what it wrote."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    for lst in out.values():
        lst.sort(key=lambda r: r.offset)
    return out


def assert_contiguous_from_zero(records: Iterable[Rec]) -> None:
    for partition, recs in by_partition(records).items():
        offsets = [r.offset for r in recs]
        assert offsets == list(range(len(offsets))), (
            f"partition {partition}: offsets not contiguous from 0: {offsets[:20]}..."
        )


def produce_confluent(
    bootstrap: str,
    topic: str,
    records: Iterable[dict],
    conf: dict | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> list:
    """Produce dicts (value, key, partition, headers, timestamp) and return the delivered messages.

    Raises if any delivery failed.
    """
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(conf or {})})
    delivered: list = []
    errors: list = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg)

    n = 0
    for r in records:
        kwargs = dict(r)
        kwargs.setdefault("value", None)
        while True:
            try:
                p.produce(topic, on_delivery=cb, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        n += 1
        p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages not delivered within {timeout}s"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert len(delivered) == n
    return delivered


def consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int | Iterable[int],
    expected: int,
    timeout: float = DEFAULT_TIMEOUT,
    conf: dict | None = None,
    start_offset: int | None = None,
) -> list[Rec]:
    """Read ``expected`` records with an assign()ed confluent-kafka consumer, from the beginning."""
    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            **(conf or {}),
        }
    )
    try:
        from confluent_kafka import OFFSET_BEGINNING

        off = OFFSET_BEGINNING if start_offset is None else start_offset
        c.assign([TopicPartition(topic, p, off) for p in parts])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            msgs = c.consume(num_messages=min(10000, expected - len(out)), timeout=0.2)
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                _ts_type, ts = m.timestamp()
                out.append(
                    Rec(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), ts)
                )
        assert len(out) == expected, f"read {len(out)} of {expected} records from {topic}"
        # nothing more should come
        extra = c.consume(num_messages=10, timeout=0.3)
        extra = [m for m in extra if m.error() is None]
        assert not extra, f"unexpected extra records: {[(m.partition(), m.offset()) for m in extra]}"
        return out
    finally:
        c.close()


def committed_after_restart(consumer: Consumer, partitions: list[TopicPartition],
                            timeout: float = DEFAULT_TIMEOUT) -> list[TopicPartition]:
    """``consumer.committed(partitions)`` right after a broker restart. A coordinator may answer
    NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (retriable) while it loads __consumer_offsets: Kafka does,
    for a moment after its restart; clients retry, and so does this, up to ``timeout``."""
    moving = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
              KafkaError.COORDINATOR_NOT_AVAILABLE)  # librdkafka does not flag them retriable here
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.committed(partitions, timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if not (err.retriable() or err.code() in moving) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def watermarks(bootstrap: str, topic: str, partition: int, timeout: float = 10.0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm-" + uuid.uuid4().hex[:8]})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
    finally:
        c.close()


def read_all_confluent(
    bootstrap: str, topic: str, partitions: int | Iterable[int], timeout: float = DEFAULT_TIMEOUT
) -> list[Rec]:
    """Everything in the partitions from the beginning up to their end (partition EOF), assign()ed."""
    from confluent_kafka import OFFSET_BEGINNING

    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "unused-" + uuid.uuid4().hex[:8],
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
    })
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[Rec] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < len(parts):
            assert time.monotonic() < deadline, f"no EOF on partitions {set(parts) - at_eof} in {timeout}s"
            for m in c.consume(num_messages=10000, timeout=0.1):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
                        continue
                    raise KafkaException(m.error())
                at_eof.discard(m.partition())
                out.append(Rec(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []),
                               m.timestamp()[1]))
        return out
    finally:
        c.close()
