"""Protobuf compatibility in moldau's registry: a table of (writer, reader) .proto pairs, each with its
source:
Confluent's documentation of its Protobuf compatibility rules (the ``Difference.Type``s its registry reports)
and the Protobuf language guide ("Updating A Message Type")."""

from __future__ import annotations

import base64

import pytest

from moldau.registry.compat import check_level
from moldau.registry.types import Dependency, SchemaError
from moldau.registry.types.protobuf import PROTOBUF

CF = "Confluent docs, Protobuf compatibility"
GUIDE = "Protobuf language guide, Updating A Message Type"


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
        False,
        f"{CF}: PACKAGE_CHANGED",
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


def test_levels() -> None:
    v1 = PROTOBUF.parse(p3("message M { int32 a = 1; }"), [])
    v2 = PROTOBUF.parse(p3("message M { int32 a = 1; } message Extra { int32 b = 1; }"), [])
    assert check_level(PROTOBUF, "BACKWARD", v2, [v1]) == []  # MESSAGE_ADDED
    assert check_level(PROTOBUF, "FORWARD", v2, [v1]) != []  # seen from v2: MESSAGE_REMOVED


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
