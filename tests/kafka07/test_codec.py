"""moldau.protocol.kafka07 (no broker): messages, the deterministic wrapper encodings, requests and
responses with the layouts of the driver document, and the v2 <-> 0.7 conversions."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import pytest

from moldau.protocol import kafka07 as k07
from moldau.protocol.records import BatchBuilder, build_control_batch, check_crc, decode_batch, split_batches


def test_message_layouts() -> None:
    m1 = k07.encode_message(b"payload")
    assert m1 == struct.pack(">iBBI", 6 + 7, 1, 0, zlib.crc32(b"payload")) + b"payload"
    m0 = k07.encode_message(b"payload", magic=0)
    assert m0 == struct.pack(">iBI", 5 + 7, 0, zlib.crc32(b"payload")) + b"payload"
    gz = k07.encode_message(b"zz", k07.GZIP)
    assert gz[5] == 1
    msgs = k07.parse_message_set(m1 + m0 + gz)
    assert [(m.magic, m.codec, m.payload, m.valid, m.size) for m in msgs] == [
        (1, 0, b"payload", True, len(m1)), (0, 0, b"payload", True, len(m0)), (1, 1, b"zz", True, len(gz))]


def test_message_set_partial_and_invalid() -> None:
    whole = k07.encode_message(b"a") + k07.encode_message(b"bb")
    assert [m.payload for m in k07.parse_message_set(whole + whole[:7])] == [b"a", b"bb"]  # tail ignored
    with pytest.raises(k07.InvalidMessage07):
        k07.parse_message_set(whole[:7])  # the first message incomplete: InvalidMessageSizeException
    with pytest.raises(k07.InvalidMessage07):
        k07.parse_message_set(struct.pack(">i", -1) + b"xxxx")
    with pytest.raises(k07.InvalidMessage07):
        k07.parse_message_set(struct.pack(">iB", 1, 2))  # unknown magic
    bad = bytearray(k07.encode_message(b"crc"))
    bad[-1] ^= 1
    with pytest.raises(k07.InvalidMessage07, match="CRC"):
        k07.validate_message_set(bytes(bad), max_message_bytes=1000)
    with pytest.raises(k07.InvalidMessage07, match="exceeds"):
        k07.validate_message_set(k07.encode_message(b"x" * 100), max_message_bytes=50)
    nested = k07.encode_message(gzip.compress(k07.encode_message(b"in", k07.GZIP)), k07.GZIP)
    with pytest.raises(k07.InvalidMessage07, match="compressed message holds a compressed"):
        k07.validate_message_set(nested, max_message_bytes=1000)
    with pytest.raises(k07.InvalidMessage07):
        k07.validate_message_set(k07.encode_message(b"not gzip", k07.GZIP), max_message_bytes=1000)
    with pytest.raises(k07.InvalidMessage07, match="codec"):
        k07.validate_message_set(k07.encode_message(b"x", 3), max_message_bytes=1000)


def test_validate_opens_gzip_and_snappy_raw_and_xerial() -> None:
    inner = k07.encode_message(b"one") + k07.encode_message(b"two")
    data = (k07.encode_message(b"plain")
            + k07.encode_message(gzip.compress(inner), k07.GZIP)
            + k07.encode_message(bytes(cramjam.snappy.compress_raw(inner)), k07.SNAPPY)
            + k07.encode_message(k07.snappy_literal(inner), k07.SNAPPY))
    from moldau.protocol.records.codecs import snappy_xerial_compress
    data += k07.encode_message(snappy_xerial_compress(inner), k07.SNAPPY)  # what 0.7's Java producer wrote
    units = k07.validate_message_set(data, max_message_bytes=1000)
    assert units == ([(0, [b"plain"], 1)] + [(k07.GZIP, [b"one", b"two"], 1)]
                     + [(k07.SNAPPY, [b"one", b"two"], 1)] * 3)
    assert k07.validate_message_set(k07.encode_message(b"old", magic=0), max_message_bytes=100) == [
        (0, [b"old"], 0)]


@pytest.mark.parametrize("n", [0, 1, 100, 65535, 65536, 200_001])
def test_gzip_stored_is_gzip_of_fixed_size(n: int) -> None:
    data = bytes(i % 251 for i in range(n))
    out = k07.gzip_stored(data)
    assert gzip.decompress(out) == data
    assert len(out) == k07.gzip_stored_size(n)


@pytest.mark.parametrize("n", [0, 1, 59, 60, 61, 255, 256, 257, 65535, 65536, 65537, 200_001])
def test_snappy_literal_is_snappy_of_fixed_size(n: int) -> None:
    data = bytes(i % 253 for i in range(n))
    out = k07.snappy_literal(data)
    assert bytes(cramjam.snappy.decompress_raw(out)) == data
    assert len(out) == k07.snappy_literal_size(n)


def _batch(codec: int, values: list[bytes | None]) -> bytearray:
    b = BatchBuilder(compression=codec)
    for i, v in enumerate(values):
        b.append(1000 + i, b"key", v)
    return bytearray(b.build(0))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batch_view_and_its_size(codec: int) -> None:
    values: list[bytes | None] = [b"v%d" % i * i for i in range(30)] + [None, b""]
    buf = _batch(codec, values)
    (pos, h), = split_batches(buf)
    view = k07.batch_to_message_set(buf, pos, h)
    assert len(view) == k07.batch_message_set_size(buf, pos, h)
    assert k07.batch_view_scan(buf, pos, h) == view  # what the worker thread converts
    msgs = k07.parse_message_set(view)
    expected = [v if v is not None else b"" for v in values]
    if codec == 0:
        assert [m.payload for m in msgs] == expected and {m.codec for m in msgs} == {0}
    else:
        assert len(msgs) == 1 and msgs[0].codec == (k07.SNAPPY if codec == 2 else k07.GZIP)
        units = k07.validate_message_set(view, max_message_bytes=1 << 20)
        assert units == [(msgs[0].codec, expected, 1)]
    assert k07.batch_to_message_set(buf, pos, h) == view  # deterministic


def _reference_view(buf: bytearray, pos: int, h) -> bytes:
    """The 0.7 view built record by record from the full decoder, independent of the bulk builder."""
    magic = k07.view_magic(h)
    inner = b"".join(k07.encode_message(r.value or b"", 0, magic) for r in decode_batch(buf, pos, header=h))
    if h.compression == 0:
        return inner
    if h.compression == 2:
        return k07.encode_message(k07.snappy_literal(inner), k07.SNAPPY)
    return k07.encode_message(k07.gzip_stored(inner), k07.GZIP)


@pytest.mark.parametrize("codec", [0, 1, 2])
def test_bulk_view_matches_a_record_by_record_encoding(codec: int) -> None:
    """``batch_to_message_set`` finds the values by one varint scan and builds the messages in bulk: the
    same bytes as decoding every record, for keys, values and lengths at every varint width (1, 2 and 3
    bytes), null keys and values, headers, more than 1024 records (built in pieces), and magic 0."""
    sizes = [0, 1, 63, 64, 100, 8191, 8192, 20_000]
    b = BatchBuilder(compression=codec)
    n = 0
    for i in range(1500):
        key = None if i % 3 == 0 else b"k" * sizes[i % len(sizes)] if i % 97 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else b"%d" % i * (sizes[(i // 3) % len(sizes)] // 4 + 1)
        headers = [("h", b"x" * (i % 70))] if i % 5 == 0 else []
        b.append(1000 + i * 37, key, value, headers)
        n += 1
    buf = bytearray(b.build(0))
    (pos, h), = split_batches(buf)
    assert h.records_count == n
    view = k07.batch_to_message_set(buf, pos, h)
    assert view == _reference_view(buf, pos, h)
    assert len(view) == k07.batch_message_set_size(buf, pos, h)
    if codec == 0:
        k07.mark_magic0(buf, pos)
        (pos, h), = split_batches(buf)
        view0 = k07.batch_to_message_set(buf, pos, h)
        assert view0 == _reference_view(buf, pos, h) and len(view0) == len(view) - n
        assert {m.magic for m in k07.parse_message_set(view0)} == {0}


def test_a_batch_counting_more_records_than_it_holds_has_no_view() -> None:
    """The scan runs out of records: a RecordError (the index counts such a batch as no view), not a
    crash."""
    from moldau.protocol.records import RecordError

    buf = _batch(0, [b"x" * 300, b"y" * 300])
    struct.pack_into(">i", buf, 57, 3)  # records_count (the CRC is not checked by the view)
    (pos, h), = split_batches(buf)
    with pytest.raises(RecordError):
        k07.batch_to_message_set(buf, pos, h)


def test_batch_views_joins_the_views_of_mixed_batches() -> None:
    """``batch_views`` (what index and view jobs run): the views of uncompressed (magic 1 and magic 0),
    compressed and control batches, joined in order, with their sizes; a batch that does not decode has
    none (size 0, reported) and the others are whole."""
    from moldau.protocol.records import RecordError

    buf = bytearray()
    for i, codec in enumerate([0, 0, 1, 0, 2, 0, 0]):
        start = len(buf)
        buf += _batch(codec, [b"b%d-r%d" % (i, j) * (j + 1) for j in range(i + 2)])
        if i == 1:
            k07.mark_magic0(buf, start)
        if i == 5:
            struct.pack_into(">i", buf, start + 57, 99)  # counts more records than it holds
    buf += build_control_batch(producer_id=1, producer_epoch=0, commit=True, timestamp=5)
    data = bytes(buf)
    batches = split_batches(data)
    errors: list[tuple[int, RecordError]] = []
    sizes, joined = k07.batch_views(data, batches, lambda h, e: errors.append((h.base_offset, e)))
    expected = []
    for p, h in batches:
        try:
            expected.append(k07.batch_to_message_set(data, p, h))
        except RecordError:
            expected.append(b"")
    assert sizes == [len(v) for v in expected] and joined == b"".join(expected)
    assert sizes[5] == 0 and sizes[-1] == 0 and len(errors) == 1
    assert {m.magic for m in k07.parse_message_set(expected[1])} == {0}


def test_control_batch_has_no_view() -> None:
    buf = bytearray(build_control_batch(commit=True, producer_id=5, producer_epoch=0, timestamp=1))
    (pos, h), = split_batches(buf)
    assert k07.batch_to_message_set(buf, pos, h) == b""
    assert k07.batch_message_set_size(buf, pos, h) == 0


def test_messages_to_batches_groups_plain_and_keeps_wrappers() -> None:
    units = [(0, [b"a"], 1), (0, [b"b"], 1), (k07.GZIP, [b"c", b"d"], 1), (0, [b"e"], 1),
             (k07.SNAPPY, [b"f"], 1), (k07.GZIP, [], 1)]
    buf = k07.messages_to_batches(units, 1234)
    batches = split_batches(buf)
    assert [h.compression for _p, h in batches] == [0, 1, 0, 2]
    assert [[r.value for r in decode_batch(buf, p)] for p, _h in batches] == [[b"a", b"b"], [b"c", b"d"],
                                                                              [b"e"], [b"f"]]
    assert all(r.key is None and r.timestamp == 1234 for p, _h in batches for r in decode_batch(buf, p))


def test_magic0_messages_come_back_as_magic0_with_their_sizes() -> None:
    """A 0.6 producer's magic-0 messages are stored in batches marked MAGIC0_FLAG (split from magic-1 ones)
    and their 0.7 view is the same bytes: magic 0, 9 bytes of overhead, so the byte offsets it computed
    hold; a modern reader sees ordinary records (the flag is not one of the bits Kafka defines)."""
    wire = [k07.encode_message(b"hello-0", magic=0), k07.encode_message(b"world-1", magic=0),
            k07.encode_message(b"magic-one"), k07.encode_message(b"third-2", magic=0)]
    units = k07.validate_message_set(b"".join(wire), max_message_bytes=100)
    buf = k07.messages_to_batches(units, 1234)
    batches = split_batches(buf)
    assert [bool(h.attributes & k07.MAGIC0_FLAG) for _p, h in batches] == [True, False, True]
    for p, h in batches:
        check_crc(buf, p, h)
    assert b"".join(k07.batch_to_message_set(buf, p, h) for p, h in batches) == b"".join(wire)
    assert b"".join(k07.batch_view_scan(buf, p, h) for p, h in batches) == b"".join(wire)
    assert [k07.batch_message_set_size(buf, p, h) for p, h in batches] == [32, 19, 16]
    assert [r.value for p, _h in batches for r in decode_batch(buf, p)] == [
        b"hello-0", b"world-1", b"magic-one", b"third-2"]
    # the flag means nothing on a compressed batch: magic 0 has no compression
    gz = _batch(k07.GZIP, [b"x"])
    k07.mark_magic0(gz, 0)
    (p, h), = split_batches(gz)
    assert k07.view_magic(h) == 1 and k07.parse_message_set(k07.batch_to_message_set(gz, p, h))[0].magic == 1


def test_requests_round_trip_with_the_documented_layouts() -> None:
    produce = k07.ProduceRequest("dogs", 3, k07.encode_message(b"woof"))
    frame = k07.encode_request(produce)
    # REQUEST_LENGTH, REQUEST_TYPE, TOPIC_LENGTH, TOPIC, PARTITION, MESSAGES_LENGTH, MESSAGES
    assert frame == (struct.pack(">ihh", len(frame) - 4, 0, 4) + b"dogs" + struct.pack(">ii", 3, 14)
                     + produce.messages)
    fetch = k07.FetchRequest("dogs", 1, 1 << 40, 300 * 1024)
    assert k07.encode_request(fetch)[4:] == (struct.pack(">hh", 1, 4) + b"dogs"
                                             + struct.pack(">iqi", 1, 1 << 40, 300 * 1024))
    offsets = k07.OffsetsRequest("dogs", 0, -2, 1)
    assert k07.encode_request(offsets)[4:] == (struct.pack(">hh", 4, 4) + b"dogs"
                                               + struct.pack(">iqi", 0, -2, 1))
    multi = k07.MultiFetchRequest([fetch, k07.FetchRequest("cats", 0, 0, 10)])
    assert k07.encode_request(multi)[4:8] == struct.pack(">hh", 2, 2)
    mp = k07.MultiProduceRequest([produce, k07.ProduceRequest("cats", 0, b"")])
    for req in (produce, fetch, offsets, multi, mp):
        frame = k07.encode_request(req)
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4
        kind, parsed = k07.parse_request(frame[4:])
        assert parsed == req and kind == struct.unpack_from(">h", frame, 4)[0]


def test_bad_requests() -> None:
    for body in (b"\x00", struct.pack(">h", 5), struct.pack(">hh", 1, 10) + b"abc",
                 struct.pack(">hh", 1, -1), struct.pack(">hh", 1, 2) + b"\xff\xfe" + b"\x00" * 16):
        with pytest.raises(k07.Kafka07RequestError):
            k07.parse_request(body)


def test_frame_reader() -> None:
    r = k07.FrameReader(1000)
    frame = k07.encode_request(k07.FetchRequest("t", 0, 0, 10))
    assert r.feed(frame[:3]) == []
    assert r.feed(frame[3:] + frame + frame[:5]) == [frame[4:], frame[4:]]
    assert r.feed(frame[5:]) == [frame[4:]]
    with pytest.raises(k07.Kafka07RequestError):
        k07.FrameReader(1000).feed(struct.pack(">i", 1001))
    with pytest.raises(k07.Kafka07RequestError):
        k07.FrameReader(1000).feed(struct.pack(">i", 1))


def test_responses() -> None:
    assert b"".join(k07.encode_fetch_response(0, b"abc")) == struct.pack(">ih", 5, 0) + b"abc"
    assert k07.encode_offsets_response(0, [7, 3]) == struct.pack(">ihiqq", 2 + 4 + 16, 0, 2, 7, 3)
    multi = b"".join(k07.encode_multifetch_response([(0, b"ab"), (3, b"")]))
    assert multi == (struct.pack(">ih", 2 + 8 + 6, 0) + struct.pack(">ih", 2 + 2, 0) + b"ab"
                     + struct.pack(">ih", 2, 3))
    assert k07.decode_multifetch_response(multi) == [(0, b"ab"), (3, b"")]
