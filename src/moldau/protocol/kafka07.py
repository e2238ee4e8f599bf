"""The Kafka 0.7 wire protocol (sans-I/O): requests, responses, messages, and the conversions between 0.7
message sets and v2 record batches.

Framing (``kafka.network.BoundedByteBufferReceive`` / ``kafka.api.*`` in Kafka 0.7)::

    request  = int32 size, int16 request type, body            (no api version, no correlation id)
    response = int32 size, int16 error code, body              (PRODUCE and MULTIPRODUCE have no response)

Bodies::

    PRODUCE (0)       topic:short-string partition:int32 message_set_size:int32 message_set
    FETCH (1)         topic partition:int32 offset:int64 max_size:int32
    MULTIFETCH (2)    count:int16 then count x FETCH body
    MULTIPRODUCE (3)  count:int16 then count x PRODUCE body
    OFFSETS (4)       topic partition:int32 time:int64 max_number:int32

    FETCH response        error, message-set bytes (a byte range of the log, possibly ending mid-message)
    MULTIFETCH response   error 0, then per fetch: int32 size (2 + bytes), int16 error, bytes
                          (``MultiMessageSetSend``: the outer size counts the inner size fields)
    OFFSETS response      error, int32 count, count x int64

A short string is an int16 length (-1 = null) and UTF-8 bytes. A message (``kafka.message.Message``)::

    int32 length, int8 magic, [int8 attributes if magic == 1], uint32 CRC32 of the payload, payload

magic 0 has no attributes byte (no compression); magic 1's attributes carry the codec in the low two bits
(0 none, 1 gzip, 2 snappy). A compressed message's payload is the compressed bytes of a message set of
uncompressed messages. Error codes (``kafka.common.ErrorMapping``): -1 unknown, 0 none, 1 OffsetOutOfRange,
2 InvalidMessage, 3 WrongPartition, 4 InvalidFetchSize (``InvalidMessageSizeException``); 0.7 has no others.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import add as _add

from .records import (
    GZIP,
    NONE,
    SNAPPY,
    BatchBuilder,
    BatchHeader,
    compute_crc,
    decode_batch,
    decode_varint,
)
from .records.codecs import decompress, gzip_decompress, snappy_decompress
from .records.exceptions import RecordError

__all__ = [
    "EARLIEST_TIME",
    "FETCH",
    "INVALID_FETCH_SIZE",
    "INVALID_MESSAGE",
    "LATEST_TIME",
    "MULTIFETCH",
    "MULTIPRODUCE",
    "NO_ERROR",
    "OFFSETS",
    "OFFSET_OUT_OF_RANGE",
    "PRODUCE",
    "FILLER_MIN",
    "MAGIC0_FLAG",
    "cleaning_plan",
    "filler",
    "gzip_padded_message",
    "mark_magic0",
    "unit_view",
    "view_magic",
    "RANDOM_PARTITION",
    "REQUEST_NAMES",
    "UNKNOWN",
    "WRONG_PARTITION",
    "FetchRequest",
    "FrameReader",
    "InvalidMessage07",
    "Kafka07RequestError",
    "Message07",
    "MultiFetchRequest",
    "MultiProduceRequest",
    "OffsetsRequest",
    "ProduceRequest",
    "batch_message_set_size",
    "batch_to_message_set",
    "batch_view_scan",
    "batch_views",
    "decode_fetch_response",
    "decode_multifetch_response",
    "decode_offsets_response",
    "encode_fetch_response",
    "encode_message",
    "encode_multifetch_response",
    "encode_offsets_response",
    "encode_request",
    "gzip_stored",
    "messages_to_batches",
    "parse_message_set",
    "parse_request",
    "snappy_literal",
    "validate_message_set",
]

# request types (kafka.api.RequestKeys)
PRODUCE = 0
FETCH = 1
MULTIFETCH = 2
MULTIPRODUCE = 3
OFFSETS = 4
REQUEST_NAMES = {PRODUCE: "PRODUCE", FETCH: "FETCH", MULTIFETCH: "MULTIFETCH", MULTIPRODUCE: "MULTIPRODUCE",
                 OFFSETS: "OFFSETS"}

# error codes (kafka.common.ErrorMapping)
UNKNOWN = -1
NO_ERROR = 0
OFFSET_OUT_OF_RANGE = 1
INVALID_MESSAGE = 2
WRONG_PARTITION = 3
INVALID_FETCH_SIZE = 4

# OFFSETS times (kafka.api.OffsetRequest)
LATEST_TIME = -1
EARLIEST_TIME = -2
# PRODUCE partition -1: the broker picks one (kafka.api.ProducerRequest.RandomPartition)
RANDOM_PARTITION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MSG1 = struct.Struct(">iBBI")   # length, magic, attributes, crc
_MSG0 = struct.Struct(">iBI")    # length, magic, crc
_FETCH_TAIL = struct.Struct(">iqi")   # partition, offset, max size
_OFFSETS_TAIL = struct.Struct(">iqi")  # partition, time, max number
_RESP = struct.Struct(">ih")

MESSAGE_OVERHEAD = 10  # int32 length + magic + attributes + crc, for magic 1
MESSAGE_OVERHEAD_V0 = 9  # int32 length + magic + crc, for magic 0 (0.6: no attributes byte)
CODEC_MASK = 0x03

# Bit 14 of a stored v2 batch's attributes: "this uncompressed batch was produced on the legacy listener as
# magic-0 messages; serve its 0.7 view as magic 0". Kafka uses bits 0-6 and clients ignore the others, so the
# bit is invisible to modern consumers (the stored batch, CRC included, is served to them untouched), and it
# travels with the batch: restart, recovery, replication and the cleaner's re-batching keep it.
MAGIC0_FLAG = 0x4000
_ATTRIBUTES_AT = 21  # offset of the int16 attributes in a v2 batch header
CODEC_MASK_V2 = 0x07  # codec bits of a v2 batch's attributes


class Kafka07RequestError(Exception):
    """A frame that is not a well-formed 0.7 request: Kafka 0.7's socket server closes the connection."""


