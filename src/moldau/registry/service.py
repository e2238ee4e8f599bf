"""``Registry``: the operations of Confluent's REST API over a ``RegistryState`` and a ``KafkaStore``. Each
method returns the JSON body of its answer or raises ``RestError`` with Confluent's status and error code."""

from __future__ import annotations

import json
from typing import Any

from . import records as rec
from .compat import DEFAULT_LEVEL, LEVELS, check_level, check_pair
from .state import RegistryState, Version, identity
from .store import KafkaStore
from .types import Dependency, ParsedSchema, SchemaError, SchemaType, schema_types

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = (1 << 31) - 1
PARSED_CACHE = 10000
CONFIG_FIELDS = (
    "alias",
    "normalize",
    "validateFields",
    "validateRules",
    "compatibilityGroup",
    "defaultMetadata",
    "overrideMetadata",
    "defaultRuleSet",
    "overrideRuleSet",
)


class RestError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def subject_not_found(subject: str) -> RestError:
    return RestError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: Any) -> RestError:
    return RestError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: Any = None) -> RestError:
    return RestError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def invalid_schema(msg: str) -> RestError:
    return RestError(422, 42201, msg)


def parse_version(text: str) -> int:
    """``latest`` and -1 -> -1; 1 .. 2^31-1 as they are; else Confluent's 42202."""
    if text == "latest":
        return -1
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v == -1 or 1 <= v <= MAX_VERSION:
        return v
    raise RestError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. Allowed values are "
        f"between [1, {MAX_VERSION}] and the string \"latest\"",
    )


