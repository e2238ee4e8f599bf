"""Compression codecs: round trips, interop with independent encoders, xerial snappy, the LZ4 legacy header
checksum (KAFKA-3160 / KIP-57), decompression-bomb limits, corrupt input."""

from __future__ import annotations

import gzip
import os
import struct

import lz4.frame
import pytest
import zstandard
from kafka import codec as kcodec

from moldau.protocol.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    UnsupportedCompressionError,
    codec_id,
    compress,
    decompress,
)
from moldau.protocol.records.codecs import lz4_frame_compress, snappy_xerial_compress
from moldau.protocol.records.crc import xxh32

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

PAYLOADS = [
    b"",
    b"a",
    b"hello kafka " * 1000,
    os.urandom(70_000),  # incompressible, more than one 64 KiB lz4 block
    bytes(range(256)) * 2000,  # 512 KB, several blocks
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_round_trip(codec, payload):
    assert decompress(codec, compress(codec, payload)) == payload


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_memoryview_and_bytearray(codec):
    data = b"xyz" * 5000
    c = compress(codec, memoryview(bytearray(data)))
    assert decompress(codec, memoryview(c)) == data
    assert decompress(codec, bytearray(c)) == data


def test_codec_id():
    assert [codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd", "uncompressed")] == [
        0,
        1,
        2,
        3,
        4,
        0,
    ]
    assert codec_id(None) == 0 and codec_id(3) == 3
    with pytest.raises(UnsupportedCompressionError):
        codec_id("brotli")
    with pytest.raises(UnsupportedCompressionError):
        codec_id(5)
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"x")
    with pytest.raises(UnsupportedCompressionError):
        compress(5, b"x")


# --- interop with independent encoders/decoders
# -----------------------------------------------------------------

DATA = b"The quick brown fox jumps over the lazy dog. " * 3000


def test_gzip_interop():
    assert gzip.decompress(compress(GZIP, DATA)) == DATA
    assert decompress(GZIP, kcodec.gzip_encode(DATA)) == DATA
    # concatenated gzip members (a valid gzip stream, Java's GZIPInputStream reads them all)
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_snappy_reads_xerial_and_raw():
    xerial = kcodec.snappy_encode(DATA)  # kafka-python writes xerial framing like the Java client
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert decompress(SNAPPY, xerial) == DATA
    raw = kcodec.snappy_encode(DATA, xerial_compatible=False)
    assert decompress(SNAPPY, raw) == DATA
    ours = compress(SNAPPY, DATA)
    assert not ours.startswith(b"\x82SNAPPY")  # raw snappy on write
    assert kcodec.snappy_decode(ours) == DATA


def test_snappy_xerial_writer_matches_kafka_python_bytes():
    assert snappy_xerial_compress(DATA) == kcodec.snappy_encode(DATA)
    assert decompress(SNAPPY, snappy_xerial_compress(DATA)) == DATA
    assert compress(SNAPPY, DATA, xerial=True) == kcodec.snappy_encode(DATA)


def test_lz4_interop_with_lz4_frame_library():
    ours = compress(LZ4, DATA)
    assert lz4.frame.decompress(ours) == DATA  # also checks the (correct) header checksum
    # frames written by the lz4 library with linked blocks, content size and checksums
    for kwargs in (
        {},
        dict(block_linked=True, content_checksum=True, store_size=True),
        dict(block_linked=False, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX4MB),
    ):
        assert decompress(LZ4, lz4.frame.compress(DATA, **kwargs)) == DATA
    assert decompress(LZ4, kcodec.lz4_encode(DATA)) == DATA


def test_lz4_frame_shape_matches_java_client():
    frame = lz4_frame_compress(b"abc" * 100)
    magic, flg, bd = struct.unpack_from("<IBB", frame)
    assert magic == 0x184D2204
    assert flg == 0x60  # version 01, independent blocks, no checksums, no content size
    assert bd == 0x40  # 64 KiB blocks
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF
    assert frame.endswith(b"\x00\x00\x00\x00")


