"""Registry-framed values in the moldau data source: ``option("value.format", "avro" | "json")`` with
``option("schema.registry.url", ...)``.

Values are in Confluent's wire format (magic byte 0, the schema id as a 4-byte big-endian integer, then the
Avro binary encoding or the JSON text) against any registry with Confluent's REST API (moldau's own, or
Confluent's). Reading: the ``value`` column becomes the subject's schema (its latest version, or
``value.schema.version``) mapped to Spark types, and ``valueSchemaId`` holds the id each row was written
with; Avro values written with other versions are read with Avro's schema resolution. Writing: the
``value`` column (a struct, or any type Avro or JSON can hold) is encoded with ``value.schema`` when given,
else with a schema derived from the column's Spark type, registered under the subject on the driver.

The subject is ``value.subject``, by default ``<topic>-value`` (Confluent's TopicNameStrategy). Driver-side
work (resolving the schema, registering it) happens when Spark plans the query; tasks only fetch writer
schemas by id (cached per Python worker).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import OptionError

__all__ = [
    "FORMATS",
    "ValueFormat",
    "avro_to_spark",
    "json_schema_to_spark",
    "parse_value_format",
    "spark_to_avro",
    "spark_to_json_schema",
]

FORMATS = {"avro": "AVRO", "json": "JSON"}
SCHEMA_ID_COLUMN = "valueSchemaId"
OPTIONS = ["value.format", "value.subject", "value.schema", "schema.registry.url",
           "schema.registry.basic.auth.user.info"]
SOURCE_OPTIONS = [*OPTIONS, "value.schema.version"]
_FRAME = struct.Struct(">bI")


@dataclass(slots=True)
class ValueFormat:
    format: str                 # avro | json
    url: str
    user: str | None            # user:password for basic auth
    subject: str
    schema_text: str | None = None   # sink: value.schema; source/sink after resolve(): the schema in use
    version: str = "latest"          # source: which version is the reader schema
    schema_id: int | None = None     # after resolve()
    value_type: Any = None           # sink: the Spark type of the value column

    @property
    def schema_type(self) -> str:
        return FORMATS[self.format]


def parse_value_format(opts: dict[str, str], topics: list[str], *, sink: bool) -> ValueFormat | None:
    """The registry options (lower-cased names) -> ValueFormat, or None without ``value.format``."""
    given = [k for k in (SOURCE_OPTIONS if not sink else OPTIONS) if k in opts and k != "value.format"]
    fmt = opts.get("value.format")
    if fmt is None:
        if given:
            raise OptionError(f"option '{given[0]}' needs option 'value.format' (avro or json)")
        return None
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        raise OptionError(f"option 'value.format' must be one of {', '.join(FORMATS)}, got {fmt!r}")
    url = opts.get("schema.registry.url", "").strip()
    if not url:
        raise OptionError("option 'value.format' needs option 'schema.registry.url'")
    subject = opts.get("value.subject", "").strip()
    if not subject:
        if len(topics) != 1:
            raise OptionError("option 'value.subject' is required unless the query has exactly one topic "
                              "(the subject is then '<topic>-value', Confluent's TopicNameStrategy)")
        subject = f"{topics[0]}-value"
    version = opts.get("value.schema.version", "latest").strip()
    if version != "latest" and not version.isdigit():
        raise OptionError(
            f"option 'value.schema.version' must be 'latest' or a version number, got {version!r}")
    return ValueFormat(fmt, url, opts.get("schema.registry.basic.auth.user.info") or None, subject,
                       opts.get("value.schema"), version)


_CLIENTS: dict[tuple[str, str | None], Any] = {}


def _client(vf: ValueFormat) -> Any:
    from moldau.registry.serde import RegistryClient

    key = (vf.url, vf.user)
    c = _CLIENTS.get(key)
    if c is None:
        c = _CLIENTS[key] = RegistryClient(vf.url, user=vf.user)
    return c


# ----------------------------------------------------------------------------------------------------
# schema -> Spark type


def avro_to_spark(schema: Any) -> Any:
    """An Avro schema (parsed JSON) -> Spark DataType, as Spark's SchemaConverters map them: nullable
    unions ``[null, T]`` -> T; records -> structs; maps -> map<string, V>; enums -> string; bytes and
    fixed -> binary; logical date, timestamp-millis/micros, local-timestamp-*, decimal, uuid."""
    t, _ = _avro(schema, {}, "")
    return t


def _avro(s: Any, named: dict[str, Any], ns: str) -> tuple[Any, bool]:
    from pyspark.sql import types as T

    prim = {"boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(),
            "float": T.FloatType(), "double": T.DoubleType(), "bytes": T.BinaryType(),
            "string": T.StringType(), "null": T.NullType()}
    if isinstance(s, str):
        if s in prim:
            return prim[s], s == "null"
        full = s if "." in s or not ns else f"{ns}.{s}"
        got = named.get(full, named.get(s))
        if got is None:
            raise OptionError(
                f"Avro schema: unknown or recursive type {s!r} (recursive types have no Spark type)")
        return got, False
    if isinstance(s, list):
        branches = [b for b in s if b != "null"]
        if len(branches) != 1:
            raise OptionError("Avro schema: unions other than [null, T] are not supported by the moldau "
                              f"source (got {json.dumps(s)})")
        t, _ = _avro(branches[0], named, ns)
        return t, len(branches) < len(s)
    if not isinstance(s, dict):
        raise OptionError(f"Avro schema: not a schema: {json.dumps(s)}")
    typ, logical = s.get("type"), s.get("logicalType")
    if logical == "date" and typ == "int":
        return T.DateType(), False
    if logical in ("timestamp-millis", "timestamp-micros") and typ == "long":
        return T.TimestampType(), False
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and typ == "long":
        return T.TimestampNTZType(), False
    if logical == "decimal" and typ in ("bytes", "fixed"):
        return T.DecimalType(int(s["precision"]), int(s.get("scale", 0))), False
    if logical and str(logical).startswith("time-"):
        raise OptionError(f"Avro schema: logical type {logical} has no Spark type")
    if typ == "record" or typ == "error":
        name = s["name"]
        space = s.get("namespace", ns) if "." not in name else name.rsplit(".", 1)[0]
        full = name if "." in name or not space else f"{space}.{name}"
        fields = []
        for f in s.get("fields", []):
            ft, nullable = _avro(f["type"], named, space)
            fields.append(T.StructField(f["name"], ft, nullable))
        st = T.StructType(fields)
        named[full] = st
        return st, False
    if typ in ("enum", "fixed"):
        name = s["name"]
        space = s.get("namespace", ns)
        t = T.StringType() if typ == "enum" else T.BinaryType()
        named[name if "." in name or not space else f"{space}.{name}"] = t
        return t, False
    if typ == "array":
        it, nullable = _avro(s["items"], named, ns)
        return T.ArrayType(it, nullable), False
    if typ == "map":
        vt, nullable = _avro(s["values"], named, ns)
        return T.MapType(T.StringType(), vt, nullable), False
    return _avro(typ, named, ns)


def spark_to_avro(t: Any, name: str = "topLevelRecord", namespace: str = "") -> Any:
    """A Spark DataType -> an Avro schema (as Spark's to_avro derives one; nullable fields become
    ``["null", T]`` with default null, so that later versions may add or drop them compatibly)."""
    from pyspark.sql import types as T

    simple = {T.BooleanType: "boolean", T.ByteType: "int", T.ShortType: "int", T.IntegerType: "int",
              T.LongType: "long", T.FloatType: "float", T.DoubleType: "double", T.StringType: "string",
              T.BinaryType: "bytes"}
    for cls, avro in simple.items():
        if isinstance(t, cls):
            return avro
    if isinstance(t, T.DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(t, T.TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(t, T.TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(t, T.DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if isinstance(t, T.ArrayType):
        return {"type": "array", "items": _nullable(spark_to_avro(t.elementType, name, namespace),
                                                    t.containsNull, False)}
    if isinstance(t, T.MapType):
        if not isinstance(t.keyType, T.StringType):
            raise OptionError(f"Avro maps have string keys: cannot write {t.simpleString()}")
        return {"type": "map", "values": _nullable(spark_to_avro(t.valueType, name, namespace),
                                                   t.valueContainsNull, False)}
    if isinstance(t, T.StructType):
        inner = f"{namespace}.{name}" if namespace else name
        rec: dict[str, Any] = {"type": "record", "name": name, "fields": []}
        if namespace:
            rec["namespace"] = namespace
        for f in t.fields:
            ft = _nullable(spark_to_avro(f.dataType, f.name, inner), f.nullable, True)
            field: dict[str, Any] = {"name": f.name, "type": ft}
            if f.nullable:
                field["default"] = None
            rec["fields"].append(field)
        return rec
    raise OptionError(f"no Avro type for Spark type {t.simpleString()}")


def _nullable(avro: Any, nullable: bool, _field: bool) -> Any:
    return ["null", avro] if nullable else avro


def json_schema_to_spark(schema: Any) -> Any:
    """A JSON Schema -> Spark DataType: object with properties -> struct (every field nullable: JSON may
    omit it), object with only additionalProperties -> map<string, V>, array -> array, integer -> long,
    number -> double, string -> string, boolean -> boolean; a nullable ``type`` list or ``anyOf`` /
    ``oneOf`` with null -> the other type; local ``$ref`` followed; anything else -> string (the JSON
    text)."""
    return _js(schema, schema, 0)


def _js(s: Any, root: Any, depth: int) -> Any:
    from pyspark.sql import types as T

    if depth > 32:
        raise OptionError("JSON Schema: nested too deep (recursive $ref?)")
    if not isinstance(s, dict):
        return T.StringType()
    ref = s.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _js(target, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        alts = [a for a in s.get(key, []) if not (isinstance(a, dict) and a.get("type") == "null")]
        if len(alts) == 1:
            return _js(alts[0], root, depth + 1)
    typ = s.get("type")
    if isinstance(typ, list):
        rest = [x for x in typ if x != "null"]
        typ = rest[0] if len(rest) == 1 else None
    if typ is None and "properties" in s:
        typ = "object"
    if typ == "object":
        props = s.get("properties")
        if props:
            return T.StructType([T.StructField(k, _js(v, root, depth + 1), True) for k, v in props.items()])
        extra = s.get("additionalProperties")
        if isinstance(extra, dict):
            return T.MapType(T.StringType(), _js(extra, root, depth + 1), True)
        return T.MapType(T.StringType(), T.StringType(), True)
    if typ == "array":
        return T.ArrayType(_js(s.get("items", {}), root, depth + 1), True)
    return {"integer": T.LongType(), "number": T.DoubleType(), "boolean": T.BooleanType()}.get(
        str(typ), T.StringType())


def spark_to_json_schema(t: Any, top: bool = True) -> dict[str, Any]:
    """A Spark DataType -> a JSON Schema (draft 7) of what the sink writes for it."""
    from pyspark.sql import types as T

    out: dict[str, Any]
    if isinstance(t, T.StructType):
        out = {"type": "object", "properties": {}}
        required = []
        for f in t.fields:
            sub = spark_to_json_schema(f.dataType, False)
            if f.nullable:
                sub = {"oneOf": [{"type": "null"}, sub]}
            else:
                required.append(f.name)
            out["properties"][f.name] = sub
        if required:
            out["required"] = required
    elif isinstance(t, T.ArrayType):
        out = {"type": "array", "items": spark_to_json_schema(t.elementType, False)}
    elif isinstance(t, T.MapType):
        out = {"type": "object", "additionalProperties": spark_to_json_schema(t.valueType, False)}
    elif isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        out = {"type": "integer"}
    elif isinstance(t, (T.FloatType, T.DoubleType, T.DecimalType)):
        out = {"type": "number"}
    elif isinstance(t, T.BooleanType):
        out = {"type": "boolean"}
    elif isinstance(t, T.DateType):
        out = {"type": "string", "format": "date"}
    elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        out = {"type": "string", "format": "date-time"}
    elif isinstance(t, T.BinaryType):
        out = {"type": "string", "contentEncoding": "base64"}
    else:
        out = {"type": "string"}
    if top:
        out = {"$schema": "http://json-schema.org/draft-07/schema#", **out}
    return out


# ----------------------------------------------------------------------------------------------------
# driver side


def source_value_type(vf: ValueFormat) -> tuple[Any, str, int]:
    """The reader schema of a source: (Spark type, schema text, id) of the subject's version."""
    c = _client(vf)
    try:
        body = c.subject_version(vf.subject, vf.version)
    except Exception as exc:
        raise OptionError(f"value.format={vf.format}: cannot get version {vf.version} of subject "
                          f"{vf.subject!r} from {vf.url}: {exc}") from None
    stype = body.get("schemaType", "AVRO")
    if stype != vf.schema_type:
        raise OptionError(f"subject {vf.subject!r} version {body.get('version')} is {stype}, not "
                          f"{vf.schema_type} (value.format={vf.format})")
    if body.get("references"):
        raise OptionError(f"subject {vf.subject!r}: schemas with references are not supported by the moldau "
                          "source yet")
    text = body["schema"]
    doc = json.loads(text)
    spark_type = avro_to_spark(doc) if vf.format == "avro" else json_schema_to_spark(doc)
    return spark_type, text, int(body["id"])


