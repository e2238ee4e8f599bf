"""AVRO: parsing and the canonical form with fastavro; compatibility by Avro's schema resolution rules
(the Avro specification, "Schema Resolution"), written here since no Python library checks them.

References: each referenced schema's named types are parsed first (dependencies before dependents), so the
schema can use them by name, as Confluent's registry does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .base import Dependency, ParsedSchema, SchemaError

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
NAMED = frozenset(("record", "error", "enum", "fixed"))
# Spec, Schema Resolution: "the writer's schema may be promoted to the reader's as follows"
PROMOTIONS = {
    "int": frozenset(("long", "float", "double")),
    "long": frozenset(("float", "double")),
    "float": frozenset(("double",)),
    "string": frozenset(("bytes",)),
    "bytes": frozenset(("string",)),
}


class AvroSchema:
    __slots__ = ("root", "named")

    def __init__(self, root: Any, named: dict[str, Any]) -> None:
        self.root = root
        self.named = named


def _parse_into(text: str, named: dict[str, Any]) -> Any:
    import fastavro
    from fastavro.schema import SchemaParseException, UnknownType

    try:
        obj = json.loads(text)
    except (ValueError, TypeError) as e:
        raise SchemaError(f"Invalid schema: not JSON: {e}") from None
    _validate(obj)
    try:
        return fastavro.parse_schema(obj, named_schemas=named)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as e:
        raise SchemaError(f"Invalid schema {text[:200]}: {type(e).__name__}: {e}") from None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _validate(s: Any) -> None:
    """What the spec requires and fastavro lets through: names of the form ``[A-Za-z_][A-Za-z0-9_]*`` (each
    part of a full name; spec, "Names"), a record's ``fields`` present and their names unique ("Records")."""
    if isinstance(s, list):
        for b in s:
            _validate(b)
        return
    if not isinstance(s, dict):
        return
    t = s.get("type")
    if t in NAMED:
        name = s.get("name")
        if not isinstance(name, str) or not all(_NAME.fullmatch(p) for p in name.split(".")):
            raise SchemaError(f"Invalid schema: {t} name {name!r} is not a valid Avro name")
    if t in ("record", "error"):
        fields = s.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"Invalid schema: record {s.get('name')!r} has no fields array")
        seen: set[str] = set()
        for f in fields:
            fname = f.get("name") if isinstance(f, dict) else None
            if not isinstance(fname, str) or not _NAME.fullmatch(fname):
                raise SchemaError(f"Invalid schema: field name {fname!r} in {s.get('name')!r} is not valid")
            if fname in seen:
                raise SchemaError(f"Invalid schema: field {fname!r} appears twice in {s.get('name')!r}")
            seen.add(fname)
            _validate(f.get("type"))
    elif t == "array":
        _validate(s.get("items"))
    elif t == "map":
        _validate(s.get("values"))
    elif isinstance(t, (dict, list)):
        _validate(t)


def _add_deps(deps: list[Dependency], named: dict[str, Any], done: set[str]) -> None:
    for d in deps:
        if d.text in done:  # the same schema reached through two references (a diamond) is parsed once
            continue
        done.add(d.text)
        _add_deps(d.deps, named, done)
        _parse_into(d.text, named)