class Registry:
    def __init__(self, state: RegistryState, store: KafkaStore) -> None:
        self.state = state
        self.store = store
        self.types: dict[str, SchemaType] = schema_types()
        # parsed schemas by (type, text, references): a transitive check parses every earlier version; a
        # referenced version cannot be deleted, so what a reference resolves to does not change under a key
        self._parsed: dict[tuple[str, str, str], ParsedSchema] = {}

    # ------------------------------------------------------------------------------------- helpers
    def _handler(self, schema_type: str) -> SchemaType:
        h = self.types.get(schema_type)
        if h is None:
            raise invalid_schema(f"Invalid schema type {schema_type}; known: {', '.join(sorted(self.types))}")
        return h

    def _deps(self, refs: list[dict[str, Any]], depth: int = 0) -> list[Dependency]:
        if depth > 32:
            raise invalid_schema("Invalid schema: references nested more than 32 deep")
        out = []
        for r in refs:
            if (
                not isinstance(r, dict)
                or not isinstance(r.get("name"), str)
                or not isinstance(r.get("subject"), str)
            ):
                raise invalid_schema(f"Invalid reference {r!r}: needs name, subject and version")
            try:
                version = int(r.get("version", -1))
            except (TypeError, ValueError):
                raise invalid_schema(f"Invalid reference {r!r}: version is not a number") from None
            v = self._version(r["subject"], version, deleted=True, missing_ok=True)
            if v is None:
                raise invalid_schema(
                    f"Invalid schema: reference {r['name']} to subject {r['subject']} version "
                    f"{version} not found"
                )
            out.append(Dependency(r["name"], v.schema, self._deps(v.references, depth + 1)))
        return out

    def parse(self, schema_type: str, text: str, refs: list[dict[str, Any]]) -> ParsedSchema:
        handler = self._handler(schema_type)
        key = (schema_type, text, json.dumps(refs, sort_keys=True))
        got = self._parsed.get(key)
        if got is not None:
            return got
        try:
            got = handler.parse(text, self._deps(refs))
        except SchemaError as e:
            raise invalid_schema(str(e)) from None
        if len(self._parsed) >= PARSED_CACHE:
            self._parsed.clear()
        self._parsed[key] = got
        return got

    @staticmethod
    def _stored_text(parsed: ParsedSchema) -> str:
        """The text a schema is stored and compared as: a Protobuf schema sent as a serialized descriptor is
        kept as ``.proto`` text, as Confluent's registry does (``format=serialized`` gives the descriptor)."""
        if parsed.schema_type == "PROTOBUF" and getattr(parsed.obj, "from_descriptor", False):
            from .types.protobuf import to_text

            return to_text(parsed.obj.fd)
        return parsed.text

    def parse_version_of(self, v: Version) -> ParsedSchema:
        return self.parse(v.schema_type, v.schema, v.references)

    def _version(
        self, subject: str, version: int, deleted: bool = False, missing_ok: bool = False
    ) -> Version | None:
        versions = self.state.subjects.get(subject)
        if version == -1:
            live = self.state.versions(subject, deleted)
            if live:
                return live[-1]
        elif versions and version in versions and (deleted or not versions[version].deleted):
            return versions[version]
        if missing_ok:
            return None
        if not self.state.versions(subject, deleted=deleted):
            raise subject_not_found(subject)
        raise version_not_found(version)

    def level(self, subject: str | None) -> str:
        for key in (subject, None) if subject is not None else (None,):
            c = self.state.configs.get(key)
            if c and c.get("compatibilityLevel"):
                return str(c["compatibilityLevel"])
        return DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def _check_writable(self, subject: str | None, importing: bool = False) -> None:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RestError(
                422,
                42205,
                f"Subject {subject} is in read-only mode" if subject else "The registry is in read-only mode",
            )
        if importing and mode != "IMPORT":
            raise RestError(422, 42205, f"Subject {subject} is not in import mode")

    @staticmethod
    def _schema_body(body: Any) -> tuple[str, str, list[dict[str, Any]], Any, Any]:
        if not isinstance(body, dict):
            raise RestError(422, 42201, "Invalid schema: the request body must be a JSON object")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise invalid_schema("Invalid schema: the 'schema' field is missing or empty")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str):
            raise invalid_schema("Invalid schemaType")
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise invalid_schema("Invalid references: expected an array")
        return text, schema_type.upper(), refs, body.get("metadata"), body.get("ruleSet")

    def _find_in_subject(
        self, subject: str, ident: tuple[str, ...], deleted: bool = False, loose: bool = False
    ) -> Version | None:
        for v in reversed(self.state.versions(subject, deleted)):
            vi = v.identity()
            if vi == ident or (loose and vi[:3] == ident[:3]):
                return v
        return None

    # ------------------------------------------------------------------------------------- subjects
    def list_subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subject_names(deleted) if s.startswith(prefix)]

    def list_versions(self, subject: str, deleted: bool = False) -> list[int]:
        vs = self.state.versions(subject, deleted)
        if not vs:
            raise subject_not_found(subject)
        return [v.version for v in vs]

    def get_version(self, subject: str, version: int, deleted: bool = False) -> Version:
        v = self._version(subject, version, deleted)
        assert v is not None
        return v

    async def register(self, subject: str, body: Any, normalize: bool = False) -> dict[str, Any]:
        text, schema_type, refs, metadata, rule_set = self._schema_body(body)
        import_id = body.get("id")
        import_version = body.get("version")
        wants_import = import_id is not None and import_id != -1
        async with self.store.writing():
            self._check_writable(subject, importing=wants_import)
            parsed = self.parse(schema_type, text, refs)
            text = self._stored_text(parsed)
            ident = identity(schema_type, text, refs, metadata, rule_set)
            same = self._find_in_subject(subject, ident)
            if same is not None and not wants_import:
                return {"id": same.id}
            if self.mode(subject) != "IMPORT":
                live = self.state.versions(subject)
                level = self.level(subject)
                previous = [self.parse_version_of(v) for v in live] if level != "NONE" else []
                msgs = check_level(self._handler(schema_type), level, parsed, previous)
                if msgs:
                    raise RestError(
                        409,
                        409,
                        f"Schema being registered is incompatible with an earlier schema "
                        f"for subject \"{subject}\", details: {msgs}",
                    )
            all_versions = self.state.subjects.get(subject, {})
            if wants_import:
                try:
                    schema_id = int(import_id)
                    version = (
                        int(import_version)
                        if import_version not in (None, -1)
                        else max(all_versions, default=0) + 1
                    )
                except (TypeError, ValueError):
                    raise invalid_schema("Invalid id or version") from None
                holder = self.state.by_id(schema_id)
                if holder is not None and holder.identity()[:3] != ident[:3]:
                    raise RestError(422, 42205, f"Overwrite new schema with id {schema_id} is not permitted.")
            else:
                schema_id = self.state.by_identity.get(ident) or self.state.max_id + 1
                version = max(all_versions, default=0) + 1
            await self.store.write(
                [
                    (
                        rec.schema_key(subject, version),
                        rec.schema_value(
                            subject, version, schema_id, text, schema_type, refs, False, metadata, rule_set
                        ),
                    )
                ]
            )
            return {"id": schema_id}

    def lookup(self, subject: str, body: Any, deleted: bool = False) -> Version:
        text, schema_type, refs, metadata, rule_set = self._schema_body(body)
        if not self.state.versions(subject, deleted):
            raise subject_not_found(subject)
        text = self._stored_text(self.parse(schema_type, text, refs))
        ident = identity(schema_type, text, refs, metadata, rule_set)
        found = self._find_in_subject(subject, ident, deleted, loose=metadata is None and rule_set is None)
        if found is None:
            raise schema_not_found()
        return found

    def _check_unreferenced(self, subject: str, versions: list[Version]) -> None:
        for v in versions:
            if self.state.referenced_by(subject, v.version):
                raise RestError(
                    422,
                    42206,
                    f"One or more references exist to the schema {{subject={subject}, version={v.version}}}.",
                )

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        async with self.store.writing():
            self._check_writable(subject)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if not permanent:
                if not live:
                    raise RestError(
                        404,
                        40404,
                        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                    )
                self._check_unreferenced(subject, live)
                await self.store.write(
                    [
                        (
                            rec.schema_key(subject, v.version),
                            rec.schema_value(
                                subject,
                                v.version,
                                v.id,
                                v.schema,
                                v.schema_type,
                                v.references,
                                True,
                                v.metadata,
                                v.rule_set,
                            ),
                        )
                        for v in live
                    ]
                )
                return [v.version for v in live]
            if live:
                raise RestError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            self._check_unreferenced(subject, every)
            records: list[tuple[bytes, bytes | None]] = [
                (rec.schema_key(subject, v.version), None) for v in every
            ]
            if subject in self.state.configs:
                records.append((rec.config_key(subject), None))
            if subject in self.state.modes:
                records.append((rec.mode_key(subject), None))
            await self.store.write(records)
            return [v.version for v in every]

    async def delete_version(self, subject: str, version: int, permanent: bool = False) -> int:
        async with self.store.writing():
            self._check_writable(subject)
            v = self._version(subject, version, deleted=True)
            assert v is not None
            if version == -1 and permanent:
                raise version_not_found("latest")  # Confluent: permanent deletes name the version
            if not permanent:
                if v.deleted:
                    raise RestError(
                        404,
                        40406,
                        f"Subject '{subject}' Version {v.version} was soft deleted.Set "
                        "permanent=true to delete permanently",
                    )
                self._check_unreferenced(subject, [v])
                await self.store.write(
                    [
                        (
                            rec.schema_key(subject, v.version),
                            rec.schema_value(
                                subject,
                                v.version,
                                v.id,
                                v.schema,
                                v.schema_type,
                                v.references,
                                True,
                                v.metadata,
                                v.rule_set,
                            ),
                        )
                    ]
                )
                return v.version
            if not v.deleted:
                raise RestError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {v.version} was not deleted first before "
                    "being permanently deleted",
                )
            self._check_unreferenced(subject, [v])
            await self.store.write([(rec.schema_key(subject, v.version), None)])
            return v.version

    # ------------------------------------------------------------------------------------- compatibility
    def test_compatibility(self, subject: str, version: int | None, body: Any) -> list[str]:
        text, schema_type, refs, _, _ = self._schema_body(body)
        parsed = self.parse(schema_type, text, refs)
        level = self.level(subject)
        handler = self._handler(schema_type)
        live = self.state.versions(subject)
        if version is None or (version == -1 and not live):  # what a registration would be checked against
            return check_level(handler, level, parsed, [self.parse_version_of(v) for v in live])
        old = self._version(subject, version)
        assert old is not None
        return check_pair(handler, level, parsed, self.parse_version_of(old))

    # ------------------------------------------------------------------------------------- config and mode
    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        c = self.state.configs.get(subject)
        if subject is not None and not c:
            if not default_to_global:
                raise RestError(
                    404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            c = self.state.configs.get(None)
        out = dict(c or {})
        out.setdefault("compatibilityLevel", DEFAULT_LEVEL if subject is None or default_to_global else None)
        return out

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RestError(422, 42203, "Invalid compatibility level: the body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise RestError(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, "
                "full, backward_transitive, forward_transitive, and full_transitive",
            )
        value = {k: body[k] for k in CONFIG_FIELDS if body.get(k) is not None}
        if level is not None:
            value["compatibilityLevel"] = level.upper()
        if not value:
            raise RestError(422, 42203, "Invalid compatibility level: no configuration given")
        async with self.store.writing():
            self._check_writable(subject)
            merged = {**self.state.configs.get(subject, {}), **value}
            await self.store.write([(rec.config_key(subject), rec.encode_value(merged))])
        out = {k: v for k, v in value.items() if k != "compatibilityLevel"}
        if level is not None:
            out["compatibility"] = level.upper()
        return out

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self.store.writing():
            if (
                subject is not None
                and not self.state.versions(subject, deleted=True)
                and subject not in self.state.configs
            ):
                raise subject_not_found(subject)
            old = self.get_config(subject, default_to_global=True)
            if subject in self.state.configs:
                await self.store.write([(rec.config_key(subject), None)])
            return old

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is not None and subject not in self.state.modes:
            if not default_to_global:
                raise RestError(
                    404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
                )
        return {"mode": self.mode(subject)}

    async def set_mode(self, subject: str | None, body: Any, force: bool = False) -> dict[str, Any]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RestError(
                422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT"
            )
        mode = mode.upper()
        async with self.store.writing():
            if mode == "IMPORT" and not force:
                names = self.state.subject_names(deleted=True)
                if (subject is None and names) or (subject is not None and subject in names):
                    raise RestError(422, 42205, "Cannot import since found existing subjects")
            await self.store.write([(rec.mode_key(subject), rec.encode_value({"mode": mode}))])
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        async with self.store.writing():
            if subject not in self.state.modes:
                raise subject_not_found(subject)
            old = self.state.modes[subject]
            await self.store.write([(rec.mode_key(subject), None)])
            return {"mode": old}
