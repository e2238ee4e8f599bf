"""Compression codecs of Kafka record batches, on top of cramjam (plus zlib for bounded gzip).

Codec ids (attributes & 7): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

* gzip: RFC 1952 stream (concatenated members accepted on read).
* snappy: written as raw snappy; read both raw snappy and the xerial framing the Java client writes
  (``\\x82SNAPPY\\x00`` + int32 version + int32 min-compatible version, then [int32 length, raw block]*).
* lz4: the LZ4 *frame* format (magic 0x184D2204), written like Kafka's Java client does (independent 64 KiB
  blocks, no checksums). Magic 0 message sets carry the legacy framing quirk (KAFKA-3160 / KIP-57): old Kafka
  computed the frame descriptor checksum (HC) over magic number + descriptor instead of the descriptor
  alone. Writing for magic 0 reproduces that broken HC; reading accepts either HC (and ignores HC entirely
  for magic 0, as Kafka does).
* zstd: standard zstd frames.

Decompression is bounded: ``max_bytes`` caps the output, and for snappy/lz4/zstd the bound is established
from the compressed stream's own headers *before* anything is allocated, so a small malicious batch cannot
make the process allocate gigabytes. Failures raise CorruptRecordError; exceeding the bound raises
InvalidRecordError; an unknown codec raises UnsupportedCompressionError.
"""

from __future__ import annotations

import logging
import struct
import zlib

import cramjam

from .crc import xxh32
from .exceptions import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED",
    "compress",
    "decompress",
    "codec_id",
]

log = logging.getLogger(__name__)

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_BY_NAME = {v: k for k, v in CODEC_NAMES.items()}
_BY_NAME["uncompressed"] = NONE  # topic config compression.type value meaning "no compression"

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

# Kafka's default levels (compression.gzip.level etc., KIP-390)
DEFAULT_GZIP_LEVEL = 6
DEFAULT_LZ4_LEVEL = 9  # only HC levels differ from the fast compressor; moldau always uses the fast one
DEFAULT_ZSTD_LEVEL = 3

_Buf = bytes | bytearray | memoryview


def codec_id(name: str | int | None) -> int:
    """'gzip' -> 1, ..., accepting ints and None (-> 0). Raises UnsupportedCompressionError."""
    if name is None:
        return NONE
    if isinstance(name, int):
        if name in CODEC_NAMES:
            return name
        raise UnsupportedCompressionError(f"unknown compression codec {name}")
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise UnsupportedCompressionError(f"unknown compression codec {name!r}") from None


# ------------------------------------------------------------------------------------------------------------
# public entry points


