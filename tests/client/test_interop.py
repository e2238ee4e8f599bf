"""Interop: moldau producer -> confluent-kafka consumer, and confluent-kafka producer -> moldau consumer."""

from __future__ import annotations

import time

import pytest

from moldau.client import Consumer, Producer, TopicPartition

from harness.clientutil import CODECS, awkward_records
from harness.kafkautil import consume_confluent, produce_confluent


@pytest.mark.parametrize("codec", CODECS)
def test_moldau_producer_confluent_consumer(broker, make_topic, codec):
    topic = make_topic(3)
    specs = awkward_records(30, seed=3)
    ts0 = int(time.time() * 1000) - 3_600_000  # recent: retention deletes older records
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec) as p:
        futs = [p.send(topic, v, key=k, partition=i % 3, headers=h, timestamp=ts0 + i)
                for i, (k, v, h) in enumerate(specs)]
        p.flush()
        mds = [f.result(10) for f in futs]
    got = consume_confluent(broker.bootstrap, topic, 3, len(specs))
    by_pos = {(r.partition, r.offset): r for r in got}
    for i, ((k, v, h), md) in enumerate(zip(specs, mds)):
        r = by_pos[(md.partition, md.offset)]
        assert (r.key, r.value, r.timestamp) == (k, v, ts0 + i)
        assert r.headers == h


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_producer_moldau_consumer(broker, make_topic, codec):
    topic = make_topic(2)
    specs = awkward_records(30, seed=4)
    ts0 = int(time.time() * 1000) - 7_200_000  # recent: retention deletes older records
    delivered = produce_confluent(
        broker.bootstrap, topic,
        [{"key": k, "value": v, "partition": i % 2, "headers": h, "timestamp": ts0 + i}
         for i, (k, v, h) in enumerate(specs)],
        conf={"compression.type": codec},
    )
    assert len(delivered) == len(specs)
    got = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        deadline = time.monotonic() + 20
        while len(got) < len(specs) and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert len(got) == len(specs)
    assert sorted(r.timestamp for r in got) == [ts0 + i for i in range(len(specs))]
    for r in got:
        i = r.timestamp - ts0  # each record carries its index in its timestamp
        k, v, h = specs[i]
        assert r.partition == i % 2
        assert (r.key, r.value, r.timestamp) == (k, v, ts0 + i)
        assert r.headers == h


@pytest.mark.parametrize("codec", CODECS)
def test_moldau_producer_kafka_python_consumer_and_back(broker, make_topic, codec):
    """Byte-exact both ways with kafka-python: moldau writes, kafka-python reads; kafka-python writes, moldau
    reads (keys, values incl. null/empty/binary/70 kB, headers incl. null values, timestamps)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    specs = awkward_records(21, seed=5)
    ts0 = int(time.time() * 1000) - 5_400_000  # recent: retention deletes older records
    # moldau -> kafka-python
    t1 = make_topic(1)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec) as p:
        futs = [p.send(t1, v, key=k, headers=h, timestamp=ts0 + i) for i, (k, v, h) in enumerate(specs)]
        p.flush()
        offsets = [f.result(10).offset for f in futs]
    assert offsets == list(range(len(specs)))
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=10000)
    kc.assign([KTP(t1, 0)])
    got = []
    for r in kc:
        got.append(r)
        if len(got) == len(specs):
            break
    kc.close()
    assert [r.offset for r in got] == offsets
    for i, ((k, v, h), r) in enumerate(zip(specs, got)):
        assert (r.key, r.value, r.timestamp) == (k, v, ts0 + i)
        assert list(r.headers) == h
    # kafka-python -> moldau (kafka-python's producer cannot send a null header value: those are left out)
    specs = [(k, v, [(hk, hv) for hk, hv in h if hv is not None]) for k, v, h in specs]
    t2 = make_topic(1)
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap,
                       compression_type=None if codec == "none" else codec)
    for i, (k, v, h) in enumerate(specs):
        kp.send(t2, value=v, key=k, headers=h, timestamp_ms=ts0 + i, partition=0)
    kp.flush()
    kp.close()
    back = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(t2, 0)])
        deadline = time.monotonic() + 20
        while len(back) < len(specs) and time.monotonic() < deadline:
            back += c.poll(0.5)
    assert [r.offset for r in back] == list(range(len(specs)))
    for i, ((k, v, h), r) in enumerate(zip(specs, back)):
        assert (r.key, r.value, r.timestamp) == (k, v, ts0 + i)
        assert list(r.headers) == h


def test_classic_group_of_moldau_and_confluent_consumers(broker, make_topic, group_id):
    """One classic group (range assignor) of a moldau and a librdkafka consumer: partitions split between
    them, every record consumed once, and the moldau consumer takes everything over when the other leaves."""
    from confluent_kafka import Consumer as CConsumer

    topic = make_topic(4)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for part in range(4):
            for i in range(10):
                p.send(topic, b"%d-%d" % (part, i), partition=part)
        p.flush()
    m = Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest",
                 session_timeout_ms=6000, heartbeat_interval_ms=500, partition_assignment_strategy="range")
    c = CConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
            "enable.auto.commit": True,
        }
    )
    seen: list[tuple[int, int]] = []
    try:
        m.subscribe([topic])
        c.subscribe([topic])
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            seen.extend((r.partition, r.offset) for r in m.poll(0.05))
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset()))
            if len(m.assignment()) == 2 and len(c.assignment()) == 2 and len(seen) >= 40:
                break
        assert len(m.assignment()) == 2 and len(c.assignment()) == 2, (m.assignment(), c.assignment())
        assert {tp.partition for tp in m.assignment()} | {tp.partition for tp in c.assignment()} == {
            0,
            1,
            2,
            3,
        }
        assert len(seen) == len(set(seen)) == 40
    finally:
        c.close()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(m.assignment()) != 4:
            m.poll(0.05)
        assert len(m.assignment()) == 4
    finally:
        m.close()
