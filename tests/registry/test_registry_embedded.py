"""The registry inside the broker process (``schema.registry.listener``) with the default ``_schemas``
topic: state that survives a broker restart; and the migration case: a ``_schemas`` topic holding records
written in Confluent Schema Registry's own formats, read by moldau's registry."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from harness.brokerproc import free_port
from harness.registryutil import RegistryThread, avro_record, call

V1 = avro_record("Order", ("id", "long"))
V2 = avro_record("Order", ("id", "long"), ("qty", "int", 1))


@pytest.mark.durable("the registry's state is the _schemas topic, kept across the restart")
@pytest.mark.single_broker("restarts the broker it configured with schema.registry.listener")
@pytest.mark.moldau_only("schema.registry.listener is a moldau broker setting")
def test_in_broker_state_survives_restart(broker_factory: Any, kind: str) -> None:
    if kind == "kafka":
        pytest.skip("schema.registry.listener is a moldau broker setting; Apache Kafka has none")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    b = broker_factory({"schema.registry.listener": f"127.0.0.1:{port}"})

    def ready() -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                call(url, "GET", "/subjects")
                return
            except OSError:
                assert time.monotonic() < deadline, b.output()[-4000:]
                time.sleep(0.1)

    ready()
    assert call(url, "POST", "/subjects/o-value/versions", {"schema": V1}) == (200, {"id": 1})
    assert call(url, "POST", "/subjects/o-value/versions", {"schema": V2}) == (200, {"id": 2})
    assert call(url, "PUT", "/config/o-value", {"compatibility": "FULL"})[0] == 200
    assert call(url, "DELETE", "/subjects/o-value/versions/1") == (200, 1)
    before = {
        p: call(url, "GET", p)
        for p in (
            "/subjects",
            "/schemas?deleted=true",
            "/config/o-value",
            "/subjects/o-value/versions?deleted=true",
        )
    }
    b.restart()
    ready()
    for p, answer in before.items():
        assert call(url, "GET", p) == answer, p
    assert call(url, "POST", "/subjects/p-value/versions", {"schema": avro_record("P", ("x", "int"))}) == (
        200,
        {"id": 3},
    )  # ids continue after the replayed ones


def _confluent_records() -> list[tuple[str | None, str | None]]:
    """Records as Confluent's registry writes them to _schemas (its SchemaRegistryKey / SchemaRegistryValue
    JSON: keytype and magic in every key, the schema's JSON text as a string, schemaType absent for AVRO, a
    null value for a permanent delete)."""

    def k(**kw: Any) -> str:
        return json.dumps(kw, separators=(",", ":"))

    user1 = avro_record("User", ("name", "string"), namespace="com.example")
    user2 = avro_record("User", ("name", "string"), ("age", ["null", "int"], None), namespace="com.example")
    money = 'syntax = "proto3";\npackage shop;\n\nmessage Money {\n  int64 cents = 1;\n}\n'
    order = (
        'syntax = "proto3";\npackage shop;\n\nimport "money.proto";\n\n'
        "message Order {\n  Money total = 1;\n}\n"
    )
    return [
        (k(keytype="NOOP", magic=0), None),
        (k(keytype="CONFIG", subject=None, magic=0), k(compatibilityLevel="FULL")),
        (
            k(keytype="SCHEMA", subject="users-value", version=1, magic=1),
            k(subject="users-value", version=1, id=1, schema=user1, deleted=False),
        ),
        (
            k(keytype="SCHEMA", subject="users-value", version=2, magic=1),
            k(subject="users-value", version=2, id=2, schema=user2, deleted=False),
        ),
        (k(keytype="CONFIG", subject="users-value", magic=0), k(compatibilityLevel="BACKWARD_TRANSITIVE")),
        (
            k(keytype="SCHEMA", subject="money", version=1, magic=1),
            k(subject="money", version=1, id=3, schemaType="PROTOBUF", schema=money, deleted=False),
        ),
        (
            k(keytype="SCHEMA", subject="orders-value", version=1, magic=1),
            k(
                subject="orders-value",
                version=1,
                id=4,
                schemaType="PROTOBUF",
                schema=order,
                deleted=False,
                references=[{"name": "money.proto", "subject": "money", "version": 1}],
            ),
        ),
        # the same schema under a second subject keeps its id
        (
            k(keytype="SCHEMA", subject="users-copy", version=1, magic=1),
            k(subject="users-copy", version=1, id=1, schema=user1, deleted=False),
        ),
        # soft delete of a version: the record again with deleted true
        (
            k(keytype="SCHEMA", subject="old-value", version=1, magic=1),
            k(subject="old-value", version=1, id=5, schema=avro_record("Old", ("o", "int")), deleted=False),
        ),
        (
            k(keytype="SCHEMA", subject="old-value", version=1, magic=1),
            k(subject="old-value", version=1, id=5, schema=avro_record("Old", ("o", "int")), deleted=True),
        ),
        # a subject deleted (DELETE_SUBJECT) and then cleared (CLEAR_SUBJECT)
        (
            k(keytype="SCHEMA", subject="gone-value", version=1, magic=1),
            k(subject="gone-value", version=1, id=6, schema=avro_record("Gone", ("g", "int")), deleted=False),
        ),
        (k(keytype="DELETE_SUBJECT", subject="gone-value", magic=0), k(subject="gone-value", version=1)),
        (
            k(keytype="SCHEMA", subject="soft-value", version=1, magic=1),
            k(subject="soft-value", version=1, id=7, schema=avro_record("Soft", ("s", "int")), deleted=False),
        ),
        (k(keytype="DELETE_SUBJECT", subject="soft-value", magic=0), k(subject="soft-value", version=1)),
        (k(keytype="CLEAR_SUBJECT", subject="gone-value", magic=0), k(subject="gone-value")),
        # a permanent delete: tombstones
        (
            k(keytype="SCHEMA", subject="hard-value", version=1, magic=1),
            k(subject="hard-value", version=1, id=8, schema=avro_record("Hard", ("h", "int")), deleted=True),
        ),
        (k(keytype="SCHEMA", subject="hard-value", version=1, magic=1), None),
        (k(keytype="MODE", subject="frozen-value", magic=0), k(mode="READONLY")),
        # a key type of newer registries (contexts) and a record that is not JSON: skipped
        (k(keytype="CONTEXT", tenant="default", context=".", magic=0), k(tenant="default", context=".")),
        ("not json", "either"),
    ]


def test_reads_confluent_schemas_topic(broker: Any) -> None:
    from confluent_kafka import Consumer, Producer

    topic = f"_schemas-confluent-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    del admin
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for key, value in _confluent_records():
        p.produce(
            topic, value=None if value is None else value.encode(), key=None if key is None else key.encode()
        )
    assert p.flush(30) == 0
    del p
    r = RegistryThread(broker.bootstrap, topic=topic).start()
    try:
        assert r.call("GET", "/subjects") == (200, ["money", "orders-value", "users-copy", "users-value"])
        assert r.call("GET", "/subjects?deleted=true")[1] == [
            "money",
            "old-value",
            "orders-value",
            "soft-value",
            "users-copy",
            "users-value",
        ]
        assert r.call("GET", "/config") == (200, {"compatibilityLevel": "FULL"})
        assert r.call("GET", "/config/users-value") == (200, {"compatibilityLevel": "BACKWARD_TRANSITIVE"})
        assert r.call("GET", "/mode/frozen-value") == (200, {"mode": "READONLY"})
        assert r.call("GET", "/subjects/users-value/versions/latest")[1]["id"] == 2
        assert r.call("GET", "/schemas/ids/1/subjects") == (200, ["users-copy", "users-value"])
        assert r.call("GET", "/schemas/ids/4")[1]["schemaType"] == "PROTOBUF"
        assert r.call("GET", "/subjects/money/versions/1/referencedby") == (200, [4])
        assert r.call("GET", "/schemas/ids/8")[1]["error_code"] == 40403
        assert r.call("GET", "/schemas/ids/6")[1]["error_code"] == 40403
        # the rules apply to the migrated history: BACKWARD_TRANSITIVE against both users versions
        bad = avro_record("User", ("name", "int"), namespace="com.example")
        assert r.call("POST", "/subjects/users-value/versions", {"schema": bad})[0] == 409
        # a new registration continues the ids and is written in the same format
        new = avro_record("Fresh", ("f", "int"))
        assert r.call("POST", "/subjects/fresh-value/versions", {"schema": new}) == (200, {"id": 9})
    finally:
        r.stop()
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        last = None
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None and b"fresh-value" in (m.key() or b""):
                last = m
                break
    finally:
        c.close()
    assert last is not None
    assert json.loads(last.key()) == {"keytype": "SCHEMA", "subject": "fresh-value", "version": 1, "magic": 1}
    assert json.loads(last.value()) == {
        "subject": "fresh-value",
        "version": 1,
        "id": 9,
        "schema": new,
        "deleted": False,
    }