def compress(
    codec: int, data: _Buf, *, level: int | None = None, magic: int = 2, xerial: bool = False
) -> bytes:
    """Compress ``data`` with ``codec``. ``magic`` only matters for lz4 (0 -> legacy broken HC)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=DEFAULT_GZIP_LEVEL if level is None else level))
    if codec == SNAPPY:
        if xerial:
            return snappy_xerial_compress(data)
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return lz4_frame_compress(data, legacy_checksum=(magic == 0))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=DEFAULT_ZSTD_LEVEL if level is None else level))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: _Buf, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, magic: int = 2) -> bytes:
    """Decompress ``data``; output larger than ``max_bytes`` is refused (InvalidRecordError)."""
    if codec == NONE:
        if len(data) > max_bytes:
            raise InvalidRecordError(f"record data of {len(data)} bytes exceeds limit {max_bytes}")
        return bytes(data)
    if codec == GZIP:
        return gzip_decompress(data, max_bytes)
    if codec == SNAPPY:
        return snappy_decompress(data, max_bytes)
    if codec == LZ4:
        return lz4_frame_decompress(data, max_bytes, ignore_header_checksum=(magic == 0))
    if codec == ZSTD:
        return zstd_decompress(data, max_bytes)
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def _too_big(size: int, max_bytes: int) -> InvalidRecordError:
    return InvalidRecordError(f"decompressed size {size} exceeds limit {max_bytes} bytes")


# ------------------------------------------------------------------------------------------------------------
# gzip


def gzip_decompress(data: _Buf, max_bytes: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """gzip (possibly several concatenated members), stopping as soon as output would pass ``max_bytes``."""
    out = bytearray()
    rest: _Buf = data
    first = True
    try:
        while first or rest:
            first = False
            d = zlib.decompressobj(wbits=31)
            chunk = d.decompress(rest, max_bytes + 1 - len(out))
            out += chunk
            if len(out) > max_bytes or d.unconsumed_tail:
                raise _too_big(len(out) + len(d.unconsumed_tail), max_bytes)
            if not d.eof:
                raise CorruptRecordError("gzip stream truncated")
            rest = d.unused_data
    except zlib.error as exc:
        raise CorruptRecordError(f"gzip decompression failed: {exc}") from None
    return bytes(out)


# ------------------------------------------------------------------------------------------------------------
# snappy

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_COMPAT = 1
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_I32 = struct.Struct(">i")


def snappy_decompress(data: _Buf, max_bytes: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Raw snappy or xerial-framed snappy."""
    try:
        if len(data) >= 16 and bytes(data[:8]) == XERIAL_MAGIC:
            return _xerial_decompress(data, max_bytes)
        size = cramjam.snappy.decompress_raw_len(data)
        if size > max_bytes:
            raise _too_big(size, max_bytes)
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy decompression failed: {exc}") from None


def _xerial_decompress(data: _Buf, max_bytes: int) -> bytes:
    mv = memoryview(data)
    pos = 16
    n = len(mv)
    blocks = []
    total = 0
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (length,) = _I32.unpack_from(mv, pos)
        pos += 4
        if length < 0 or length > n - pos:
            raise CorruptRecordError(f"xerial snappy block length {length} out of range")
        block = mv[pos : pos + length]
        pos += length
        size = cramjam.snappy.decompress_raw_len(block)
        total += size
        if total > max_bytes:
            raise _too_big(total, max_bytes)
        blocks.append(block)
    out = bytearray()
    for block in blocks:
        out += cramjam.snappy.decompress_raw(block)
    return bytes(out)


def snappy_xerial_compress(data: _Buf, block_size: int = _XERIAL_BLOCK) -> bytes:
    """xerial framing (what Kafka's Java client writes)."""
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT))
    mv = memoryview(data)
    for start in range(0, len(mv), block_size):
        block = cramjam.snappy.compress_raw(mv[start : start + block_size])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


# ------------------------------------------------------------------------------------------------------------
# lz4 frame

LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = struct.pack("<I", LZ4_MAGIC)
_U32LE = struct.Struct("<I")
_LZ4_BLOCK_64K = 4
_LZ4_UNCOMPRESSED = 0x80000000


def _lz4_hc(descriptor: _Buf) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def lz4_frame_compress(
    data: _Buf, *, legacy_checksum: bool = False, block_size_id: int = _LZ4_BLOCK_64K
) -> bytes:
    """One LZ4 frame with independent blocks and no checksums, as Kafka's Java client writes it.

    ``legacy_checksum`` writes the broken header checksum of Kafka < 0.10 (required for magic 0).
    """
    flg = 0x60  # version 01, block independence
    bd = (block_size_id & 7) << 4
    out = bytearray(_LZ4_MAGIC_BYTES)
    out.append(flg)
    out.append(bd)
    out.append(_lz4_hc(out if legacy_checksum else out[4:]))
    block_max = 1 << (2 * block_size_id + 8)
    mv = memoryview(data)
    compress_block = cramjam.lz4.compress_block
    for start in range(0, len(mv), block_max):
        chunk = mv[start : start + block_max]
        comp = compress_block(chunk, store_size=False)
        clen = len(comp)
        if clen >= len(chunk):
            out += _U32LE.pack(len(chunk) | _LZ4_UNCOMPRESSED)
            out += chunk
        else:
            out += _U32LE.pack(clen)
            out += comp
    out += b"\x00\x00\x00\x00"  # EndMark
    return bytes(out)


