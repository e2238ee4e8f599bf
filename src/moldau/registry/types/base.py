"""The types every schema type module shares: the parsed form, a resolved reference, the error."""

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
