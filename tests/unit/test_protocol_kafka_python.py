"""moldau's message declarations and codecs held against kafka-python (an independent implementation).

* cross-check: every declaration against Kafka's JSON definitions as kafka-python ships them (max version,
  flexible versions, per version the field names, types, nullability, tags);
* byte-exact: populated objects encoded by moldau and by kafka-python's JSON-driven encoder give the same
  bytes, for every message and every version kafka-python supports, and each side decodes the other's bytes;
* versions below the JSON minimum (removed by Kafka 4) against kafka-python's old hand-written classes.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol import messages as m
from moldau.protocol.schema import MAX_VERSION, Field, Message, parse_versions

kafka = pytest.importorskip("kafka")
from kafka.protocol.api_message import ApiMessage  # noqa: E402

RESOURCES = Path(importlib.import_module("kafka.protocol.schemas.resources").__file__).parent  # type: ignore[arg-type]


def _strip(text: str) -> str:
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            in_str = c != '"'
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


JSON: dict[str, dict[str, Any]] = {
    p.stem: json.loads(_strip(p.read_text())) for p in sorted(RESOURCES.glob("*.json"))
}


def _vrange(spec: str | None) -> range:
    r = parse_versions(spec)
    return range(0) if r is None else range(r[0], min(r[1], MAX_VERSION) + 1)


def _in(spec: str | None, v: int) -> bool:
    return v in _vrange(spec)


# --- cross-check against the JSON ------------------------------------------------------------------------

def _json_fields(j: dict[str, Any], fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    common = {c["name"]: c for c in j.get("commonStructs", [])}
    out = []
    for f in fields:
        f = dict(f)
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if elem[:1].isupper() and "fields" not in f:
            f["fields"] = common[elem]["fields"]
        out.append(f)
    return out


def _layout_json(j: dict[str, Any], fields: list[dict[str, Any]], v: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for f in _json_fields(j, fields):
        if not _in(f["versions"], v):
            continue
        tagged = _in(f.get("taggedVersions"), v)
        sub = _layout_json(j, f["fields"], v) if "fields" in f else None
        out.append(
            (f["name"], f["type"], _in(f.get("nullableVersions"), v), f.get("tag") if tagged else None, sub)
        )
    return out


def _layout_decl(fields: list[Field], v: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for f in fields:
        if not f.present(v):
            continue
        sub = _layout_decl(f.fields, v) if f.fields else None
        out.append((f.name, f.type, f.is_nullable(v), f.tag if f.is_tagged(v) else None, sub))
    return out


def test_generated_declarations_are_current() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    try:
        import gen_messages
    finally:
        sys.path.pop(0)
    assert gen_messages.generate(check=True) == 0, "run tools/gen_messages.py"


def test_every_json_message_is_declared() -> None:
    assert set(JSON) <= set(m.ALL), sorted(set(JSON) - set(m.ALL))
    for name, j in JSON.items():
        if j.get("apiKey") is not None:
            table = m.REQUESTS if j["type"] == "request" else m.RESPONSES
            assert table[j["apiKey"]] is m.ALL[name]
    assert (
        m.REQUESTS[68] is m.ConsumerGroupHeartbeatRequest
        and m.RESPONSES[69] is m.ConsumerGroupDescribeResponse
    )


@pytest.mark.parametrize("name", sorted(JSON))
def test_declaration_matches_json(name: str) -> None:
    j = JSON[name]
    msg = m.ALL[name]
    valid = _vrange(j["validVersions"])
    assert msg.max_version == valid[-1]
    assert msg.min_version <= valid[0]
    assert msg.api_key == j.get("apiKey")
    flex = parse_versions(j.get("flexibleVersions"))
    assert msg.flexible == flex
    for v in range(msg.min_version, msg.max_version + 1):
        assert _layout_decl(msg.fields, v) == _layout_json(j, j["fields"], v), f"{name} v{v}"
        assert msg.is_flexible(v) == (flex is not None and flex[0] <= v <= flex[1])


EXTRA_JSON: dict[str, dict[str, Any]] = {
    p.stem: json.loads(_strip(p.read_text()))
    for p in sorted((Path(__file__).resolve().parents[2] / "tools" / "kafka_json" / "4.2").glob("*.json"))
}


@pytest.mark.parametrize("name", sorted(EXTRA_JSON))
def test_share_declaration_matches_json(name: str) -> None:
    """The share-group APIs (Kafka 4.2's JSON in tools/kafka_json/4.2; kafka-python has none): same checks."""
    j = EXTRA_JSON[name]
    msg = m.ALL[name]
    valid = _vrange(j["validVersions"])
    assert (msg.min_version, msg.max_version) == (valid[0], valid[-1])
    assert msg.api_key == j.get("apiKey")
    flex = parse_versions(j.get("flexibleVersions"))
    for v in valid:
        assert _layout_decl(msg.fields, v) == _layout_json(j, j["fields"], v), f"{name} v{v}"
        assert msg.is_flexible(v) == (flex is not None and flex[0] <= v <= flex[1])
    for v in valid:  # populated objects survive an encode/decode round trip byte for byte
        obj = _gen_struct(msg, msg.name, msg.fields, v, random.Random(v), 0)
        data = msg.encode(obj, v)
        back, end = msg.decode(data, v)
        assert end == len(data) and bytes(msg.encode(back, v)) == bytes(data)


# --- value generation ------------------------------------------------------------------------------------

_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_STRINGS = ["", "a", "topic-1", "ünïcødé ✓", "x" * 130]


def _gen_elem(msg: Message, f: Field, v: int, rng: random.Random, depth: int) -> Any:
    t = f.elem
    if f.struct_name is not None:
        return _gen_struct(msg, f.struct_name, f.fields or [], v, rng, depth + 1)
    if t in _INT_RANGES:
        b = _INT_RANGES[t]
        return rng.choice([0, -1, 1, -(1 << b), (1 << b) - 1, rng.randint(-(1 << b), (1 << b) - 1)])
    if t == "uint16":
        return rng.randint(0, 0xFFFF)
    if t == "uint32":
        return rng.randint(0, 0xFFFFFFFF)
    if t == "float64":
        return rng.choice([0.0, 1.5, -2.25e10])
    if t == "bool":
        return rng.random() < 0.5
    if t == "string":
        return rng.choice(_STRINGS)
    if t in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 200])))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(t)