def _frame_magic(mv: memoryview, pos: int, codec: str) -> tuple[int, int | None]:
    """(magic number, end of the frame when it is a skippable frame - the same in LZ4 and zstd - else None)
    of the frame at ``pos``."""
    n = len(mv)
    if n - pos < 4:
        raise CorruptRecordError(f"{codec} frame truncated")
    (magic,) = _U32LE.unpack_from(mv, pos)
    if magic & 0xFFFFFFF0 != 0x184D2A50:
        return magic, None
    if n - pos < 8:
        raise CorruptRecordError(f"{codec} skippable frame truncated")
    (size,) = _U32LE.unpack_from(mv, pos + 4)
    end = pos + 8 + size
    if end > n:
        raise CorruptRecordError(f"{codec} skippable frame truncated")
    return magic, end


def _lz4_frame_bound(
    mv: memoryview, pos: int, ignore_hc: bool, fixes: list[tuple[int, int]]
) -> tuple[int, int]:
    """Walk one LZ4 frame (or skippable frame) at ``pos``: returns (upper bound of output, end position).

    Records header-checksum corrections to apply in ``fixes`` as (position, correct HC).
    """
    n = len(mv)
    magic, skip_end = _frame_magic(mv, pos, "lz4")
    if skip_end is not None:
        return 0, skip_end
    if magic != LZ4_MAGIC:
        raise CorruptRecordError("not an lz4 frame (bad magic number)")
    if n - pos < 7:
        raise CorruptRecordError("lz4 frame header truncated")
    flg = mv[pos + 4]
    bd = mv[pos + 5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4 frame version {flg >> 6} unsupported")
    block_id = (bd >> 4) & 7
    if block_id < 4:
        raise CorruptRecordError(f"lz4 block size id {block_id} invalid")
    block_max = 1 << (2 * block_id + 8)
    block_checksum = bool(flg & 0x10)
    content_size_flag = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    dict_id = bool(flg & 0x01)
    hc_pos = pos + 6 + (8 if content_size_flag else 0) + (4 if dict_id else 0)
    if hc_pos >= n:
        raise CorruptRecordError("lz4 frame header truncated")
    content_size = None
    if content_size_flag:
        content_size = int.from_bytes(mv[pos + 6 : pos + 14], "little")
    hc = mv[hc_pos]
    correct = _lz4_hc(mv[pos + 4 : hc_pos])
    if hc != correct:
        if not ignore_hc and hc != _lz4_hc(mv[pos:hc_pos]):
            raise CorruptRecordError("lz4 frame descriptor checksum mismatch")
        fixes.append((hc_pos, correct))
    p = hc_pos + 1
    bound = 0
    while True:
        if n - p < 4:
            raise CorruptRecordError("lz4 block header truncated")
        (bsize,) = _U32LE.unpack_from(mv, p)
        p += 4
        if bsize == 0:
            break
        raw = bool(bsize & _LZ4_UNCOMPRESSED)
        bsize &= 0x7FFFFFFF
        if bsize > block_max:
            raise CorruptRecordError(f"lz4 block size {bsize} exceeds max {block_max}")
        p += bsize + (4 if block_checksum else 0)
        if p > n:
            raise CorruptRecordError("lz4 block truncated")
        bound += bsize if raw else block_max
    if content_checksum:
        p += 4
        if p > n:
            raise CorruptRecordError("lz4 content checksum truncated")
    if content_size is not None and content_size > bound:
        raise CorruptRecordError("lz4 content size larger than its blocks can hold")
    return bound, p


def lz4_frame_decompress(
    data: _Buf, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, *, ignore_header_checksum: bool = False
) -> bytes:
    """Decompress LZ4 frame(s), accepting Kafka's legacy broken header checksum."""
    mv = memoryview(data)
    pos = 0
    total = 0
    fixes: list[tuple[int, int]] = []
    while pos < len(mv):
        bound, pos = _lz4_frame_bound(mv, pos, ignore_header_checksum, fixes)
        total += bound
        if total > max_bytes:
            raise _too_big(total, max_bytes)
    if pos == 0:
        raise CorruptRecordError("empty lz4 data")
    src: _Buf = data
    if fixes:
        patched = bytearray(data)
        for at, value in fixes:
            patched[at] = value
        src = patched
    try:
        out = bytes(cramjam.lz4.decompress(src))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"lz4 decompression failed: {exc}") from None
    if len(out) > max_bytes:  # cannot happen when the block walk above is right
        raise _too_big(len(out), max_bytes)
    return out


