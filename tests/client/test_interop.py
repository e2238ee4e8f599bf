"""Interop: moldau producer -> confluent-kafka consumer, and confluent-kafka producer -> moldau consumer."""

from __future__ import annotations

import time

import pytest

from clientutil import CODECS, awkward_records
from kafkautil import consume_confluent, produce_confluent
from moldau.client import Consumer, Producer, TopicPartition


@pytest.mark.parametrize("codec", CODECS)
def test_moldau_producer_confluent_consumer(broker, make_topic, codec):
    topic = make_topic(3)
    specs = awkward_records(30, seed=3)
    ts0 = 1_750_000_000_000
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
    ts0 = 1_760_000_000_000
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
