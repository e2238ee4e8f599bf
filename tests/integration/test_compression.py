"""Compressed batches written by one client are read back exactly by another.

Cross matrix over gzip, snappy, lz4 and zstd (RecordBatch v2), plus legacy compressed message sets
(magic 0 and 1 wrapper messages from kafka-python with an old api_version) read by modern clients, and
modern compressed batches read by old-protocol consumers (down-conversion).
"""

from __future__ import annotations

import dataclasses
import zlib

import pytest

from harness.clients import AioKafka, Caps, Client, Confluent, KafkaPython, Kcat, assert_same, make_records

CODECS = ["gzip", "snappy", "lz4", "zstd"]
OLD_FORMAT_GAP = pytest.mark.tansu_gap("tansu rejects legacy message formats / Produce v0-v2")
KCAT_GAP = pytest.mark.tansu_gap("librdkafka 2.0.2 (kcat 1.7.1) cannot parse tansu's ApiVersions v3 response")


def both(a: Caps, b: Caps) -> Caps:
    return Caps(**{f.name: getattr(a, f.name) and getattr(b, f.name) for f in dataclasses.fields(Caps)})


KCAT_READER_CAPS = Caps(headers=False, per_record_headers=False)  # %h is not compared byte-exactly


def _caps(writer: Client, reader: Client) -> Caps:
    rc = KCAT_READER_CAPS if isinstance(reader, Kcat) else reader.caps
    return both(writer.caps, rc)


def _run(broker, make_topic, writer: Client, reader: Client, codec: str, partitions: int = 2,
         per_partition: int = 60) -> None:
    topic = make_topic(partitions)
    caps = _caps(writer, reader)
    specs = make_records(
        partitions, per_partition, caps, seed=zlib.crc32(f"{writer}{reader}{codec}".encode())
    )
    if isinstance(writer, Kcat):
        specs = writer.headers_for(specs)
    writer.produce(broker.bootstrap, topic, specs, compression=codec)
    read = reader.consume(broker.bootstrap, topic, partitions, len(specs), group=False)
    assert_same(
        specs, read,
        check_headers=caps.headers and not isinstance(reader, Kcat),
        check_timestamps=caps.timestamps,
    )


PAIRS = [
    pytest.param(Confluent(), KafkaPython(), id="confluent->kafka-python"),
    pytest.param(KafkaPython(), AioKafka(), id="kafka-python->aiokafka"),
    pytest.param(AioKafka(), Confluent(), id="aiokafka->confluent"),
    pytest.param(Kcat(), Confluent(), id="kcat->confluent", marks=KCAT_GAP),
    pytest.param(Confluent(), Kcat(), id="confluent->kcat", marks=KCAT_GAP),
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer,reader", PAIRS)
def test_cross_client(broker, make_topic, writer, reader, codec, request):
    if isinstance(writer, Kcat) or isinstance(reader, Kcat):
        request.getfixturevalue("kcat")
    _run(broker, make_topic, writer, reader, codec)


# Legacy message sets: magic 0 (api_version 0.9) and magic 1 (0.10) support gzip, snappy and lz4 only.
LEGACY_CODECS = ["gzip", "snappy", "lz4"]


@OLD_FORMAT_GAP
@pytest.mark.kafka_differs(
    "Kafka 4.0 removed the message formats v0/v1 with Produce v0-v2 and Fetch v0-v3 (KIP-896): it closes the "
    "connection of a client that uses them; moldau keeps serving them to old clients"
)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize(
    "writer,reader",
    [
        pytest.param(KafkaPython((0, 10)), Confluent(), id="kp0.10->confluent"),
        pytest.param(KafkaPython((0, 9)), AioKafka(), id="kp0.9->aiokafka"),
        pytest.param(KafkaPython((0, 8, 2)), KafkaPython(), id="kp0.8.2->kafka-python"),
        pytest.param(Confluent(), KafkaPython((0, 10)), id="confluent->kp0.10"),
        pytest.param(AioKafka(), KafkaPython((0, 8, 2)), id="aiokafka->kp0.8.2"),
    ],
)
def test_legacy_compressed(broker, make_topic, writer, reader, codec):
    _run(broker, make_topic, writer, reader, codec, per_partition=40)
