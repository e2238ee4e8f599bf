"""Every producer of RecordBatch v2 against an independent implementation.

The codec (``moldau.protocol.records``) is the one builder; its users frame their records through it: the
client's accumulator (``ProducerBatch``), the Spark writer (``encode_section`` + ``build_batch``), the log
cleaner (``rebuild_batch``), the broker's transaction markers (``build_control_batch``). Each is checked
here byte for byte against kafka-python's record classes (``DefaultRecordBatchBuilder``) where the bytes are
deterministic (uncompressed), and decoded and CRC-checked by kafka-python's ``DefaultRecordBatch`` where they
are not (compressed). Bytes 0-8 (base offset) and 12-16 (partition leader epoch) lie outside the CRC and are
not compared: kafka-python writes leader epoch 0, the broker overwrites both.
"""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from moldau.client.producer import ProducerBatch
from moldau.protocol.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BatchBuilder,
    build_control_batch,
    decode_batch,
    encode_record,
    parse_batch_header,
    seal_batch,
)
from moldau.protocol.records.batch import HEADER_SIZE, HEADER_STRUCT

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
BASE_TS = 1_700_000_000_000

# (timestamp, key, value, headers): null and empty keys/values, 1-, 2- and 3-byte varints, headers
SAMPLE: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (BASE_TS + 3 * i,
     None if i % 4 == 0 else (b"" if i % 4 == 1 else b"key-%d" % i),
     None if i == 7 else b"v" * (i * 97),
     [("h%d" % j, None if j == 1 else b"x" * j) for j in range(i % 3)])
    for i in range(40)
] + [(BASE_TS - 5, b"k", b"\x00" * 20000, [])]  # a negative timestamp delta, a 3-byte value length


def kp_batch(records, codec: int = NONE, *, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False,
             offsets: list[int] | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=txn, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i, (ts, k, v, hs) in enumerate(records):
        b.append(i if offsets is None else offsets[i], timestamp=ts, key=k, value=v, headers=hs)
    return bytes(b.build())


def same_batch(ours: bytes | bytearray, theirs: bytes | bytearray) -> None:
    """Equal except for the two fields outside the CRC (base offset, partition leader epoch)."""
    assert len(ours) == len(theirs)
    assert ours[8:12] == theirs[8:12]
    assert bytes(ours[16:]) == bytes(theirs[16:])


def kp_records(raw: bytes | bytearray) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    kb = DefaultRecordBatch(bytes(raw))
    assert kb.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]


def expected(records, offsets: list[int] | None = None):
    return [(i if offsets is None else offsets[i], ts, k, v, hs) for i, (ts, k, v, hs) in enumerate(records)]


# ------------------------------------------------------------------------------------------------------------
# the codec's record encoder


def test_encode_record_is_kafkas_record_encoding():
    theirs = kp_batch(SAMPLE)
    section = records_section(SAMPLE)
    assert section == theirs[HEADER_SIZE:]


def records_section(records) -> bytes:
    pieces: list[bytes] = []
    for i, (ts, k, v, hs) in enumerate(records):
        size = encode_record(pieces, i, ts - records[0][0], k, v, hs)
        assert size > 0
    return b"".join(pieces)


def test_encode_record_copies_mutable_buffers_and_counts_its_bytes():
    key = bytearray(b"key")
    pieces: list[bytes] = [b"before"]
    size = encode_record(pieces, 0, 0, key, memoryview(b"value"), [("h", bytearray(b"v"))])
    key[:] = b"xxx"
    assert pieces[0] == b"before" and all(type(p) is bytes for p in pieces)
    assert size == sum(map(len, pieces[1:]))
    fresh: list[bytes] = []
    encode_record(fresh, 0, 0, b"key", b"value", [("h", b"v")])
    assert b"".join(pieces[1:]) == b"".join(fresh)


@pytest.mark.parametrize("codec", CODECS)
def test_seal_batch(codec):
    section = records_section(SAMPLE)
    sealed = seal_batch(bytearray(HEADER_SIZE) + section, attributes=codec, records_count=len(SAMPLE),
                        base_timestamp=SAMPLE[0][0], max_timestamp=max(r[0] for r in SAMPLE), producer_id=5,
                        producer_epoch=1, base_sequence=9)
    assert kp_records(sealed) == expected(SAMPLE)
    if codec == NONE:
        same_batch(sealed, kp_batch(SAMPLE, pid=5, epoch=1, seq=9))


# ------------------------------------------------------------------------------------------------------------
# the client's accumulator


def client_batch(records, codec: int = NONE, *, pid: int = -1, epoch: int = -1, seq: int = -1,
                 txn: bool = False) -> bytearray:
    b = ProducerBatch("t", 0, 0.0, 1 << 20)
    for ts, k, v, hs in records:
        b.append(ts, k, v, hs)
    b.producer_id, b.producer_epoch, b.base_sequence = pid, epoch, seq
    return b.build(codec, None, txn)


