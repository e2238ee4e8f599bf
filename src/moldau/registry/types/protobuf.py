"""PROTOBUF: ``.proto`` text (parsed with proto-schema-parser) or a serialized ``FileDescriptorProto`` in
base64 (what confluent-kafka's Python serializer registers), both turned into a ``FileDescriptorProto`` (the
protobuf package's) on which compatibility is decided; imports are references, named by their import path; the
well-known types (``google/protobuf/*.proto``) resolve without references.

Compatibility follows Confluent's Protobuf rules (its ``Difference.Type``s and ``SchemaDiff``): going from
the original (writer) schema to the update (reader), a removed message, a field whose kind (scalar or message;
an enum counts as a scalar), scalar type (outside the wire-compatible groups, enums with int32/uint32/int64/
uint64/bool) or message type changed, a required field added or removed, a field removed from a oneof, a field
moved into an existing oneof or several fields moved into a new one are incompatible; a changed package
(messages are matched by their names within the package), added messages, added and removed fields, renamed
fields, enum changes and new oneofs are compatible.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from .base import Dependency, ParsedSchema, SchemaError

_SCALARS = {
    "double": 1,
    "float": 2,
    "int64": 3,
    "uint64": 4,
    "int32": 5,
    "fixed64": 6,
    "fixed32": 7,
    "bool": 8,
    "string": 9,
    "bytes": 12,
    "uint32": 13,
    "sfixed32": 15,
    "sfixed64": 16,
    "sint32": 17,
    "sint64": 18,
}
TYPE_GROUP, TYPE_MESSAGE, TYPE_ENUM = 10, 11, 14
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3
# Protobuf language guide, "Updating A Message Type": int32, uint32, int64, uint64 and bool are compatible;
# sint32 and sint64 with each other; string and bytes (valid UTF-8); fixed32 with sfixed32, fixed64 with
# sfixed64
_COMPATIBLE_SCALARS = [
    frozenset((5, 13, 3, 4, 8, TYPE_ENUM)),  # Confluent's FieldSchemaDiff: an enum is a general number
    frozenset((17, 18)),
    frozenset((9, 12)),
    frozenset((7, 15)),
    frozenset((6, 16)),
]


@dataclass(slots=True)
class ProtoSchema:
    fd: Any  # google.protobuf.descriptor_pb2.FileDescriptorProto
    deps: dict[str, Any]  # import path -> FileDescriptorProto
    from_descriptor: bool = False  # registered as a base64 descriptor, not as .proto text

    def serialized(self) -> str:
        return base64.b64encode(self.fd.SerializeToString(deterministic=True)).decode()


def _well_known(path: str) -> Any | None:
    if not path.startswith("google/protobuf/"):
        return None
    import importlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    mod = path[len("google/protobuf/") :].removesuffix(".proto") + "_pb2"
    try:
        importlib.import_module(f"google.protobuf.{mod}")
        fd = descriptor_pool.Default().FindFileByName(path)
    except (ImportError, KeyError):
        return None
    out = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(out)
    return out


def _from_base64(text: str) -> Any | None:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if not stripped or any(c in stripped for c in " ;{\n"):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    fd = descriptor_pb2.FileDescriptorProto()
    try:
        fd.ParseFromString(raw)
    except DecodeError:
        return None
    return fd if fd.message_type or fd.enum_type or fd.package or fd.name else None


class _Names:
    """Full names (``.pkg.Outer.Inner``) of the messages and enums a file can see, for scope resolution."""

    def __init__(self) -> None:
        self.kinds: dict[str, int] = {}

    def add_file(self, fd: Any) -> None:
        prefix = f".{fd.package}" if fd.package else ""
        for m in fd.message_type:
            self._add_message(m, prefix)
        for e in fd.enum_type:
            self.kinds[f"{prefix}.{e.name}"] = TYPE_ENUM

    def _add_message(self, m: Any, prefix: str) -> None:
        full = f"{prefix}.{m.name}"
        self.kinds[full] = TYPE_MESSAGE
        for n in m.nested_type:
            self._add_message(n, full)
        for e in m.enum_type:
            self.kinds[f"{full}.{e.name}"] = TYPE_ENUM

    def resolve(self, name: str, scope: str) -> str | None:
        """Protobuf's rule: the innermost scope first, then outwards."""
        if name.startswith("."):
            return name if name in self.kinds else None
        parts = scope.split(".") if scope else []
        while True:
            cand = ".".join(parts + [name])
            cand = cand if cand.startswith(".") else "." + cand
            if cand in self.kinds:
                return cand
            if not parts or parts == [""]:
                return None
            parts = parts[:-1]


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _from_text(text: str, deps: dict[str, Any], file_name: str) -> Any:
    from antlr4.error.ErrorListener import ErrorListener
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    class _Raise(ErrorListener):
        def syntaxError(self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any) -> None:
            raise SchemaError(f"Invalid Protobuf schema: line {line}:{column}: {msg}")

    def strict(obj: Any) -> None:  # ANTLR prints syntax errors and recovers by default
        obj.removeErrorListeners()
        obj.addErrorListener(_Raise())

    try:
        tree = Parser(setup_lexer=strict, setup_parser=strict).parse(text)
    except SchemaError:
        raise
    except Exception as e:  # the parser's own errors have no common base class
        raise SchemaError(f"Invalid Protobuf schema: {e}") from None
    fd = descriptor_pb2.FileDescriptorProto(name=file_name, syntax=tree.syntax or "proto2")
    for el in tree.file_elements:
        if isinstance(el, ast.Package):
            fd.package = el.name
        elif isinstance(el, ast.Import):
            fd.dependency.append(el.name)
        elif isinstance(el, ast.Option):
            _set_option(fd.options, el)
    for imp in fd.dependency:
        if imp not in deps:
            wk = _well_known(imp)
            if wk is None:
                raise SchemaError(f"Invalid Protobuf schema: import {imp!r} has no reference")
            deps[imp] = wk
    # first the declarations (names), then the fields (which resolve names)
    pending: list[tuple[Any, Any, str]] = []

    def declare(msg_ast: Any, out: Any, scope: str) -> None:
        out.name = msg_ast.name
        full = f"{scope}.{msg_ast.name}"
        for el in msg_ast.elements:
            if isinstance(el, ast.Message):
                declare(el, out.nested_type.add(), full)
            elif isinstance(el, ast.Enum):
                enum(el, out.enum_type.add())
        pending.append((msg_ast, out, full))

    def enum(enum_ast: Any, out: Any) -> None:
        out.name = enum_ast.name
        for v in enum_ast.elements:
            if isinstance(v, ast.EnumValue):
                out.value.add(name=v.name, number=int(v.number))

    prefix = f".{fd.package}" if fd.package else ""
    for el in tree.file_elements:
        if isinstance(el, ast.Message):
            declare(el, fd.message_type.add(), prefix)
        elif isinstance(el, ast.Enum):
            enum(el, fd.enum_type.add())
    names = _Names()
    names.add_file(fd)
    for d in deps.values():
        names.add_file(d)
    proto3 = fd.syntax == "proto3"

    def field(f_ast: Any, out: Any, scope: str, oneof: int | None) -> None:
        fp = out.field.add(name=f_ast.name, number=int(f_ast.number), json_name=_json_name(f_ast.name))
        card = getattr(f_ast, "cardinality", None)
        card = card.value if card is not None else None
        fp.label = {"REPEATED": LABEL_REPEATED, "REQUIRED": LABEL_REQUIRED}.get(card or "", LABEL_OPTIONAL)
        if card == "OPTIONAL" and proto3 and oneof is None:
            fp.proto3_optional = True
            synth = out.oneof_decl.add(name=f"_{f_ast.name}")
            fp.oneof_index = len(out.oneof_decl) - 1
            del synth
        if oneof is not None:
            fp.oneof_index = oneof
        for opt in getattr(f_ast, "options", None) or []:
            _set_option(fp.options, opt)
        t = f_ast.type
        if t in _SCALARS:
            fp.type = _SCALARS[t]
        else:
            full = names.resolve(t, scope)
            if full is None:
                raise SchemaError(f"Invalid Protobuf schema: unknown type {t!r} in {scope[1:]}")
            fp.type = names.kinds[full]
            fp.type_name = full

    for msg_ast, out, full in pending:
        for el in msg_ast.elements:
            if isinstance(el, ast.Field):
                field(el, out, full, None)
            elif isinstance(el, ast.OneOf):
                out.oneof_decl.add(name=el.name)
                idx = len(out.oneof_decl) - 1
                for f in el.elements:
                    if isinstance(f, ast.Field):
                        field(f, out, full, idx)
            elif isinstance(el, ast.MapField):
                entry = out.nested_type.add(name=_camel(el.name) + "Entry")
                entry.options.map_entry = True
                names.kinds[f"{full}.{entry.name}"] = TYPE_MESSAGE
                for n, (fname, t) in enumerate((("key", el.key_type), ("value", el.value_type)), 1):
                    fake = ast.Field(name=fname, number=n, type=t, cardinality=None, options=[])
                    field(fake, entry, f"{full}.{entry.name}", None)
                mf = out.field.add(
                    name=el.name,
                    number=int(el.number),
                    label=LABEL_REPEATED,
                    type=TYPE_MESSAGE,
                    type_name=f"{full}.{entry.name}",
                    json_name=_json_name(el.name),
                )
                del mf
    return fd


