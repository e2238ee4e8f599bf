"""Confluent's wire format for the moldau client: ``AvroSerializer`` / ``AvroDeserializer``,
``JsonSerializer`` / ``JsonDeserializer`` (JSON Schema) and ``ProtobufSerializer`` / ``ProtobufDeserializer``
over a small synchronous registry client
(``RegistryClient``), for any registry with Confluent's REST API.

A framed value is the magic byte 0, the schema id as a 4-byte big-endian integer, then the Avro binary
encoding. They plug into the moldau client's ``value.serializer`` / ``value.deserializer`` (or keys)::

    client = RegistryClient("http://127.0.0.1:8081")
    ser = AvroSerializer(client, schema, topic="orders")
    producer = Producer(bootstrap_servers="...", value_serializer=ser)
    consumer = Consumer("orders", bootstrap_servers="...", value_deserializer=AvroDeserializer(client))

Subjects follow Confluent's TopicNameStrategy (``<topic>-value``, ``<topic>-key``) unless ``subject`` is
given.
Schemas with references are not handled here yet.
"""

from __future__ import annotations

import base64
import io
import json
import ssl
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MAGIC = 0
_FRAME = struct.Struct(">bI")
CT = "application/vnd.schemaregistry.v1+json"


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, error {code})")
        self.status = status
        self.code = code


class RegistryClient:
    """A synchronous client of Confluent's REST API with the caches a serializer needs (schema -> id per
    subject, id -> schema); thread-safe."""

    def __init__(
        self, url: str, *, user: str | None = None, ca: str | None = None, timeout: float = 30.0
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Content-Type": CT, "Accept": CT}
        if user:
            self._headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        self._ssl = ssl.create_default_context(cafile=ca) if ca else None
        self._ids: dict[tuple[str, str, str], int] = {}
        self._by_id: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())
            except ValueError:
                err = {}
            raise RegistryError(
                e.code, int(err.get("error_code", e.code)), str(err.get("message", e.reason))
            ) from None

    def register(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: list[dict[str, Any]] | None = None,
    ) -> int:
        key = (subject, schema_type, schema)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        sid = int(
            self._call("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)["id"]
        )
        with self._lock:
            self._ids[key] = sid
        return sid

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        key = (subject, schema_type, schema)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        sid = int(self._call("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}", body)["id"])
        with self._lock:
            self._ids[key] = sid
        return sid

    def latest_version(self, subject: str) -> int:
        return int(
            self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest")["version"]
        )

    def subject_version(self, subject: str, version: str | int = "latest") -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}``'s body (``subject``, ``version``, ``id``,
        ``schema``, ``schemaType``, ``references``); not cached (``latest`` moves)."""
        return dict(
            self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}")
        )

    def schema(self, schema_id: int) -> dict[str, Any]:
        """``GET /schemas/ids/{id}``'s body (``schema``, ``schemaType``, ``references``), cached."""
        with self._lock:
            got = self._by_id.get(schema_id)
        if got is None:
            got = self._call("GET", f"/schemas/ids/{schema_id}")
            with self._lock:
                self._by_id[schema_id] = got
        return got