def with_value_type(base: Any, value_type: Any) -> Any:
    """Spark's Kafka schema with ``value`` of the decoded type and ``valueSchemaId`` appended."""
    from pyspark.sql import types as T

    fields = [T.StructField("value", value_type, True) if f.name == "value" else f for f in base.fields]
    fields.append(T.StructField(SCHEMA_ID_COLUMN, T.IntegerType(), True))
    return T.StructType(fields)


def resolve_source(vf: ValueFormat, expected_value_type: Any | None = None) -> ValueFormat:
    """Fix the reader schema on the driver (its text and id go to the tasks)."""
    spark_type, text, sid = source_value_type(vf)
    if expected_value_type is not None and spark_type != expected_value_type:
        raise OptionError(
            f"the schema of subject {vf.subject!r} changed while the query was planned "
            f"({expected_value_type.simpleString()} -> {spark_type.simpleString()}): run it again")
    vf.schema_text, vf.schema_id = text, sid
    return vf


def resolve_sink(vf: ValueFormat, value_type: Any) -> ValueFormat:
    """The writer schema: ``value.schema`` or one derived from the value column, registered (or found: the
    registry answers the existing id for a schema it has) under the subject."""
    vf.value_type = value_type
    if vf.schema_text is None:
        doc = spark_to_avro(value_type) if vf.format == "avro" else spark_to_json_schema(value_type)
        vf.schema_text = json.dumps(doc)
    else:
        try:
            json.loads(vf.schema_text)
        except ValueError as exc:
            raise OptionError(f"option 'value.schema' is not JSON: {exc}") from None
    try:
        vf.schema_id = _client(vf).register(vf.subject, vf.schema_text, vf.schema_type)
    except Exception as exc:
        raise OptionError(f"value.format={vf.format}: registering the value schema under subject "
                          f"{vf.subject!r} at {vf.url} failed: {exc}") from None
    return vf