def _set_option(options: Any, opt: Any) -> None:
    """A standard option (``java_package``, ``deprecated``, ...) onto its options message; custom options
    (``(name)``) and unknown names are left out."""
    name = str(opt.name)
    field = options.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        return
    value = opt.value
    try:
        if field.enum_type is not None:
            v = field.enum_type.values_by_name.get(getattr(value, "name", str(value)))
            if v is not None:
                setattr(options, name, v.number)
        elif field.type == field.TYPE_BOOL:
            setattr(options, name, value is True or str(value) == "true")
        else:
            setattr(options, name, value)
    except (TypeError, ValueError):
        return


def _option_value(field: Any, value: Any) -> str:
    if field.enum_type is not None:
        return str(field.enum_type.values_by_number[value].name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _option_list(options: Any) -> list[str]:
    return [f"{f.name} = {_option_value(f, v)}" for f, v in options.ListFields() if f.name != "map_entry"]


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _load(text: str, deps: list[Dependency], file_name: str = "schema.proto") -> ProtoSchema:
    dep_fds: dict[str, Any] = {}
    for d in deps:
        sub = _load(d.text, d.deps, d.name)
        dep_fds.update(sub.deps)
        dep_fds[d.name] = sub.fd
    fd = _from_base64(text)
    if fd is None:
        fd = _from_text(text, dep_fds, file_name)
        return ProtoSchema(fd, dep_fds)
    else:
        for imp in fd.dependency:
            if imp not in dep_fds:
                wk = _well_known(imp)
                if wk is None:
                    raise SchemaError(f"Invalid Protobuf schema: import {imp!r} has no reference")
                dep_fds[imp] = wk
    return ProtoSchema(fd, dep_fds, from_descriptor=True)


class _Protobuf:
    def parse(self, text: str, deps: list[Dependency]) -> ParsedSchema:
        ps = _load(text, deps)
        canonical = ps.serialized()
        return ParsedSchema("PROTOBUF", text, canonical, ps)

    def compatible(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return compare(writer.obj, reader.obj)


PROTOBUF = _Protobuf()


def _messages(fd: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    prefix = f".{fd.package}" if fd.package else ""

    def walk(m: Any, scope: str) -> None:
        full = f"{scope}.{m.name}"
        out[full] = m
        for n in m.nested_type:
            walk(n, full)

    for m in fd.message_type:
        walk(m, prefix)
    return out


def _kind(f: Any) -> str:
    """Confluent's field kinds: an enum counts as a scalar (its values are varints, as int32's)."""
    return {TYPE_MESSAGE: "message", TYPE_GROUP: "message"}.get(f.type, "scalar")


def _real_oneof(m: Any, f: Any) -> str | None:
    if not f.HasField("oneof_index") or f.proto3_optional:
        return None
    return str(m.oneof_decl[f.oneof_index].name)


def _strip(name: str, package: str) -> str:
    """A fully qualified name (``.pkg.M.N``) without its package (``.M.N``)."""
    prefix = f".{package}." if package else ""
    return name[len(prefix) - 1 :] if prefix and name.startswith(prefix) else name


def _local(messages: dict[str, Any], package: str) -> dict[str, Any]:
    return {_strip(k, package): v for k, v in messages.items()}


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def compare(original: ProtoSchema, update: ProtoSchema) -> list[str]:
    """Confluent's incompatible differences from ``original`` (the writer) to ``update`` (the reader)."""
    out: list[str] = []
    o, u = original.fd, update.fd
    # messages are matched by their names within their package: a changed package is compatible (Confluent's
    # SchemaDiff counts PACKAGE_CHANGED among its compatible changes)
    om, um = _local(_messages(o), o.package), _local(_messages(u), u.package)
    for name, m in om.items():  # a map's entry message too: its key and value types are compared
        n = um.get(name)
        if n is None:
            out.append(f"MESSAGE_REMOVED: {name[1:]}")
            continue
        ofields = {f.number: f for f in m.field}
        ufields = {f.number: f for f in n.field}
        o_oneofs = {str(d.name) for d in m.oneof_decl}
        moved_to_new: dict[str, int] = {}
        for num, f in ofields.items():
            g = ufields.get(num)
            where = f"{name[1:]}.{f.name} ({num})"
            if g is None:
                if _real_oneof(m, f) is not None:
                    out.append(f"ONEOF_FIELD_REMOVED: {where}")
                elif f.label == LABEL_REQUIRED:
                    out.append(f"REQUIRED_FIELD_REMOVED: {where}")
                continue  # FIELD_REMOVED is compatible
            if _kind(f) != _kind(g):
                out.append(f"FIELD_KIND_CHANGED: {where}: {_kind(f)} -> {_kind(g)}")
            elif (
                _kind(f) == "scalar"
                and f.type != g.type
                and not any(f.type in grp and g.type in grp for grp in _COMPATIBLE_SCALARS)
            ):
                out.append(f"FIELD_SCALAR_KIND_CHANGED: {where}")
            elif (
                _kind(f) != "scalar"
                and _short(f.type_name) != _short(g.type_name)
                and not _map_entries_match(
                    om.get(_strip(f.type_name, o.package)), um.get(_strip(g.type_name, u.package))
                )
            ):
                out.append(f"FIELD_NAMED_TYPE_CHANGED: {where}: {f.type_name[1:]} -> {g.type_name[1:]}")
            if (
                (f.label == LABEL_REPEATED) != (g.label == LABEL_REPEATED)
                and _kind(f) != "message"
                and f.type not in (9, 12)
            ):
                out.append(f"FIELD_NUMERIC_LABEL_CHANGED: {where}")
            if (f.label == LABEL_REQUIRED) != (g.label == LABEL_REQUIRED):
                out.append(
                    f"{'REQUIRED_FIELD_ADDED' if g.label == LABEL_REQUIRED else 'REQUIRED_FIELD_REMOVED'}:"
                    f" {where}"
                )
            of, uf = _real_oneof(m, f), _real_oneof(n, g)
            if of is None and uf is not None:
                if uf in o_oneofs:
                    out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {where} -> {uf}")
                else:
                    moved_to_new[uf] = moved_to_new.get(uf, 0) + 1
        for oneof, count in moved_to_new.items():
            if count > 1:
                out.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name[1:]}.{oneof}")
        for num, g in ufields.items():
            if num not in ofields and g.label == LABEL_REQUIRED:
                out.append(f"REQUIRED_FIELD_ADDED: {name[1:]}.{g.name} ({num})")
    return out


def _map_entries_match(a: Any, b: Any) -> bool:
    """Two map fields (their generated entries' names follow the field names) with the same key and value."""
    if a is None or b is None or not (a.options.map_entry and b.options.map_entry):
        return False
    return [(f.number, f.type, _short(f.type_name)) for f in a.field] == [
        (f.number, f.type, _short(f.type_name)) for f in b.field
    ]


# ---------------------------------------------------------------------------------------------- printing
_SCALAR_NAMES = {v: k for k, v in _SCALARS.items()}


def to_text(fd: Any) -> str:
    """A ``FileDescriptorProto`` as ``.proto`` text (what Confluent's registry stores and answers for a schema
    registered as a serialized descriptor): syntax, package, imports, messages (nested types, maps, oneofs,
    proto3 ``optional``), enums. Standard file and field options are printed, custom ones not."""
    lines = [f'syntax = "{fd.syntax or "proto2"}";']
    if fd.package:
        lines.append(f"package {fd.package};")
    if fd.dependency:
        lines.append("")
        lines += [f'import "{d}";' for d in fd.dependency]
    opts = _option_list(fd.options)
    if opts:
        lines.append("")
        lines += [f"option {o};" for o in opts]
    prefix = f".{fd.package}" if fd.package else ""
    for m in fd.message_type:
        lines.append("")
        _print_message(m, lines, 0, prefix, fd.syntax == "proto3")
    for e in fd.enum_type:
        lines.append("")
        _print_enum(e, lines, 0)
    return "\n".join(lines) + "\n"


def _type_ref(f: Any, scope: str) -> str:  # noqa: ARG001 - the scope is where the reference stands
    if f.type in _SCALAR_NAMES:
        return _SCALAR_NAMES[f.type]
    name = str(f.type_name)
    return name if name.startswith(".") else "." + name  # fully qualified: no scope to resolve again


def _print_enum(e: Any, lines: list[str], depth: int) -> None:
    ind = "  " * depth
    lines.append(f"{ind}enum {e.name} {{")
    for v in e.value:
        lines.append(f"{ind}  {v.name} = {v.number};")
    lines.append(f"{ind}}}")


def _print_message(m: Any, lines: list[str], depth: int, scope: str, proto3: bool) -> None:
    ind = "  " * depth
    full = f"{scope}.{m.name}"
    lines.append(f"{ind}message {m.name} {{")
    entries = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
    oneof_done: set[int] = set()

    def field_line(f: Any, pad: str, in_oneof: bool) -> str:
        entry = entries.get(f.type_name) if f.type == TYPE_MESSAGE else None
        if entry is not None:
            k, v = entry.field[0], entry.field[1]
            return f"{pad}map<{_type_ref(k, full)}, {_type_ref(v, full)}> {f.name} = {f.number};"
        label = ""
        if f.label == LABEL_REPEATED:
            label = "repeated "
        elif f.label == LABEL_REQUIRED:
            label = "required "
        elif f.proto3_optional or (not proto3 and not in_oneof):
            label = "optional "
        opts = _option_list(f.options)
        suffix = f" [{', '.join(opts)}]" if opts else ""
        return f"{pad}{label}{_type_ref(f, full)} {f.name} = {f.number}{suffix};"

    for f in m.field:
        real_oneof = f.HasField("oneof_index") and not f.proto3_optional
        if real_oneof:
            idx = f.oneof_index
            if idx in oneof_done:
                continue
            oneof_done.add(idx)
            lines.append(f"{ind}  oneof {m.oneof_decl[idx].name} {{")
            for g in m.field:
                if g.HasField("oneof_index") and g.oneof_index == idx and not g.proto3_optional:
                    lines.append(field_line(g, ind + "    ", True))
            lines.append(f"{ind}  }}")
        else:
            lines.append(field_line(f, ind + "  ", False))
    for n in m.nested_type:
        if not n.options.map_entry:
            _print_message(n, lines, depth + 1, full, proto3)
    for e in m.enum_type:
        _print_enum(e, lines, depth + 1)
    lines.append(f"{ind}}}")