class InvalidMessage07(Exception):
    """A message set that Kafka 0.7's ``Log.append`` refuses (bad CRC, unknown magic or codec, bad size)."""


# ------------------------------------------------------------------------------------------------- messages
@dataclass(slots=True)
class Message07:
    magic: int
    codec: int
    crc: int
    payload: bytes
    size: int  # bytes on the wire, the int32 length included

    @property
    def valid(self) -> bool:
        return zlib.crc32(self.payload) == self.crc


def encode_message(payload: bytes | bytearray | memoryview, codec: int = NONE, magic: int = 1) -> bytes:
    """One message: magic 1 (with the attributes byte) unless ``magic=0``."""
    crc = zlib.crc32(payload)
    if magic == 0:
        return _MSG0.pack(5 + len(payload), 0, crc) + bytes(payload)
    return _MSG1.pack(6 + len(payload), 1, codec & CODEC_MASK, crc) + bytes(payload)


def parse_message_set(data: bytes | bytearray | memoryview, *, strict: bool = True) -> list[Message07]:
    """The messages of a message set, as ``ByteBufferMessageSet``'s shallow iterator sees them: a trailing
    partial message ends the set (it is not an error unless it is the first one, or its size is negative:
    ``InvalidMessageSizeException``). Raises InvalidMessage07 for a message too short for its header or with
    an unknown magic (0.7's ``UnknownMagicByteException``); CRCs are not checked here."""
    mv = memoryview(data)
    n = len(mv)
    pos = 0
    out: list[Message07] = []
    while n - pos >= 4:
        (size,) = _I32.unpack_from(mv, pos)
        if size < 0 or n - pos - 4 < size:
            if strict and (not out or size < 0):
                raise InvalidMessage07(f"invalid message size {size} with {n - pos - 4} bytes left at {pos}")
            break
        body = mv[pos + 4: pos + 4 + size]
        if size < 1:
            raise InvalidMessage07(f"empty message at {pos}")
        magic = body[0]
        if magic == 0:
            if size < 5:
                raise InvalidMessage07(f"message of {size} bytes at {pos} is shorter than its header")
            (crc,) = struct.unpack_from(">I", body, 1)
            out.append(Message07(0, NONE, crc, bytes(body[5:]), size + 4))
        elif magic == 1:
            if size < 6:
                raise InvalidMessage07(f"message of {size} bytes at {pos} is shorter than its header")
            codec = body[1] & CODEC_MASK
            (crc,) = struct.unpack_from(">I", body, 2)
            out.append(Message07(1, codec, crc, bytes(body[6:]), size + 4))
        else:
            raise InvalidMessage07(f"unknown magic byte {magic} at {pos}")
        pos += 4 + size
    return out


def _decompress(msg: Message07, max_bytes: int) -> bytes:
    try:
        if msg.codec == GZIP:
            return gzip_decompress(msg.payload, max_bytes)
        if msg.codec == SNAPPY:
            return snappy_decompress(msg.payload, max_bytes)
    except RecordError as e:
        raise InvalidMessage07(f"cannot decompress a message: {e}") from None
    raise InvalidMessage07(f"unknown compression codec {msg.codec}")


