"""A tiny order pipeline: publish orders (confluent-kafka), total them per customer (kafka-python), and
an asyncio audit trail (aiokafka). Each function takes the bootstrap servers and the topic, as a real
application takes them from its configuration."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int

    def to_bytes(self) -> bytes:
        return json.dumps({"order_id": self.order_id, "customer": self.customer,
                           "amount_cents": self.amount_cents}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Order":
        d = json.loads(data)
        return cls(d["order_id"], d["customer"], int(d["amount_cents"]))


def publish_orders(bootstrap_servers: str, topic: str, orders: Iterable[Order]) -> int:
    """Publish orders keyed by customer (so one customer's orders keep their order); returns how many."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    n = 0
    for order in orders:
        producer.produce(topic, key=order.customer.encode(), value=order.to_bytes())
        n += 1
    if producer.flush(30) != 0:
        raise RuntimeError("orders were not delivered")
    return n


def totals_by_customer(bootstrap_servers: str, topic: str, group_id: str, expected: int,
                       timeout: float = 30.0) -> dict[str, int]:
    """Consume ``expected`` orders as member of ``group_id`` and sum them per customer; commits."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group_id,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    totals: dict[str, int] = {}
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    order = Order.from_bytes(r.value)
                    totals[order.customer] = totals.get(order.customer, 0) + order.amount_cents
                    seen += 1
        consumer.commit()
    finally:
        consumer.close()
    return totals


async def audit(bootstrap_servers: str, source: str, audit_topic: str, expected: int,
                timeout: float = 30.0) -> int:
    """Copy ``expected`` orders from ``source`` to ``audit_topic`` with an ``audited`` header (aiokafka)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest",
                                group_id=None)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    await consumer.start()
    await producer.start()
    copied = 0
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while copied < expected and loop.time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    await producer.send(audit_topic, key=r.key, value=r.value, headers=[("audited", b"1")])
                    copied += 1
        await producer.flush()
    finally:
        await consumer.stop()
        await producer.stop()
    return copied
