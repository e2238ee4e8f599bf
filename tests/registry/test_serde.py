"""moldau's Confluent-framed Avro serializers (moldau.registry.serde) with the moldau client, interchangeable
with confluent-kafka's: records written by one are read by the other, across two schema versions."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from moldau.client import Consumer, Producer
from moldau.registry.serde import AvroDeserializer, AvroSerializer, RegistryClient

from harness.registryutil import RegistryThread, avro_record

V1 = avro_record("Click", ("user", "string"), ("n", "int"), namespace="web")
V2 = avro_record("Click", ("user", "string"), ("n", "long"), ("page", "string", "/"), namespace="web")


def _moldau_read(bootstrap: str, topic: str, deser: Any, count: int) -> list[Any]:
    c = Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}-{uuid.uuid4().hex[:6]}",  # a group per read: each reads from the start
        auto_offset_reset="earliest",
        value_deserializer=deser,
    )
    try:
        out: list[Any] = []
        for _ in range(60):
            out += [r.value for r in c.poll(0.5)]
            if len(out) >= count:
                return out
        return out
    finally:
        c.close()


def test_moldau_and_confluent_serializers_interoperate(
    registry: RegistryThread, broker: Any, make_topic: Callable[..., str]
) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CKDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CKSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = RegistryClient(registry.url)
    ck = SchemaRegistryClient({"url": registry.url})
    # moldau writes with two versions, confluent-kafka reads
    topic = make_topic()
    p = Producer(bootstrap_servers=broker.bootstrap)
    try:
        s1, s2 = AvroSerializer(client, V1, topic=topic), AvroSerializer(client, V2, topic=topic)
        p.send(topic, s1({"user": "ann", "n": 1}))
        p.send(topic, s2({"user": "bob", "n": 2, "page": "/cart"}))
        p.flush()
    finally:
        p.close()
    assert ck.get_versions(f"{topic}-value") == [1, 2]
    c = CKConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"ck-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == 2:
                break
    finally:
        c.close()
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert [CKDeserializer(ck, V2)(v, ctx) for v in got] == [
        {"user": "ann", "n": 1, "page": "/"},
        {"user": "bob", "n": 2, "page": "/cart"},
    ]
    # confluent-kafka writes, moldau reads (its own writer's schema, then with V2 as the reader's)
    topic2 = make_topic()
    ckp = CKProducer({"bootstrap.servers": broker.bootstrap})
    ctx2 = SerializationContext(topic2, MessageField.VALUE)
    ckp.produce(topic2, CKSerializer(ck, V1)({"user": "cy", "n": 3}, ctx2))
    assert ckp.flush(30) == 0
    del ckp
    assert _moldau_read(broker.bootstrap, topic2, AvroDeserializer(client), 1) == [{"user": "cy", "n": 3}]
    assert _moldau_read(broker.bootstrap, topic2, AvroDeserializer(client, V2), 1) == [
        {"user": "cy", "n": 3, "page": "/"}
    ]


def test_serde_errors(registry: RegistryThread) -> None:
    client = RegistryClient(registry.url)
    with pytest.raises(ValueError):
        AvroSerializer(client, V1)  # neither topic nor subject
    with pytest.raises(ValueError):
        AvroDeserializer(client)(b"\x01\x00\x00\x00\x01abc")  # not magic byte 0
    ser = AvroSerializer(client, V1, subject="serde-unregistered", auto_register=False)
    with pytest.raises(Exception) as e:
        ser({"user": "x", "n": 1})
    assert getattr(e.value, "code", None) == 40401
    assert AvroSerializer(client, V1, subject="serde-null")(None) is None


def test_json_serializers_interoperate(registry: RegistryThread) -> None:
    import jsonschema
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CKJsonDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer as CKJsonSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from moldau.registry.serde import JsonDeserializer, JsonSerializer

    schema = (
        '{"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}, '
        '"required": ["sku"]}'
    )
    client = RegistryClient(registry.url)
    ck = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext("json-serde", MessageField.VALUE)
    ours = JsonSerializer(client, schema, topic="json-serde")({"sku": "a1", "qty": 2})
    assert CKJsonDeserializer(None, schema_registry_client=ck)(ours, ctx) == {"sku": "a1", "qty": 2}
    theirs = CKJsonSerializer(schema, ck)({"sku": "b2"}, ctx)
    assert JsonDeserializer(client)(theirs) == {"sku": "b2"}
    assert ours[1:5] == theirs[1:5]  # one subject, one schema, one id
    with pytest.raises(jsonschema.ValidationError):
        JsonSerializer(client, schema, topic="json-serde")({"qty": 1})  # sku is required


def _proto_pool() -> Any:
    """money.proto (shop.Money) and order.proto (shop.Note; shop.Order with a nested Line; Order imports
    money.proto), as a descriptor pool built by hand (no protoc)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(name="money.proto", package="shop", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=3, label=1, json_name="cents")
    pool.Add(money)
    order = descriptor_pb2.FileDescriptorProto(
        name="order.proto", package="shop", syntax="proto3", dependency=["money.proto"]
    )
    note = order.message_type.add(name="Note")
    note.field.add(name="text", number=1, type=9, label=1, json_name="text")
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=3, label=1, json_name="id")
    o.field.add(name="total", number=2, type=11, label=1, type_name=".shop.Money", json_name="total")
    line = o.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1, json_name="sku")
    pool.Add(order)
    return pool


def test_protobuf_serializers_interoperate(registry: RegistryThread) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CKProtoDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CKProtoSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import message_factory

    from moldau.registry.serde import ProtobufDeserializer, ProtobufSerializer, message_indexes

    pool = _proto_pool()
    order_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    line_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order.Line"))
    assert message_indexes(order_cls.DESCRIPTOR) == [1] and message_indexes(line_cls.DESCRIPTOR) == [1, 0]
    client = RegistryClient(registry.url)
    ck = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext("pb-serde", MessageField.VALUE)
    order = order_cls(id=7)
    order.total.cents = 1250
    ours = ProtobufSerializer(client, order_cls, topic="pb-serde")(order)
    assert ck.get_latest_version("pb-serde-value").schema.references[0].subject == "money.proto"
    conf = {"use.deprecated.format": False}
    assert CKProtoDeserializer(order_cls, conf, ck)(ours, ctx) == order
    theirs = CKProtoSerializer(order_cls, ck, conf)(order, ctx)
    assert ProtobufDeserializer(order_cls)(theirs) == order
    assert ours == theirs  # the same id, indexes and bytes
    # a nested message: indexes [1, 0]
    lines = ProtobufSerializer(client, line_cls, subject="pb-lines")(line_cls(sku="x-1"))
    assert CKProtoDeserializer(line_cls, conf, ck)(lines, ctx).sku == "x-1"
    assert ProtobufDeserializer(line_cls)(lines).sku == "x-1"
