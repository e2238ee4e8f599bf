"""The console's schema registry pages and decoder (``moldau console --schema-registry URL``): subjects, their
versions, a diff between two versions, compatibility levels, and the ``registry`` decoding of messages in
Confluent's framing (magic byte 0, 4-byte schema id; Avro shown as JSON, JSON Schema values as they are).

The registry is any with Confluent's REST API; it is reached with ``moldau.registry.serde.RegistryClient``
(synchronous, cached), always from a thread (``asyncio.to_thread``) so the console's loop never waits on it.
"""

from __future__ import annotations

import difflib
import io
import json
import struct
import urllib.parse
from typing import Any

__all__ = ["SchemaBrowser"]

_FRAME = struct.Struct(">bI")


def _pretty(schema: str, schema_type: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return schema


class SchemaBrowser:
    def __init__(self, url: str) -> None:
        from moldau.registry.serde import RegistryClient

        self.url = url
        self.client = RegistryClient(url, timeout=10.0)
        self._avro: dict[int, Any] = {}

    def _get(self, path: str) -> Any:
        return self.client._call("GET", path)

    # -- pages (blocking: call from a thread) --------------------------------------------------------
    def subjects(self) -> list[dict[str, Any]]:
        out = []
        default = self._get("/config").get("compatibilityLevel", "BACKWARD")
        for s in sorted(self._get("/subjects")):
            latest = self.client.subject_version(s)
            out.append({"subject": s, "versions": len(self._get(f"/subjects/{_q(s)}/versions")),
                        "latest": latest["version"], "id": latest["id"],
                        "type": latest.get("schemaType", "AVRO"),
                        "compatibility": self.compatibility(s, default)})
        return out

    def compatibility(self, subject: str, default: str | None = None) -> str:
        try:
            return str(self._get(f"/config/{_q(subject)}")["compatibilityLevel"])
        except Exception:  # noqa: BLE001 - 40408: no subject-level config, the global one applies
            return default if default is not None else str(self._get("/config").get("compatibilityLevel"))

    def subject(self, subject: str, a: int | None, b: int | None) -> dict[str, Any]:
        versions = [int(v) for v in self._get(f"/subjects/{_q(subject)}/versions")]
        bodies = {v: self.client.subject_version(subject, v) for v in versions}
        b = b if b in bodies else versions[-1]
        a = a if a in bodies else (versions[-2] if len(versions) > 1 else b)
        rows = [{"version": v, "id": bodies[v]["id"], "type": bodies[v].get("schemaType", "AVRO"),
                 "references": bodies[v].get("references") or [],
                 "compatible": self._compatible(subject, bodies[v], prev) if prev is not None else None}
                for prev, v in zip([None, *versions], versions)]
        texts = {v: _pretty(bodies[v]["schema"], bodies[v].get("schemaType", "AVRO")) for v in (a, b)}
        diff = list(difflib.unified_diff(texts[a].splitlines(), texts[b].splitlines(),
                                         f"version {a}", f"version {b}", lineterm=""))
        return {"subject": subject, "versions": rows, "a": a, "b": b, "schema": texts[b], "diff": diff,
                "compatibility": self.compatibility(subject)}

    def _compatible(self, subject: str, body: dict[str, Any], prev: int) -> bool | None:
        """Whether a version's schema is compatible with the version before it under the subject's level
        (``POST /compatibility/subjects/{s}/versions/{prev}``); None when the registry cannot say."""
        req: dict[str, Any] = {"schema": body["schema"]}
        if body.get("schemaType", "AVRO") != "AVRO":
            req["schemaType"] = body["schemaType"]
        if body.get("references"):
            req["references"] = body["references"]
        try:
            got = self.client._call("POST", f"/compatibility/subjects/{_q(subject)}/versions/{prev}", req)
        except Exception:  # noqa: BLE001
            return None
        return bool(got.get("is_compatible"))

    # -- messages ------------------------------------------------------------------------------------
    def prefetch(self, values: list[bytes | None]) -> None:
        """Fetch (into the client's cache) the schemas of these framed values; errors are left to decode."""
        for data in values:
            if data is not None and len(data) >= 5 and data[0] == 0:
                try:
                    self.client.schema(_FRAME.unpack_from(data)[1])
                except Exception:  # noqa: BLE001 - shown per message by decode()
                    pass

    def decode(self, data: bytes | None) -> str | None:
        """A framed value as text: ``[schema id N] {json}``; what is not framed, or has no schema, says so."""
        if data is None:
            return None
        if len(data) < 5 or data[0] != 0:
            return f"(not in Confluent's framing) {data[:64].hex(' ')}"
        sid = _FRAME.unpack_from(data)[1]
        try:
            body = self.client.schema(sid)
        except Exception as e:  # noqa: BLE001
            return f"[schema id {sid}: not found ({e})] {data[5:69].hex(' ')}"
        stype = body.get("schemaType", "AVRO")
        try:
            if stype == "AVRO":
                import fastavro

                parsed = self._avro.get(sid)
                if parsed is None:
                    parsed = self._avro[sid] = fastavro.parse_schema(json.loads(body["schema"]))
                obj = fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)
                text = json.dumps(obj, indent=2, ensure_ascii=False, default=str)
            elif stype == "JSON":
                text = json.dumps(json.loads(data[5:]), indent=2, ensure_ascii=False)
            else:
                text = f"({stype} payload, {len(data) - 5} bytes) {data[5:69].hex(' ')}"
        except Exception as e:  # noqa: BLE001
            return f"[schema id {sid}, {stype}: does not decode ({e})] {data[5:69].hex(' ')}"
        return f"[schema id {sid}, {stype}]\n{text}"


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")
