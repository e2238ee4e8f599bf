"""The records of the ``_schemas`` topic, in Confluent Schema Registry's formats.

A key is a JSON object with ``keytype`` and ``magic`` (Confluent's ``SchemaRegistryKey`` classes):

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` -> a ``SchemaValue``: ``subject``, ``version``,
  ``id``, ``schema``, ``schemaType`` (absent for AVRO), ``references``, ``deleted``, ``metadata``,
  ``ruleSet``;
* ``{"keytype":"CONFIG","subject":S|null,"magic":0}`` -> ``{"compatibilityLevel": ..., ...}``;
* ``{"keytype":"MODE","subject":S|null,"magic":0}`` -> ``{"mode": ...}``;
* ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S,"version":V}`` (a soft delete of
  every version up to V);
* ``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S}`` (permanent removal of the
  soft-deleted versions);
* ``{"keytype":"NOOP","magic":0}`` -> null (a marker the reader skips).

A null value (a tombstone) removes what the key names. Keys are written with the field order Confluent's
registry uses, so that compaction merges records for the same key whichever registry wrote them.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def clear_subject_key(subject: str) -> bytes:
    return _dump({"keytype": CLEAR_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def schema_value(
    subject: str,
    version: int,
    schema_id: int,
    schema: str,
    schema_type: str,
    references: list[dict[str, Any]],
    deleted: bool,
    metadata: Any = None,
    rule_set: Any = None,
) -> bytes:
    v: dict[str, Any] = {
        "subject": subject,
        "version": version,
        "id": schema_id,
        "schema": schema,
        "deleted": deleted,
    }
    if schema_type != "AVRO":
        v["schemaType"] = schema_type
    if references:
        v["references"] = references
    if metadata is not None:
        v["metadata"] = metadata
    if rule_set is not None:
        v["ruleSet"] = rule_set
    return _dump(v)


def encode_value(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else _dump(value)


def decode(data: bytes | None) -> Any:
    """A key or value as JSON (None for a tombstone); ValueError when it is not JSON."""
    if data is None:
        return None
    return json.loads(bytes(data).decode("utf-8"))
