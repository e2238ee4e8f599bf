"""Property tests: every declared message and version round-trips; malformed input only ever raises
ProtocolDecodeError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol import messages as m
from moldau.protocol.errors import ProtocolDecodeError
from moldau.protocol.schema import Field, Message

_INTS = {
    "int8": st.integers(-(1 << 7), (1 << 7) - 1),
    "int16": st.integers(-(1 << 15), (1 << 15) - 1),
    "int32": st.integers(-(1 << 31), (1 << 31) - 1),
    "int64": st.integers(-(1 << 63), (1 << 63) - 1),
    "uint16": st.integers(0, 0xFFFF),
    "uint32": st.integers(0, 0xFFFFFFFF),
}


def _elem(msg: Message, f: Field, v: int, depth: int) -> st.SearchStrategy[Any]:
    if f.struct_name is not None:
        return struct_strategy(msg, f.struct_name, f.fields or [], v, depth + 1)
    t = f.elem
    if t in _INTS:
        return _INTS[t]
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(t)


def _value(msg: Message, f: Field, v: int, depth: int) -> st.SearchStrategy[Any]:
    if f.is_array:
        s: st.SearchStrategy[Any] = st.lists(_elem(msg, f, v, depth), max_size=3 if depth < 2 else 1)
    else:
        s = _elem(msg, f, v, depth)
    if f.is_nullable(v):
        s = st.none() | s
    return s


_STRATEGIES: dict[tuple[str, str, int, int], st.SearchStrategy[Any]] = {}


def struct_strategy(
    msg: Message, sname: str, fields: list[Field], v: int, depth: int = 0
) -> st.SearchStrategy[Any]:
    key = (msg.name, sname, v, depth)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _build_struct_strategy(msg, sname, fields, v, depth)
    return _STRATEGIES[key]


def _build_struct_strategy(
    msg: Message, sname: str, fields: list[Field], v: int, depth: int
) -> st.SearchStrategy[Any]:
    kw = {f.attr: _value(msg, f, v, depth) for f in fields if f.present(v)}
    if msg.is_flexible(v):
        known = {f.tag for f in fields if f.tag is not None}
        kw["_unknown_tags"] = st.none() | st.dictionaries(
            st.integers(1000, 20000).filter(lambda t: t not in known), st.binary(max_size=6), max_size=2)
    cls = msg.classes[sname]
    return st.fixed_dictionaries(kw).map(lambda d: cls(**d))


NAMES = sorted(m.ALL)


def _norm_tags(obj: Any) -> None:
    """Empty unknown-tag dicts decode as None; normalise recursively so equality is exact."""
    if hasattr(obj, "_fields"):
        if not obj._unknown_tags:
            obj._unknown_tags = None
        for a in obj._fields:
            _norm_tags(getattr(obj, a))
    elif isinstance(obj, list):
        for x in obj:
            _norm_tags(x)


def _normalize(msg: Message, sname: str, fields: list[Field], obj: Any, v: int) -> Any:
    fresh = msg.classes[sname]()
    for f in fields:
        if not f.present(v):
            continue
        val = getattr(obj, f.attr)
        if f.struct_name is not None and val is not None:
            if f.is_array:
                val = [_normalize(msg, f.struct_name, f.fields or [], x, v) for x in val]
            else:
                val = _normalize(msg, f.struct_name, f.fields or [], val, v)
        setattr(fresh, f.attr, val)
    fresh._unknown_tags = obj._unknown_tags if msg.is_flexible(v) else None
    return fresh


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_roundtrip(name: str, data: st.DataObject) -> None:
    msg = m.ALL[name]
    for version in range(msg.min_version, msg.max_version + 1):
        _check_roundtrip(msg, version, data)


def _check_roundtrip(msg: Message, version: int, data: st.DataObject) -> None:
    obj = data.draw(struct_strategy(msg, msg.name, msg.fields, version))
    buf = msg.encode(obj, version)
    back, end = msg.decode(buf, version)
    assert end == len(buf)
    expected = _normalize(msg, msg.name, msg.fields, obj, version)
    _norm_tags(expected)
    _norm_tags(back)
    assert back == expected
    assert msg.encode(back, version) == buf
    # decoding at an offset inside a larger buffer, from a memoryview, ignores what follows
    padded = b"\x07\x07" + buf + b"\xff\xff\xff"
    back2, end2 = msg.decode(memoryview(padded), version, 2)
    assert end2 == 2 + len(buf)
    _norm_tags(back2)
    assert back2 == expected
    # every strict prefix is rejected with ProtocolDecodeError
    cuts = sorted({0, len(buf) // 2, len(buf) - 1} | set(data.draw(st.lists(
        st.integers(0, max(len(buf) - 1, 0)), max_size=4))))
    for cut in cuts:
        if not 0 <= cut < len(buf):
            continue
        with pytest.raises(ProtocolDecodeError):
            msg.decode(buf[:cut], version)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_garbage_raises_only_protocol_decode_error(name: str, data: st.DataObject) -> None:
    msg = m.ALL[name]
    version = data.draw(st.integers(msg.min_version, msg.max_version))
    obj = data.draw(struct_strategy(msg, msg.name, msg.fields, version))
    buf = bytearray(msg.encode(obj, version))
    # flip some bytes of a valid encoding, or use random bytes
    if buf and data.draw(st.booleans()):
        for pos in data.draw(st.lists(st.integers(0, len(buf) - 1), min_size=1, max_size=4)):
            buf[pos] = data.draw(st.integers(0, 255))
    else:
        buf = bytearray(data.draw(st.binary(max_size=64)))
    try:
        _, end = msg.decode(bytes(buf), version)
    except ProtocolDecodeError:
        return
    assert 0 <= end <= len(buf)
