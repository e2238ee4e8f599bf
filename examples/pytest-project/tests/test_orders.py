"""The application's tests, against a real Kafka-compatible broker from moldau's pytest plugin."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from orders import Order, audit, publish_orders, totals_by_customer

ORDERS = [Order(f"o{i}", f"customer-{i % 3}", 100 * (i + 1)) for i in range(9)]


def test_published_orders_reach_the_topic(moldau_broker, moldau_topic):
    assert publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS) == len(ORDERS)
    records = moldau_broker.expect_records(moldau_topic, len(ORDERS), timeout=20)
    assert sorted(Order.from_bytes(r.value) for r in records) == sorted(ORDERS)
    assert {r.key for r in records} == {b"customer-0", b"customer-1", b"customer-2"}


@pytest.mark.moldau_topic(partitions=3)
def test_totals_per_customer_with_a_consumer_group(moldau_broker, moldau_topic):
    publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS)
    group = f"totals-{uuid.uuid4().hex[:6]}"
    totals = totals_by_customer(moldau_broker.bootstrap_servers, moldau_topic, group, len(ORDERS))
    assert totals == {"customer-0": 1200, "customer-1": 1500, "customer-2": 1800}
    # the group committed: a second run finds nothing new
    assert totals_by_customer(moldau_broker.bootstrap_servers, moldau_topic, group, 1, timeout=3) == {}


def test_audit_copies_with_a_header(moldau_broker, moldau_topic):
    audit_topic = moldau_broker.create_topic(f"audit-{uuid.uuid4().hex[:6]}")
    publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS[:4])
    copied = asyncio.run(audit(moldau_broker.bootstrap_servers, moldau_topic, audit_topic, 4))
    assert copied == 4
    records = moldau_broker.expect_records(audit_topic, 4, timeout=20)
    assert all(("audited", b"1") in r.headers for r in records)


def test_moldau_client_fixtures(moldau_topic, moldau_producer, moldau_consumer):
    moldau_producer.send(moldau_topic, b"hello", key=b"k").result(10)
    moldau_consumer.subscribe([moldau_topic])
    got = []
    for _ in range(50):
        got += moldau_consumer.poll(timeout=0.5)
        if got:
            break
    assert [(r.key, r.value) for r in got] == [(b"k", b"hello")]
