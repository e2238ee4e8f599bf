"""Third-party clients produce and consume exact bytes through the broker.

Each client writes awkward records (null/empty/binary keys and values, 70 KB values, duplicate, empty,
null and non-ASCII headers, explicit create timestamps) with explicit partitions, reads them back itself
(through a consumer group where the client has one, else assign()), and confluent-kafka reads the same
topic independently. Per partition, offsets must be contiguous from 0 and every byte must match.
"""

from __future__ import annotations

import time

import pytest

from harness.clients import AioKafka, Confluent, KafkaPython, Kcat, assert_same, make_records
from harness.kafkautil import consume_confluent

OLD_FORMAT_GAP = pytest.mark.tansu_gap(
    "tansu rejects legacy message formats / Produce v0-v2 (kafka-python with an old api_version times out)"
)
# moldau keeps the old formats on purpose (docs/compat.md, "Apache Kafka as the control broker")
KAFKA4_REMOVED = pytest.mark.kafka_differs(
    "Kafka 4.0 removed Produce v0-v2 and the message formats v0/v1 (KIP-896) and closes the connection; "
    "moldau keeps serving them to old clients"
)
KCAT_GAP = pytest.mark.tansu_gap(
    "librdkafka 2.0.2 (Debian's kcat 1.7.1) fails to parse tansu's ApiVersions v3 response (Read underflow)"
)

CLIENTS = [
    pytest.param(Confluent(), id="confluent"),
    pytest.param(KafkaPython(), id="kafka-python"),
    pytest.param(KafkaPython((0, 10)), id="kafka-python-0.10", marks=[OLD_FORMAT_GAP, KAFKA4_REMOVED]),
    pytest.param(KafkaPython((0, 9)), id="kafka-python-0.9", marks=[OLD_FORMAT_GAP, KAFKA4_REMOVED]),
    pytest.param(KafkaPython((0, 8, 2)), id="kafka-python-0.8.2", marks=[OLD_FORMAT_GAP, KAFKA4_REMOVED]),
    pytest.param(AioKafka(), id="aiokafka"),
]


@pytest.mark.parametrize("partitions", [1, 12])
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip(broker, make_topic, client, partitions):
    topic = make_topic(partitions)
    per_partition = 16 if partitions == 1 else 8
    specs = make_records(partitions, per_partition, client.caps, seed=partitions)
    client.produce(broker.bootstrap, topic, specs)

    read = client.consume(broker.bootstrap, topic, partitions, len(specs), group=client.caps.groups)
    assert_same(specs, read, check_headers=client.caps.headers, check_timestamps=client.caps.timestamps)

    # an independent reader sees the same bytes (records written in an old format are up-converted)
    read2 = consume_confluent(broker.bootstrap, topic, partitions, len(specs))
    assert_same(specs, read2, check_headers=client.caps.headers, check_timestamps=client.caps.timestamps)


@KCAT_GAP
@pytest.mark.parametrize("partitions", [1, 12])
def test_kcat_roundtrip(broker, make_topic, kcat, partitions):
    topic = make_topic(partitions)
    k = Kcat(kcat)
    per_partition = 16 if partitions == 1 else 8
    specs = k.headers_for(make_records(partitions, per_partition, k.caps, seed=100 + partitions))
    t0 = int(time.time() * 1000)
    k.produce(broker.bootstrap, topic, specs)
    t1 = int(time.time() * 1000)

    read = k.consume(broker.bootstrap, topic, partitions, len(specs))
    assert_same(specs, read, check_headers=False, check_timestamps=False)
    for r in read:
        # kcat's producer stamps the create time itself; %T must show it
        assert r.timestamp is not None and t0 - 1000 <= r.timestamp <= t1 + 1000, r.timestamp
        text = dict(r.headers)["%h"].decode()
        for part in ("h1=v1", "dup=a", "dup=b", "empty="):
            assert part in text, f"kcat %h {text!r} lacks {part!r}"

    # exact headers (including the null-valued one) as another client sees them
    read2 = consume_confluent(broker.bootstrap, topic, partitions, len(specs))
    assert_same(specs, read2, check_headers=True, check_timestamps=False)


@KCAT_GAP
def test_kcat_reads_confluent_timestamps_and_offsets(broker, make_topic, kcat):
    """kcat -C -o beginning -e on records written by confluent-kafka: exact %T, %o, %p, %k, %s."""
    topic = make_topic(3)
    c = Confluent()
    k = Kcat(kcat)
    specs = make_records(3, 6, k.caps, seed=7)
    # confluent writes kcat-representable records, but with real timestamps and no headers
    base = int(time.time() * 1000) - 3_600_000  # recent: retention deletes older records
    for s in specs:
        s.headers = []
        s.timestamp = base + s.partition * 1000 + (s.timestamp or 0) % 1000
    c.produce(broker.bootstrap, topic, specs)
    read = k.consume(broker.bootstrap, topic, 3, len(specs))
    assert_same(specs, read, check_headers=False, check_timestamps=True)
    for r in read:
        assert dict(r.headers)["%h"] == b"", r.headers


@OLD_FORMAT_GAP
@KAFKA4_REMOVED
def test_old_and_new_formats_interleave_in_one_partition(broker, make_topic):
    """Batches written as magic 0, magic 1 and v2 into one partition: every client reads all, in order."""
    topic = make_topic(1)
    writers = [KafkaPython((0, 9)), KafkaPython((0, 10)), KafkaPython(), Confluent()]
    all_specs = []
    for n, w in enumerate(writers):
        specs = make_records(1, 5, w.caps, seed=200 + n)
        w.produce(broker.bootstrap, topic, specs)
        all_specs += specs
    for reader in (Confluent(), KafkaPython((0, 8, 2)), KafkaPython((0, 10)), AioKafka()):
        read = reader.consume(broker.bootstrap, topic, 1, len(all_specs), group=False)
        assert_same(all_specs, read, check_headers=False, check_timestamps=False)


@pytest.mark.tansu_gap("tansu holds a new group's first JoinGroup for about half the session timeout")
def test_group_join_is_prompt(broker, make_topic):
    """A new librdkafka group consumer with default settings (45 s session timeout) gets its first
    record within a few seconds: the coordinator answers the first JoinGroup after
    group.initial.rebalance.delay.ms (0 for the test broker, 3 s by default), not ~session timeout / 2."""
    from confluent_kafka import Consumer

    topic = make_topic(1)
    Confluent().produce(broker.bootstrap, topic, make_records(1, 1, Confluent.caps))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "prompt-" + topic,
                  "auto.offset.reset": "earliest"})
    try:
        t0 = time.monotonic()
        c.subscribe([topic])
        msg = None
        while msg is None and time.monotonic() - t0 < 15:
            msg = c.poll(0.2)
        elapsed = time.monotonic() - t0
        assert msg is not None and msg.error() is None, msg and msg.error()
        assert elapsed < 5.0, f"first record after {elapsed:.1f}s"
    finally:
        c.close()