def _gen_value(msg: Message, f: Field, v: int, rng: random.Random, depth: int) -> Any:
    if f.is_nullable(v) and rng.random() < 0.2:
        return None
    if f.is_array:
        n = rng.choice([0, 1, 2, 3]) if depth < 3 else rng.choice([0, 1])
        return [_gen_elem(msg, f, v, rng, depth) for _ in range(n)]
    return _gen_elem(msg, f, v, rng, depth)


def _gen_struct(msg: Message, sname: str, fields: list[Field], v: int, rng: random.Random, depth: int) -> Any:
    kwargs = {}
    for f in fields:
        if not f.present(v):
            continue
        if f.is_tagged(v) and rng.random() < 0.4:
            continue  # leave the default: not written
        kwargs[f.attr] = _gen_value(msg, f, v, rng, depth)
    return msg.classes[sname](**kwargs)


def populated(msg: Message, v: int, seed: int) -> Any:
    return _gen_struct(msg, msg.name, msg.fields, v, random.Random(seed * 7919 + v), 0)


def normalized(msg: Message, obj: Any, v: int) -> Any:
    """The object as a decode of version v sees it: fields outside v back to their defaults."""
    return _norm(msg, msg.name, msg.fields, obj, v)


def _norm(msg: Message, sname: str, fields: list[Field], obj: Any, v: int) -> Any:
    fresh = msg.classes[sname]()
    for f in fields:
        if not f.present(v):
            continue
        val = getattr(obj, f.attr)
        if f.struct_name is not None and val is not None:
            if f.is_array:
                val = [_norm(msg, f.struct_name, f.fields or [], x, v) for x in val]
            else:
                val = _norm(msg, f.struct_name, f.fields or [], val, v)
        setattr(fresh, f.attr, val)
    return fresh


