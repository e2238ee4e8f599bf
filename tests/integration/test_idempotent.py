"""Idempotent producers: no duplicates, order kept, also when Produce responses are lost.

Clients: confluent-kafka (enable.idempotence=true), kafka-python 3 (idempotent by default),
aiokafka (enable_idempotence=True, which sends InitProducerId v0).

The fault test puts a proxy (faultproxy.FaultProxy) between clients and broker that lets some Produce
requests through but swallows their responses and drops the connection; the clients retry the same
batches (same producer id, epoch and sequence), and the broker must recognise them as duplicates.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from harness.faultproxy import FaultProxy
from harness.kafkautil import consume_confluent, create_topic, read_all_confluent, unique_topic

PARTITIONS = 3


def _value(p: int, seq: int) -> bytes:
    return b"%d:%06d" % (p, seq)


def produce_confluent_idem(bootstrap: str, topic: str, n: int, chunk: int) -> None:
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
        "retry.backoff.ms": 50, "reconnect.backoff.ms": 20, "socket.timeout.ms": 10000,
        "request.timeout.ms": 10000, "message.timeout.ms": 60000,
        # the fault proxy drops connections under this producer on purpose: its disconnects go to logging
        # (captured by pytest) instead of librdkafka's stderr
        "logger": logging.getLogger("test_idempotent.producer"),
    })
    for i in range(n):
        part = i % PARTITIONS
        p.produce(topic, value=_value(part, i // PARTITIONS), key=b"k", partition=part,
                  on_delivery=lambda err, msg: err and errors.append(err))
        if i % chunk == chunk - 1:
            p.poll(0)
            assert p.flush(60) == 0
    assert p.flush(60) == 0
    assert not errors, errors[:3]


def produce_kafka_python_idem(bootstrap: str, topic: str, n: int, chunk: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, retry_backoff_ms=50,
                      request_timeout_ms=10000, reconnect_backoff_ms=20)
    assert p.config["enable_idempotence"], "kafka-python 3 is expected to be idempotent by default"
    futures = []
    try:
        for i in range(n):
            part = i % PARTITIONS
            futures.append(p.send(topic, value=_value(part, i // PARTITIONS), key=b"k", partition=part))
            if i % chunk == chunk - 1:
                p.flush(timeout=60)
        p.flush(timeout=60)
        for f in futures:
            f.get(timeout=60)
    finally:
        p.close(timeout=5)


def produce_aiokafka_idem(bootstrap: str, topic: str, n: int, chunk: int) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=2,
                             retry_backoff_ms=50, request_timeout_ms=10000)
        await p.start()
        try:
            futs = []
            for i in range(n):
                part = i % PARTITIONS
                futs.append(
                    await p.send(topic, value=_value(part, i // PARTITIONS), key=b"k", partition=part)
                )
                if i % chunk == chunk - 1:
                    await p.flush()
            await p.flush()
            await asyncio.wait_for(asyncio.gather(*futs), 60)
        finally:
            await p.stop()

    asyncio.run(go())


PRODUCERS = [
    pytest.param(produce_confluent_idem, id="confluent"),
    pytest.param(produce_kafka_python_idem, id="kafka-python"),
    pytest.param(produce_aiokafka_idem, id="aiokafka", marks=pytest.mark.tansu_gap(
        "aiokafka's InitProducerId v0 gets UnknownError from tansu (the pitfall)")),
]


def _check_exactly_once_in_order(bootstrap: str, topic: str, n: int) -> None:
    recs = consume_confluent(bootstrap, topic, PARTITIONS, n, timeout=30)
    per: dict[int, list] = {}
    for r in sorted(recs, key=lambda r: (r.partition, r.offset)):
        per.setdefault(r.partition, []).append(r)
    for part in range(PARTITIONS):
        count = len(range(part, n, PARTITIONS))
        got = per.get(part, [])
        values = [r.value for r in got]
        dups = len(values) - len(set(values))
        assert dups == 0, f"partition {part}: {dups} duplicate records"
        assert values == [_value(part, s) for s in range(count)], f"partition {part}: order/content differs"
        assert [r.offset for r in got] == list(range(count)), f"partition {part}: offsets not contiguous"


@pytest.mark.parametrize("produce", PRODUCERS)
def test_idempotent_produce(broker, produce):
    topic = create_topic(broker.bootstrap, unique_topic("idem"), PARTITIONS)
    n = 1500
    produce(broker.bootstrap, topic, n, chunk=250)
    _check_exactly_once_in_order(broker.bootstrap, topic, n)


@pytest.fixture
def proxied(broker_factory):
    proxy = FaultProxy()
    b = broker_factory(advertised_port=proxy.listen_port)
    proxy.target = ("127.0.0.1", b.port)
    yield b, proxy
    proxy.close()


@pytest.mark.parametrize("produce", PRODUCERS)
def test_idempotent_retry_after_lost_responses(proxied, produce):
    """Responses of some Produce requests are lost (connection dropped after the broker wrote the
    batch): the client retries, and the log still holds every record exactly once, in order."""
    broker, proxy = proxied
    topic = create_topic(proxy.bootstrap, unique_topic("idem-fault"), PARTITIONS)
    n = 1200
    proxy.arm(drop_every=3, max_drops=3)
    t0 = time.monotonic()
    produce(proxy.bootstrap, topic, n, chunk=60)
    proxy.disarm()
    assert proxy.drops >= 1, (
        f"no Produce response was dropped ({proxy.produce_responses} seen): test is vacuous"
    )
    assert time.monotonic() - t0 < 60
    _check_exactly_once_in_order(proxy.bootstrap, topic, n)
    assert broker.alive()


def test_control_non_idempotent_producer_duplicates(proxied):
    """Control for the fault test: under the same lost responses, a producer WITHOUT idempotence
    writes duplicates. This shows the proxy really makes clients resend already-written batches."""
    from confluent_kafka import Producer

    _broker, proxy = proxied
    topic = create_topic(proxy.bootstrap, unique_topic("nonidem-fault"), 1)
    proxy.arm(drop_every=3, max_drops=3)
    p = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": False, "acks": "all",
                  "linger.ms": 2, "retry.backoff.ms": 50, "reconnect.backoff.ms": 20,
                  "max.in.flight.requests.per.connection": 1,
                  "logger": logging.getLogger("test_idempotent.producer")})  # disconnects: see above
    n = 600
    for i in range(n):
        p.produce(topic, value=b"%06d" % i, partition=0)
        if i % 60 == 59:
            assert p.flush(60) == 0
    assert p.flush(60) == 0
    proxy.disarm()
    assert proxy.drops >= 1
    values = [r.value for r in read_all_confluent(proxy.bootstrap, topic, 1)]
    assert set(values) == {b"%06d" % i for i in range(n)}
    assert len(values) > n, f"expected duplicates from retried batches, log has {len(values)} for {n} sent"
