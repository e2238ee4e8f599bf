"""Compatibility levels (Confluent's): which earlier versions a new schema is checked against, and in which
direction. BACKWARD: the new schema reads data written with the latest; FORWARD: the latest reads data
written with the new; FULL: both; the ``_TRANSITIVE`` forms check against every live version, not only the
latest; NONE checks nothing."""

from __future__ import annotations

from .types import ParsedSchema, SchemaType

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"


def check_pair(handler: SchemaType, level: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    """What makes ``new`` incompatible with ``old`` under ``level`` (empty when compatible)."""
    if level == "NONE":
        return []
    if new.schema_type != old.schema_type:
        return [f"Incompatible schema type: {new.schema_type} against {old.schema_type}"]
    out: list[str] = []
    if level.startswith(("BACKWARD", "FULL")):
        out += [f"BACKWARD: {m}" for m in handler.compatible(new, old)]
    if level.startswith(("FORWARD", "FULL")):
        out += [f"FORWARD: {m}" for m in handler.compatible(old, new)]
    return out


def check_level(
    handler: SchemaType, level: str, new: ParsedSchema, previous: list[ParsedSchema]
) -> list[str]:
    """``previous``: the subject's live versions, oldest first."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    out: list[str] = []
    for old in reversed(against):
        out += check_pair(handler, level, new, old)
    return out
