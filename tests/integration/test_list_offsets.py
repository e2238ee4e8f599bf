"""ListOffsets: earliest / latest / by timestamp agree with what was written.

Timestamps are set by the producer (CreateTime), several batches per partition, so a timestamp lookup
has to find the right batch and then the first record inside it whose timestamp is >= the target.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from harness.kafkautil import admin, consume_confluent, watermarks

LATEST_GAP = pytest.mark.tansu_gap("tansu answers latest = last batch's base offset + 1 (the pitfall)")
TIME_GAP = pytest.mark.tansu_gap(
    "tansu answers a timestamp lookup with the batch's base offset, not the first record >= target"
)
OLD_FORMAT_GAP = pytest.mark.tansu_gap("tansu rejects old protocol versions (ListOffsets v0, Produce v0-v2)")


def _produce_batches(bootstrap: str, topic: str, partition: int, batches: list[list[int]]) -> None:
    """One flushed batch per inner list; each int is a record's create timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
    n = 0
    for batch in batches:
        for ts in batch:
            p.produce(topic, value=b"r%d" % n, key=b"k%d" % n, partition=partition, timestamp=ts)
            n += 1
        assert p.flush(15) == 0


def _list(bootstrap: str, topic: str, partition: int, spec: OffsetSpec) -> int:
    tp = TopicPartition(topic, partition)
    a = admin(bootstrap)  # keep a reference: a collected client cancels its futures (_DESTROY)
    res = a.list_offsets({tp: spec}, request_timeout=15)
    return res[tp].result(timeout=15).offset


@pytest.fixture
def timed_topic(broker, make_topic):
    """2 partitions; partition 0: 3 batches (5 + 1 + 20 records), timestamps T0 + 10*i;
    partition 1 stays empty."""
    topic = make_topic(2)
    t0 = int(time.time() * 1000) - 3_600_000
    ts = [t0 + 10 * i for i in range(26)]
    _produce_batches(broker.bootstrap, topic, 0, [ts[0:5], ts[5:6], ts[6:26]])
    # the oracle below assumes record i carries ts[i]: check that on the records as read
    read = consume_confluent(broker.bootstrap, topic, [0], len(ts))
    assert [(r.offset, r.timestamp) for r in read] == list(enumerate(ts))
    return topic, t0, ts


@LATEST_GAP
def test_latest_after_batch_is_record_count(broker, make_topic):
    """After one batch of N records, latest == N (not base offset + 1)."""
    topic = make_topic(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "acks": "all"})
    for i in range(37):
        p.produce(topic, value=b"x%d" % i, partition=0)
    assert p.flush(15) == 0
    assert watermarks(broker.bootstrap, topic, 0) == (0, 37)
    assert _list(broker.bootstrap, topic, 0, OffsetSpec.latest()) == 37
    assert _list(broker.bootstrap, topic, 0, OffsetSpec.earliest()) == 0
    # a second batch moves it by its own size
    for i in range(5):
        p.produce(topic, value=b"y%d" % i, partition=0)
    assert p.flush(15) == 0
    assert watermarks(broker.bootstrap, topic, 0) == (0, 42)


@LATEST_GAP
def test_confluent_earliest_latest(broker, timed_topic):
    topic, _, ts = timed_topic
    assert watermarks(broker.bootstrap, topic, 0) == (0, len(ts))
    assert watermarks(broker.bootstrap, topic, 1) == (0, 0)
    assert _list(broker.bootstrap, topic, 0, OffsetSpec.earliest()) == 0
    assert _list(broker.bootstrap, topic, 0, OffsetSpec.latest()) == len(ts)
    assert _list(broker.bootstrap, topic, 1, OffsetSpec.latest()) == 0


def _confluent_times(bootstrap: str, topic: str, targets: list[int]) -> list[int]:
    """Consumer.offsets_for_times, one request per target (a partition may appear once per request)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "oft-" + topic})
    try:
        out = []
        for t in targets:
            (r,) = c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=15)
            assert r.error is None, r.error
            out.append(r.offset)
        return out
    finally:
        c.close()


def _expected(ts: list[int], target: int) -> int:
    for i, t in enumerate(ts):
        if t >= target:
            return i
    return -1


@TIME_GAP
def test_confluent_offsets_for_times(broker, timed_topic):
    topic, t0, ts = timed_topic
    targets = [t0 - 1000, t0, t0 + 1, t0 + 40, t0 + 45, t0 + 50, t0 + 55, t0 + 60, t0 + 125, ts[-1],
               ts[-1] + 1]
    expected = [_expected(ts, t) for t in targets]
    assert expected[:3] == [0, 0, 1] and expected[-1] == -1  # sanity of the oracle
    got = _confluent_times(broker.bootstrap, topic, targets)
    # confluent-kafka reports "no such record" as OFFSET_END (-1)
    assert got == expected
    # the Admin API agrees
    for t, e in zip(targets, expected):
        assert _list(broker.bootstrap, topic, 0, OffsetSpec.for_timestamp(t)) == e, t


@LATEST_GAP
@TIME_GAP
def test_kafka_python_offsets(broker, timed_topic):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic, t0, ts = timed_topic
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        tp0, tp1 = KTP(topic, 0), KTP(topic, 1)
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: len(ts), tp1: 0}
        for target in (t0 - 5, t0, t0 + 33, t0 + 50, t0 + 51, ts[-1], ts[-1] + 10):
            res = c.offsets_for_times({tp0: target})[tp0]
            e = _expected(ts, target)
            if e < 0:
                assert res is None, (target, res)
            else:
                assert res is not None and res.offset == e and res.timestamp == ts[e], (target, res, e)
    finally:
        c.close()


@TIME_GAP
def test_non_monotonic_timestamps(broker, make_topic):
    """Timestamps out of order within and across batches: the first offset whose timestamp >= target."""
    topic = make_topic(1)
    t0 = int(time.time() * 1000) - 600_000
    ts = [t0 + d for d in (100, 300, 200, 50, 400, 250)]
    _produce_batches(broker.bootstrap, topic, 0, [ts[0:3], ts[3:6]])
    for target in (t0 + 10, t0 + 150, t0 + 250, t0 + 300, t0 + 301, t0 + 400, t0 + 401):
        got = _confluent_times(broker.bootstrap, topic, [target])[0]
        assert got == _expected(ts, target), (target - t0, got)


@pytest.mark.tansu_gap("tansu does not implement ListOffsets max_timestamp (v7)")
def test_max_timestamp(broker, make_topic):
    topic = make_topic(1)
    t0 = int(time.time() * 1000) - 600_000
    ts = [t0 + d for d in (100, 900, 200, 50, 400)]
    _produce_batches(broker.bootstrap, topic, 0, [ts[0:3], ts[3:5]])
    tp = TopicPartition(topic, 0)
    a = admin(broker.bootstrap)
    res = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=15)
    assert (res.offset, res.timestamp) == (1, t0 + 900)


@OLD_FORMAT_GAP
@pytest.mark.kafka_differs(
    "Kafka 4.0 removed the request versions these clients speak (ListOffsets v0, Metadata v0-v3, "
    "Fetch v0-v3: KIP-896) and closes their connections; moldau keeps serving them"
)
@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 10)])
def test_old_list_offsets_versions(broker, timed_topic, api_version):
    """ListOffsets v0 (0.8.2: offsets array) and v1 (0.10.1: one offset + timestamps)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic, _t0, ts = timed_topic
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, request_timeout_ms=15000)
    try:
        tp0, tp1 = KTP(topic, 0), KTP(topic, 1)
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: len(ts), tp1: 0}
    finally:
        c.close()
