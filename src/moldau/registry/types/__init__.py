"""Schema types: each module parses its schema text (with the schemas its references resolve to) into a
``ParsedSchema`` and says whether a reader schema can read what a writer schema wrote."""

from __future__ import annotations

from .base import Dependency, ParsedSchema, SchemaError, SchemaType

__all__ = ["Dependency", "ParsedSchema", "SchemaError", "SchemaType", "schema_types"]


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
