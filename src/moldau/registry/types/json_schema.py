"""JSON: JSON Schema (drafts 4, 6, 7, 2019-09 and 2020-12, chosen by ``$schema``, draft 7 when absent as in
Confluent's registry), checked against its meta-schema with the ``jsonschema`` package.

Compatibility: a reader schema can read what a writer schema wrote when every document valid under the writer
is valid under the reader. That is decided structurally, with the rules of Confluent's documentation ("JSON
Schema" under "Schema Evolution and Compatibility", its open, closed and partially open content models): types
may be extended (integer -> number, a type added), numeric and length bounds relaxed, enums extended, required
properties removed (or added with a default), ``oneOf``/``anyOf`` extended and ``allOf`` narrowed; a property
the reader adds must be acceptable for whatever the writer's content model let through (any value when the
writer is open, nothing when it is closed, its ``additionalProperties`` schema when it is partially open), and
a property the reader drops must be let through by the reader's content model. ``$ref`` is followed within a
schema (JSON pointers) and to referenced schemas (by their reference names).
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from .base import Dependency, ParsedSchema, SchemaError

DEFAULT_DRAFT = "http://json-schema.org/draft-07/schema#"


class JsonDoc:
    """A parsed schema document with the documents its references name."""

    __slots__ = ("root", "docs")

    def __init__(self, root: Any, docs: dict[str, Any]) -> None:
        self.root = root
        self.docs = docs


def _load(text: str) -> Any:
    try:
        obj = json.loads(text)
    except (ValueError, TypeError) as e:
        raise SchemaError(f"Invalid schema: not JSON: {e}") from None
    if not isinstance(obj, (dict, bool)):
        raise SchemaError("Invalid JSON Schema: a schema is an object or a boolean")
    return obj


def _check_meta(obj: Any) -> None:
    import jsonschema
    from jsonschema.validators import validator_for

    if isinstance(obj, bool):
        return
    default = jsonschema.validators.validator_for({"$schema": DEFAULT_DRAFT})
    cls = validator_for(obj, default=default)
    try:
        cls.check_schema(obj)
    except jsonschema.SchemaError as e:
        raise SchemaError(f"Invalid JSON Schema: {e.message}") from None


def _collect(deps: list[Dependency], docs: dict[str, Any]) -> None:
    for d in deps:
        if d.name in docs:
            continue
        _collect(d.deps, docs)
        obj = _load(d.text)
        _check_meta(obj)
        docs[d.name] = obj
        if isinstance(obj, dict) and isinstance(obj.get("$id"), str):
            docs.setdefault(obj["$id"], obj)


class _Json:
    def parse(self, text: str, deps: list[Dependency]) -> ParsedSchema:
        obj = _load(text)
        _check_meta(obj)
        docs: dict[str, Any] = {}
        _collect(deps, docs)
        canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
        return ParsedSchema("JSON", text, canonical, JsonDoc(obj, docs))

    def compatible(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        out: list[str] = []
        _Cmp(reader.obj, writer.obj, out).check(reader.obj.root, writer.obj.root, "#", set())
        return out


JSON = _Json()

_ANY: dict[str, Any] = {}
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def _types(s: dict[str, Any]) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    ts = {t} if isinstance(t, str) else set(t)
    if "number" in ts:
        ts.add("integer")
    return ts


class _Cmp:
    def __init__(self, reader: JsonDoc, writer: JsonDoc, out: list[str]) -> None:
        self.rdoc = reader
        self.wdoc = writer
        self.out = out

    def _deref(self, s: Any, doc: JsonDoc, depth: int = 0) -> Any:
        while isinstance(s, dict) and isinstance(s.get("$ref"), str) and depth < 64:
            ref = s["$ref"]
            name, _, pointer = ref.partition("#")
            base = doc.root if not name else doc.docs.get(name)
            if base is None:
                return _ANY  # an unknown external reference constrains nothing we can see
            target = base
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    return _ANY
            rest = {k: v for k, v in s.items() if k != "$ref"}
            s = {**target, **rest} if rest and isinstance(target, dict) else target
            depth += 1
        return s

    def fail(self, path: str, msg: str) -> None:
        self.out.append(f"{path}: {msg}")

    def check(self, r: Any, w: Any, path: str, seen: set[tuple[int, int]]) -> None:
        r = self._deref(r, self.rdoc)
        w = self._deref(w, self.wdoc)
        key = (id(r), id(w))
        if key in seen:
            return
        seen = seen | {key}
        if r is True or r == {}:
            return  # the reader accepts anything
        if w is False:
            return  # the writer wrote nothing
        if r is False:
            self.fail(path, "the reader accepts nothing")
            return
        if w is True:
            w = {}
        # combined types (Confluent: SUM_TYPE_EXTENDED and PRODUCT_TYPE_NARROWED are compatible)
        for kw in ("oneOf", "anyOf"):
            if kw in w and kw not in r:
                for i, b in enumerate(w[kw]):
                    self.check({k: v for k, v in r.items()}, b, f"{path}/{kw}/{i}", seen)
                return
        for kw in ("oneOf", "anyOf"):
            if kw in r:
                wbranches = w.get("oneOf") or w.get("anyOf") or [w]
                for i, wb in enumerate(wbranches):
                    if not any(self._fits(rb, wb, seen) for rb in r[kw]):
                        self.fail(
                            f"{path}/{kw}", f"no {kw} branch of the reader accepts the writer's branch {i}"
                        )
                return
        if "allOf" in r:
            for i, rb in enumerate(r["allOf"]):
                if "allOf" in w and rb in w["allOf"]:
                    continue
                self.check(rb, w, f"{path}/allOf/{i}", seen)
        if "allOf" in w and "allOf" not in r:
            merged: dict[str, Any] = {}
            for b in w["allOf"]:
                b = self._deref(b, self.wdoc)
                if isinstance(b, dict):
                    merged.update(b)
            w = {**merged, **{k: v for k, v in w.items() if k != "allOf"}}
        if "not" in r:
            if "not" not in w or not self._fits(w["not"], r["not"], seen, swap=True):
                self.fail(f"{path}/not", "the reader's not excludes what the writer may write")
        if "enum" in r:
            if "enum" not in w and "const" not in w:
                self.fail(f"{path}/enum", "the reader has an enum, the writer none")
            else:
                wvals = w.get("enum", [w.get("const")])
                missing = [v for v in wvals if v not in r["enum"]]
                if missing:
                    self.fail(f"{path}/enum", f"the reader's enum lacks {missing}")
        if "const" in r and w.get("const", object()) != r["const"] and w.get("enum") != [r["const"]]:
            self.fail(f"{path}/const", "the reader's const differs")
        rt, wt = _types(r), _types(w)
        if rt is not None:
            if wt is None:
                if not ("enum" in w or "const" in w):
                    self.fail(f"{path}/type", f"the reader narrows to {sorted(rt)}; the writer has no type")
            elif not wt <= rt:
                self.fail(
                    f"{path}/type", f"the reader's type {sorted(rt)} does not cover the writer's {sorted(wt)}"
                )
        self._bounds(r, w, path)
        if (wt is None or "object" in wt) and (rt is None or "object" in rt):
            self._object(r, w, path, seen)
        if (wt is None or "array" in wt) and (rt is None or "array" in rt):
            self._array(r, w, path, seen)

    def _fits(self, r: Any, w: Any, seen: set[tuple[int, int]], swap: bool = False) -> bool:
        sub = _Cmp(self.wdoc if swap else self.rdoc, self.rdoc if swap else self.wdoc, [])
        sub.check(r, w, "", seen)
        return not sub.out

    def _bounds(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        # an upper bound may rise or go, a lower bound may fall or go (Confluent: MAX_LENGTH_INCREASED,
        # MIN_LENGTH_DECREASED, MAXIMUM_INCREASED, ... are compatible; their opposites are not)
        for kw in ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties"):
            if isinstance(r.get(kw), (int, float)) and not isinstance(r.get(kw), bool):
                wv = w.get(kw)
                if not isinstance(wv, (int, float)) or wv > r[kw]:
                    self.fail(f"{path}/{kw}", f"the reader's {kw} {r[kw]} is below the writer's {wv}")
        for kw in ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties"):
            if isinstance(r.get(kw), (int, float)) and not isinstance(r.get(kw), bool):
                wv = w.get(kw)
                if not isinstance(wv, (int, float)) or wv < r[kw]:
                    self.fail(f"{path}/{kw}", f"the reader's {kw} {r[kw]} is above the writer's {wv}")
        if "multipleOf" in r:
            wm = w.get("multipleOf")
            if wm is None or Fraction(str(wm)) % Fraction(str(r["multipleOf"])) != 0:
                self.fail(f"{path}/multipleOf", "the writer's multipleOf is not a multiple of the reader's")
        if "pattern" in r and r["pattern"] != w.get("pattern"):
            self.fail(f"{path}/pattern", "the reader's pattern differs from the writer's")
        if "format" in r and r["format"] != w.get("format"):
            self.fail(f"{path}/format", "the reader's format differs from the writer's")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.fail(f"{path}/uniqueItems", "the reader requires unique items, the writer does not")

    def _object(self, r: dict[str, Any], w: dict[str, Any], path: str, seen: set[tuple[int, int]]) -> None:
        rprops: dict[str, Any] = r.get("properties") or {}
        wprops: dict[str, Any] = w.get("properties") or {}
        r_add = r.get("additionalProperties", True)
        w_add = w.get("additionalProperties", True)
        for name, rs in rprops.items():
            p = f"{path}/properties/{name}"
            if name in wprops:
                self.check(rs, wprops[name], p, seen)
            elif w_add is False:
                continue  # closed writer: the writer never wrote it (PROPERTY_ADDED_TO_CLOSED_CONTENT_MODEL)
            elif w_add is True or w_add == {}:
                # open writer: it may have written anything under that name; only a reader that accepts any
                # value is safe (PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL vs
                # PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)
                if not self._fits(rs, True, seen):
                    self.fail(
                        p,
                        "property added to an open content model: the writer may have written any "
                        "value under this name",
                    )
            else:  # partially open: whatever the writer's additionalProperties let through
                self.check(rs, w_add, p, seen)
        for name, ws in wprops.items():
            if name in rprops:
                continue
            p = f"{path}/properties/{name}"
            if r_add is False:
                self.fail(p, "property removed from a closed content model: the reader refuses it")
            elif not (r_add is True or r_add == {}):
                self.check(r_add, ws, p, seen)
        if r_add is not True and r_add != {} and (w_add is True or w_add == {}):
            self.fail(
                f"{path}/additionalProperties",
                "the reader restricts additional properties the writer allowed",
            )
        elif isinstance(r_add, dict) and r_add and isinstance(w_add, dict) and w_add:
            self.check(r_add, w_add, f"{path}/additionalProperties", seen)
        wreq = set(w.get("required") or ())
        for name in r.get("required") or ():
            if name in wreq:
                continue
            rs = self._deref(rprops.get(name, {}), self.rdoc)
            if isinstance(rs, dict) and "default" in rs:
                continue  # REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED
            self.fail(f"{path}/required", f"the reader requires {name!r}, the writer does not")

    def _array(self, r: dict[str, Any], w: dict[str, Any], path: str, seen: set[tuple[int, int]]) -> None:
        ri, wi = r.get("items"), w.get("items")
        if ri is None:
            return
        if isinstance(ri, list) or isinstance(wi, list):
            rl = ri if isinstance(ri, list) else None
            wl = wi if isinstance(wi, list) else None
            if rl is None or wl is None:
                if rl is None and wl is not None:
                    for i, ws in enumerate(wl):
                        self.check(ri, ws, f"{path}/items/{i}", seen)
                    self.check(ri, w.get("additionalItems", True), f"{path}/additionalItems", seen)
                else:
                    self.fail(f"{path}/items", "the reader's tuple does not match the writer's items")
                return
            for i, rs in enumerate(rl):
                if i < len(wl):
                    self.check(rs, wl[i], f"{path}/items/{i}", seen)
                else:
                    self.check(rs, w.get("additionalItems", True), f"{path}/items/{i}", seen)
            for i in range(len(rl), len(wl)):
                self.check(r.get("additionalItems", True), wl[i], f"{path}/items/{i}", seen)
            return
        self.check(ri, True if wi is None else wi, f"{path}/items", seen)