def validate_message_set(data: bytes | bytearray | memoryview, *, max_message_bytes: int,
                         max_decompressed: int = 256 << 20) -> list[tuple[int, list[bytes], int]]:
    """Kafka 0.7's ``Log.append`` checks, as one unit: every message (compressed ones decompressed, their
    inner messages too) must have a valid CRC, a known magic and codec, and a size within
    ``max_message_bytes``.
    Returns [(codec, payloads, magic)]: an uncompressed message gives (0, [payload], its magic), a
    compressed one (codec, its inner payloads, 1). Raises InvalidMessage07, and then nothing of the set may
    be written."""
    out: list[tuple[int, list[bytes], int]] = []
    for msg in parse_message_set(data):
        if msg.size - 4 > max_message_bytes:
            raise InvalidMessage07(f"message of {msg.size - 4} bytes exceeds {max_message_bytes}")
        if not msg.valid:
            raise InvalidMessage07(f"message CRC {msg.crc} does not match its payload")
        if msg.codec == NONE:
            out.append((NONE, [msg.payload], msg.magic))
            continue
        inner = parse_message_set(_decompress(msg, max_decompressed))
        payloads = []
        for m in inner:
            if not m.valid:
                raise InvalidMessage07("a compressed message holds a message with a bad CRC")
            if m.codec != NONE:
                raise InvalidMessage07("a compressed message holds a compressed message")
            payloads.append(m.payload)
        out.append((msg.codec, payloads, 1))
    return out


def messages_to_batches(units: list[tuple[int, list[bytes], int]], timestamp_ms: int) -> bytearray:
    """v2 record batches for validated 0.7 messages: consecutive uncompressed messages of the same magic share
    one uncompressed batch (one record per message; magic 0 marks the batch with ``MAGIC0_FLAG``); each
    compressed message becomes one batch of its inner messages, compressed with the same codec, so that it
    stays one unit (one 0.7 message) when read back."""
    out = bytearray()
    plain: list[bytes] = []
    plain_magic = 1

    def flush_plain() -> None:
        if plain:
            b = BatchBuilder(compression=NONE)
            for p in plain:
                b.append(timestamp_ms, None, p)
            start = len(out)
            out.extend(b.build(0))
            if plain_magic == 0:
                mark_magic0(out, start)
            plain.clear()

    for codec, payloads, magic in units:
        if codec == NONE:
            if magic != plain_magic:
                flush_plain()
                plain_magic = magic
            plain.extend(payloads)
            continue
        flush_plain()
        if not payloads:
            continue
        b = BatchBuilder(compression=codec)
        for p in payloads:
            b.append(timestamp_ms, None, p)
        out.extend(b.build(0))
    flush_plain()
    return out


def mark_magic0(buf: bytearray, pos: int) -> None:
    """Set ``MAGIC0_FLAG`` on the v2 batch at ``pos`` and recompute its CRC."""
    (attrs,) = _I16.unpack_from(buf, pos + _ATTRIBUTES_AT)
    _I16.pack_into(buf, pos + _ATTRIBUTES_AT, attrs | MAGIC0_FLAG)
    (length,) = _I32.unpack_from(buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, compute_crc(buf, pos, 12 + length))


def view_magic(header: BatchHeader) -> int:
    """Magic of the messages of a batch's 0.7 view: 0 for an uncompressed batch marked ``MAGIC0_FLAG``
    (written by a 0.6-era producer), 1 otherwise (magic 0 cannot be compressed, so the flag is ignored on a
    compressed or control batch)."""
    return 0 if header.attributes & MAGIC0_FLAG and header.compression == NONE else 1


# ------------------------------------------------------------------------------------ deterministic encodings
# The 0.7 view of a stored batch must have the same size forever (byte offsets are sums of sizes), so the
# compressed wrappers are written in encodings whose output is fixed by their format, not by a compressor
# library's version: gzip with stored deflate blocks, snappy with literal elements only.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_STORED_MAX = 0xFFFF
_SNAPPY_LITERAL_MAX = 0x10000


def gzip_stored(data: bytes | bytearray | memoryview) -> bytes:
    """RFC 1952 gzip of ``data`` in stored (uncompressed) deflate blocks: any gzip reader decodes it."""
    mv = memoryview(data)
    n = len(mv)
    out = bytearray(_GZIP_HEADER)
    pos = 0
    while True:
        chunk = mv[pos: pos + _STORED_MAX]
        pos += len(chunk)
        final = pos >= n
        out += struct.pack("<BHH", 1 if final else 0, len(chunk), len(chunk) ^ 0xFFFF)
        out += chunk
        if final:
            break
    out += struct.pack("<II", zlib.crc32(mv) & 0xFFFFFFFF, n & 0xFFFFFFFF)
    return bytes(out)


