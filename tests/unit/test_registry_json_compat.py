"""JSON Schema compatibility in moldau's registry: a table of (reader, writer) cases, each with its source:
Confluent's documentation ("Schema Evolution and Compatibility", JSON Schema: open, closed and partially open
content models) and the JSON Schema specification (validation keywords). A reader is compatible with a writer
when every document the writer accepts, the reader accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.compat import LEVELS, check_level
from moldau.registry.types import Dependency, SchemaError
from moldau.registry.types.json_schema import JSON

CF = "Confluent docs, JSON Schema compatibility"
VAL = "JSON Schema Validation"
# Confluent's schema registry source: json-schema-provider/src/test/resources/diff-schema-examples.json, each
# case an original (the writer) and an update (the reader) with Confluent's verdict; named by its description
EX = "Confluent schema-registry, json-schema-provider diff-schema-examples.json"
# Confluent docs, "Schema Evolution and Compatibility": BACKWARD, the new schema reads data written with the
# old; FORWARD, the old reads the new; FULL, both; _TRANSITIVE, against every earlier version; NONE, no check
LV = "Confluent docs, Schema Evolution and Compatibility: compatibility types"


def obj(props: dict[str, Any], required: list[str] | None = None, additional: Any = None) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        s["required"] = required
    if additional is not None:
        s["additionalProperties"] = additional
    return s


INT = {"type": "integer"}
NUM = {"type": "number"}
STR = {"type": "string"}

CASES: list[tuple[Any, Any, bool, str]] = [
    (INT, INT, True, f"{VAL}: the same schema"),
    (NUM, INT, True, f"{VAL}, type: every integer is a number (TYPE_EXTENDED)"),
    (INT, NUM, False, f"{VAL}, type: a number need not be an integer (TYPE_NARROWED)"),
    ({"type": ["string", "null"]}, STR, True, f"{CF}: a type added to the reader (TYPE_EXTENDED)"),
    (STR, {"type": ["string", "null"]}, False, f"{CF}: a type removed (TYPE_NARROWED)"),
    (
        {"type": "string", "maxLength": 10},
        {"type": "string", "maxLength": 5},
        True,
        f"{CF}: MAX_LENGTH_INCREASED is compatible",
    ),
    (
        {"type": "string", "maxLength": 5},
        {"type": "string", "maxLength": 10},
        False,
        f"{CF}: MAX_LENGTH_DECREASED is incompatible",
    ),
    (STR, {"type": "string", "maxLength": 5}, True, f"{CF}: MAX_LENGTH_REMOVED is compatible"),
    ({"type": "string", "maxLength": 5}, STR, False, f"{CF}: MAX_LENGTH_ADDED is incompatible"),
    (
        {"type": "string", "minLength": 1},
        {"type": "string", "minLength": 3},
        True,
        f"{CF}: MIN_LENGTH_DECREASED is compatible",
    ),
    (
        {"type": "string", "minLength": 3},
        {"type": "string", "minLength": 1},
        False,
        f"{CF}: MIN_LENGTH_INCREASED is incompatible",
    ),
    (
        {"type": "integer", "maximum": 100},
        {"type": "integer", "maximum": 10},
        True,
        f"{CF}: MAXIMUM_INCREASED is compatible",
    ),
    (
        {"type": "integer", "minimum": 5},
        {"type": "integer", "minimum": 0},
        False,
        f"{CF}: MINIMUM_INCREASED is incompatible",
    ),
    (
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "multipleOf": 4},
        True,
        f"{CF}: MULTIPLE_OF_REDUCED (the writer's is a multiple of the reader's) is compatible",
    ),
    (
        {"type": "integer", "multipleOf": 4},
        {"type": "integer", "multipleOf": 2},
        False,
        f"{CF}: MULTIPLE_OF_EXPANDED is incompatible",
    ),
    ({"type": "string", "pattern": "^a"}, STR, False, f"{CF}: PATTERN_ADDED is incompatible"),
    (STR, {"type": "string", "pattern": "^a"}, True, f"{CF}: PATTERN_REMOVED is compatible"),
    ({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}, True, f"{CF}: ENUM_ARRAY_EXTENDED is compatible"),
    ({"enum": ["a"]}, {"enum": ["a", "b"]}, False, f"{CF}: ENUM_ARRAY_NARROWED is incompatible"),
    (
        obj({"a": INT}),
        obj({"a": INT, "b": STR}),
        True,
        f"{CF}: PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL is compatible",
    ),
    (
        obj({"a": INT}, additional=False),
        obj({"a": INT, "b": STR}),
        False,
        f"{CF}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL is incompatible",
    ),
    (
        obj({"a": INT, "b": STR}),
        obj({"a": INT}),
        False,
        f"{CF}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL is incompatible (the writer may have written any b)",
    ),
    (
        obj({"a": INT, "b": {}}),
        obj({"a": INT}),
        True,
        f"{CF}: PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL is compatible",
    ),
    (
        obj({"a": INT, "b": STR}),
        obj({"a": INT}, additional=False),
        True,
        f"{CF}: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL (closed writer) is compatible",
    ),
    (
        obj({"a": INT, "b": STR}, required=["b"]),
        obj({"a": INT}, additional=False),
        False,
        f"{CF}: REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL is incompatible",
    ),
    (
        obj({"a": INT, "b": {"type": "string", "default": "x"}}, required=["b"]),
        obj({"a": INT}, additional=False),
        True,
        f"{CF}: REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED is compatible",
    ),
    (
        obj({"a": INT, "b": STR}),
        obj({"a": INT}, additional=STR),
        True,
        f"{CF}: PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL is compatible",
    ),
    (
        obj({"a": INT, "b": INT}),
        obj({"a": INT}, additional=STR),
        False,
        f"{CF}: PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL is incompatible",
    ),
    (
        obj({"a": INT}, additional=STR),
        obj({"a": INT, "b": STR}, additional=STR),
        True,
        f"{CF}: PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL is compatible",
    ),
    (
        obj({"a": INT}, additional=INT),
        obj({"a": INT, "b": STR}, additional=INT),
        False,
        f"{CF}: PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL is incompatible",
    ),
    (
        obj({"a": INT}, additional=False),
        obj({"a": INT}),
        False,
        f"{CF}: ADDITIONAL_PROPERTIES_REMOVED is incompatible",
    ),
    (
        obj({"a": INT}),
        obj({"a": INT}, additional=False),
        True,
        f"{CF}: ADDITIONAL_PROPERTIES_ADDED is compatible",
    ),
    (
        obj({"a": INT}, additional=NUM),
        obj({"a": INT}, additional=INT),
        True,
        f"{CF}: ADDITIONAL_PROPERTIES_EXTENDED is compatible",
    ),
    (
        obj({"a": INT}, additional=INT),
        obj({"a": INT}, additional=NUM),
        False,
        f"{CF}: ADDITIONAL_PROPERTIES_NARROWED is incompatible",
    ),
    (
        obj({"a": INT}),
        obj({"a": INT}, required=["a"]),
        True,
        f"{CF}: REQUIRED_ATTRIBUTE_REMOVED is compatible",
    ),
    (
        obj({"a": INT}, required=["a"]),
        obj({"a": INT}),
        False,
        f"{CF}: REQUIRED_ATTRIBUTE_ADDED (without a default) is incompatible",
    ),
    (
        {"type": "array", "items": NUM},
        {"type": "array", "items": INT},
        True,
        f"{VAL}, items: item schemas compared recursively",
    ),
    (
        {"type": "array", "items": INT},
        {"type": "array", "items": NUM},
        False,
        f"{VAL}, items: narrowed items",
    ),
    (
        {"type": "array", "items": INT, "maxItems": 5},
        {"type": "array", "items": INT},
        False,
        f"{CF}: MAX_ITEMS_ADDED is incompatible",
    ),
    (
        {"type": "array", "items": INT, "uniqueItems": True},
        {"type": "array", "items": INT},
        False,
        f"{CF}: UNIQUE_ITEMS_ADDED is incompatible",
    ),
    (
        {"oneOf": [INT, STR, {"type": "null"}]},
        {"oneOf": [INT, STR]},
        True,
        f"{CF}: SUM_TYPE_EXTENDED is compatible",
    ),
    ({"oneOf": [INT]}, {"oneOf": [INT, STR]}, False, f"{CF}: SUM_TYPE_NARROWED is incompatible"),
    ({"anyOf": [INT, STR]}, INT, True, f"{CF}: COMBINED_TYPE_EXTENDED (a schema made one branch of anyOf)"),
    (
        {"allOf": [obj({"a": INT})]},
        {"allOf": [obj({"a": INT}), obj({"b": STR})]},
        True,
        f"{CF}: PRODUCT_TYPE_NARROWED is compatible",
    ),
    (
        {"allOf": [obj({"a": INT}), {"required": ["a"]}]},
        {"allOf": [obj({"a": INT})]},
        False,
        f"{CF}: PRODUCT_TYPE_EXTENDED is incompatible",
    ),
    (
        {"$ref": "#/definitions/x", "definitions": {"x": NUM}},
        INT,
        True,
        f"{VAL}: $ref resolved within the schema document",
    ),
    (
        {"$ref": "#/definitions/x", "definitions": {"x": INT}},
        NUM,
        False,
        f"{VAL}: $ref resolved within the schema document (narrowed)",
    ),
    ({}, {"properties": {}}, True, f"{EX}: 'Anything can change to empty schema'"),
    ({"title": "b"}, {"title": "a"}, True, f"{EX}: 'Detect changes to title' (TITLE_CHANGED)"),
    ({"description": "b"}, {"description": "a"}, True, f"{EX}: 'Detect changes to description'"),
    ({"type": "array"}, {"type": "object"}, False, f"{EX}: 'Detect changes to simple schema type'"),
    (
        {"type": "string", "pattern": "uuid"},
        {"type": "string", "pattern": "date-time"},
        False,
        f"{EX}: 'Detect changes to pattern string schema' (PATTERN_CHANGED)",
    ),
    (
        {"type": "string", "pattern": "date-time"},
        {"type": "string", "pattern": "date-time"},
        True,
        f"{EX}: 'Detect changes to pattern' (the same pattern)",
    ),
    (
        {"type": "number", "multipleOf": 11},
        {"type": "number", "multipleOf": 10},
        False,
        f"{EX}: 'Detect changes to multipleOf number schema' (MULTIPLE_OF_CHANGED)",
    ),
    (
        {"type": "number", "multipleOf": 2},
        {"type": "number", "multipleOf": 10},
        True,
        f"{EX}: 'Detect reduced multipleOf number schema'",
    ),
    ({"type": "number"}, {"type": "number", "maximum": 10}, True, f"{EX}: 'Detect removed maximum'"),
    (
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 11},
        False,
        f"{EX}: 'Detect decreased maximum number schema'",
    ),
    (
        {"type": "number", "minimum": 10},
        {"type": "number", "minimum": 11},
        True,
        f"{EX}: 'Detect decreased minimum number schema'",
    ),
    ({"type": "integer"}, NUM, False, f"{EX}: 'Detect narrowed change to number schema'"),
    ({"not": INT}, {"not": NUM}, True, f"{EX}: 'Detect compatible change to not schema' (NOT_TYPE_NARROWED)"),
    (
        {"not": NUM},
        {"not": INT},
        False,
        f"{EX}: 'Detect incompatible change to not schema' (NOT_TYPE_EXTENDED)",
    ),
    (STR, {"type": "string", "enum": ["red"]}, True, f"{EX}: 'Detect removed enum'"),
    (
        {"properties": {"foo": {"const": "blue"}}},
        {"properties": {"foo": {"const": "red"}}},
        False,
        f"{EX}: 'Detect incompatible changes to const schema'",
    ),
    ({"type": ["object", "array"]}, {"type": ["object"]}, True, f"{EX}: 'Detect changes to type array'"),
    ({"oneOf": [NUM]}, {"oneOf": [STR]}, False, f"{EX}: 'Detect changes to sub schemas'"),
    ({"oneOf": [NUM, STR]}, {"oneOf": [STR]}, True, f"{EX}: 'Detect changes to number of sub schemas'"),
    (
        {"properties": {"bar": STR}},
        {"properties": {"foo": STR}},
        False,
        f"{EX}: 'Detect changes to remove properties' (a property added to an open model)",
    ),
    (
        {"properties": {"foo": NUM}},
        {"properties": {"foo": STR}},
        False,
        f"{EX}: 'Detect change type of properties'",
    ),
    (
        obj({"foo": STR, "bar": NUM}, additional=False),
        obj({"foo": STR}, additional=False),
        True,
        f"{EX}: 'Detect optional property added to closed content model'",
    ),
    (
        obj({"foo": STR, "bar": STR}, required=["bar"], additional=STR),
        obj({"foo": STR}, additional=STR),
        False,
        f"{EX}: 'Detect property added to partially open content model 4' (required)",
    ),
    (
        obj({"foo": STR}, additional=STR),
        obj({"foo": STR, "bar": STR}, additional=False),
        True,
        f"{EX}: 'Detect property removed from partially open content model 2'",
    ),
    (True, STR, True, "JSON Schema Core: true accepts every instance"),
    (STR, True, False, "JSON Schema Core: true accepts every instance, a string schema does not"),
]


def parse(s: Any, deps: list[Dependency] | None = None) -> Any:
    return JSON.parse(json.dumps(s), deps or [])


@pytest.mark.parametrize("reader,writer,ok,source", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_json_table(reader: Any, writer: Any, ok: bool, source: str) -> None:
    msgs = JSON.compatible(parse(reader), parse(writer))
    assert (not msgs) == ok, (source, msgs)


def test_invalid_json_schemas() -> None:
    for bad in ('{"type": "objectx"}', '{"minLength": -1}', '{"required": "a"}', "[1]", "{"):
        with pytest.raises(SchemaError):
            JSON.parse(bad, [])
    # the draft is chosen by $schema: draft 4's exclusiveMaximum is a boolean, 2020-12's a number
    JSON.parse(
        '{"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3, "exclusiveMaximum": true}', []
    )
    with pytest.raises(SchemaError):
        JSON.parse(
            '{"$schema": "https://json-schema.org/draft/2020-12/schema", "exclusiveMaximum": true}', []
        )


def test_references_between_schemas() -> None:
    addr = obj({"city": STR}, required=["city"])
    addr_wide = obj({"city": STR})
    person = obj({"home": {"$ref": "address.json"}})
    old = parse(person, [Dependency("address.json", json.dumps(addr))])
    new = parse(person, [Dependency("address.json", json.dumps(addr_wide))])
    assert JSON.compatible(new, old) == []  # the reader no longer requires city
    assert JSON.compatible(old, new) != []


def smax(n: int | None) -> dict[str, Any]:
    return {"type": "string"} if n is None else {"type": "string", "maxLength": n}


# (level, history oldest first, new, compatible, source); BACKWARD checks compatible(reader=new, writer=old),
# FORWARD compatible(reader=old, writer=new)
LEVEL_CASES: list[tuple[str, list[Any], Any, bool, str]] = [
    ("NONE", [obj({"a": INT})], obj({"a": STR}), True, f"{LV}: NONE checks nothing (a property's type)"),
    ("NONE", [STR], INT, True, f"{LV}: NONE checks nothing (the type)"),
    (
        "BACKWARD",
        [obj({"a": INT}, additional=False)],
        obj({"a": INT, "b": STR}, additional=False),
        True,
        f"{CF}: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL, the new reader reads the old data",
    ),
    (
        "BACKWARD",
        [obj({"a": INT})],
        obj({"a": INT, "b": STR}),
        False,
        f"{CF}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL (old data may hold any b)",
    ),
    ("BACKWARD", [smax(None), smax(10)], smax(20), True, f"{LV}: the latest only (MAX_LENGTH_INCREASED)"),
    (
        "BACKWARD_TRANSITIVE",
        [smax(None), smax(10)],
        smax(20),
        False,
        f"{LV}: the first version had no maxLength (MAX_LENGTH_ADDED against it)",
    ),
    ("BACKWARD_TRANSITIVE", [smax(None), smax(10)], smax(None), True, f"{LV}: reads every version"),
    (
        "FORWARD",
        [obj({"a": INT})],
        obj({"a": INT, "b": STR}),
        True,
        f"{CF}: seen from the old reader, PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    (
        "FORWARD",
        [obj({"a": INT}, additional=False)],
        obj({"a": INT, "b": STR}, additional=False),
        False,
        f"{CF}: the old closed reader refuses b (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)",
    ),
    ("FORWARD", [smax(5), smax(10)], smax(8), True, f"{LV}: the latest reader only (maxLength 10 >= 8)"),
    (
        "FORWARD_TRANSITIVE",
        [smax(5), smax(10)],
        smax(8),
        False,
        f"{LV}: the first reader's maxLength 5 refuses the new data",
    ),
    ("FORWARD_TRANSITIVE", [smax(5), smax(10)], smax(3), True, f"{LV}: every reader accepts the new data"),
    (
        "FULL",
        [obj({"a": INT})],
        obj({"a": INT, "b": {}}),
        True,
        f"{CF}: PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL, compatible both ways",
    ),
    (
        "FULL",
        [obj({"a": INT})],
        obj({"a": INT, "b": STR}),
        False,
        f"{CF}: forward holds, backward fails (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)",
    ),
    (
        "FULL",
        [obj({"a": INT}, additional=False)],
        obj({"a": INT, "b": STR}, additional=False),
        False,
        f"{CF}: backward holds, forward fails",
    ),
    (
        "FULL",
        [obj({"a": INT}, additional=False), obj({"a": INT})],
        obj({"a": INT}),
        True,
        f"{LV}: FULL checks the latest only",
    ),
    (
        "FULL_TRANSITIVE",
        [obj({"a": INT}, additional=False), obj({"a": INT})],
        obj({"a": INT}),
        False,
        f"{CF}: the first (closed) reader refuses the open model's data (ADDITIONAL_PROPERTIES_REMOVED)",
    ),
    (
        "FULL_TRANSITIVE",
        [obj({"a": INT}), obj({"a": INT, "b": {}})],
        obj({"a": INT, "b": {}, "c": {}}),
        True,
        f"{CF}: properties with empty schemas added to an open model, both ways against every version",
    ),
]


@pytest.mark.parametrize(
    "level,history,new,ok,source", LEVEL_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LEVEL_CASES)]
)
def test_levels(level: str, history: list[Any], new: Any, ok: bool, source: str) -> None:
    msgs = check_level(JSON, level, parse(new), [parse(h) for h in history])
    assert (not msgs) == ok, (source, msgs)


def test_every_level_is_covered() -> None:
    """Each level has a compatible and an incompatible case (NONE has none to refuse)."""
    for level in LEVELS:
        assert {c[3] for c in LEVEL_CASES if c[0] == level} == ({True} if level == "NONE" else {True, False})