# ----------------------------------------------------------------------------------------------------
# tasks: decode and encode Arrow batches


class _Decoder:
    def __init__(self, vf: ValueFormat, arrow_type: Any, spark_type: Any) -> None:
        self.vf = vf
        self.arrow_type = arrow_type
        self.spark_type = spark_type
        self._writers: dict[int, Any] = {}
        if vf.format == "avro":
            import fastavro

            assert vf.schema_text is not None
            self._fa = fastavro
            self.reader = fastavro.parse_schema(json.loads(vf.schema_text))

    def _writer(self, sid: int) -> Any:
        w = self._writers.get(sid)
        if w is None:
            body = _client(self.vf).schema(sid)
            if body.get("schemaType", "AVRO") != "AVRO":
                raise ValueError(f"schema {sid} is {body.get('schemaType')}, not AVRO")
            w = self._writers[sid] = self._fa.parse_schema(json.loads(body["schema"]))
        return w

    def decode(self, data: bytes, where: str) -> tuple[Any, int]:
        if len(data) < 5 or data[0] != 0:
            raise ValueError(f"{where}: not a Confluent-framed value (magic byte 0 and a 4-byte schema id)")
        _, sid = _FRAME.unpack_from(data)
        if self.vf.format == "json":
            return _from_json(json.loads(data[5:]), self.spark_type), sid
        buf = io.BytesIO(memoryview(data)[5:])
        if sid == self.vf.schema_id:
            return _plain(self._fa.schemaless_reader(buf, self.reader, None)), sid
        # another version: Avro's schema resolution from the writer's schema to the reader's
        return _plain(self._fa.schemaless_reader(buf, self._writer(sid), self.reader)), sid


