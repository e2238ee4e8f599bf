"""Schema types: each module parses its schema text (with the schemas its references resolve to) into a
``ParsedSchema`` and says whether a reader schema can read what a writer schema wrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class SchemaError(ValueError):
    """The schema text is not a valid schema of its type (Confluent's 42201)."""


@dataclass(slots=True)
class Dependency:
    """A resolved reference: the name the schema uses for it, the referenced schema's text and type, and that
    schema's own resolved references (dependencies first)."""

    name: str
    text: str
    deps: list["Dependency"] = field(default_factory=list)


@dataclass(slots=True)
class ParsedSchema:
    schema_type: str
    text: str
    canonical: str  # the form lookups compare: two texts with equal canonical forms are one schema
    obj: Any  # the type's own parsed form


class SchemaType(Protocol):
    def parse(self, text: str, deps: list[Dependency]) -> ParsedSchema: ...

    def compatible(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Empty when ``reader`` can read data written with ``writer``; else what prevents it."""
        ...


def schema_types() -> dict[str, SchemaType]:
    """The types whose libraries are installed (the ``registry`` extra brings all three)."""
    out: dict[str, SchemaType] = {}
    try:
        import fastavro  # noqa: F401

        from . import avro

        out["AVRO"] = avro.AVRO
    except ImportError:  # pragma: no cover - fastavro is in the registry extra
        pass
    try:
        import jsonschema  # noqa: F401

        from . import json_schema

        out["JSON"] = json_schema.JSON
    except ImportError:  # pragma: no cover - the jsonschema package is in the registry extra
        pass
    try:
        import google.protobuf  # noqa: F401
        import proto_schema_parser  # noqa: F401

        from . import protobuf

        out["PROTOBUF"] = protobuf.PROTOBUF
    except ImportError:  # pragma: no cover - protobuf and proto-schema-parser are in the registry extra
        pass
    return out
