"""``RegistryState``: the registry's in-memory state, built only by applying the records of ``_schemas`` in
offset order (``apply``). Replaying the topic from its start rebuilds it exactly."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from . import records as rec

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Version:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)
    deleted: bool = False
    metadata: Any = None
    rule_set: Any = None

    _identity: tuple[str, str, str, str, str] | None = None

    def identity(self) -> tuple[str, str, str, str, str]:
        """Computed once: lookups compare it against every version of a subject."""
        if self._identity is None:
            self._identity = identity(
                self.schema_type, self.schema, self.references, self.metadata, self.rule_set
            )
        return self._identity

    def body(self, with_subject: bool = True) -> dict[str, Any]:
        """Confluent's ``Schema`` JSON (GET /subjects/{s}/versions/{v} and friends)."""
        out: dict[str, Any] = {}
        if with_subject:
            out["subject"] = self.subject
            out["version"] = self.version
        out["id"] = self.id
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set
        out["schema"] = self.schema
        return out


def _norm_text(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text.strip()


def identity(
    schema_type: str, text: str, references: list[dict[str, Any]], metadata: Any, rule_set: Any
) -> tuple[str, str, str, str, str]:
    """What makes two registrations one schema (one id): the type, the text (for JSON texts: whitespace and
    member order aside), the references, metadata and rule set."""
    return (
        schema_type,
        _norm_text(text),
        json.dumps(references or [], sort_keys=True),
        json.dumps(metadata, sort_keys=True),
        json.dumps(rule_set, sort_keys=True),
    )


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.ids: dict[int, set[tuple[str, int]]] = {}  # id -> the (subject, version)s that use it
        self.by_identity: dict[tuple[str, str, str, str, str], int] = {}
        self.applied_offset = -1

    # ------------------------------------------------------------------------------------------ apply
    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None, offset: int = -1) -> None:
        try:
            key = rec.decode(key_bytes)
            value = rec.decode(value_bytes)
            if not isinstance(key, dict):
                raise ValueError("key is not an object")
            self._apply(key, value)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("_schemas offset %d: record skipped (%s): key=%r", offset, e, key_bytes)
        if offset >= 0:
            self.applied_offset = offset

    def _apply(self, key: dict[str, Any], value: Any) -> None:
        kt = key.get("keytype")
        if kt == rec.SCHEMA:
            subject, version = str(key["subject"]), int(key["version"])
            if value is None:
                self._remove(subject, version)
                return
            v = Version(
                subject=str(value.get("subject", subject)),
                version=int(value.get("version", version)),
                id=int(value["id"]),
                schema=str(value["schema"]),
                schema_type=str(value.get("schemaType") or "AVRO"),
                references=list(value.get("references") or []),
                deleted=bool(value.get("deleted")),
                metadata=value.get("metadata"),
                rule_set=value.get("ruleSet"),
            )
            self._remove(subject, version)
            self.subjects.setdefault(subject, {})[version] = v
            self.ids.setdefault(v.id, set()).add((subject, version))
            self.by_identity.setdefault(v.identity(), v.id)
            self.max_id = max(self.max_id, v.id)
        elif kt == rec.CONFIG:
            sub = key.get("subject")
            if value is None:
                self.configs.pop(sub, None)
            else:
                self.configs[sub] = dict(value)
        elif kt == rec.MODE:
            sub = key.get("subject")
            if value is None:
                self.modes.pop(sub, None)
            else:
                self.modes[sub] = str(value["mode"])
        elif kt == rec.DELETE_SUBJECT:
            if value is None:
                return
            subject = str(value.get("subject", key.get("subject")))
            upto = int(value.get("version", 1 << 31))
            for v in self.subjects.get(subject, {}).values():
                if v.version <= upto:
                    v.deleted = True
        elif kt == rec.CLEAR_SUBJECT:
            if value is None:
                return
            subject = str(value.get("subject", key.get("subject")))
            for v in [v for v in self.subjects.get(subject, {}).values() if v.deleted]:
                self._remove(subject, v.version)
        elif kt == rec.NOOP or kt in rec.KEY_TYPES:
            return
        else:
            # CONTEXT and key types of newer registries: nothing this registry keeps
            log.debug("_schemas: key type %r ignored", kt)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if not versions or version not in versions:
            return
        old = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        users = self.ids.get(old.id)
        if users is not None:
            users.discard((subject, version))
            if not users:
                del self.ids[old.id]
                ident = old.identity()
                if self.by_identity.get(ident) == old.id:
                    del self.by_identity[ident]

    # ------------------------------------------------------------------------------------------ reads
    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        return sorted(
            (v for v in self.subjects.get(subject, {}).values() if deleted or not v.deleted),
            key=lambda v: v.version,
        )

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def by_id(self, schema_id: int) -> Version | None:
        users = self.ids.get(schema_id)
        if not users:
            return None
        found = [self.subjects[s][v] for s, v in users]
        found.sort(key=lambda v: (v.deleted, v.subject, v.version))
        return found[0]

    def users_of(self, schema_id: int, deleted: bool = False) -> list[Version]:
        out = [self.subjects[s][v] for s, v in self.ids.get(schema_id, ())]
        return sorted((v for v in out if deleted or not v.deleted), key=lambda v: (v.subject, v.version))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        ids: set[int] = set()
        for versions in self.subjects.values():
            for v in versions.values():
                if v.deleted:
                    continue
                for r in v.references:
                    if r.get("subject") == subject and int(r.get("version", -1)) == version:
                        ids.add(v.id)
        return sorted(ids)