def _plain(v: Any) -> Any:
    """fastavro's values -> what Arrow takes for the mapped Spark type (uuid -> str)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, uuid.UUID):
        return str(v)
    return v


def _from_json(v: Any, t: Any) -> Any:
    """A parsed JSON value -> the Python value of Spark type ``t`` (lenient: wrong shapes become null,
    strings of other values hold their JSON text)."""
    from pyspark.sql import types as T

    if v is None:
        return None
    if isinstance(t, T.StructType):
        if not isinstance(v, dict):
            return None
        return {f.name: _from_json(v.get(f.name), f.dataType) for f in t.fields}
    if isinstance(t, T.ArrayType):
        return [_from_json(x, t.elementType) for x in v] if isinstance(v, list) else None
    if isinstance(t, T.MapType):
        return {str(k): _from_json(x, t.valueType) for k, x in v.items()} if isinstance(v, dict) else None
    if isinstance(t, T.StringType):
        return v if isinstance(v, str) else json.dumps(v)
    if isinstance(t, T.LongType):
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(t, T.DoubleType):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(t, T.BooleanType):
        return v if isinstance(v, bool) else None
    return v


def decode_batch(vf: ValueFormat, batch: Any, decoder: _Decoder | None) -> tuple[Any, _Decoder]:
    """An Arrow batch of Spark's Kafka schema -> the same with ``value`` decoded and ``valueSchemaId``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    if decoder is None:
        assert vf.schema_text is not None
        doc = json.loads(vf.schema_text)
        st = avro_to_spark(doc) if vf.format == "avro" else json_schema_to_spark(doc)
        decoder = _Decoder(vf, to_arrow_type(st, timezone="UTC"), st)
    names = batch.schema.names
    raw = batch.column(names.index("value")).to_pylist()
    offsets = batch.column(names.index("offset")).to_pylist()
    topic = batch.column(names.index("topic"))[0].as_py() if batch.num_rows else ""
    part = batch.column(names.index("partition"))[0].as_py() if batch.num_rows else 0
    values: list[Any] = []
    ids: list[int | None] = []
    for data, off in zip(raw, offsets):
        if data is None:
            values.append(None)
            ids.append(None)
            continue
        v, sid = decoder.decode(data, f"{topic}-{part} offset {off}")
        values.append(v)
        ids.append(sid)
    cols = list(batch.columns)
    cols[names.index("value")] = pa.array(values, type=decoder.arrow_type)
    cols.append(pa.array(ids, type=pa.int32()))
    fields = [pa.field("value", decoder.arrow_type) if n == "value" else batch.schema.field(n) for n in names]
    fields.append(pa.field(SCHEMA_ID_COLUMN, pa.int32()))
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields)), decoder