class _Avro:
    def parse(self, text: str, deps: list[Dependency]) -> ParsedSchema:
        named: dict[str, Any] = {}
        _add_deps(deps, named, set())
        root = _parse_into(text, named)
        # Avro's Parsing Canonical Form would drop logical types, docs and defaults, which are part of a
        # registered schema: the identity is the JSON itself, whitespace and member order aside.
        canonical = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        return ParsedSchema("AVRO", text, canonical, AvroSchema(root, named))

    def compatible(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        r, w = reader.obj, writer.obj
        out: list[str] = []
        _check(r.root, w.root, r.named, w.named, "/", out, set())
        return out


AVRO = _Avro()


# ---------------------------------------------------------------------------------------- resolution
def _resolve(s: Any, named: dict[str, Any]) -> Any:
    """A schema with a reference to a named type replaced by the type's definition."""
    while isinstance(s, str) and s not in PRIMITIVES:
        if s not in named:
            return s
        s = named[s]
    return s


def _kind(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, str):
        return s
    t = s.get("type")
    if isinstance(t, (dict, list)):
        return _kind(t)
    return "record" if t == "error" else str(t)


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _names_match(r: dict[str, Any], w: dict[str, Any]) -> bool:
    """Spec: "both schemas are records/enums/fixed with the same (unqualified) name"; a reader's alias names
    the writer's type too ("Aliases")."""
    if _short(r["name"]) == _short(w["name"]):
        return True
    return any(a == w["name"] or _short(a) == _short(w["name"]) for a in r.get("aliases") or ())


def _check(
    r: Any,
    w: Any,
    rn: dict[str, Any],
    wn: dict[str, Any],
    path: str,
    out: list[str],
    seen: set[tuple[str, str]],
) -> None:
    r, w = _resolve(r, rn), _resolve(w, wn)
    if (
        isinstance(r, dict)
        and isinstance(r.get("type"), (dict, list, str))
        and r.get("type") not in NAMED
        and r.get("type") not in ("array", "map")
    ):
        r = _resolve(
            r["type"], rn
        )  # {"type": "int", "logicalType": ...}: logical types resolve as their base
    if (
        isinstance(w, dict)
        and isinstance(w.get("type"), (dict, list, str))
        and w.get("type") not in NAMED
        and w.get("type") not in ("array", "map")
    ):
        w = _resolve(w["type"], wn)
    rk, wk = _kind(r), _kind(w)
    # Spec: "if the writer's schema is a union ... the first schema in the reader's union that matches ...";
    # for compatibility every branch the writer may have used must be readable.
    if wk == "union":
        for i, branch in enumerate(w):
            _check(r, branch, rn, wn, f"{path}union[{i}]/", out, seen)
        return
    if rk == "union":
        # "if the reader's is a union, but writer's is not: the first schema in the reader's union that
        # matches the writer's schema is recursively resolved against it. If none match, an error is
        # signalled."
        for branch in r:
            trial: list[str] = []
            if _matches(_resolve(branch, rn), w, rn, wn):
                _check(branch, w, rn, wn, path, trial, seen)
                if not trial:
                    return
        out.append(f"{path}: the reader's union has no branch for the writer's {_describe(w)}")
        return
    if rk == wk and rk in PRIMITIVES:
        return
    if wk in PROMOTIONS and rk in PROMOTIONS[wk]:
        return  # "int is promotable to long, float, or double" ... "bytes is promotable to string"
    if rk != wk:
        out.append(f"{path}: reader type {rk} does not match writer type {wk}")
        return
    if rk == "array":
        _check(r["items"], w["items"], rn, wn, path + "items/", out, seen)
    elif rk == "map":
        _check(r["values"], w["values"], rn, wn, path + "values/", out, seen)
    elif rk == "fixed":
        if not _names_match(r, w):
            out.append(f"{path}: fixed name {r['name']} does not match the writer's {w['name']}")
        elif r["size"] != w["size"]:
            out.append(f"{path}: fixed {r['name']} size {r['size']} differs from the writer's {w['size']}")
    elif rk == "enum":
        if not _names_match(r, w):
            out.append(f"{path}: enum name {r['name']} does not match the writer's {w['name']}")
            return
        # "if the writer's symbol is not present in the reader's enum and the reader has a default value,
        # then that value is used, otherwise an error is signalled"
        if r.get("default") is None:
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing:
                out.append(f"{path}: the reader's enum {r['name']} lacks the writer's symbols {missing}")
    elif rk == "record":
        if not _names_match(r, w):
            out.append(f"{path}: record name {r['name']} does not match the writer's {w['name']}")
            return
        pair = (r["name"], w["name"])
        if pair in seen:  # a recursive type: its fields are being checked further up
            return
        seen = seen | {pair}
        wfields = {f["name"]: f for f in w["fields"]}
        for f in r["fields"]:
            wf = wfields.get(f["name"])
            if wf is None:
                for alias in f.get("aliases") or ():
                    wf = wfields.get(alias)
                    if wf is not None:
                        break
            if wf is None:
                # "if the reader's record schema has a field with no default value, and writer's schema does
                # not have a field with the same name, an error is signalled"
                if "default" not in f:
                    out.append(
                        f"{path}{f['name']}: the reader's field has no default and the writer has "
                        "no such field"
                    )
                continue
            _check(f["type"], wf["type"], rn, wn, f"{path}{f['name']}/", out, seen)
        # "if the writer's record contains a field with a name not present in the reader's record, the
        # writer's value for that field is ignored"
    else:  # pragma: no cover - every Avro kind is handled above
        out.append(f"{path}: cannot compare {rk}")


def _matches(r: Any, w: Any, rn: dict[str, Any], wn: dict[str, Any]) -> bool:
    """Whether a reader union branch is a candidate for the writer's (non-union) schema: same kind (and name
    for named types), or a promotion."""
    rk, wk = _kind(r), _kind(w)
    if rk == wk:
        if rk in ("record", "enum", "fixed"):
            return _names_match(r, w)
        return True
    return wk in PROMOTIONS and rk in PROMOTIONS[wk]


def _describe(s: Any) -> str:
    k = _kind(s)
    return f"{k} {s['name']}" if k in ("record", "enum", "fixed") else k