class AvroSerializer:
    """``obj -> bytes`` in Confluent's framing. ``auto_register`` (default) registers the schema under the
    subject on first use; otherwise it must be registered already (a lookup)."""

    def __init__(
        self,
        client: RegistryClient,
        schema: str,
        *,
        topic: str | None = None,
        subject: str | None = None,
        is_key: bool = False,
        auto_register: bool = True,
    ) -> None:
        import fastavro

        if subject is None:
            if topic is None:
                raise ValueError("AvroSerializer needs a topic (TopicNameStrategy) or a subject")
            subject = f"{topic}-{'key' if is_key else 'value'}"
        self.client = client
        self.subject = subject
        self.schema_text = schema
        self.parsed = fastavro.parse_schema(json.loads(schema))
        self.auto_register = auto_register
        self._header: bytes | None = None
        self._write = fastavro.schemaless_writer

    def header(self) -> bytes:
        if self._header is None:
            sid = (self.client.register if self.auto_register else self.client.lookup)(
                self.subject, self.schema_text
            )
            self._header = _FRAME.pack(MAGIC, sid)
        return self._header

    def __call__(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        buf = io.BytesIO()
        buf.write(self.header())
        self._write(buf, self.parsed, obj)
        return buf.getvalue()


class AvroDeserializer:
    """``bytes -> obj``: the writer's schema fetched by the id in the frame (cached), read with
    ``reader_schema`` when given (Avro's schema resolution: defaults fill fields the writer lacked)."""

    def __init__(self, client: RegistryClient, reader_schema: str | None = None) -> None:
        import fastavro

        self.client = client
        self.reader = fastavro.parse_schema(json.loads(reader_schema)) if reader_schema else None
        self._writers: dict[int, Any] = {}
        self._parse = fastavro.parse_schema
        self._read = fastavro.schemaless_reader

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 5 or data[0] != MAGIC:
            raise ValueError("not a Confluent-framed value (magic byte 0 and a 4-byte schema id)")
        _, sid = _FRAME.unpack_from(data)
        writer = self._writers.get(sid)
        if writer is None:
            body = self.client.schema(sid)
            if body.get("schemaType", "AVRO") != "AVRO":
                raise ValueError(f"schema {sid} is {body.get('schemaType')}, not AVRO")
            writer = self._writers[sid] = self._parse(json.loads(body["schema"]))
        buf = io.BytesIO(memoryview(data)[5:])
        if self.reader is None:
            return self._read(buf, writer)
        return self._read(buf, writer, self.reader)


class JsonSerializer:
    """``obj -> bytes`` in Confluent's framing for JSON Schema: the header, then the JSON text (UTF-8),
    validated against the schema first (``validate=False`` skips it), as confluent-kafka's JSONSerializer."""

    def __init__(
        self,
        client: RegistryClient,
        schema: str,
        *,
        topic: str | None = None,
        subject: str | None = None,
        is_key: bool = False,
        auto_register: bool = True,
        validate: bool = True,
    ) -> None:
        from jsonschema.validators import validator_for

        if subject is None:
            if topic is None:
                raise ValueError("JsonSerializer needs a topic (TopicNameStrategy) or a subject")
            subject = f"{topic}-{'key' if is_key else 'value'}"
        self.client = client
        self.subject = subject
        self.schema_text = schema
        doc = json.loads(schema)
        self.validator = validator_for(doc)(doc) if validate else None
        self.auto_register = auto_register
        self._header: bytes | None = None

    def header(self) -> bytes:
        if self._header is None:
            fn = self.client.register if self.auto_register else self.client.lookup
            self._header = _FRAME.pack(MAGIC, fn(self.subject, self.schema_text, "JSON"))
        return self._header

    def __call__(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if self.validator is not None:
            self.validator.validate(obj)  # jsonschema.ValidationError when it does not conform
        return self.header() + json.dumps(obj, separators=(",", ":")).encode()


class JsonDeserializer:
    """``bytes -> obj``: the JSON after the header, validated against the writer's schema (fetched by id,
    cached) unless ``validate=False``."""

    def __init__(self, client: RegistryClient, *, validate: bool = True) -> None:
        self.client = client
        self.validate = validate
        self._validators: dict[int, Any] = {}

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 5 or data[0] != MAGIC:
            raise ValueError("not a Confluent-framed value (magic byte 0 and a 4-byte schema id)")
        _, sid = _FRAME.unpack_from(data)
        obj = json.loads(bytes(memoryview(data)[5:]))
        if self.validate:
            v = self._validators.get(sid)
            if v is None:
                from jsonschema.validators import validator_for

                body = self.client.schema(sid)
                if body.get("schemaType") != "JSON":
                    raise ValueError(f"schema {sid} is {body.get('schemaType', 'AVRO')}, not JSON")
                doc = json.loads(body["schema"])
                v = self._validators[sid] = validator_for(doc)(doc)
            v.validate(obj)
        return obj


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_zigzag_varint(data: memoryview, pos: int) -> tuple[int, int]:
    shift = z = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated message indexes")
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("message index varint too long")


def message_indexes(descriptor: Any) -> list[int]:
    """The path of a message type in its file (Confluent's message indexes): [i] for the file's i-th message,
    [i, j] for the j-th nested in it, ..."""
    path: list[int] = []
    d = descriptor
    while d.containing_type is not None:
        path.append(list(d.containing_type.nested_types).index(d))
        d = d.containing_type
    path.append(list(d.file.message_types_by_name.values()).index(d))
    return path[::-1]


class ProtobufSerializer:
    """``message -> bytes`` in Confluent's framing for Protobuf: the header, the message indexes (zig-zag
    varints; ``[0]`` as one 0 byte), then the message. The schema registered is the message's file as a base64
    ``FileDescriptorProto``; its imports are registered first under their file names and referenced
    (``google/protobuf/*`` well-known files are not: every registry knows them), as confluent-kafka does."""

    def __init__(
        self,
        client: RegistryClient,
        message_class: Any,
        *,
        topic: str | None = None,
        subject: str | None = None,
        is_key: bool = False,
        auto_register: bool = True,
    ) -> None:
        if subject is None:
            if topic is None:
                raise ValueError("ProtobufSerializer needs a topic (TopicNameStrategy) or a subject")
            subject = f"{topic}-{'key' if is_key else 'value'}"
        self.client = client
        self.subject = subject
        self.message_class = message_class
        self.auto_register = auto_register
        idx = message_indexes(message_class.DESCRIPTOR)
        self._indexes = (
            b"\x00" if idx == [0] else _zigzag_varint(len(idx)) + b"".join(_zigzag_varint(i) for i in idx)
        )
        self._header: bytes | None = None

    def _file(self, file_desc: Any) -> tuple[str, list[dict[str, Any]]]:
        from google.protobuf import descriptor_pb2

        refs = []
        for dep in file_desc.dependencies:
            if dep.name.startswith("google/protobuf/"):
                continue
            text, dep_refs = self._file(dep)
            if self.auto_register:
                self.client.register(dep.name, text, "PROTOBUF", dep_refs)
            refs.append(
                {"name": dep.name, "subject": dep.name, "version": self.client.latest_version(dep.name)}
            )
        fdp = descriptor_pb2.FileDescriptorProto()
        file_desc.CopyToProto(fdp)
        return base64.b64encode(fdp.SerializeToString()).decode(), refs

    def header(self) -> bytes:
        if self._header is None:
            text, refs = self._file(self.message_class.DESCRIPTOR.file)
            if self.auto_register:
                sid = self.client.register(self.subject, text, "PROTOBUF", refs)
            else:
                sid = self.client.lookup(self.subject, text, "PROTOBUF")
            self._header = _FRAME.pack(MAGIC, sid) + self._indexes
        return self._header

    def __call__(self, message: Any) -> bytes | None:
        if message is None:
            return None
        return self.header() + message.SerializeToString()


class ProtobufDeserializer:
    """``bytes -> message`` of ``message_class``, after the header and the message indexes."""

    def __init__(self, message_class: Any) -> None:
        self.message_class = message_class

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 6 or data[0] != MAGIC:
            raise ValueError("not a Confluent-framed value (magic byte 0 and a 4-byte schema id)")
        view = memoryview(data)
        count, pos = _read_zigzag_varint(view, 5)
        for _ in range(count):
            _, pos = _read_zigzag_varint(view, pos)
        return self.message_class.FromString(bytes(view[pos:]))
