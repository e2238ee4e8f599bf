"""Kafka's default partitioner: murmur2 vectors, and keys land where confluent-kafka's murmur2_random puts
them."""

from __future__ import annotations

import os
import random

import pytest

from moldau.client import Producer
from moldau.client.partitioner import DefaultPartitioner, key_partition, murmur2

from harness.kafkautil import produce_confluent

# Vectors from Kafka's UtilsTest.testMurmur2 (Java's signed 32-bit results)
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


@pytest.mark.parametrize("data,expected", list(KAFKA_VECTORS.items()))
def test_murmur2_known_vectors(data, expected):
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python_reference():
    # kafka-python ships an independent implementation of Kafka's murmur2; used here only to compare
    from kafka.partitioner.default import murmur2 as reference

    rnd = random.Random(7)
    for n in list(range(0, 40)) + [100, 1000, 4097]:
        for _ in range(5):
            data = bytes(rnd.getrandbits(8) for _ in range(n))
            assert murmur2(data) & 0xFFFFFFFF == reference(bytearray(data)) & 0xFFFFFFFF, data


def test_key_partition_is_positive_modulo():
    for key, h in KAFKA_VECTORS.items():
        for n in (1, 2, 3, 7, 12, 100):
            assert key_partition(key, n) == (h & 0x7FFFFFFF) % n
    assert key_partition(memoryview(b"21"), 7) == key_partition(b"21", 7)


def test_sticky_partitioner_switches_after_a_batch_worth():
    p = DefaultPartitioner(batch_size=100, rng=random.Random(1))
    first = p.partition("t", None, 8)
    assert all(p.partition("t", None, 8) == first for _ in range(10))
    p.record_appended("t", 60)
    assert p.partition("t", None, 8) == first
    p.record_appended("t", 60)  # over batch.size: a new sticky partition is chosen on the next record
    p.on_new_batch("t", first, 8)
    seen = {p.partition("t", None, 8, available=[1, 2]) for _ in range(3)}
    assert seen <= {1, 2, first}


def test_keys_land_where_confluent_murmur2_random_puts_them(broker, make_topic):
    partitions = 7
    topic_c = make_topic(partitions)
    topic_m = make_topic(partitions)
    keys = (
        [b"key-%d" % i for i in range(60)] + [os.urandom(n) for n in range(1, 30)] + [b"", b"21", b"foobar"]
    )
    delivered = produce_confluent(broker.bootstrap, topic_c,
                                  [{"key": k, "value": b"v"} for k in keys],
                                  conf={"partitioner": "murmur2_random"})
    confluent_part = {m.key(): m.partition() for m in delivered}
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        futs = {k: p.send(topic_m, b"v", key=k) for k in keys}
        p.flush()
        moldau_part = {k: f.result(10).partition for k, f in futs.items()}
    assert moldau_part == confluent_part
