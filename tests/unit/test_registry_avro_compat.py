"""Avro compatibility in moldau's registry: a table of (reader, writer) cases, each with the rule of the Avro
specification (1.11, "Schema Resolution") it exercises, then the seven levels over a subject's history
(Confluent's documentation, "Compatibility types")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.compat import LEVELS, check_level
from moldau.registry.types import Dependency, SchemaError
from moldau.registry.types.avro import AVRO

SPEC = "Avro spec, Schema Resolution"


def rec(name: str, *fields: Any, ns: str = "t", **extra: Any) -> dict[str, Any]:
    fs = []
    for f in fields:
        d = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            d["default"] = f[2]
        fs.append(d)
    return {"type": "record", "name": name, "namespace": ns, "fields": fs, **extra}


def enum(name: str, symbols: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **extra}


def fixed(name: str, size: int) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size}


LIST = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
}
LIST_LONG = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}

# (reader, writer, compatible, source)
CASES: list[tuple[Any, Any, bool, str]] = [
    ("int", "int", True, f"{SPEC}: both schemas are the same primitive type"),
    ("string", "int", False, f"{SPEC}: otherwise (types do not match) an error is signalled"),
    ("long", "int", True, f"{SPEC}: int is promotable to long, float, or double"),
    ("float", "int", True, f"{SPEC}: int is promotable to long, float, or double"),
    ("double", "int", True, f"{SPEC}: int is promotable to long, float, or double"),
    ("double", "long", True, f"{SPEC}: long is promotable to float or double"),
    ("float", "long", True, f"{SPEC}: long is promotable to float or double"),
    ("double", "float", True, f"{SPEC}: float is promotable to double"),
    ("int", "long", False, f"{SPEC}: promotion only widens (long is not promotable to int)"),
    ("float", "double", False, f"{SPEC}: promotion only widens (double is not promotable to float)"),
    ("bytes", "string", True, f"{SPEC}: string is promotable to bytes"),
    ("string", "bytes", True, f"{SPEC}: bytes is promotable to string"),
    ("null", "null", True, f"{SPEC}: both schemas are the same primitive type"),
    ("boolean", "int", False, f"{SPEC}: no promotion to boolean"),
    (
        {"type": "array", "items": "long"},
        {"type": "array", "items": "int"},
        True,
        f"{SPEC}: arrays: this resolution algorithm is applied recursively to the reader's and writer's "
        "item schemas",
    ),
    (
        {"type": "array", "items": "int"},
        {"type": "array", "items": "string"},
        False,
        f"{SPEC}: arrays: item schemas resolved recursively",
    ),
    (
        {"type": "map", "values": "double"},
        {"type": "map", "values": "float"},
        True,
        f"{SPEC}: maps: resolved recursively on the value schemas",
    ),
    (
        {"type": "map", "values": "int"},
        {"type": "array", "items": "int"},
        False,
        f"{SPEC}: a map and an array do not match",
    ),
    (
        rec("R", ("a", "int")),
        rec("R", ("a", "int"), ("b", "string")),
        True,
        f"{SPEC}: records: if the writer's record contains a field with a name not present in the reader's "
        "record, the writer's value for that field is ignored",
    ),
    (
        rec("R", ("a", "int"), ("b", "string", "x")),
        rec("R", ("a", "int")),
        True,
        f"{SPEC}: records: if the reader's record schema has a field that contains a default value, and "
        "writer's "
        "schema does not have a field with the same name, then the reader should use the default value",
    ),
    (
        rec("R", ("a", "int"), ("b", "string")),
        rec("R", ("a", "int")),
        False,
        f"{SPEC}: records: if the reader's record schema has a field with no default value, and "
        "writer's schema "
        "does not have a field with the same name, an error is signalled",
    ),
    (
        rec("R", ("a", "long")),
        rec("R", ("a", "int")),
        True,
        f"{SPEC}: records: the types of fields with the same name are resolved recursively",
    ),
    (
        rec("R", ("a", "int")),
        rec("R", ("a", "long")),
        False,
        f"{SPEC}: records: field types resolved recursively (long is not promotable to int)",
    ),
    (
        rec("R", ("a", "int")),
        rec("S", ("a", "int")),
        False,
        f"{SPEC}: both schemas are records with the same (unqualified) name",
    ),
    (
        rec("R", ("a", "int"), ns="one"),
        rec("R", ("a", "int"), ns="two"),
        True,
        f"{SPEC}: records with the same unqualified name match whatever their namespaces",
    ),
    (
        rec("R", ("a", "int"), aliases=["t.S"]),
        rec("S", ("a", "int")),
        True,
        "Avro spec, Aliases: a reader's alias names the writer's type",
    ),
    (
        {
            "type": "record",
            "name": "R",
            "namespace": "t",
            "fields": [{"name": "renamed", "type": "int", "aliases": ["a"]}],
        },
        rec("R", ("a", "int")),
        True,
        "Avro spec, Aliases: a reader's field alias matches the writer's field name",
    ),
    (
        enum("E", ["A", "B", "C"]),
        enum("E", ["A", "B"]),
        True,
        f"{SPEC}: enums: the reader's symbols cover the writer's",
    ),
    (
        enum("E", ["A", "B"]),
        enum("E", ["A", "B", "C"]),
        False,
        f"{SPEC}: enums: if the writer's symbol is not present in the reader's enum and the reader has "
        "no default "
        "value, then an error is signalled",
    ),
    (
        enum("E", ["A", "B", "U"], default="U"),
        enum("E", ["A", "B", "C"]),
        True,
        f"{SPEC}: enums: if the writer's symbol is not present in the reader's enum and the reader has a "
        "default value, then that value is used",
    ),
    (
        enum("E", ["A"]),
        enum("F", ["A"]),
        False,
        f"{SPEC}: both schemas are enums with the same (unqualified) name",
    ),
    (fixed("F", 16), fixed("F", 16), True, f"{SPEC}: both schemas are fixed with the same name and size"),
    (fixed("F", 16), fixed("F", 8), False, f"{SPEC}: both schemas are fixed with the same name and size"),
    (fixed("F", 4), fixed("G", 4), False, f"{SPEC}: both schemas are fixed with the same name and size"),
    (
        ["null", "int"],
        "int",
        True,
        f"{SPEC}: if reader's is a union, but writer's is not: the first schema in the reader's union that "
        "matches the writer's schema is recursively resolved against it",
    ),
    (["null", "long"], "int", True, f"{SPEC}: reader's union, writer's not: a branch matching by promotion"),
    (
        ["null", "string"],
        "int",
        False,
        f"{SPEC}: reader's union, writer's not: if none match, an error is signalled",
    ),
    (
        "int",
        ["null", "int"],
        False,
        f"{SPEC}: if writer's is a union, but reader's is not: if the reader's schema matches the selected "
        "writer's schema ... otherwise an error is signalled (the writer may have written null)",
    ),
    (
        "long",
        ["int", "long"],
        True,
        f"{SPEC}: writer's union, reader's not: every branch the writer may select resolves against "
        "the reader",
    ),
    (
        ["null", "int", "string"],
        ["null", "int"],
        True,
        f"{SPEC}: if both are unions: the first schema in the reader's union that matches the "
        "selected writer's "
        "union schema is recursively resolved against it",
    ),
    (
        ["null", "int"],
        ["null", "int", "string"],
        False,
        f"{SPEC}: both unions: if none match, an error is signalled (the writer's string branch)",
    ),
    (
        rec("R", ("u", ["null", rec("In", ("x", "int"))], None)),
        rec("R", ("u", ["null", rec("In", ("x", "int"), ("y", "int"))], None)),
        True,
        f"{SPEC}: unions of records resolve recursively",
    ),
    (
        {"type": "int", "logicalType": "date"},
        "int",
        True,
        "Avro spec, Logical Types: a logical type resolves as its underlying type",
    ),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        {"type": "int", "logicalType": "date"},
        True,
        "Avro spec, Logical Types: resolution uses the underlying types (int promotes to long)",
    ),
    (LIST_LONG, LIST, True, f"{SPEC}: recursive records resolve (the field types recursively)"),
    (LIST, LIST_LONG, False, f"{SPEC}: recursive records: long is not promotable to int"),
]


def parse(s: Any, deps: list[Dependency] | None = None) -> Any:
    return AVRO.parse(json.dumps(s), deps or [])


@pytest.mark.parametrize("reader,writer,ok,source", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_resolution_table(reader: Any, writer: Any, ok: bool, source: str) -> None:
    msgs = AVRO.compatible(parse(reader), parse(writer))
    assert (not msgs) == ok, (source, msgs)


def test_invalid_schemas_refused() -> None:
    for bad in (
        '{"type": "record", "name": "R"}',  # a record needs fields (spec: Complex Types)
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',  # symbols must be unique
        '{"type": "fixed", "name": "F"}',  # fixed needs a size
        '"nosuch"',  # an unknown name
        '{"type": "record", "name": "9R", "fields": []}',  # spec, Names: [A-Za-z_][A-Za-z0-9_]*
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, '
        '{"name": "a", "type": "long"}]}',  # field names unique (spec, Records)
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        "{",
    ):
        with pytest.raises(SchemaError):
            AVRO.parse(bad, [])


def test_references_resolve_named_types() -> None:
    addr = rec("Address", ("city", "string"), ns="r")
    person = {"type": "record", "name": "P", "namespace": "r", "fields": [{"name": "a", "type": "r.Address"}]}
    with pytest.raises(SchemaError):
        parse(person)
    dep = Dependency("r.Address", json.dumps(addr))
    p = parse(person, [dep])
    # the same dependency reached twice (a diamond) is parsed once
    assert parse(person, [dep, Dependency("again", json.dumps(addr))]).canonical == p.canonical
    addr2 = rec("Address", ("city", "string"), ("zip", "string", ""), ns="r")
    p2 = parse(person, [Dependency("r.Address", json.dumps(addr2))])
    assert AVRO.compatible(p2, p) == [] and AVRO.compatible(p, p2) == []


# Confluent's documentation, "Compatibility types": BACKWARD checks the new schema as reader of the latest;
# FORWARD the latest as reader of the new; FULL both; _TRANSITIVE against every earlier version.
H1 = rec("H", ("a", "int"))
H2 = rec("H", ("a", "int"), ("b", "int", 0))  # adds b with a default: full with H1
H3 = rec("H", ("a", "int"), ("b", "int", 0), ("c", "int"))  # adds c without a default
H3_DEL = rec("H", ("b", "int", 0))  # drops a (no default in H1/H2)
H_NEW_B_NO_DEFAULT = rec("H", ("a", "int"), ("b", "int"))  # against H1 only: b without default


LEVEL_CASES = [
    # (level, history, new, compatible, why)
    ("NONE", [H1], rec("X", ("z", "string")), True, "NONE: no check"),
    ("BACKWARD", [H1], H2, True, "the new reader fills b's default"),
    ("BACKWARD", [H2], H3, False, "the new reader has c without a default"),
    ("BACKWARD", [H1], H3_DEL, True, "the new reader ignores the writer's a"),
    ("FORWARD", [H2], H3, True, "the old reader ignores c"),
    ("FORWARD", [H1], H3_DEL, False, "the old reader needs a, without a default"),
    ("FULL", [H1], H2, True, "b has a default both ways"),
    ("FULL", [H2], H3, False, "backward fails on c"),
    ("FULL", [H1], H3_DEL, False, "forward fails on a"),
    # transitive: compatible with the latest, not with an earlier one
    ("BACKWARD", [H_NEW_B_NO_DEFAULT, H2], rec("H", ("a", "int"), ("b", "int", 0)), True, "latest only"),
    (
        "BACKWARD",
        [rec("H", ("a", "int"), ("x", "string")), rec("H", ("a", "int"), ("x", "string", ""))],
        rec("H", ("a", "int"), ("x", "int", 0)),
        False,
        "x's type changed against the latest",
    ),
    (
        "BACKWARD",
        [rec("H", ("a", "string")), rec("H", ("a", "string"), ("b", "int", 0))],
        rec("H", ("a", "string"), ("b", "long", 0)),
        True,
        "latest: int promotes to long",
    ),
    (
        "BACKWARD_TRANSITIVE",
        [rec("H", ("b", "string", "")), rec("H", ("b", "int", 0))],
        rec("H", ("b", "long", 0)),
        False,
        "the first version wrote b as a string",
    ),
    (
        "BACKWARD",
        [rec("H", ("b", "string", "")), rec("H", ("b", "int", 0))],
        rec("H", ("b", "long", 0)),
        True,
        "only the latest (int) is checked",
    ),
    (
        "FORWARD_TRANSITIVE",
        [rec("H", ("a", "int"), ("c", "int")), rec("H", ("a", "int"), ("c", "int", 0))],
        rec("H", ("a", "int")),
        False,
        "the first version's reader needs c",
    ),
    (
        "FORWARD",
        [rec("H", ("a", "int"), ("c", "int")), rec("H", ("a", "int"), ("c", "int", 0))],
        rec("H", ("a", "int")),
        True,
        "the latest reader has c's default",
    ),
    (
        "FULL_TRANSITIVE",
        [H1, H2],
        rec("H", ("a", "int"), ("b", "int", 0), ("d", "int", 1)),
        True,
        "defaults both ways against every version",
    ),
    (
        "FULL_TRANSITIVE",
        [rec("H", ("a", "int"), ("c", "int")), H2],
        H2,
        False,
        "the first version's reader needs c",
    ),
    ("FULL", [rec("H", ("a", "int"), ("c", "int")), H2], H2, True, "only the latest"),
]


@pytest.mark.parametrize(
    "level,history,new,ok,why", LEVEL_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LEVEL_CASES)]
)
def test_levels(level: str, history: list[Any], new: Any, ok: bool, why: str) -> None:
    msgs = check_level(AVRO, level, parse(new), [parse(h) for h in history])
    assert (not msgs) == ok, (why, msgs)


def test_every_level_is_covered() -> None:
    assert {c[0] for c in LEVEL_CASES} == set(LEVELS)