def test_client_accumulator_byte_exact():
    same_batch(client_batch(SAMPLE), kp_batch(SAMPLE))
    same_batch(client_batch(SAMPLE, pid=77, epoch=3, seq=2_147_483_600, txn=True),
               kp_batch(SAMPLE, pid=77, epoch=3, seq=2_147_483_600, txn=True))


@pytest.mark.parametrize("codec", CODECS)
def test_client_accumulator_read_by_kafka_python(codec):
    raw = client_batch(SAMPLE, codec, pid=1, epoch=0, seq=0)
    kb = DefaultRecordBatch(bytes(raw))
    assert kb.compression_type == codec and kb.producer_id == 1 and kb.base_sequence == 0
    assert kp_records(raw) == expected(SAMPLE)


def test_client_accumulator_size_counts_every_byte():
    b = ProducerBatch("t", 0, 0.0, 1 << 20)
    for ts, k, v, hs in SAMPLE:
        b.append(ts, k, v, hs)
    assert b.size == len(kp_batch(SAMPLE))


# ------------------------------------------------------------------------------------------------------------
# the Spark writer


@pytest.mark.parametrize("codec", CODECS)
def test_spark_writer_batches(codec):
    pa = pytest.importorskip("pyarrow")
    produce = pytest.importorskip("moldau.spark.produce")
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(300)]
    values = [None if i % 7 == 0 else b"v" * (i % 150) for i in range(300)]
    records = [(BASE_TS, k, v, []) for k, v in zip(keys, values)]
    section = produce.encode_section(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
    plain = produce.build_batch(section, len(records), BASE_TS, NONE)
    same_batch(plain, kp_batch(records))
    txn = produce.build_batch(section, len(records), BASE_TS, codec, None, (42, 1, 600))
    kb = DefaultRecordBatch(bytes(txn))
    assert kb.is_transactional and (kb.producer_id, kb.producer_epoch, kb.base_sequence) == (42, 1, 600)
    assert kp_records(txn) == expected(records)
    if codec == NONE:
        same_batch(txn, kp_batch(records, pid=42, epoch=1, seq=600, txn=True))


# ------------------------------------------------------------------------------------------------------------
# transaction markers


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_is_kafkas_end_transaction_marker(commit):
    """Kafka's EndTransactionMarker: key (version 0, type 0 ABORT / 1 COMMIT), value (version 0, coordinator
    epoch), in a transactional batch with the control bit, no sequence. The expected bytes are kafka-python's
    transactional batch of that record with the control bit set and its CRC computed by kafka-python."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 17)
    theirs = bytearray(kp_batch([(BASE_TS, key, value, [])], pid=900, epoch=4, seq=-1, txn=True))
    struct.pack_into(">h", theirs, 21, struct.unpack_from(">h", theirs, 21)[0] | 0x20)
    struct.pack_into(">I", theirs, 17, calc_crc32c(bytes(theirs[21:])))
    ours = build_control_batch(producer_id=900, producer_epoch=4, commit=commit, timestamp=BASE_TS,
                               coordinator_epoch=17)
    same_batch(ours, theirs)
    kb = DefaultRecordBatch(bytes(ours))
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional


# ------------------------------------------------------------------------------------------------------------
# the log cleaner's re-batching


def test_cleaner_rebuild_batch_keeps_offsets_and_header():
    from moldau.log.cleaner import rebuild_batch

    b = BatchBuilder(producer_id=8, producer_epoch=2, base_sequence=100, partition_leader_epoch=0)
    for ts, k, v, hs in SAMPLE:
        b.append(ts, k, v, hs)
    src = b.build(0)
    keep = [r for r in decode_batch(src) if r.offset % 3 != 2]  # gaps in the offsets, the last one kept
    assert keep[-1].offset == len(SAMPLE) - 1
    rebuilt = rebuild_batch(HEADER_STRUCT.unpack_from(src, 0), keep, None)
    offsets = [r.offset for r in keep]
    records = [(r.timestamp, r.key, r.value, list(r.headers)) for r in keep]
    theirs = kp_batch(records, pid=8, epoch=2, seq=100, offsets=offsets)
    # kafka-python's max timestamp is that of the kept records; Kafka's cleaner also recomputes it
    same_batch(rebuilt, theirs)
    h = parse_batch_header(rebuilt)
    assert h.last_offset_delta == len(SAMPLE) - 1 and h.records_count == len(keep)


# ------------------------------------------------------------------------------------------------------------
# one builder


def test_only_the_codec_packs_a_batch_header():
    """The v2 header layout and its packing live in moldau.protocol.records.batch alone (``seal_batch``)."""
    import re
    from pathlib import Path

    import moldau

    root = Path(moldau.__file__).parent
    codec = root / "protocol" / "records" / "batch.py"
    layout = re.compile(r"qiibIhiqqqhii|(?<!\w)(_?HEADER|HEADER_STRUCT)\.pack|struct\.pack.*[Bb]atch")
    offenders = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p != codec
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if layout.search(line)]
    assert offenders == []
    assert len(re.findall(r"_HEADER\.pack_into", codec.read_text(encoding="utf-8"))) == 1