# ------------------------------------------------------------------------------------------------------------
# zstd

ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024


def _zstd_frame_bound(mv: memoryview, pos: int) -> tuple[int, int]:
    n = len(mv)
    magic, skip_end = _frame_magic(mv, pos, "zstd")
    if skip_end is not None:
        return 0, skip_end
    if magic != ZSTD_MAGIC:
        raise CorruptRecordError("not a zstd frame (bad magic number)")
    p = pos + 4
    if p >= n:
        raise CorruptRecordError("zstd frame header truncated")
    fhd = mv[p]
    p += 1
    fcs_flag = fhd >> 6
    single_segment = bool(fhd & 0x20)
    checksum = bool(fhd & 0x04)
    dict_flag = fhd & 0x03
    if fhd & 0x08:
        raise CorruptRecordError("zstd frame header reserved bit set")
    window_max = _ZSTD_BLOCK_MAX
    if not single_segment:
        if p >= n:
            raise CorruptRecordError("zstd frame header truncated")
        wd = mv[p]
        p += 1
        exponent = wd >> 3
        base = 1 << (10 + exponent)
        window = base + (base >> 3) * (wd & 7)
        window_max = min(window, _ZSTD_BLOCK_MAX)
    p += (0, 1, 2, 4)[dict_flag]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    content_size = None
    if fcs_size:
        if p + fcs_size > n:
            raise CorruptRecordError("zstd frame header truncated")
        content_size = int.from_bytes(mv[p : p + fcs_size], "little")
        if fcs_size == 2:
            content_size += 256
        p += fcs_size
    if single_segment and content_size is not None:
        window_max = min(max(content_size, 1), _ZSTD_BLOCK_MAX)
    bound = 0
    while True:
        if n - p < 3:
            raise CorruptRecordError("zstd block header truncated")
        bh = mv[p] | (mv[p + 1] << 8) | (mv[p + 2] << 16)
        p += 3
        last = bh & 1
        btype = (bh >> 1) & 3
        bsize = bh >> 3
        if btype == 0:  # raw
            bound += bsize
            p += bsize
        elif btype == 1:  # RLE
            bound += bsize
            p += 1
        elif btype == 2:  # compressed
            if bsize > _ZSTD_BLOCK_MAX:
                raise CorruptRecordError("zstd compressed block too large")
            bound += window_max
            p += bsize
        else:
            raise CorruptRecordError("zstd reserved block type")
        if p > n:
            raise CorruptRecordError("zstd block truncated")
        if last:
            break
    if checksum:
        p += 4
        if p > n:
            raise CorruptRecordError("zstd checksum truncated")
    if content_size is not None:
        bound = min(bound, content_size)
    return bound, p


def zstd_decompress(data: _Buf, max_bytes: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    mv = memoryview(data)
    pos = 0
    total = 0
    while pos < len(mv):
        bound, pos = _zstd_frame_bound(mv, pos)
        total += bound
        if total > max_bytes:
            raise _too_big(total, max_bytes)
    if pos == 0:
        raise CorruptRecordError("empty zstd data")
    try:
        out = bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"zstd decompression failed: {exc}") from None
    if len(out) > max_bytes:  # belt and braces: the bound above should make this impossible
        raise _too_big(len(out), max_bytes)
    return out
