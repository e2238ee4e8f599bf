"""Protobuf compatibility in moldau's registry: a table of (writer, reader) .proto pairs, each with its
source:
Confluent's documentation of its Protobuf compatibility rules (the ``Difference.Type``s its registry reports)
and the Protobuf language guide ("Updating A Message Type")."""

from __future__ import annotations

import base64

import pytest

from moldau.registry.compat import LEVELS, check_level
from moldau.registry.types import Dependency, SchemaError
from moldau.registry.types.protobuf import PROTOBUF

CF = "Confluent docs, Protobuf compatibility"
GUIDE = "Protobuf language guide, Updating A Message Type"
# Confluent's schema registry source: protobuf-provider's diff/SchemaDiff.java and FieldSchemaDiff.java, and
# its test cases protobuf-provider/src/test/resources/diff-schema-examples.json (original -> update, the
# update reading data written with the original)
SRC = "Confluent schema-registry, protobuf diff/SchemaDiff.java"
EX = "Confluent schema-registry, protobuf-provider diff-schema-examples.json"
# Confluent docs, "Schema Evolution and Compatibility": the compatibility types (BACKWARD: the new schema
# reads data written with the old; FORWARD: the old reads the new; FULL: both; _TRANSITIVE: against every
# earlier version) and its summary table per format (Protobuf: BACKWARD_TRANSITIVE is the best practice, since
# adding a message type is not forward compatible)
LV = "Confluent docs, Schema Evolution and Compatibility: compatibility types"
PB = "Confluent docs, Schema Evolution and Compatibility: summary table, Protobuf"


def p3(body: str, package: str = "shop", head: str = "") -> str:
    return f'syntax = "proto3";\npackage {package};\n{head}\n{body}\n'


BASE = p3("message M { int64 id = 1; string name = 2; }")

