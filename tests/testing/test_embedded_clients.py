"""EmbeddedBroker in each of its shapes (a thread or a child process; logs in memory or on disk) against the
three third-party clients: a round trip, a consumer group with committed offsets, and a transaction (one
committed, one aborted). The same scenarios as tests/integration, through the embedded broker's own API."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator

import pytest

from moldau.testing import EmbeddedBroker

MODES = ["thread-memory", "thread-disk", "process-memory", "process-disk"]
CLIENTS = ["confluent", "kafka-python", "aiokafka"]
TIMEOUT = 30.0


@pytest.fixture(scope="module", params=MODES)
def embedded(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    shape, storage = request.param.split("-")
    with EmbeddedBroker(process=shape == "process", memory=storage == "memory") as broker:
        yield broker


def _records(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % 4}".encode(), f"{tag}-{i}".encode()) for i in range(n)]


def _new_topic(broker: EmbeddedBroker, partitions: int = 2) -> str:
    return broker.create_topic(f"t-{uuid.uuid4().hex[:10]}", partitions)


# ------------------------------------------------------------------------------------------ clients
def produce(client: str, bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    if client == "confluent":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for k, v in records:
            p.produce(topic, value=v, key=k)
        assert p.flush(TIMEOUT) == 0
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for k, v in records:
            kp.send(topic, value=v, key=k)
        kp.flush(TIMEOUT)
        kp.close(TIMEOUT)
    else:
        from aiokafka import AIOKafkaProducer

        async def go() -> None:
            ap = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
            await ap.start()
            try:
                for k, v in records:
                    await ap.send(topic, value=v, key=k)
                await ap.flush()
            finally:
                await ap.stop()

        asyncio.run(go())


def consume_group(client: str, bootstrap: str, topic: str, group: str, n: int) -> list[tuple[bytes, bytes]]:
    """``n`` records through group membership (subscribe), committed; then the consumer leaves."""
    out: list[tuple[bytes, bytes]] = []
    if client == "confluent":
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "isolation.level": "read_committed"})
        try:
            c.subscribe([topic])
            end = time.monotonic() + TIMEOUT
            while len(out) < n and time.monotonic() < end:
                m = c.poll(0.5)
                if m is None:
                    continue
                assert m.error() is None, m.error()
                out.append((m.key(), m.value()))
            c.commit(asynchronous=False)
        finally:
            c.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer

        kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False, isolation_level="read_committed")
        try:
            end = time.monotonic() + TIMEOUT
            while len(out) < n and time.monotonic() < end:
                for recs in kc.poll(timeout_ms=500).values():
                    out.extend((r.key, r.value) for r in recs)
            kc.commit()
        finally:
            kc.close()
    else:
        from aiokafka import AIOKafkaConsumer

        async def go() -> None:
            ac = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                  auto_offset_reset="earliest", enable_auto_commit=False,
                                  isolation_level="read_committed")
            await ac.start()
            try:
                loop = asyncio.get_running_loop()
                end = loop.time() + TIMEOUT
                while len(out) < n and loop.time() < end:
                    for recs in (await ac.getmany(timeout_ms=500)).values():
                        out.extend((r.key, r.value) for r in recs)
                await ac.commit()
            finally:
                await ac.stop()

        asyncio.run(go())
    return out


def transact(client: str, bootstrap: str, topic: str, commit: list[tuple[bytes, bytes]],
             abort: list[tuple[bytes, bytes]]) -> None:
    """One transaction with ``commit`` committed, then one with ``abort`` aborted."""
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    if client == "confluent":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        p.init_transactions(TIMEOUT)
        for batch, done in ((commit, p.commit_transaction), (abort, p.abort_transaction)):
            p.begin_transaction()
            for k, v in batch:
                p.produce(topic, value=v, key=k)
            p.flush(TIMEOUT)
            done(TIMEOUT)
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        try:
            kp.init_transactions()
            for batch, ok in ((commit, True), (abort, False)):
                kp.begin_transaction()
                for k, v in batch:
                    kp.send(topic, value=v, key=k)
                kp.flush(TIMEOUT)
                if ok:
                    kp.commit_transaction()
                else:
                    kp.abort_transaction()
        finally:
            kp.close(TIMEOUT)
    else:
        from aiokafka import AIOKafkaProducer

        async def go() -> None:
            ap = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
            await ap.start()
            try:
                for batch, ok in ((commit, True), (abort, False)):
                    await ap.begin_transaction()
                    for k, v in batch:
                        await ap.send(topic, value=v, key=k)
                    if ok:
                        await ap.commit_transaction()
                    else:
                        await ap.abort_transaction()
            finally:
                await ap.stop()

        asyncio.run(go())


def _pairs(records: list) -> list[tuple[bytes, bytes]]:
    return [(r.key, r.value) for r in records]


# ------------------------------------------------------------------------------------------- scenarios
@pytest.mark.parametrize("client", CLIENTS)
def test_round_trip(embedded: EmbeddedBroker, client: str) -> None:
    topic = _new_topic(embedded)
    sent = _records(20, "rt")
    produce(client, embedded.bootstrap_servers, topic, sent)
    got = embedded.expect_records(topic, len(sent), TIMEOUT)
    assert sorted(_pairs(got)) == sorted(sent)
    by_key: dict[bytes, list[bytes]] = {}
    for r in got:  # one key, one partition, in the order sent
        by_key.setdefault(r.key, []).append(r.value)
        assert {x.partition for x in got if x.key == r.key} == {r.partition}
    for k, values in by_key.items():
        assert values == [v for kk, v in sent if kk == k]


@pytest.mark.parametrize("client", CLIENTS)
def test_group_commits_and_resumes(embedded: EmbeddedBroker, client: str) -> None:
    topic = _new_topic(embedded)
    group = f"g-{uuid.uuid4().hex[:8]}"
    first, second = _records(12, "one"), _records(8, "two")
    produce(client, embedded.bootstrap_servers, topic, first)
    got = consume_group(client, embedded.bootstrap_servers, topic, group, len(first))
    assert sorted(got) == sorted(first)
    produce(client, embedded.bootstrap_servers, topic, second)
    # the same group resumes at its committed offsets: only the new records
    assert sorted(consume_group(client, embedded.bootstrap_servers, topic, group, len(second))) \
        == sorted(second)
    offsets = embedded.admin().list_consumer_group_offsets(group)
    assert sum(o.offset for tp, o in offsets.items() if tp.topic == topic) == len(first) + len(second)


@pytest.mark.parametrize("client", CLIENTS)
def test_transaction_commit_and_abort(embedded: EmbeddedBroker, client: str) -> None:
    topic = _new_topic(embedded)
    committed, aborted = _records(6, "commit"), _records(5, "abort")
    transact(client, embedded.bootstrap_servers, topic, committed, aborted)
    got = embedded.expect_records(topic, len(committed), TIMEOUT)  # read_committed: exactly these
    assert sorted(_pairs(got)) == sorted(committed)
    everything = embedded.expect_records(topic, len(committed) + len(aborted), TIMEOUT,
                                         isolation_level="read_uncommitted")
    assert sorted(_pairs(everything)) == sorted(committed + aborted)


def test_modes_are_what_they_say(embedded: EmbeddedBroker) -> None:
    data = embedded.data_dir
    assert data is not None and os.path.isdir(data)
    if embedded.memory:
        from moldau.broker.memory import ram_parent

        assert os.path.dirname(data) == ram_parent()
    assert (embedded.broker is not None) == (not embedded.process)