# --- kafka-python's JSON-driven classes ------------------------------------------------------------------

def _kp_classes() -> dict[str, type]:
    import kafka.protocol as kp

    for mod in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in mod.name or mod.name.endswith("generate_stubs"):
            continue
        try:
            importlib.import_module(mod.name)
        except Exception:  # pragma: no cover - optional modules
            continue
    found: dict[str, type] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if getattr(c, "_class_version", None) is None and getattr(c, "_json", None) is not None:
            found.setdefault(c._json["name"], c)
    return found


KP = _kp_classes()


_KP_DATA: dict[int, type] = {}
_DEFAULT_STRUCTS: dict[int, Any] = {}


def field_default(f: Field) -> Any:
    """The value a field has in a default-constructed parent object."""
    for msg in m.ALL.values():
        for sname, fields in msg._struct_fields.items():
            if any(x is f for x in fields):
                return getattr(msg.classes[sname](), f.attr)
    raise AssertionError(f)



def _kp_data_class(kf: Any) -> type:
    # kafka-python attaches no data class to uses of commonStructs; make one like its own
    from kafka.protocol.data_container import DataContainer

    if kf.data_class is not None:
        return kf.data_class
    if id(kf) not in _KP_DATA:
        _KP_DATA[id(kf)] = type(kf.type_str, (DataContainer,), {"_struct": kf})
    return _KP_DATA[id(kf)]


def _to_kp(fields: list[Field], obj: Any, v: int, kp_struct: Any, cls: Any, root: bool) -> Any:
    kp_fields = list(kp_struct._fields)
    assert len(kp_fields) == len(fields)
    kwargs = {}
    for f, kf in zip(fields, kp_fields):
        if not f.present(v):
            continue
        val = getattr(obj, f.attr)
        if f.is_tagged(v) and val == field_default(f):
            # Kafka writes a tagged field only when it differs from its default (for structs: the default
            # struct, for uuids: the zero uuid); kafka-python compares with its own defaults, so it is given
            # no value in that case.
            continue
        if kf.type_str == "bitfield":  # kafka-python reads authorized-operations int32s as bit sets
            val = {i for i in range(32) if (val & 0xFFFFFFFF) >> i & 1}
        if f.struct_name is not None and val is not None:
            if f.is_array:
                val = [_to_kp(f.fields or [], x, v, kf, _kp_data_class(kf), False) for x in val]
            else:
                val = _to_kp(f.fields or [], val, v, kf, _kp_data_class(kf), False)
        kwargs[kf.name] = val
    return cls(version=v, **kwargs) if root else cls(**kwargs)


def _kp_cases() -> list[tuple[str, int]]:
    cases = []
    for name in sorted(JSON):
        j = JSON[name]
        if j.get("apiKey") is None or name not in KP:
            continue
        for v in _vrange(j["validVersions"]):
            cases.append((name, v))
    return cases


KP_CASES = _kp_cases()


def test_kafka_python_covers_every_api_message() -> None:
    api_json = {n for n, j in JSON.items() if j.get("apiKey") is not None}
    assert api_json == set(KP), sorted(api_json ^ set(KP))
    assert len(KP_CASES) > 400


def _same(a: Any, b: Any) -> bool:
    return bytes(a) == bytes(b)