# (writer, reader, compatible, source)
CASES = [
    (BASE, BASE, True, f"{CF}: no difference"),
    (BASE, p3("message M { int64 id = 1; string name = 2; bool flag = 3; }"), True, f"{CF}: FIELD_ADDED"),
    (BASE, p3("message M { int64 id = 1; }"), True, f"{CF}: FIELD_REMOVED"),
    (BASE, p3("message M { int64 ident = 1; string name = 2; }"), True, f"{CF}: FIELD_NAME_CHANGED"),
    (BASE, p3("message M { string id = 1; string name = 2; }"), False, f"{CF}: FIELD_SCALAR_KIND_CHANGED"),
    (
        BASE,
        p3("message M { int32 id = 1; string name = 2; }"),
        True,
        f"{GUIDE}: int32, uint32, int64, uint64, and bool are all compatible",
    ),
    (
        p3("message M { sint32 id = 1; }"),
        p3("message M { sint64 id = 1; }"),
        True,
        f"{GUIDE}: sint32 and sint64 are compatible with each other",
    ),
    (
        p3("message M { sint32 id = 1; }"),
        p3("message M { int32 id = 1; }"),
        False,
        f"{GUIDE}: sint32 is not compatible with the other integer types",
    ),
    (
        p3("message M { string s = 1; }"),
        p3("message M { bytes s = 1; }"),
        True,
        f"{GUIDE}: string and bytes are compatible as long as the bytes are valid UTF-8",
    ),
    (
        p3("message M { fixed32 x = 1; }"),
        p3("message M { sfixed32 x = 1; }"),
        True,
        f"{GUIDE}: fixed32 is compatible with sfixed32",
    ),
    (
        p3("message M { N n = 1; } message N { int32 a = 1; }"),
        p3("message M { int32 n = 1; } message N { int32 a = 1; }"),
        False,
        f"{CF}: FIELD_KIND_CHANGED (message to scalar)",
    ),
    (
        p3("message M { N n = 1; } message N { int32 a = 1; } message O { int32 a = 1; }"),
        p3("message M { O n = 1; } message N { int32 a = 1; } message O { int32 a = 1; }"),
        False,
        f"{CF}: FIELD_NAMED_TYPE_CHANGED",
    ),
    (
        p3("message M { int32 a = 1; } message Other { int32 b = 1; }"),
        p3("message M { int32 a = 1; }"),
        False,
        f"{CF}: MESSAGE_REMOVED",
    ),
    (
        p3("message M { int32 a = 1; }"),
        p3("message M { int32 a = 1; } message Other { int32 b = 1; }"),
        True,
        f"{CF}: MESSAGE_ADDED",
    ),
    (
        BASE,
        p3("message M { int64 id = 1; string name = 2; }", package="other"),
        True,
        f"{SRC}: PACKAGE_CHANGED is among SchemaDiff's COMPATIBLE_CHANGES (diff-schema-examples:"
        " 'Detect package change', compatible)",
    ),
    (
        p3("message M { string s = 1; N n = 2; message N { string t = 1; } }", package="foo"),
        p3("message M { string s = 1; .bar.M.N n = 2; message N { string t = 1; } }", package="bar"),
        True,
        f"{EX}: 'Detect package change' (a nested type's qualified name follows the package)",
    ),
    (
        p3("message M { string s = 1; } message N { string s = 1; }"),
        p3("message N { string s = 1; } message M { string s = 1; }"),
        True,
        f"{EX}: 'Detect compatible message index change' (MESSAGE_MOVED)",
    ),
    (
        p3("message M { string s = 1; int32 i = 2; }"),
        p3("message M { string s = 1; Status i = 2; } enum Status { ACTIVE = 0; INACTIVE = 1; }"),
        True,
        f"{EX}: 'Detect field number type to enum change' (an enum is a general number)",
    ),
    (
        p3("message M { string s = 1; Status i = 2; } enum Status { ACTIVE = 0; INACTIVE = 1; }"),
        p3("message M { string s = 1; int32 i = 2; }"),
        True,
        f"{EX}: 'Detect enum type to field number change' (ENUM_REMOVED)",
    ),
    (
        p3("message M { string s = 1; Status i = 2; } enum Status { ACTIVE = 0; INACTIVE = 1; }"),
        p3("message M { string s = 1; Status i = 2; } enum Status { ACTIVE = 0; NOT_ACTIVE = 1; }"),
        True,
        f"{EX}: 'Detect enum const change' (ENUM_CONST_CHANGED)",
    ),
    (
        p3("message M { string s = 1; int32 i = 2; }"),
        p3("message M { string s = 1; T2 i = 2; } message T2 { string s1 = 1; }"),
        False,
        f"{EX}: 'Detect incompatible field type change' (FIELD_KIND_CHANGED, scalar to message)",
    ),
    (
        p3("message M { string s = 1; int32 i = 2; }"),
        p3("message M { string s = 1; string s2 = 2; }"),
        False,
        f"{EX}: 'Detect incompatible field type change' (FIELD_SCALAR_KIND_CHANGED)",
    ),
    (
        p3("message M { optional int32 i = 1; }"),
        p3("message M { repeated int32 i = 1; }"),
        False,
        f"{EX}: 'Detect incompatible field label change for number' (FIELD_NUMERIC_LABEL_CHANGED)",
    ),
    (
        p3("message M { string s = 1; }"),
        p3("message M { string s = 2; }"),
        True,
        f"{EX}: 'Detect changed field number' (FIELD_REMOVED and FIELD_ADDED)",
    ),
    (
        p3("message M { E e = 1; } enum E { A = 0; B = 1; }"),
        p3("message M { E e = 1; } enum E { A = 0; }"),
        True,
        f"{CF}: ENUM_CONST_REMOVED",
    ),
    (
        p3("message M { E e = 1; } enum E { A = 0; }"),
        p3("message M { E e = 1; } enum E { A = 0; B = 1; }"),
        True,
        f"{CF}: ENUM_CONST_ADDED",
    ),
    (
        p3("message M { oneof o { int32 a = 1; string b = 2; } }"),
        p3("message M { oneof o { int32 a = 1; } }"),
        False,
        f"{CF}: ONEOF_FIELD_REMOVED",
    ),
    (
        p3("message M { oneof o { int32 a = 1; } }"),
        p3("message M { oneof o { int32 a = 1; string b = 2; } }"),
        True,
        f"{CF}: ONEOF_FIELD_ADDED",
    ),
    (
        p3("message M { int32 a = 1; }"),
        p3("message M { oneof o { int32 a = 1; } }"),
        True,
        f"{GUIDE}: moving a single field into a new oneof is safe",
    ),
    (
        p3("message M { int32 a = 1; string b = 2; }"),
        p3("message M { oneof o { int32 a = 1; string b = 2; } }"),
        False,
        f"{CF}: MULTIPLE_FIELDS_MOVED_TO_ONEOF",
    ),
    (
        p3("message M { int32 a = 1; oneof o { string b = 2; } }"),
        p3("message M { oneof o { int32 a = 1; string b = 2; } }"),
        False,
        f"{CF}: FIELD_MOVED_TO_EXISTING_ONEOF",
    ),
    (
        'syntax = "proto2"; package shop; message M { optional int32 a = 1; }',
        'syntax = "proto2"; package shop; message M { optional int32 a = 1; required int32 b = 2; }',
        False,
        f"{CF}: REQUIRED_FIELD_ADDED",
    ),
    (
        'syntax = "proto2"; package shop; message M { required int32 a = 1; }',
        'syntax = "proto2"; package shop; message M { optional int32 a = 1; }',
        False,
        f"{CF}: REQUIRED_FIELD_REMOVED",
    ),
    (
        p3("message M { string s = 1; }"),
        p3("message M { repeated string s = 1; }"),
        True,
        f"{GUIDE}: for string, bytes, and message fields, singular is compatible with repeated",
    ),
    (
        p3("message M { map<string, int32> m = 1; }"),
        p3("message M { map<string, int32> m = 1; int32 x = 2; }"),
        True,
        f"{CF}: a map field kept, a field added",
    ),
    (
        p3("message M { map<string, int32> m = 1; }"),
        p3("message M { map<string, string> m = 1; }"),
        False,
        f"{CF}: FIELD_SCALAR_KIND_CHANGED (a map's value type)",
    ),
    (
        p3("message M { message In { int32 a = 1; } In i = 1; }"),
        p3("message M { message In { string a = 1; } In i = 1; }"),
        False,
        f"{CF}: FIELD_SCALAR_KIND_CHANGED in a nested message",
    ),
]


