"""confluent-kafka's SchemaRegistryClient and its Avro serializer/deserializer against moldau's registry,
with a producer and a consumer on the moldau broker: register, evolve, an incompatible change refused (409),
soft and hard deletes, per-subject config, modes, references and referencedby, GET /schemas, and Avro records
written with two schema versions read back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.registryutil import RegistryThread, avro_record

sr = pytest.importorskip("confluent_kafka.schema_registry")
avro = pytest.importorskip("confluent_kafka.schema_registry.avro")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

V1 = avro_record("Order", ("id", "long"), ("item", "string"), namespace="shop")
V2 = avro_record("Order", ("id", "long"), ("item", "string"), ("qty", "int", 1), namespace="shop")
V3_BAD = avro_record("Order", ("id", "long"), ("item", "string"), ("price", "double"), namespace="shop")


@pytest.fixture
def client(registry: RegistryThread) -> Iterator[SchemaRegistryClient]:
    yield SchemaRegistryClient({"url": registry.url})


def fails(fn: Callable[[], Any]) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as e:
        fn()
    return e.value


def test_register_evolve_refuse(client: SchemaRegistryClient) -> None:
    s = "orders-value"
    id1 = client.register_schema(s, Schema(V1, "AVRO"))
    id2 = client.register_schema(s, Schema(V2, "AVRO"))
    assert id2 != id1
    latest = client.get_latest_version(s)
    assert (latest.version, latest.schema_id, json.loads(latest.schema.schema_str)) == (
        2,
        id2,
        json.loads(V2),
    )
    assert client.get_version(s, 1).schema_id == id1
    assert client.get_versions(s) == [1, 2]
    assert s in client.get_subjects()
    assert json.loads(client.get_schema(id1).schema_str) == json.loads(V1)
    assert client.lookup_schema(s, Schema(V1, "AVRO")).version == 1
    assert client.test_compatibility(s, Schema(V2, "AVRO")) is True
    assert client.test_compatibility(s, Schema(V3_BAD, "AVRO")) is False
    assert client.test_compatibility_all_versions(s, Schema(V3_BAD, "AVRO")) is False
    e = fails(lambda: client.register_schema(s, Schema(V3_BAD, "AVRO")))
    assert (e.http_status_code, e.error_code) == (409, 409)
    assert client.get_versions(s) == [1, 2]
    assert {"subject": s, "version": 1} in [
        {"subject": v.subject, "version": v.version} for v in client.get_schema_versions(id1)
    ]
    assert s in client.get_subjects_by_schema_id(id1)
    assert "AVRO" in client.get_schema_types()


def test_config_and_modes(client: SchemaRegistryClient) -> None:
    s = "cfg-value"
    client.register_schema(s, Schema(V1, "AVRO"))
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility(s, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(s) == "NONE"
    client.register_schema(s, Schema(V3_BAD, "AVRO"))  # NONE: accepted
    client.set_compatibility(s, "FULL_TRANSITIVE")
    assert client.get_config(s).compatibility_level.value == "FULL_TRANSITIVE"
    client.delete_config(s)
    assert fails(lambda: client.get_compatibility(s)).error_code == 40408
    assert client.update_mode(s, "READONLY") == "READONLY"
    assert client.get_mode(s) == "READONLY"
    e = fails(lambda: client.register_schema(s, Schema(V2, "AVRO")))
    assert (e.http_status_code, e.error_code) == (422, 42205)
    assert client.delete_mode(s) == "READONLY"
    assert client.get_global_mode() == "READWRITE"
    assert fails(lambda: client.update_mode(s, "BOGUS")).error_code == 42204


def test_deletes(client: SchemaRegistryClient) -> None:
    s = "del2-value"
    client.register_schema(s, Schema(V1, "AVRO"))
    client.register_schema(s, Schema(V2, "AVRO"))
    assert client.delete_version(s, 2) == 2
    assert client.get_versions(s) == [1]
    assert client.get_versions(s, deleted=True) == [1, 2]
    assert fails(lambda: client.delete_version(s, 1, permanent=True)).error_code == 40407
    assert client.delete_version(s, 2, permanent=True) == 2
    assert client.delete_subject(s) == [1]
    assert s not in client.get_subjects()
    assert s in client.get_subjects(deleted=True)
    assert fails(lambda: client.get_versions(s)).error_code == 40401
    assert client.delete_subject(s, permanent=True) == [1]
    assert s not in client.get_subjects(deleted=True)


def test_references(client: SchemaRegistryClient, registry: RegistryThread) -> None:
    money = json.dumps(
        {
            "type": "record",
            "name": "Money",
            "namespace": "shop",
            "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}],
        }
    )
    client.register_schema("money", Schema(money, "AVRO"))
    invoice = json.dumps(
        {
            "type": "record",
            "name": "Invoice",
            "namespace": "shop",
            "fields": [{"name": "total", "type": "shop.Money"}],
        }
    )
    ref = SchemaReference("shop.Money", "money", 1)
    iid = client.register_schema("invoice-value", Schema(invoice, "AVRO", [ref]))
    assert client.get_referenced_by("money", 1) == [iid]
    got = client.get_schema(iid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [("shop.Money", "money", 1)]
    assert fails(lambda: client.delete_subject("money")).error_code == 42206
    # the serializer resolves the reference to write and read a record
    ser = avro.AvroSerializer(
        client,
        invoice_schema := Schema(invoice, "AVRO", [ref]),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    del invoice_schema
    ctx = SerializationContext("invoice", MessageField.VALUE)
    data = ser({"total": {"cents": 1250, "currency": "EUR"}}, ctx)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == iid
    assert avro.AvroDeserializer(client)(data, ctx) == {"total": {"cents": 1250, "currency": "EUR"}}
    # GET /schemas (no method in the client): every registered version
    status, schemas = registry.call("GET", "/schemas?subjectPrefix=invoice")
    assert status == 200 and [(x["subject"], x["id"]) for x in schemas] == [("invoice-value", iid)]


def test_produce_consume_two_versions(
    client: SchemaRegistryClient, broker: Any, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    subject = f"{topic}-value"
    ser1 = avro.AvroSerializer(client, V1)
    ser2 = avro.AvroSerializer(client, V2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p.produce(topic, ser1({"id": 1, "item": "tea"}, ctx))
    p.produce(topic, ser2({"id": 2, "item": "cake", "qty": 3}, ctx))
    assert p.flush(30) == 0
    del p
    assert client.get_versions(subject) == [1, 2]  # the serializers registered both (auto.register.schemas)
    plain = avro.AvroDeserializer(client)  # each record read with its writer's schema
    as_v2 = avro.AvroDeserializer(client, V2)  # both read with V2: qty's default fills in
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == 2:
                break
    finally:
        c.close()
    assert [plain(v, ctx) for v in got] == [{"id": 1, "item": "tea"}, {"id": 2, "item": "cake", "qty": 3}]
    assert [as_v2(v, ctx) for v in got] == [
        {"id": 1, "item": "tea", "qty": 1},
        {"id": 2, "item": "cake", "qty": 3},
    ]


def test_json_schema_serializers(client: SchemaRegistryClient) -> None:
    jsonser = pytest.importorskip("confluent_kafka.schema_registry.json_schema")
    s = "json-orders-value"
    v1 = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        }
    )
    v2 = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        }
    )
    bad = json.dumps({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
    ctx = SerializationContext("json-orders", MessageField.VALUE)
    data1 = jsonser.JSONSerializer(v1, client)({"id": 7}, ctx)
    data2 = jsonser.JSONSerializer(v2, client)({"id": 8, "note": "hi"}, ctx)
    assert client.get_versions(s) == [1, 2]
    latest = client.get_latest_version(s)
    assert latest.schema.schema_type == "JSON" and latest.version == 2
    e = fails(lambda: client.register_schema(s, Schema(bad, "JSON")))
    assert (e.http_status_code, e.error_code) == (409, 409)
    assert fails(lambda: client.register_schema(s, Schema('{"type": 12}', "JSON"))).error_code == 42201
    de = jsonser.JSONDeserializer(None, schema_registry_client=client)
    assert de(data1, ctx) == {"id": 7} and de(data2, ctx) == {"id": 8, "note": "hi"}
    # a JSON Schema that references another by name
    client.register_schema(
        "json-money",
        Schema(json.dumps({"type": "object", "properties": {"cents": {"type": "integer"}}}), "JSON"),
    )
    ref = SchemaReference("money.json", "json-money", 1)
    rid = client.register_schema(
        "json-invoice-value",
        Schema(
            json.dumps({"type": "object", "properties": {"total": {"$ref": "money.json"}}}), "JSON", [ref]
        ),
    )
    assert client.get_referenced_by("json-money", 1) == [rid]


def _proto_classes() -> tuple[Any, Any]:
    """Two versions of shop.Item as message classes, built from descriptors by hand (no protoc), the second
    importing google/protobuf/timestamp.proto and adding a field."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    out = []
    for version in (1, 2):
        pool = descriptor_pool.DescriptorPool()
        fd = descriptor_pb2.FileDescriptorProto(name="item.proto", package="shop", syntax="proto3")
        m = fd.message_type.add(name="Item")
        m.field.add(name="id", number=1, type=3, label=1, json_name="id")  # int64
        m.field.add(name="name", number=2, type=9, label=1, json_name="name")  # string
        if version == 2:
            ts = descriptor_pb2.FileDescriptorProto()
            timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
            pool.Add(ts)
            fd.dependency.append("google/protobuf/timestamp.proto")
            m.field.add(
                name="at", number=3, type=11, label=1, type_name=".google.protobuf.Timestamp", json_name="at"
            )
        pool.Add(fd)
        out.append(message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Item")))
    return out[0], out[1]


def test_protobuf_serializers(client: SchemaRegistryClient, registry: RegistryThread) -> None:
    pb = pytest.importorskip("confluent_kafka.schema_registry.protobuf")
    item1, item2 = _proto_classes()
    ctx = SerializationContext("pb-items", MessageField.VALUE)
    s = "pb-items-value"
    d1 = pb.ProtobufSerializer(item1, client, {"use.deprecated.format": False})(item1(id=1, name="a"), ctx)
    msg2 = item2(id=2, name="b")
    msg2.at.seconds = 1700000000
    d2 = pb.ProtobufSerializer(item2, client, {"use.deprecated.format": False})(msg2, ctx)
    assert client.get_versions(s) == [1, 2]
    latest = client.get_latest_version(s).schema
    assert latest.schema_type == "PROTOBUF"
    # the serializer sent a base64 descriptor; the registry keeps and answers .proto text, as Confluent's
    assert latest.schema_str.startswith('syntax = "proto3";') and "message Item {" in latest.schema_str
    assert [r.name for r in latest.references] == []  # the well-known import needs no reference
    # a new serializer (no cache) registering the same class finds the same id, no new version
    again = pb.ProtobufSerializer(
        item2, SchemaRegistryClient({"url": registry.url}), {"use.deprecated.format": False}
    )(msg2, ctx)
    assert again[1:5] == d2[1:5] and client.get_versions(s) == [1, 2]
    # a field's type changed: FIELD_SCALAR_KIND_CHANGED, refused
    bad = 'syntax = "proto3"; package shop; message Item { string id = 1; string name = 2; }'
    e = fails(lambda: client.register_schema(s, Schema(bad, "PROTOBUF")))
    assert (e.http_status_code, e.error_code) == (409, 409)
    assert fails(lambda: client.register_schema(s, Schema("message {", "PROTOBUF"))).error_code == 42201
    # .proto text compatible with the serializer's descriptor: a field added
    text = (
        'syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto";\n'
        "message Item { int64 id = 1; string name = 2; google.protobuf.Timestamp at = 3; string note = 4; }"
    )
    client.register_schema(s, Schema(text, "PROTOBUF"))
    status, body = registry.call("GET", f"/subjects/{s}/versions/3?format=serialized")
    assert status == 200 and body["schema"] != text and "schemaType" in body
    by_id = registry.call("GET", f"/schemas/ids/{body['id']}?format=serialized")[1]
    assert by_id["schema"] == body["schema"] and by_id["schemaType"] == "PROTOBUF"
    assert registry.call("GET", f"/schemas/ids/{body['id']}")[1]["schema"] == text  # as registered
    de1 = pb.ProtobufDeserializer(item1, {"use.deprecated.format": False}, client)
    de2 = pb.ProtobufDeserializer(item2, {"use.deprecated.format": False}, client)
    assert (de1(d1, ctx).id, de1(d1, ctx).name) == (1, "a")
    got = de2(d2, ctx)
    assert (got.id, got.name, got.at.seconds) == (2, "b", 1700000000)
    assert de2(d1, ctx).at.seconds == 0  # an old record read with the new class