@pytest.mark.parametrize("name,version", KP_CASES, ids=[f"{n}-v{v}" for n, v in KP_CASES])
def test_byte_exact_against_kafka_python(name: str, version: int) -> None:
    msg = m.ALL[name]
    kp_cls = KP[name]
    for seed in range(3):
        obj = populated(msg, version, seed)
        ours = msg.encode(obj, version)
        kp_obj = _to_kp(msg.fields, obj, version, kp_cls._struct, kp_cls, True)
        theirs = kp_obj.encode(version=version)
        assert ours.hex() == bytes(theirs).hex(), f"seed {seed}: {obj!r}"
        # encode_parts joins to the same bytes
        assert b"".join(bytes(p) for p in msg.encode_parts(obj, version)) == ours
        # moldau decodes kafka-python's bytes back to the object
        back, end = msg.decode(theirs, version)
        assert end == len(theirs)
        assert back == normalized(msg, obj, version)
        # and kafka-python decodes ours to an equal object
        if name == "ApiVersionsResponse" and obj.error_code != 0:
            continue  # kafka-python decodes an ApiVersionsResponse carrying an error as v0 (Kafka's quirk)
        kp_back = kp_cls.decode(ours, version=version)
        kp_back._header = None  # kafka-python's decoder leaves the slot unset
        assert kp_back.encode(version=version) == theirs


# --- versions below the JSON minimum, against kafka-python's old classes ---------------------------------

def _old_classes() -> dict[tuple[str, int], type]:
    import kafka.protocol.old as old

    found: dict[tuple[str, int], type] = {}
    for mod in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{mod.name}")
        for attr, obj in vars(module).items():
            if isinstance(obj, type) and "_v" in attr and hasattr(obj, "SCHEMA"):
                base, _, ver = attr.rpartition("_v")
                if ver.isdigit() and base in m.ALL:
                    found[(base, int(ver))] = obj
    return found


OLD = _old_classes()
# kafka-python's old DescribeLogDirsRequest_v0 declares Partitions as a single int32; Kafka's definition (3.9
# and 4.x alike) has []int32, which is what moldau follows.
OLD_KNOWN_WRONG = {("DescribeLogDirsRequest", 0)}
OLD_CASES = sorted(
    (name, v)
    for (name, v) in OLD
    if v < _vrange(JSON[name]["validVersions"])[0] and v >= m.ALL[name].min_version
    and (name, v) not in OLD_KNOWN_WRONG
)


def test_old_versions_have_independent_references() -> None:
    names = {n for n, _ in OLD_CASES}
    for expected in ("ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse",
                     "ListOffsetsRequest",
                     "OffsetCommitRequest", "OffsetFetchResponse", "CreateTopicsRequest",
                     "DeleteTopicsResponse",
                     "OffsetForLeaderEpochResponse", "DescribeConfigsResponse", "CreateAclsRequest"):
        assert expected in names


def _to_old(fields: list[Field], obj: Any, v: int) -> tuple[Any, ...]:
    out = []
    for f in fields:
        if not f.present(v):
            continue
        val = getattr(obj, f.attr)
        if f.struct_name is not None and val is not None:
            if f.is_array:
                val = [_to_old(f.fields or [], x, v) for x in val]
            else:
                val = _to_old(f.fields or [], val, v)
        elif f.elem == "uuid" and val is not None:
            val = val.bytes if not f.is_array else [x.bytes for x in val]
        out.append(val)
    return tuple(out)


@pytest.mark.parametrize("name,version", OLD_CASES, ids=[f"{n}-v{v}" for n, v in OLD_CASES])
def test_old_versions_against_kafka_python_old_classes(name: str, version: int) -> None:
    msg = m.ALL[name]
    old_cls = OLD[(name, version)]
    for seed in range(3):
        obj = populated(msg, version, seed)
        ours = msg.encode(obj, version)
        args = _to_old(msg.fields, obj, version)
        assert len(args) == len(old_cls.SCHEMA.names), (old_cls.SCHEMA.names, args)
        theirs = old_cls(*args).encode()
        assert ours.hex() == bytes(theirs).hex(), f"seed {seed}: {obj!r}"
        back, end = msg.decode(theirs, version)
        assert end == len(theirs) and back == normalized(msg, obj, version)