@pytest.mark.parametrize("writer,reader,ok,source", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_protobuf_table(writer: str, reader: str, ok: bool, source: str) -> None:
    msgs = PROTOBUF.compatible(PROTOBUF.parse(reader, []), PROTOBUF.parse(writer, []))
    assert (not msgs) == ok, (source, msgs)


def test_invalid_and_references() -> None:
    for bad in (
        "message {",
        p3("message M { Unknown u = 1; }"),
        p3("message M {}", head='import "missing.proto";'),
    ):
        with pytest.raises(SchemaError):
            PROTOBUF.parse(bad, [])
    money = p3("message Money { int64 cents = 1; }")
    order = p3("message Order { Money total = 1; }", head='import "money.proto";')
    parsed = PROTOBUF.parse(order, [Dependency("money.proto", money)])
    assert parsed.obj.fd.message_type[0].field[0].type_name == ".shop.Money"
    # the serialized descriptor (base64) is the same schema as the text
    again = PROTOBUF.parse(parsed.obj.serialized(), [Dependency("money.proto", money)])
    assert again.obj.fd == parsed.obj.fd
    assert base64.b64decode(parsed.obj.serialized())
    wk = PROTOBUF.parse(
        p3(
            "message T { google.protobuf.Timestamp at = 1; }",
            head='import "google/protobuf/timestamp.proto";',
        ),
        [],
    )
    assert wk.obj.fd.message_type[0].field[0].type_name == ".google.protobuf.Timestamp"


def m(*fields: str, extra: str = "") -> str:
    return p3("message M { " + " ".join(fields) + " }" + extra)


V_S = m("string x = 1;")  # x written as a string
V_A = m("int32 a = 2;")  # x removed (FIELD_REMOVED), a added
X_LONG = m("int32 a = 2;", "int64 x = 1;")  # x back as an int64: compatible with V_A, not with V_S
X_STR = m("int32 a = 2;", "string x = 1;")  # x back as a string: compatible with both
EXTRA = " message Extra { int32 b = 1; }"

# (level, history oldest first, new, compatible, source)
LEVEL_CASES = [
    ("NONE", [V_S], m("int32 x = 1;"), True, f"{LV}: NONE checks nothing (a scalar kind changed)"),
    ("NONE", [m("int32 a = 1;", extra=EXTRA)], m("int32 a = 1;"), True, f"{LV}: NONE (a message removed)"),
    ("BACKWARD", [m("int32 a = 1;")], m("int32 a = 1;", extra=EXTRA), True, f"{PB}: a message added"),
    (
        "BACKWARD",
        [m("int32 a = 1;", extra=EXTRA)],
        m("int32 a = 1;"),
        False,
        f"{CF}: MESSAGE_REMOVED (the new reader lacks a type the old writer had)",
    ),
    ("BACKWARD", [V_S, V_A], X_LONG, True, f"{LV}: BACKWARD checks the latest only (FIELD_ADDED)"),
    ("BACKWARD", [V_A], m("int32 a = 2;", "int32 b = 3;"), True, f"{CF}: FIELD_ADDED"),
    (
        "BACKWARD_TRANSITIVE",
        [V_S, V_A],
        X_LONG,
        False,
        f"{LV}: against every version; the first wrote x as a string (FIELD_SCALAR_KIND_CHANGED)",
    ),
    ("BACKWARD_TRANSITIVE", [V_S, V_A], X_STR, True, f"{LV}: x as a string again reads both versions"),
    (
        "FORWARD",
        [m("int32 a = 1;")],
        m("int32 a = 1;", extra=EXTRA),
        False,
        f"{PB}: adding a message type is not forward compatible (the old reader lacks it)",
    ),
    (
        "FORWARD",
        [m("int32 a = 1;", extra=EXTRA)],
        m("int32 a = 1;"),
        True,
        f"{LV}: FORWARD, the old reader reads the new data (seen from it, MESSAGE_ADDED)",
    ),
    ("FORWARD", [V_S, V_A], X_LONG, True, f"{LV}: FORWARD checks the latest only"),
    (
        "FORWARD_TRANSITIVE",
        [V_S, V_A],
        X_LONG,
        False,
        f"{LV}: the first version's reader has x as a string (FIELD_SCALAR_KIND_CHANGED)",
    ),
    ("FORWARD_TRANSITIVE", [V_S, V_A], X_STR, True, f"{LV}: every earlier reader reads x"),
    ("FULL", [m("int32 a = 1;")], m("int32 a = 1;", "string b = 2;"), True, f"{CF}: FIELD_ADDED both ways"),
    (
        "FULL",
        [m("int32 a = 1;")],
        m("int32 a = 1;", extra=EXTRA),
        False,
        f"{PB}: a message added is backward, not forward compatible",
    ),
    (
        "FULL",
        [V_S, V_A],
        X_LONG,
        True,
        f"{LV}: FULL checks the latest only",
    ),
    (
        "FULL_TRANSITIVE",
        [V_S, V_A],
        X_LONG,
        False,
        f"{LV}: against every version both ways",
    ),
    ("FULL_TRANSITIVE", [V_S, V_A], X_STR, True, f"{LV}: compatible both ways with every version"),
]


@pytest.mark.parametrize(
    "level,history,new,ok,source", LEVEL_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LEVEL_CASES)]
)
def test_levels(level: str, history: list[str], new: str, ok: bool, source: str) -> None:
    msgs = check_level(PROTOBUF, level, PROTOBUF.parse(new, []), [PROTOBUF.parse(h, []) for h in history])
    assert (not msgs) == ok, (source, msgs)


