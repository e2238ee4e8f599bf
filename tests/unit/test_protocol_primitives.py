"""Wire primitives."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.protocol import primitives as p
from moldau.protocol.errors import ProtocolDecodeError


@given(st.integers(0, (1 << 64) - 1))
def test_uvarint_roundtrip(n: int) -> None:
    out = bytearray()
    p.write_uvarint(out, n)
    assert len(out) == p.uvarint_size(n)
    assert p.read_uvarint(bytes(out), 0, 10) == (n, len(out))


@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_roundtrip(n: int) -> None:
    out = bytearray()
    p.write_varint(out, n)
    assert p.read_varint(bytes(out), 0) == (n, len(out))


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_roundtrip(n: int) -> None:
    out = bytearray()
    p.write_varlong(out, n)
    assert len(out) == p.varint_size(n)
    assert p.read_varlong(bytes(out), 0) == (n, len(out))


def test_known_varint_encodings() -> None:
    for value, enc in [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
    ]:
        out = bytearray()
        p.write_varint(out, value)
        assert bytes(out) == enc


def test_varint_errors() -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_uvarint(b"\x80\x80", 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_uvarint(b"\xff" * 6, 0)
    with pytest.raises(ValueError):
        p.write_varint(bytearray(), 1 << 31)


@given(st.text(max_size=40) | st.none())
def test_strings(s: str | None) -> None:
    for w, r in [(p.write_nullable_string, p.read_nullable_string),
                 (p.write_compact_nullable_string, p.read_compact_nullable_string)]:
        out = bytearray()
        w(out, s)
        assert r(bytes(out), 0) == (s, len(out))
        if out:
            with pytest.raises(ProtocolDecodeError):
                r(bytes(out[:-1]), 0) if s else r(b"", 0)


@given(st.binary(max_size=40))
def test_bytes(b: bytes) -> None:
    for w, r in [(p.write_bytes, p.read_bytes), (p.write_compact_bytes, p.read_compact_bytes)]:
        out = bytearray()
        w(out, b)
        assert r(bytes(out), 0) == (b, len(out))


def test_null_for_non_nullable() -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_string(b"\xff\xff", 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_compact_bytes(b"\x00", 0)


def test_arrays_and_fixed() -> None:
    out = bytearray()
    p.write_array(out, [1, 2, 3], p.write_int32)
    assert p.read_array(bytes(out), 0, p.read_int32) == ([1, 2, 3], len(out))
    out = bytearray()
    p.write_compact_array(out, None, p.write_int32)
    assert p.read_compact_array(bytes(out), 0, p.read_int32, nullable=True) == (None, 1)
    with pytest.raises(ProtocolDecodeError):
        p.read_array(b"\x7f\xff\xff\xff", 0, p.read_int32)  # absurd length: no allocation
    with pytest.raises(ProtocolDecodeError):
        p.read_int64(b"\x00" * 7, 0)
    u = uuid.uuid4()
    out = bytearray()
    p.write_uuid(out, u)
    assert p.read_uuid(bytes(out), 0) == (u, 16)
    out = bytearray()
    p.write_uint32(out, 0xFFFFFFFF)
    p.write_float64(out, 1.5)
    p.write_bool(out, True)
    assert p.read_uint32(bytes(out), 0)[0] == 0xFFFFFFFF
    assert p.read_float64(bytes(out), 4)[0] == 1.5 and p.read_bool(bytes(out), 12)[0] is True


def test_tagged_fields() -> None:
    out = bytearray()
    p.write_tagged_fields(out, {5: b"x", 1: b""})
    assert bytes(out) == bytes([2, 1, 0, 5, 1]) + b"x"
    assert p.read_tagged_fields(bytes(out), 0) == ({1: b"", 5: b"x"}, len(out))
    assert p.read_tagged_fields(b"\x00", 0) == (None, 1)
    with pytest.raises(ProtocolDecodeError):
        p.read_tagged_fields(bytes([2, 5, 0, 1, 0]), 0)  # out of order


def test_records_helpers() -> None:
    class C:
        def __len__(self) -> int:
            return 3

        def chunks(self) -> list[bytes]:
            return [b"a", b"bc"]

    assert p.records_len(C()) == 3 and p.records_chunks(C()) == [b"a", b"bc"]
    assert p.records_len([b"ab", memoryview(b"c")]) == 3