def _to_py(v: Any, t: Any, fmt: str) -> Any:
    """An Arrow ``to_pylist`` value of Spark type ``t`` -> what fastavro (maps as dicts) or json.dumps
    (dates as ISO text, bytes as base64, decimals as numbers) take."""
    from pyspark.sql import types as T

    if v is None:
        return None
    if isinstance(t, T.StructType):
        return {f.name: _to_py(v.get(f.name), f.dataType, fmt) for f in t.fields}
    if isinstance(t, T.ArrayType):
        return [_to_py(x, t.elementType, fmt) for x in v]
    if isinstance(t, T.MapType):
        items = v.items() if isinstance(v, dict) else v
        return {k: _to_py(x, t.valueType, fmt) for k, x in items}
    if fmt == "json":
        if isinstance(v, (dt.date, dt.datetime)):
            return v.isoformat()
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if isinstance(v, decimal.Decimal):
            return float(v)
    return v


def encode_batches(vf: ValueFormat, batches: Iterator[Any]) -> Iterator[Any]:
    """Arrow batches whose ``value`` column is of ``vf.value_type`` -> the same with ``value`` framed
    binary."""
    import pyarrow as pa

    value_type = vf.value_type

    assert vf.schema_text is not None and vf.schema_id is not None
    header = _FRAME.pack(0, vf.schema_id)
    if vf.format == "avro":
        import fastavro

        parsed = fastavro.parse_schema(json.loads(vf.schema_text))

        def enc(obj: Any) -> bytes:
            buf = io.BytesIO()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, obj)
            return buf.getvalue()
    else:
        from jsonschema.validators import validator_for

        doc = json.loads(vf.schema_text)
        validator = validator_for(doc)(doc)

        def enc(obj: Any) -> bytes:
            validator.validate(obj)
            return header + json.dumps(obj, separators=(",", ":")).encode()

    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        i = names.index("value")
        out = [None if x is None else enc(_to_py(x, value_type, vf.format))
               for x in batch.column(i).to_pylist()]
        cols = list(batch.columns)
        cols[i] = pa.array(out, type=pa.binary())
        fields = [pa.field("value", pa.binary()) if j == i else f for j, f in enumerate(batch.schema)]
        yield pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields))