def test_every_level_is_covered() -> None:
    """Each level has a compatible and an incompatible case."""
    for level in LEVELS:
        assert {c[3] for c in LEVEL_CASES if c[0] == level} == ({True} if level == "NONE" else {True, False})


def test_descriptor_printed_as_text() -> None:
    """A schema registered as a serialized descriptor is kept as .proto text: printing it and parsing the text
    again gives the same descriptor (nested types, maps, oneofs, proto3 optional, enums, imports)."""
    from moldau.registry.types.protobuf import to_text

    money = p3("message Money { int64 cents = 1; }")
    deps = [Dependency("money.proto", money)]
    text = p3(
        "message Order { int64 id = 1; oneof pay { string card = 3; Money cash = 4; }"
        " map<string, int32> tags = 5; repeated Line lines = 6; message Line { int32 n = 1; }"
        " enum S { A = 0; B = 1; } S s = 7;"
        " optional string note = 8; google.protobuf.Timestamp at = 9; }",
        head='import "money.proto";\nimport "google/protobuf/timestamp.proto";',
    )
    parsed = PROTOBUF.parse(text, deps)
    from_descriptor = PROTOBUF.parse(parsed.obj.serialized(), deps)
    printed = to_text(from_descriptor.obj.fd)
    assert printed.startswith('syntax = "proto3";\npackage shop;\n')
    assert PROTOBUF.parse(printed, deps).obj.fd == parsed.obj.fd
    with_options = (
        'syntax = "proto3"; package p; option java_package = "com.example.p";'
        " option java_multiple_files = true; option optimize_for = SPEED;"
        " message M { int32 a = 1 [deprecated = true]; }"
    )
    parsed = PROTOBUF.parse(with_options, [])
    assert parsed.obj.fd.options.java_package == "com.example.p" and parsed.obj.fd.options.optimize_for == 1
    printed = to_text(PROTOBUF.parse(parsed.obj.serialized(), []).obj.fd)
    assert 'option java_package = "com.example.p";' in printed and "[deprecated = true]" in printed
    assert PROTOBUF.parse(printed, []).obj.fd == parsed.obj.fd
    proto2 = 'syntax = "proto2"; package p; message M { required int32 a = 1; optional string b = 2; }'
    again = PROTOBUF.parse(to_text(PROTOBUF.parse(proto2, []).obj.fd), [])
    assert again.obj.fd == PROTOBUF.parse(proto2, []).obj.fd