def test_lz4_legacy_header_checksum_written_for_magic0():
    frame = compress(LZ4, DATA, magic=0)
    broken = (xxh32(frame[0:6]) >> 8) & 0xFF  # computed over magic + descriptor (KAFKA-3160)
    correct = (xxh32(frame[4:6]) >> 8) & 0xFF
    assert broken != correct
    assert frame[6] == broken
    # kafka-python's old-kafka decoder (independent implementation of the quirk) reads it
    assert kcodec.lz4_decode_old_kafka(frame) == DATA
    # a strict LZ4 frame decoder refuses it: proof the checksum is really the broken one
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)


def test_lz4_reads_both_header_checksums():
    assert decompress(LZ4, kcodec.lz4_encode_old_kafka(DATA)) == DATA  # broken HC, any magic
    assert decompress(LZ4, kcodec.lz4_encode_old_kafka(DATA), magic=1) == DATA
    assert decompress(LZ4, compress(LZ4, DATA, magic=0), magic=0) == DATA
    assert decompress(LZ4, compress(LZ4, DATA, magic=2), magic=0) == DATA


def test_lz4_bad_header_checksum_rejected_unless_magic0():
    frame = bytearray(compress(LZ4, DATA))
    frame[6] ^= 0x5A
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, frame)
    assert decompress(LZ4, frame, magic=0) == DATA  # Kafka ignores HC for magic 0


def test_zstd_interop():
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, DATA)) == DATA
    assert decompress(ZSTD, kcodec.zstd_encode(DATA)) == DATA
    # streamed frame without content size
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    streamed = cobj.compress(DATA) + cobj.flush()
    assert decompress(ZSTD, streamed) == DATA
    # two frames back to back
    two = zstandard.ZstdCompressor().compress(b"one") + zstandard.ZstdCompressor().compress(b"two")
    assert decompress(ZSTD, two) == b"onetwo"


# --- decompression bombs
# -----------------------------------------------------------------------------------------

BOMB = b"\x00" * (8 * 1024 * 1024)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_bomb_refused(codec):
    small = compress(codec, BOMB)
    assert len(small) < len(BOMB) // 20
    with pytest.raises(InvalidRecordError):
        decompress(codec, small, max_bytes=1024 * 1024)
    assert len(decompress(codec, small, max_bytes=len(BOMB))) == len(BOMB)


def test_bomb_refused_foreign_frames():
    with pytest.raises(InvalidRecordError):
        decompress(LZ4, lz4.frame.compress(BOMB, block_size=lz4.frame.BLOCKSIZE_MAX4MB), max_bytes=1 << 20)
    with pytest.raises(InvalidRecordError):
        decompress(SNAPPY, kcodec.snappy_encode(BOMB), max_bytes=1 << 20)
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    with pytest.raises(InvalidRecordError):
        decompress(ZSTD, cobj.compress(BOMB) + cobj.flush(), max_bytes=1 << 20)
    with pytest.raises(InvalidRecordError):
        decompress(NONE, b"x" * 100, max_bytes=99)


def test_lz4_lying_content_size_is_not_trusted():
    frame = bytearray(lz4.frame.compress(BOMB, store_size=True, block_size=lz4.frame.BLOCKSIZE_MAX4MB))
    struct.pack_into("<Q", frame, 6, 10)  # claim 10 bytes of content
    frame[14] = (xxh32(frame[4:14]) >> 8) & 0xFF
    with pytest.raises(RecordError):
        decompress(LZ4, frame, max_bytes=1 << 20)


# --- corrupt input
# -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_and_truncation_raise_corrupt(codec):
    good = compress(codec, DATA)
    with pytest.raises(RecordError):
        decompress(codec, b"\x00garbage\xff" * 3)
    with pytest.raises(RecordError):
        decompress(codec, good[: len(good) // 2])
    with pytest.raises(RecordError):
        decompress(codec, b"")


def test_xerial_bad_block_length():
    bad = bytearray(kcodec.snappy_encode(DATA))
    struct.pack_into(">i", bad, 16, 10**9)
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, bad)
