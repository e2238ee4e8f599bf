"""Third-party clients against one shared three-broker cluster (replication factor 3 everywhere).

The default run's slice of ``MOLDAU_TEST_BROKER=cluster`` (the whole integration suite against a cluster,
docs/cluster.md): one ZooKeeper and three brokers for the module; per client (confluent-kafka, kafka-python,
aiokafka, kcat, moldau's own client) a produce/consume round trip of awkward records and a consumer group of
two members, one exactly-once transaction scenario, and admin calls answered consistently by every broker.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from moldau.broker.cluster.local import LocalCluster

from harness.clients import AioKafka, Confluent, KafkaPython, Kcat, Spec, assert_same, make_records
from harness.clusterutil import QUIET, admin, create_topic, fully_replicated, partitions, wait_until
from harness.kafkautil import Rec, consume_confluent

T = 30.0  # seconds for any one wait; generous: the machine is shared


@pytest.fixture(scope="module")
def cl(module_cluster: LocalCluster) -> LocalCluster:
    return module_cluster


def new_topic(c: LocalCluster, prefix: str, n: int) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(c.bootstrap, name, n, 3)
    for b in c.brokers:  # CreateTopics answers once its broker has the leaders; the others follow at once
        wait_until(lambda b=b: fully_replicated(b.address, name, 3), T, f"{name} on broker {b.node_id}")
    return name


# ---------------------------------------------------------------------------------------- round trips


class Moldau(Confluent):
    """moldau's own client (sync facade): explicit partitions, headers and timestamps; assign() to read."""

    name = "moldau"

    def produce(self, bootstrap: str, topic: str, specs: list[Spec], compression: str | None = None) -> None:
        from moldau.client import Producer as MProducer

        with MProducer(bootstrap_servers=bootstrap, acks="all") as p:
            futs = [p.send(topic, value=s.value, key=s.key, partition=s.partition, headers=s.headers,
                           timestamp=s.timestamp) for s in specs]
            for f in futs:
                f.result(T)

    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int, *, group: bool = True,
                timeout: float = T, isolation: str = "read_uncommitted") -> list[Rec]:
        from moldau.client import Consumer as MConsumer
        from moldau.client import TopicPartition as MTP

        c = MConsumer(config={"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "isolation.level": isolation})
        try:
            c.assign([MTP(topic, p) for p in range(partitions)])
            out: list[Rec] = []
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for m in c.poll(0.2):
                    out.append(Rec(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                   m.timestamp))
            return out
        finally:
            c.close()


CLIENTS = [Confluent(), KafkaPython(), AioKafka(), Moldau()]


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_roundtrip(cl: LocalCluster, client: Any) -> None:
    """Awkward records over 6 partitions, acks=all: the client reads back exact bytes (through a group where
    it has one), confluent-kafka reads them from the leaders independently, every replica in the ISR."""
    topic = new_topic(cl, f"rt-{client.name}", 6)
    specs = make_records(6, 6, client.caps, seed=11)
    client.produce(cl.bootstrap, topic, specs)
    read = client.consume(cl.bootstrap, topic, 6, len(specs), group=client.caps.groups)
    assert_same(specs, read, check_headers=client.caps.headers, check_timestamps=client.caps.timestamps)
    read2 = consume_confluent(cl.bootstrap, topic, 6, len(specs))
    assert_same(specs, read2, check_headers=client.caps.headers, check_timestamps=client.caps.timestamps)
    assert fully_replicated(cl.brokers[0].address, topic, 3)


def kcat_path() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat is not installed: run ./scripts/setup.sh --test (installs the Debian package kcat)")
    return path


def test_kcat_roundtrip(cl: LocalCluster) -> None:
    k = Kcat(kcat_path())
    topic = new_topic(cl, "rt-kcat", 6)
    specs = k.headers_for(make_records(6, 6, k.caps, seed=12))
    k.produce(cl.bootstrap, topic, specs)
    assert_same(specs, k.consume(cl.bootstrap, topic, 6, len(specs)), check_headers=False,
                check_timestamps=False)
    assert_same(specs, consume_confluent(cl.bootstrap, topic, 6, len(specs)), check_headers=True,
                check_timestamps=False)


# ---------------------------------------------------------------------------------------- groups


class Member(threading.Thread):
    """One group member of one client library, consuming in its own thread until closed."""

    def __init__(self, lib: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True, name=f"{lib}-member")
        self.lib, self.bootstrap, self.group, self.topic = lib, bootstrap, group, topic
        self.assignment: set[int] = set()
        self.records: list[tuple[int, int]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            getattr(self, "_run_" + self.lib.replace("-", "_"))()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def _run_confluent(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "logger": QUIET,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000})
        c.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                m = c.poll(0.1)
                self.assignment = {tp.partition for tp in c.assignment()}
                if m is not None and not m.error():
                    self.records.append((m.partition(), m.offset()))
                    c.commit(message=m, asynchronous=False)
        finally:
            c.close()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import RebalanceInProgressError

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                          auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000)
        # the topic's metadata first: a kafka-python group leader that assigns before its metadata has the
        # topic hands out nothing, and (a race in kafka-python 3.0) may not rebalance when it arrives
        wait_until(lambda: c.partitions_for_topic(self.topic), T, "kafka-python metadata of the topic")
        c.subscribe([self.topic])
        pending = False
        try:
            while not self.stop.is_set():
                got = c.poll(timeout_ms=100)
                self.assignment = {tp.partition for tp in c.assignment()}
                for recs in got.values():
                    self.records.extend((r.partition, r.offset) for r in recs)
                if got or pending:
                    try:
                        c.commit()
                        pending = False
                    except RebalanceInProgressError:
                        # kafka-python's documented answer: finish the rebalance in poll(), then commit
                        # again (the consumed positions, so nothing is lost; a redelivery would show below)
                        pending = True
        finally:
            c.close()

    def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer

        async def go() -> None:
            c = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=10000)
            await c.start()
            try:
                while not self.stop.is_set():
                    got = await c.getmany(timeout_ms=100)
                    self.assignment = {tp.partition for tp in c.assignment()}
                    for recs in got.values():
                        self.records.extend((r.partition, r.offset) for r in recs)
                    if got:
                        await c.commit()
            finally:
                await c.stop()

        asyncio.run(go())

    def _run_moldau(self) -> None:
        from moldau.client import Consumer as MConsumer

        c = MConsumer(self.topic, config={"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                          "session.timeout.ms": 10000})
        try:
            while not self.stop.is_set():
                got = c.poll(0.1)
                self.assignment = {tp.partition for tp in c.assignment()}
                self.records.extend((m.partition, m.offset) for m in got)
                if got:
                    c.commit()
        finally:
            c.close(autocommit=False)


def committed_offsets(bootstrap: str, group: str, topic: str, n: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": QUIET})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(n)], timeout=T)}
    finally:
        c.close()


def produce_spread(bootstrap: str, topic: str, n: int, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": QUIET})
    for i in range(n * per_partition):
        p.produce(topic, value=b"g%d" % i, partition=i % n)
    assert p.flush(T) == 0


@pytest.mark.parametrize("lib", ["confluent", "kafka-python", "aiokafka", "moldau"])
def test_consumer_group(cl: LocalCluster, lib: str) -> None:
    """Two members share 6 partitions (the coordinator is the leader of the group's __consumer_offsets
    partition, on any broker): each record consumed once; the committed offsets reach the end of every
    partition and are read back through another broker's coordinator lookup."""
    topic = new_topic(cl, f"grp-{lib}", 6)
    group = f"g-{lib}-{uuid.uuid4().hex[:6]}"
    members = [Member(lib, cl.bootstrap, group, topic) for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: all(m.assignment for m in members)
                   and set().union(*(m.assignment for m in members)) == set(range(6))
                   and sum(len(m.assignment) for m in members) == 6, T,
                   f"the two members to share the 6 partitions ({[m.assignment for m in members]})")
        produce_spread(cl.bootstrap, topic, 6, 10)
        wait_until(lambda: sum(len(m.records) for m in members) >= 60, T, "60 records consumed")
        time.sleep(0.5)  # nothing more may come
        seen = Counter(r for m in members for r in m.records)
        assert set(seen) == {(p, o) for p in range(6) for o in range(10)} and set(seen.values()) == {1}
        for m in members:  # each read only its own partitions
            assert {p for p, _ in m.records} == m.assignment
        addr = cl.brokers[2].address
        wait_until(lambda: committed_offsets(addr, group, topic, 6) == {p: 10 for p in range(6)}, T,
                   "committed offsets at the end of every partition")
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(T)
    assert [m.error for m in members] == [None, None]


def test_kcat_consumer_group(cl: LocalCluster) -> None:
    """kcat's balanced consumer (-G): every record once, its offsets committed for the group."""
    topic = new_topic(cl, "grp-kcat", 6)
    group = f"g-kcat-{uuid.uuid4().hex[:6]}"
    produce_spread(cl.bootstrap, topic, 6, 10)
    out = subprocess.run(
        [kcat_path(), "-b", cl.bootstrap, "-G", group, "-o", "beginning", "-e", "-f", "%p|%o\\n",
         "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic],
        capture_output=True, timeout=90, check=True,
    ).stdout
    seen = Counter(tuple(int(x) for x in line.split(b"|")) for line in out.splitlines() if line)
    assert set(seen) == {(p, o) for p in range(6) for o in range(10)} and set(seen.values()) == {1}
    assert committed_offsets(cl.bootstrap, group, topic, 6) == {p: 10 for p in range(6)}


# ---------------------------------------------------------------------------------------- transactions


def test_exactly_once_transactions(cl: LocalCluster) -> None:
    """confluent-kafka consume-transform-produce with its offsets in the transaction (coordinators on any
    broker; __transaction_state and __consumer_offsets replicated 3 times); a committed and an aborted
    transaction: read_committed readers (confluent-kafka, kafka-python, moldau) see exactly the committed
    output, and the group's committed offset is the committed transaction's."""
    src = new_topic(cl, "eos-src", 3)
    dst = new_topic(cl, "eos-dst", 3)
    produce_spread(cl.bootstrap, src, 3, 4)
    group = f"eos-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": cl.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "logger": QUIET})
    c.assign([TopicPartition(src, p) for p in range(3)])
    p = Producer({"bootstrap.servers": cl.bootstrap, "transactional.id": f"eos-{uuid.uuid4().hex[:6]}",
                  "logger": QUIET})
    p.init_transactions(T)
    try:
        got: list[Any] = []
        deadline = time.monotonic() + T
        while len(got) < 12 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m)
        assert len(got) == 12
        for commit, batch in ((True, got), (False, got)):  # the second, aborted, would duplicate
            p.begin_transaction()
            for m in batch:
                value = m.value().upper() + (b"" if commit else b"-dup")
                p.produce(dst, value=value, partition=m.partition())
            offs = [TopicPartition(src, part, 4 if commit else 99) for part in range(3)]
            p.send_offsets_to_transaction(offs, c.consumer_group_metadata(), T)
            if commit:
                p.commit_transaction(T)
            else:
                p.abort_transaction(T)
    finally:
        c.close()
    want = sorted(m.value().upper() for m in got)
    assert sorted(r.value for r in consume_confluent(cl.bootstrap, dst, 3, 12,
                                                      conf={"isolation.level": "read_committed"})) == want
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    k = KafkaConsumer(bootstrap_servers=cl.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        k.assign([KTP(dst, i) for i in range(3)])
        assert sorted(r.value for r in k) == want
    finally:
        k.close()
    moldau_read = Moldau().consume(cl.bootstrap, dst, 3, 12, isolation="read_committed")
    assert sorted(r.value for r in moldau_read) == want
    assert committed_offsets(cl.brokers[1].address, group, src, 3) == {0: 4, 1: 4, 2: 4}


# ---------------------------------------------------------------------------------------- admin


def test_admin_calls_agree_on_every_broker(cl: LocalCluster) -> None:
    a = admin(cl.bootstrap)
    md = a.list_topics(timeout=T)
    assert sorted(md.brokers) == [1, 2, 3] and md.controller_id in (1, 2, 3)
    name = f"adm-{uuid.uuid4().hex[:8]}"
    # more replicas than brokers: refused; three: one on each broker
    with pytest.raises(KafkaException) as info:
        a.create_topics([NewTopic(name, 2, 4)], request_timeout=T)[name].result(T)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    a.create_topics([NewTopic(name, 2, 3)], request_timeout=T)[name].result(T)
    for b in cl.brokers:  # CreateTopics answered once its broker had the leaders
        ps = partitions(b.address, name)
        assert sorted(ps) == [0, 1] and all(sorted(p.replicas) == [1, 2, 3] and p.leader > 0
                                           for p in ps.values())
    # a topic config set through one broker is what every broker describes (it lives in ZooKeeper)
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(T)

    def retention(addr: str) -> str:
        r = ConfigResource(ResourceType.TOPIC, name)
        one = admin(addr)  # kept until the result is in (a collected client cancels its futures)
        return one.describe_configs([r], request_timeout=T)[r].result(T)["retention.ms"].value

    for b in cl.brokers:
        wait_until(lambda b=b: retention(b.address) == "3600000", T, f"retention.ms on broker {b.node_id}")
    # more partitions, replicated on three brokers too, usable at once
    a.create_partitions([NewPartitions(name, 4)], request_timeout=T)[name].result(T)
    wait_until(lambda: fully_replicated(cl.brokers[2].address, name, 3) and
               len(partitions(cl.brokers[2].address, name)) == 4, T, "4 replicated partitions")
    produce_spread(cl.bootstrap, name, 4, 5)
    # records deletion on the leader moves the earliest offset seen through any broker
    from confluent_kafka import TopicPartition as CTP

    r = a.delete_records([CTP(name, 3, 2)], request_timeout=T)
    assert r[CTP(name, 3, 2)].result(T).low_watermark == 2
    low = Consumer({"bootstrap.servers": cl.brokers[0].address, "group.id": "w", "logger": QUIET})
    try:
        assert low.get_watermark_offsets(CTP(name, 3), timeout=T) == (2, 5)
    finally:
        low.close()
    # kafka-python's admin client sees the same cluster
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=cl.bootstrap)
    try:
        desc = kp.describe_cluster()
        ids = sorted(b.get("node_id", b.get("broker_id")) for b in desc["brokers"])
        assert ids == [1, 2, 3], desc
        assert desc["controller_id"] == md.controller_id
    finally:
        kp.close()
    # deleted: gone from every broker's metadata
    a.delete_topics([name], request_timeout=T)[name].result(T)
    for b in cl.brokers:
        wait_until(lambda b=b: name not in admin(b.address).list_topics(timeout=T).topics, T,
                   f"{name} gone from broker {b.node_id}")