def gzip_stored_size(n: int) -> int:
    blocks = max(1, -(-n // _STORED_MAX))
    return len(_GZIP_HEADER) + 5 * blocks + n + 8


def _varint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _literal_tag(length: int) -> bytes:
    m = length - 1
    if m < 60:
        return bytes((m << 2,))
    if m < 0x100:
        return bytes((60 << 2, m))
    return bytes((61 << 2, m & 0xFF, m >> 8))


def snappy_literal(data: bytes | bytearray | memoryview) -> bytes:
    """Raw snappy (the block format) made of literal elements only: any snappy reader decodes it."""
    mv = memoryview(data)
    n = len(mv)
    out = bytearray()
    v = n
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    for pos in range(0, n, _SNAPPY_LITERAL_MAX):
        chunk = mv[pos: pos + _SNAPPY_LITERAL_MAX]
        out += _literal_tag(len(chunk))
        out += chunk
    return bytes(out)


def snappy_literal_size(n: int) -> int:
    size = _varint_size(n)
    for pos in range(0, n, _SNAPPY_LITERAL_MAX):
        m = min(_SNAPPY_LITERAL_MAX, n - pos) - 1
        size += (1 if m < 60 else 2 if m < 0x100 else 3) + m + 1
    return size


def _wrapper_codec(compression: int) -> int:
    """0.7 codec of the wrapper for a batch compressed with ``compression``: snappy stays snappy, gzip stays
    gzip, lz4 and zstd (unknown to 0.7) become gzip."""
    return SNAPPY if compression == SNAPPY else GZIP


def batch_to_message_set(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    """The 0.7 view of one stored v2 batch: nothing for a control batch; one message per record for an
    uncompressed batch (magic 0 when the batch carries ``MAGIC0_FLAG``, else magic 1); one compressed
    wrapper message holding them for a compressed batch. Keys, headers and timestamps have no place in 0.7
    and are left out; a null value becomes an empty payload."""
    return batch_view_scan(buf, pos, header)


def _value_bytes(section: bytes | memoryview, count: int) -> int:
    """Sum of the value lengths of ``count`` v2 records in ``section`` (nulls count 0)."""
    starts, ends = _value_spans(section, count)
    return sum(ends) - sum(starts)


def _value_spans(section: bytes | memoryview, count: int, p: int = 0, n: int = -1
                 ) -> tuple[list[int], list[int]]:
    """Start and end positions of the values of ``count`` v2 records in ``section`` from position ``p`` up
    to ``n`` (-1: its end) (a null value: an empty span): one pass over the records' varints, the common 1-
    and 2-byte encodings inline, the GIL given up every 1024 records (a thread waiting for it, the event
    loop's, has it then)."""
    starts: list[int] = []
    ends: list[int] = []
    start = starts.append
    stop = ends.append
    s = section
    if n < 0:
        n = len(s)
    try:
        for first in range(0, count, 1024):
            if first:
                time.sleep(0)
            for _ in range(min(1024, count - first)):
                b = s[p]
                if b < 0x80:
                    end = p + 1 + (b >> 1)
                    p += 1
                else:
                    b = (b & 0x7F) | (s[p + 1] << 7)
                    if b & 0x4000 or b & 1:
                        length, p = decode_varint(s, p)
                        if length < 0:
                            raise RecordError("negative record length")
                        end = p + length
                    else:
                        p += 2
                        end = p + (b >> 1)
                # attributes, then the timestamp and offset deltas (varlongs, skipped), the key length
                q = p + 1
                if s[q] >= 0x80:
                    q += 1
                    while s[q] >= 0x80:
                        q += 1
                q += 1
                if s[q] >= 0x80:
                    q += 1
                    while s[q] >= 0x80:
                        q += 1
                q += 1
                b = s[q]
                if b < 0x80:
                    q += 1 if b & 1 else 1 + (b >> 1)
                else:
                    klen, q = decode_varint(s, q)
                    if klen > 0:
                        q += klen
                b = s[q]  # value length
                if b < 0x80:
                    q += 1
                    v = q if b & 1 else q + (b >> 1)  # odd: -1, a null value
                else:
                    b = (b & 0x7F) | (s[q + 1] << 7)
                    if b & 0x4000 or b & 1:
                        vlen, q = decode_varint(s, q)
                        v = q + vlen if vlen > 0 else q
                    else:
                        q += 2
                        v = q + (b >> 1)
                if v > end or end > n:
                    raise RecordError("record runs past its batch")
                start(q)
                stop(v)
                p = end
    except IndexError:
        raise RecordError("record runs past its batch") from None
    return starts, ends


def _skip_varint(section: bytes | memoryview, p: int) -> int:
    """Position after the varint at ``p`` (no value, no tuple: the scans run in a worker thread, and
    allocating less there means fewer garbage collections holding the GIL)."""
    try:
        while section[p] & 0x80:
            p += 1
    except IndexError:
        raise RecordError("truncated varint") from None
    return p + 1


def _section(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes | memoryview:
    count = header.records_count
    if count < 0 or header.batch_length + 12 > len(buf) - pos:
        raise RecordError(f"record batch at {pos} is truncated or has a bad count")
    body = memoryview(buf)[pos + 61: pos + 12 + header.batch_length]
    return decompress(header.compression, body) if header.compression != NONE else body


def batch_view_scan(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    """``batch_to_message_set`` by one plain-Python scan of the records' varints for the values' places
    (``_value_spans``; no record objects), then the 0.7 messages built in bulk: the values sliced, their
    CRCs and the message headers computed by ``map`` over C functions, one ``join``. What a worker thread
    runs to convert views off the event loop: the scan gives the GIL up regularly, the bulk part is short."""
    if header.is_control:
        return b""
    section = _section(buf, pos, header)
    count = header.records_count
    inner = _messages(bytes(section), count, view_magic(header))
    if header.compression == NONE:
        return inner
    codec = _wrapper_codec(header.compression)
    payload = snappy_literal(inner) if codec == SNAPPY else gzip_stored(inner)
    return encode_message(payload, codec)


def _messages(section: bytes, count: int, magic: int) -> bytes:
    """The uncompressed 0.7 messages (of ``magic``) of the ``count`` records of ``section``."""
    starts, ends = _value_spans(section, count)
    return _build(section, starts, ends, magic)


_BUILD_BYTES = 128 << 10


def _build(data: bytes, starts: list[int], ends: list[int], magic: int) -> bytes:
    """Uncompressed 0.7 messages (of ``magic``) of the values ``data[starts[i]:ends[i]]``, built in pieces
    of at most 1024 messages and about ``_BUILD_BYTES`` with the GIL given up in between (each piece is C
    calls that do not give it up: slicing, CRCs, packing, joining)."""
    count = len(starts)
    if not count:
        return b""
    step = max(16, min(1024, _BUILD_BYTES * count // max(1, ends[-1] - starts[0])))
    out: list[bytes] = []
    for first in range(0, count, step):
        if first:
            time.sleep(0)
        last = min(count, first + step)
        values = list(map(data.__getitem__, map(slice, starts[first:last], ends[first:last])))
        crcs = map(zlib.crc32, values)
        if magic == 0:
            heads = map(_MSG0.pack, map(_add, map(len, values), repeat(5)), repeat(0), crcs)
        else:
            heads = map(_MSG1.pack, map(_add, map(len, values), repeat(6)), repeat(1), repeat(0), crcs)
        parts: list[bytes] = [b""] * (2 * len(values))
        parts[::2] = heads
        parts[1::2] = values
        out.append(b"".join(parts))
    return out[0] if len(out) == 1 else b"".join(out)


_OnError = Callable[[BatchHeader, RecordError], None]


def batch_views(buf: bytes, batches: list[tuple[int, BatchHeader]], on_error: _OnError | None = None
                ) -> tuple[list[int], bytes]:
    """The 0.7 views of ``batches`` of ``buf`` (``batch_to_message_set`` of each), joined, and their sizes:
    the messages of consecutive uncompressed batches are built together in one bulk pass (a batch of a few
    records costs little more than its records). A batch that does not decode has no view (size 0; its
    error goes to ``on_error``)."""
    sizes: list[int] = []
    out: list[bytes] = []
    starts: list[int] = []
    ends: list[int] = []
    magic = 1
    for bp, h in batches:
        try:
            if h.is_control:
                sizes.append(0)
                continue
            if h.compression != NONE:
                v = batch_view_scan(buf, bp, h)
                if starts:
                    out.append(_build(buf, starts, ends, magic))
                    starts, ends = [], []
                out.append(v)
                sizes.append(len(v))
                continue
            count = h.records_count
            if count < 0 or h.batch_length + 12 > len(buf) - bp:
                raise RecordError(f"record batch at {bp} is truncated or has a bad count")
            st, en = _value_spans(buf, count, bp + 61, bp + 12 + h.batch_length)
            m = view_magic(h)
            if m != magic and starts:
                out.append(_build(buf, starts, ends, magic))
                starts, ends = [], []
            magic = m
            starts += st
            ends += en
            sizes.append(count * (MESSAGE_OVERHEAD_V0 if m == 0 else MESSAGE_OVERHEAD) + sum(en) - sum(st))
        except RecordError as e:
            if on_error is not None:
                on_error(h, e)
            sizes.append(0)
    if starts:
        out.append(_build(buf, starts, ends, magic))
    return sizes, b"".join(out)


def batch_message_set_size(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    """``len(batch_to_message_set(...))`` without building it."""
    if header.is_control:
        return 0
    count = header.records_count
    overhead = MESSAGE_OVERHEAD_V0 if view_magic(header) == 0 else MESSAGE_OVERHEAD
    if header.compression == NONE and isinstance(buf, bytes):  # scanned in place (bytes index fastest)
        if count < 0 or header.batch_length + 12 > len(buf) - pos:
            raise RecordError(f"record batch at {pos} is truncated or has a bad count")
        starts, ends = _value_spans(buf, count, pos + 61, pos + 12 + header.batch_length)
        return count * overhead + sum(ends) - sum(starts)
    inner = count * overhead + _value_bytes(_section(buf, pos, header), count)
    if header.compression == NONE:
        return inner
    if _wrapper_codec(header.compression) == SNAPPY:
        return MESSAGE_OVERHEAD + snappy_literal_size(inner)
    return MESSAGE_OVERHEAD + gzip_stored_size(inner)


# ------------------------------------------------------------------------------------------- compacted views
# A cleaning pass removes records from batches. Byte offsets must not move (a consumer's saved offset stays
# valid), so the byte-offset index keeps every unit's position and size, and what a unit has lost is made up
# for in the view: a unit whose records are all gone is a *filler*, a gzip message holding an empty message
# set (0.7 consumers open it and find nothing), padded to the unit's size with a gzip comment; a compressed
# unit that lost records is a gzip message of what is left, padded the same way. The smallest filler is 33
# bytes, so the cleaner of an indexed partition keeps removed records it could not cover (``cleaning_plan``).
FILLER_MIN = MESSAGE_OVERHEAD + 23  # 10 + gzip header, one empty stored block, trailer


def message_size(magic: int, value_len: int) -> int:
    return (MESSAGE_OVERHEAD_V0 if magic == 0 else MESSAGE_OVERHEAD) + value_len


def gzip_padded_message(inner: bytes | bytearray, size: int) -> bytes | None:
    """A gzip message of exactly ``size`` bytes holding the message set ``inner`` (stored deflate blocks,
    padded with an FCOMMENT field), or None when ``inner`` does not fit."""
    pad = size - MESSAGE_OVERHEAD - gzip_stored_size(len(inner))
    if pad < 0:
        return None
    gz = gzip_stored(inner)
    if pad:
        # FLG.FCOMMENT: a zero-terminated comment after the 10-byte header
        gz = gz[:3] + b"\x10" + gz[4:10] + b" " * (pad - 1) + b"\x00" + gz[10:]
    return encode_message(gz, GZIP)


def filler(size: int) -> bytes:
    """What a unit whose records were all removed by compaction is served as (``size`` >= FILLER_MIN)."""
    out = gzip_padded_message(b"", size)
    if out is None:  # pragma: no cover - the cleaner never leaves a smaller hole
        raise ValueError(f"no filler of {size} bytes")
    return out


def unit_view(buf: bytes | bytearray | memoryview | None, pos: int, header: BatchHeader | None, lo: int,
              hi: int, size: int, skip: int = 0) -> bytes:
    """The view of the index unit [lo, hi) of ``size`` bytes, from byte ``skip`` of it, out of the stored
    batch holding its records (None: there is none; a cleaning pass may have thinned or removed it): its
    messages at their places, a padded gzip message for a compressed unit that lost records, a filler for a
    unit with none left. Read from inside a filler (a consumer's saved offset of a message that was
    removed), it is a shorter filler to the unit's end, so the next offset the consumer computes is a unit's
    start."""
    if buf is None or header is None or header.is_control:
        records = []
    else:
        records = [r for r in decode_batch(buf, pos, header=header) if lo <= r.offset < hi]
    if not records or header is None:
        return filler(size - skip) if size - skip >= FILLER_MIN else filler(size)[skip:]
    return _unit_view(records, header, size)[skip:] if skip else _unit_view(records, header, size)


def _unit_view(records: list, header: BatchHeader, size: int) -> bytes:
    magic = view_magic(header)
    inner = b"".join(encode_message(r.value or b"", NONE, magic) for r in records)
    if header.compression == NONE:
        return inner if len(inner) == size else filler(size)
    codec = _wrapper_codec(header.compression)
    natural = encode_message(snappy_literal(inner) if codec == SNAPPY else gzip_stored(inner), codec)
    if len(natural) == size:
        return natural
    return gzip_padded_message(inner, size) or filler(size)


def cleaning_plan(attributes: int, offsets: list[int], value_lens: list[int], kept: list[bool]
                  ) -> tuple[list[bool], list[tuple[int, int, bool]] | None]:
    """What the cleaner of a partition with a byte-offset index may remove from one data batch (records
    ``offsets`` with ``value_lens``; ``kept``: what compaction keeps) so that every unit keeps its size:
    a run of removed records of an uncompressed batch must end with a message of at least FILLER_MIN bytes
    (the records after the last such message are kept), so that the filler served from any message of the
    run to its end has room; a compressed batch must leave room for its padded gzip message or a filler
    (else it is kept whole). Returns the adjusted ``kept`` and, for an uncompressed batch, (offset, view
    size, kept) per record, which ``ByteOffsetIndex.apply_cleaning`` uses to split the batch's unit."""
    magic = 0 if attributes & MAGIC0_FLAG and attributes & CODEC_MASK_V2 == NONE else 1
    sizes = [message_size(magic, n) for n in value_lens]
    if attributes & CODEC_MASK_V2 != NONE:
        inner = sum(sizes)
        if _wrapper_codec(attributes & CODEC_MASK_V2) == SNAPPY:
            natural = MESSAGE_OVERHEAD + snappy_literal_size(inner)
        else:
            natural = MESSAGE_OVERHEAD + gzip_stored_size(inner)
        left = sum(sz for sz, k in zip(sizes, kept) if k)
        fits = natural >= FILLER_MIN if not left else MESSAGE_OVERHEAD + gzip_stored_size(left) <= natural
        return (list(kept) if fits else [True] * len(kept)), None
    out = list(kept)
    i = 0
    while i < len(out):
        if out[i]:
            i += 1
            continue
        j = i
        while j < len(out) and not out[j]:
            j += 1
        # a consumer may have saved the byte offset of any message of the run: the filler served from there
        # to the end of the run needs FILLER_MIN bytes, so the run must end with a message that large
        k = j
        while k > i and sizes[k - 1] < FILLER_MIN:
            out[k - 1] = True
            k -= 1
        i = j
    return out, [(o, sz, k) for o, sz, k in zip(offsets, sizes, out)]


# ------------------------------------------------------------------------------------------------- requests
@dataclass(slots=True)
class ProduceRequest:
    topic: str
    partition: int
    messages: bytes


@dataclass(slots=True)
class FetchRequest:
    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(slots=True)
class MultiFetchRequest:
    fetches: list[FetchRequest] = field(default_factory=list)


@dataclass(slots=True)
class MultiProduceRequest:
    produces: list[ProduceRequest] = field(default_factory=list)


@dataclass(slots=True)
class OffsetsRequest:
    topic: str
    partition: int
    time: int
    max_number: int


Request07 = ProduceRequest | FetchRequest | MultiFetchRequest | MultiProduceRequest | OffsetsRequest


class FrameReader:
    """Splits a byte stream into request bodies (int32 size prefix). A size below 2 or above ``max_size`` is
    a Kafka07RequestError (0.7's ``InvalidRequestException``: the connection is closed)."""

    __slots__ = ("_buf", "max_size")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self.max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if size < 2 or size > self.max_size:
                raise Kafka07RequestError(f"request of {size} bytes is out of range (max {self.max_size})")
            if n - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4: pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out


class _Reader:
    __slots__ = ("mv", "pos")

    def __init__(self, data: bytes) -> None:
        self.mv = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or len(self.mv) - self.pos < n:
            raise Kafka07RequestError(f"request truncated at byte {self.pos} (wanted {n} more)")
        out = self.mv[self.pos: self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self.take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def topic(self) -> str:
        n = self.i16()
        if n < 0:
            raise Kafka07RequestError("null topic")
        try:
            return bytes(self.take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise Kafka07RequestError("topic is not UTF-8") from None

    def produce(self) -> ProduceRequest:
        topic = self.topic()
        partition = self.i32()
        size = self.i32()
        return ProduceRequest(topic, partition, bytes(self.take(size)))

    def fetch(self) -> FetchRequest:
        topic = self.topic()
        partition, offset, max_size = _FETCH_TAIL.unpack(self.take(_FETCH_TAIL.size))
        return FetchRequest(topic, partition, offset, max_size)


def parse_request(body: bytes) -> tuple[int, Request07]:
    """(request type, request) of one request body (the bytes after the size). Raises Kafka07RequestError
    for an unknown type or a body that does not parse (trailing bytes are ignored, as 0.7 did)."""
    r = _Reader(body)
    kind = r.i16()
    if kind == PRODUCE:
        return kind, r.produce()
    if kind == FETCH:
        return kind, r.fetch()
    if kind == MULTIFETCH:
        n = r.i16()
        return kind, MultiFetchRequest([r.fetch() for _ in range(max(n, 0))])
    if kind == MULTIPRODUCE:
        n = r.i16()
        return kind, MultiProduceRequest([r.produce() for _ in range(max(n, 0))])
    if kind == OFFSETS:
        topic = r.topic()
        partition, time, max_number = _OFFSETS_TAIL.unpack(r.take(_OFFSETS_TAIL.size))
        return kind, OffsetsRequest(topic, partition, time, max_number)
    raise Kafka07RequestError(f"unknown request type {kind}")


def _topic_bytes(topic: str) -> bytes:
    t = topic.encode("utf-8")
    return _I16.pack(len(t)) + t


def _produce_body(p: ProduceRequest) -> bytes:
    return _topic_bytes(p.topic) + _I32.pack(p.partition) + _I32.pack(len(p.messages)) + p.messages


def _fetch_body(f: FetchRequest) -> bytes:
    return _topic_bytes(f.topic) + _FETCH_TAIL.pack(f.partition, f.offset, f.max_size)


def encode_request(req: Request07) -> bytes:
    """A whole request frame (size prefix included): what a 0.7 client sends."""
    if isinstance(req, ProduceRequest):
        body = _I16.pack(PRODUCE) + _produce_body(req)
    elif isinstance(req, FetchRequest):
        body = _I16.pack(FETCH) + _fetch_body(req)
    elif isinstance(req, MultiFetchRequest):
        body = _I16.pack(MULTIFETCH) + _I16.pack(len(req.fetches)) + b"".join(map(_fetch_body, req.fetches))
    elif isinstance(req, MultiProduceRequest):
        body = (_I16.pack(MULTIPRODUCE) + _I16.pack(len(req.produces))
                + b"".join(map(_produce_body, req.produces)))
    else:
        body = (_I16.pack(OFFSETS) + _topic_bytes(req.topic)
                + _OFFSETS_TAIL.pack(req.partition, req.time, req.max_number))
    return _I32.pack(len(body)) + body


# ------------------------------------------------------------------------------------------------ responses
def encode_fetch_response(error: int, data: bytes | bytearray | memoryview = b"") -> list[bytes]:
    """FETCH response (``MessageSetSend``) as chunks to write."""
    return [_RESP.pack(2 + len(data), error), bytes(data)]


def encode_multifetch_response(parts: list[tuple[int, bytes]]) -> list[bytes]:
    """MULTIFETCH response (``MultiMessageSetSend``): outer header with error 0, then each fetch's own
    size + error + bytes, in request order."""
    total = sum(6 + len(d) for _e, d in parts)
    out = [_RESP.pack(2 + total, NO_ERROR)]
    for error, data in parts:
        out.append(_RESP.pack(2 + len(data), error))
        out.append(bytes(data))
    return out


def encode_offsets_response(error: int, offsets: list[int]) -> bytes:
    """OFFSETS response (``OffsetArraySend``)."""
    body = _I32.pack(len(offsets)) + b"".join(_I64.pack(o) for o in offsets)
    return _RESP.pack(2 + len(body), error) + body


def _split_response(frame: bytes) -> tuple[int, memoryview]:
    if len(frame) < 6:
        raise Kafka07RequestError("response shorter than its header")
    size, error = _RESP.unpack_from(frame, 0)
    if size != len(frame) - 4:
        raise Kafka07RequestError(f"response size {size} does not match {len(frame) - 4} bytes")
    return error, memoryview(frame)[6:]


def decode_fetch_response(frame: bytes) -> tuple[int, bytes]:
    """(error, message-set bytes) of a whole FETCH response frame (size prefix included)."""
    error, rest = _split_response(frame)
    return error, bytes(rest)


def decode_multifetch_response(frame: bytes) -> list[tuple[int, bytes]]:
    error, rest = _split_response(frame)
    if error != NO_ERROR:
        raise Kafka07RequestError(f"MULTIFETCH response with outer error {error}")
    out = []
    pos = 0
    while pos < len(rest):
        size, err = _RESP.unpack_from(rest, pos)
        out.append((err, bytes(rest[pos + 6: pos + 4 + size])))
        pos += 4 + size
    return out


def decode_offsets_response(frame: bytes) -> tuple[int, list[int]]:
    error, rest = _split_response(frame)
    (n,) = _I32.unpack_from(rest, 0)
    return error, [_I64.unpack_from(rest, 4 + 8 * i)[0] for i in range(n)]
