"""Registry-framed values through format("moldau") (value.format avro / json, schema.registry.url), against
moldau's registry and confluent-kafka's serializers: records written by confluent-kafka's AvroSerializer
(two schema versions) are streamed by Spark into another topic, whose records confluent-kafka's
AvroDeserializer reads back."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest

V1 = json.dumps({"type": "record", "name": "Click", "namespace": "web", "fields": [
    {"name": "user", "type": "string"}, {"name": "n", "type": "int"}]})
V2 = json.dumps({"type": "record", "name": "Click", "namespace": "web", "fields": [
    {"name": "user", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "page", "type": "string", "default": "/"},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]})


def _ck_produce(bootstrap: str, topic: str, ser_values: list[tuple[Any, dict]]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    p = Producer({"bootstrap.servers": bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for i, (ser, value) in enumerate(ser_values):
        p.produce(topic, key=str(i).encode(), value=ser(value, ctx))
    p.produce(topic, key=b"tombstone", value=None)
    assert p.flush(30) == 0


def _ck_consume(bootstrap: str, topic: str, deser: Any, count: int) -> list[Any]:
    from confluent_kafka import Consumer
    from confluent_kafka.serialization import MessageField, SerializationContext

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    ctx = SerializationContext(topic, MessageField.VALUE)
    out: list[Any] = []
    try:
        for _ in range(120):
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.key(), deser(m.value(), ctx)))
            if len(out) >= count:
                break
    finally:
        c.close()
    return out


def test_avro_batch_round_trip_with_confluent(spark, bootstrap, schema_registry, make_topic):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    ck = SchemaRegistryClient({"url": schema_registry.url})
    src, dst = make_topic(1), make_topic(1)
    s1, s2 = AvroSerializer(ck, V1), AvroSerializer(ck, V2)
    _ck_produce(bootstrap, src, [(s1, {"user": "ann", "n": 1}),
                                 (s2, {"user": "bob", "n": 2**40, "page": "/x", "at": None, "tags": ["t"]})])
    ids = [ck.get_version(f"{src}-value", v).schema_id for v in (1, 2)]
    opts = {"kafka.bootstrap.servers": bootstrap, "value.format": "avro",
            "schema.registry.url": schema_registry.url}
    df = spark.read.format("moldau").options(**opts).option("subscribe", src).load()
    rows = [(r.value and r.value.asDict(), r.valueSchemaId) for r in df.orderBy("offset").collect()]
    assert rows == [({"user": "ann", "n": 1, "page": "/", "at": None, "tags": []}, ids[0]),
                    ({"user": "bob", "n": 2**40, "page": "/x", "at": None, "tags": ["t"]}, ids[1]),
                    (None, None)]  # the tombstone
    (df.where("value IS NOT NULL").selectExpr("key", "struct(value.user, value.n * 2 AS n2) AS value")
     .write.format("moldau").options(**opts).option("topic", dst).mode("append").save())
    got = dict(_ck_consume(bootstrap, dst, AvroDeserializer(ck), 2))
    assert got == {b"0": {"user": "ann", "n2": 2}, b"1": {"user": "bob", "n2": 2**41}}


@pytest.mark.skipif(not os.environ.get("MOLDAU_REGISTRY_FULL"),
                    reason="a longer registry test (Structured Streaming): run with MOLDAU_REGISTRY_FULL=1")
def test_avro_stream_between_confluent_serializers(spark, bootstrap, schema_registry, make_topic, tmp_path):
    import datetime as dt

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    ck = SchemaRegistryClient({"url": schema_registry.url})
    src, dst = make_topic(2), make_topic(1)
    s1, s2 = AvroSerializer(ck, V1), AvroSerializer(ck, V2)
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    values = [(s1, {"user": f"u{i}", "n": i}) for i in range(20)]
    values += [(s2, {"user": f"w{i}", "n": 2**40 + i, "page": f"/p{i}", "at": at, "tags": ["a", str(i)]})
               for i in range(20)]
    _ck_produce(bootstrap, src, values)
    id1 = ck.get_version(f"{src}-value", 1).schema_id
    id2 = ck.get_version(f"{src}-value", 2).schema_id

    url = schema_registry.url
    stream = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("value.format", "avro").option("schema.registry.url", url).load())
    # the latest version is the reader schema: v1's records read with Avro's resolution (defaults)
    assert stream.schema["value"].dataType.simpleString() == (
        "struct<user:string,n:bigint,page:string,at:timestamp,tags:array<string>>")
    assert stream.schema["valueSchemaId"].dataType.simpleString() == "int"
    out = stream.selectExpr(
        "key", "named_struct('user', upper(value.user), 'n', value.n, 'page', value.page, 'at', value.at, "
        "'tags', value.tags, 'src_id', valueSchemaId) AS value").where("value.user IS NOT NULL")
    q = (out.writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("value.format", "avro").option("schema.registry.url", url)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    if q.exception() is not None:
        raise q.exception()

    got = dict(_ck_consume(bootstrap, dst, AvroDeserializer(ck), 40))
    assert len(got) == 40
    for i in range(20):
        assert got[str(i).encode()] == {"user": f"U{i}", "n": i, "page": "/", "at": None, "tags": [],
                                        "src_id": id1}
        assert got[str(20 + i).encode()] == {"user": f"W{i}", "n": 2**40 + i, "page": f"/p{i}", "at": at,
                                             "tags": ["a", str(i)], "src_id": id2}
    # the sink registered the schema it derived from the column's type under TopicNameStrategy's subject
    written = json.loads(ck.get_latest_version(f"{dst}-value").schema.schema_str)
    assert [f["name"] for f in written["fields"]] == ["user", "n", "page", "at", "tags", "src_id"]


@pytest.mark.skipif(not os.environ.get("MOLDAU_REGISTRY_FULL"),
                    reason="a longer registry test: run with MOLDAU_REGISTRY_FULL=1")
def test_json_batch_round_trip_with_confluent(spark, bootstrap, schema_registry, make_topic):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    ck = SchemaRegistryClient({"url": schema_registry.url})
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                         "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"},
                                        "price": {"type": "number"},
                                        "attrs": {"type": "object",
                                                  "additionalProperties": {"type": "string"}}},
                         "required": ["sku", "qty"]})
    src, dst = make_topic(1), make_topic(1)
    ser = JSONSerializer(schema, ck)
    _ck_produce(bootstrap, src, [(ser, {"sku": f"s{i}", "qty": i, "price": i / 4, "attrs": {"c": str(i)}})
                                 for i in range(10)])
    opts = {"kafka.bootstrap.servers": bootstrap, "value.format": "json",
            "schema.registry.url": schema_registry.url}
    df = spark.read.format("moldau").options(**opts).option("subscribe", src).load()
    rows = df.where("value IS NOT NULL").orderBy("offset").collect()
    assert [(r.value.sku, r.value.qty, r.value.price, r.value.attrs) for r in rows] == [
        (f"s{i}", i, i / 4, {"c": str(i)}) for i in range(10)]
    sid = ck.get_latest_version(f"{src}-value").schema_id
    assert {r.valueSchemaId for r in rows} == {sid}
    (df.where("value IS NOT NULL").selectExpr("key", "named_struct('sku', value.sku, 'total', "
                                              "value.qty * value.price) AS value")
     .write.format("moldau").options(**opts).option("topic", dst).mode("append").save())
    got = dict(_ck_consume(bootstrap, dst, JSONDeserializer(None, schema_registry_client=ck), 10))
    assert got == {str(i).encode(): {"sku": f"s{i}", "total": i * i / 4} for i in range(10)}


def test_value_format_options_and_type_mapping():
    from pyspark.sql import types as T

    from moldau.spark.options import OptionError, parse_sink_options, parse_source_options
    from moldau.spark.valueformat import avro_to_spark, json_schema_to_spark, spark_to_avro

    base = {"kafka.bootstrap.servers": "127.0.0.1:1"}
    vf = parse_source_options({**base, "subscribe": "t", "value.format": "AVRO",
                               "schema.registry.url": "http://r"}, streaming=True).value_format
    assert (vf.format, vf.subject, vf.version) == ("avro", "t-value", "latest")
    for bad, why in [
        ({"subscribePattern": "t.*", "value.format": "avro", "schema.registry.url": "http://r"},
         "value.subject"),
        ({"subscribe": "t", "value.format": "xml", "schema.registry.url": "http://r"}, "value.format"),
        ({"subscribe": "t", "value.format": "avro"}, "schema.registry.url"),
        ({"subscribe": "t", "schema.registry.url": "http://r"}, "needs option 'value.format'"),
    ]:
        with pytest.raises(OptionError, match=why):
            parse_source_options({**base, **bad}, streaming=False)
    with pytest.raises(OptionError, match="value.subject"):  # per-row topics: no TopicNameStrategy subject
        parse_sink_options({**base, "value.format": "avro", "schema.registry.url": "http://r"})
    assert parse_sink_options({**base, "topic": "o", "value.format": "json", "schema.registry.url": "http://r"}
                              ).value_format.subject == "o-value"

    avro = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "e2", "type": "E"},
        {"name": "x", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                        "scale": 2}]}]}
    assert avro_to_spark(avro).simpleString() == (
        "struct<d:date,m:map<string,double>,e:string,e2:string,x:decimal(9,2)>")
    with pytest.raises(OptionError, match="unions"):
        avro_to_spark(["int", "string"])
    st = T.StructType([T.StructField("a", T.LongType(), False), T.StructField("t", T.TimestampType())])
    assert avro_to_spark(spark_to_avro(st)) == T.StructType(
        [T.StructField("a", T.LongType(), False), T.StructField("t", T.TimestampType(), True)])
    assert json_schema_to_spark({"type": "object", "properties": {
        "a": {"type": ["integer", "null"]}, "b": {"$ref": "#/definitions/B"}},
        "definitions": {"B": {"type": "array", "items": {"type": "number"}}}}).simpleString() == (
        "struct<a:bigint,b:array<double>>")
