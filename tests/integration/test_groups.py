"""Consumer groups against a real broker process, driven by real clients (confluent-kafka/librdkafka,
kafka-python, aiokafka): sharing partitions, members leaving and dying, committed offsets across consumer and
broker restarts, cooperative-sticky, static membership, mixed-client groups, the admin APIs and KIP-848.

Members run in threads (confluent-kafka, kafka-python, aiokafka in its own event loop) or, where a member must
be killed with SIGKILL, in subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.kafkautil import committed_after_restart, create_topic, unique_topic

TIMEOUT = 30.0
SESSION_MS = 6000
HEARTBEAT_MS = 500


def group_name(prefix: str = "grp") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until(pred: Callable[[], bool], timeout: float = TIMEOUT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
    errors: list[Any] = []
    for i, v in enumerate(values):
        kw = {} if partitions is None else {"partition": i % partitions}
        while True:
            try:
                p.produce(topic, value=v, on_delivery=lambda e, m: errors.append(e) if e else None, **kw)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    assert not errors, errors[:3]


class Producing(threading.Thread):
    """Writes ``n`` records (values ``b"<i>"``) round-robin over the partitions, a few ms apart."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, n: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.n = bootstrap, topic, partitions, n
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 1, "acks": "all"})
            for i in range(self.n):
                p.produce(self.topic, value=str(i).encode(), partition=i % self.partitions)
                if i % 20 == 19:
                    p.poll(0)
                    time.sleep(0.01)
            assert p.flush(TIMEOUT) == 0
        except BaseException as exc:  # noqa: BLE001
            self.error = exc


# -------------------------------------------------------------------------------------------- members


class Member(threading.Thread):
    """A group member in a thread: consumes, commits synchronously after every batch, records what it saw."""

    lib = "?"

    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topics, self.conf = bootstrap, group, topics, conf
        self.records: list[tuple[str, int, int, bytes]] = []
        self.assignment: set[tuple[str, int]] = set()
        self.events: list[tuple[str, set[tuple[str, int]]]] = []
        self.stop_evt = threading.Event()
        self.error: BaseException | None = None
        self.t_subscribe = 0.0
        self.t_first: float | None = None
        self.lock = threading.Lock()

    def got(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            if self.t_first is None:
                self.t_first = time.monotonic()
            self.records.append((topic, partition, offset, value))

    def close(self, timeout: float = TIMEOUT) -> None:
        self.stop_evt.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.lib} member did not stop"
        if self.error is not None:
            raise self.error

    @property
    def first_record_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_subscribe

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc


class ConfluentMember(Member):
    lib = "confluent-kafka"

    def loop(self) -> None:
        self.t_subscribe = time.monotonic()
        defaults = self.conf.pop("_defaults", False)
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **({} if defaults else {"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS}),
            **self.conf,
        }
        if conf.get("group.protocol") == "consumer":
            for k in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
                conf.pop(k, None)
        c = Consumer(conf)
        # incremental callbacks: cooperative-sticky, and always with the KIP-848 protocol
        cooperative = (
            "cooperative" in str(conf.get("partition.assignment.strategy", ""))
            or conf.get("group.protocol") == "consumer"
        )

        def on_assign(consumer: Any, parts: list[TopicPartition]) -> None:
            got = {(p.topic, p.partition) for p in parts}
            self.events.append(("assign", got))
            self.assignment = self.assignment | got if cooperative else got

        def on_revoke(consumer: Any, parts: list[TopicPartition]) -> None:
            gone = {(p.topic, p.partition) for p in parts}
            self.events.append(("revoke", gone))
            self.assignment = self.assignment - gone

        c.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop_evt.is_set():
                msgs = c.consume(num_messages=500, timeout=0.1)
                good = []
                for m in msgs:
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaException(m.error())
                    good.append(m)
                    self.got(m.topic(), m.partition(), m.offset(), m.value())
                if good:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException as exc:
                        if exc.args[0].code() not in (
                            KafkaError.REBALANCE_IN_PROGRESS,
                            KafkaError.ILLEGAL_GENERATION,
                            KafkaError.UNKNOWN_MEMBER_ID,
                            KafkaError._NO_OFFSET,
                            KafkaError.STALE_MEMBER_EPOCH,
                        ):
                            raise
        finally:
            c.close()


class KafkaPythonMember(Member):
    lib = "kafka-python"

    def loop(self) -> None:
        from kafka import KafkaConsumer

        self.t_subscribe = time.monotonic()
        defaults = self.conf.pop("_defaults", False)
        kw: dict[str, Any] = dict(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        if not defaults:
            kw.update(
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                fetch_max_wait_ms=100,
                request_timeout_ms=15000,
            )
        kw.update(self.conf)
        c = KafkaConsumer(**kw)
        # the topics' metadata first: a kafka-python group leader that assigns before its metadata has a
        # topic hands out nothing for it, and (a race in kafka-python 3.0) may not rebalance when it arrives
        for t in self.topics:
            wait_until(lambda t=t: bool(c.partitions_for_topic(t)), what=f"kafka-python metadata of {t}")
        c.subscribe(self.topics)
        from kafka.errors import CommitFailedError, RebalanceInProgressError

        # a commit refused during a rebalance is made again on the next round: a member that keeps its
        # partitions through the rebalance may get no more records, and its positions must still be committed
        uncommitted = False
        try:
            while not self.stop_evt.is_set():
                # kafka-python 3.0.12: a rebalance whose JoinGroup/SyncGroup round outlasts one poll() and
                # was started by the leader's own metadata check (its first assignment was made on an empty
                # metadata snapshot) is never completed by the next poll(): need_rejoin() is already False,
                # so the finished SyncGroup is dropped, the heartbeat stays off and the member keeps its old
                # partitions until its session expires. A poll long enough for a whole rebalance round keeps
                # clear of that.
                batch = c.poll(timeout_ms=1000, max_records=500)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
                n = 0
                for tp, msgs in batch.items():
                    for m in msgs:
                        self.got(m.topic, m.partition, m.offset, m.value)
                        n += 1
                if n or uncommitted:
                    try:
                        c.commit()
                        uncommitted = False
                    except (CommitFailedError, RebalanceInProgressError):
                        uncommitted = True
        finally:
            c.close(autocommit=False)


class AioKafkaMember(Member):
    lib = "aiokafka"

    def loop(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

        defaults = self.conf.pop("_defaults", False)
        kw: dict[str, Any] = dict(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        if not defaults:
            kw.update(
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                fetch_max_wait_ms=100,
                request_timeout_ms=15000,
            )
        kw.update(self.conf)
        c = AIOKafkaConsumer(**kw)
        await c.start()
        self.t_subscribe = time.monotonic()
        c.subscribe(self.topics)
        try:
            while not self.stop_evt.is_set():
                batch = await c.getmany(timeout_ms=100, max_records=500)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
                n = 0
                for tp, msgs in batch.items():
                    for m in msgs:
                        self.got(m.topic, m.partition, m.offset, m.value)
                        n += 1
                if n:
                    try:
                        await c.commit()
                    except (CommitFailedError, RebalanceInProgressError, IllegalStateError):
                        pass
        finally:
            await c.stop()


MEMBER_KINDS: dict[str, type[Member]] = {
    "confluent-kafka": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AioKafkaMember,
}


def wait_assigned(members: list[Member], topic: str, partitions: int, timeout: float = TIMEOUT) -> None:
    """Every member holds partitions, and together exactly the topic's partitions, each once."""

    def ok() -> bool:
        for m in members:
            if m.error is not None:
                raise m.error
        owned = [tp for m in members for tp in m.assignment]
        return all(m.assignment for m in members) and sorted(owned) == [(topic, i) for i in range(partitions)]

    wait_until(
        ok,
        timeout,
        f"assignment of {partitions} partitions over {len(members)} members: "
        f"{[sorted(m.assignment) for m in members]}",
    )


def all_consumed(members: list[Member]) -> list[tuple[str, int, int, bytes]]:
    return [r for m in members for r in m.records]


# --------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("lib", list(MEMBER_KINDS))
def test_three_members_share_six_partitions_exactly_once(broker, lib):
    topic = unique_topic(f"share-{lib}")
    create_topic(broker.bootstrap, topic, 6)
    group = group_name()
    kind = MEMBER_KINDS[lib]
    members = [kind(broker.bootstrap, group, [topic]) for _ in range(3)]
    for m in members:
        m.start()
    try:
        wait_assigned(members, topic, 6)
        n = 600
        prod = Producing(broker.bootstrap, topic, 6, n)
        prod.start()
        prod.join(TIMEOUT)
        assert prod.error is None, prod.error
        wait_until(lambda: len(all_consumed(members)) >= n, what=f"{n} records consumed")
        time.sleep(0.5)
        seen = Counter((p, o) for _, p, o, _ in all_consumed(members))
        assert len(seen) == n and set(seen.values()) == {1}, "every record exactly once"
        assert sorted(int(v) for *_, v in all_consumed(members)) == list(range(n))
        # the group's partitions were split: every member consumed something
        assert all(m.records for m in members)
    finally:
        for m in members:
            m.close()
    # the offsets are committed: DescribeGroups/ListConsumerGroupOffsets see them
    adm = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
    committed = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}
    assert sum(committed.values()) == n, (
        f"committed {sorted(committed.items())}; consumed per member "
        f"{[sorted(Counter(p for _, p, _, _ in m.records).items()) for m in members]}"
    )


CHILD = textwrap.dedent("""
    import json, signal, sys, time
    from confluent_kafka import Consumer, KafkaException
    bootstrap, group, topic = sys.argv[1:4]
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    def on_assign(consumer, parts):
        print(json.dumps({"assign": sorted(p.partition for p in parts)}), flush=True)
    c.subscribe([topic], on_assign=on_assign)
    while not stop:
        msgs = [m for m in c.consume(500, 0.1) if m.error() is None]
        for m in msgs:
            print(json.dumps({"p": m.partition(), "o": m.offset()}), flush=True)
        if msgs:
            try:
                c.commit(asynchronous=False)
            except KafkaException:
                pass
    c.close()
    print(json.dumps({"closed": True}), flush=True)
""")


class ChildMember:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, bootstrap, group, topic],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.records: list[tuple[int, int]] = []
        self.assignment: set[int] = set()
        self.closed = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            d = json.loads(line)
            if "assign" in d:
                self.assignment = set(d["assign"])
            elif "closed" in d:
                self.closed = True
            else:
                self.records.append((d["p"], d["o"]))

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(TIMEOUT)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(TIMEOUT)


def test_member_closes_another_is_killed_partitions_move_nothing_lost(broker):
    topic = unique_topic("failover")
    create_topic(broker.bootstrap, topic, 6)
    group = group_name()
    kids = [ChildMember(broker.bootstrap, group, topic) for _ in range(3)]
    try:
        wait_until(
            lambda: (
                sorted(p for k in kids for p in k.assignment) == list(range(6))
                and all(k.assignment for k in kids)
            ),
            what="three members with two partitions each",
        )
        produce(broker.bootstrap, topic, [b"a%d" % i for i in range(300)], 6)
        wait_until(lambda: len({r for k in kids for r in k.records}) >= 300, what="first 300 records")
        closing, dying, survivor = kids
        closing.terminate()  # a clean close: LeaveGroup, the partitions move at once
        assert closing.closed
        wait_until(
            lambda: (
                len(dying.assignment) + len(survivor.assignment) == 6
                and not (dying.assignment & survivor.assignment)
            ),
            what="partitions of the closed member moved",
        )
        dying_parts = set(dying.assignment)
        dying.kill9()  # no LeaveGroup: the session timeout (6 s) has to notice
        t_kill = time.monotonic()
        produce(broker.bootstrap, topic, [b"b%d" % i for i in range(300)], 6)
        wait_until(
            lambda: survivor.assignment == set(range(6)),
            timeout=SESSION_MS / 1000 + 20,
            what="the survivor takes over every partition",
        )
        moved_after = time.monotonic() - t_kill
        wait_until(lambda: len({r for k in kids for r in k.records}) >= 600, what="all 600 records")
        consumed = {r for k in kids for r in k.records}
        assert consumed == {(p, o) for p in range(6) for o in range(100)}
        # the killed member's partitions were consumed by the survivor after the kill
        assert {p for p, o in survivor.records if o >= 50} >= dying_parts
        assert moved_after < SESSION_MS / 1000 + 10
    finally:
        for k in kids:
            if k.proc.poll() is None:
                k.kill9()


@pytest.mark.durable("committed offsets after a broker restart")
@pytest.mark.moldau_only(reason="broker restart keeps __consumer_offsets")
def test_committed_offsets_survive_consumer_and_broker_restart(fresh_broker):
    b = fresh_broker
    topic = unique_topic("durable")
    create_topic(b.bootstrap, topic, 3)
    produce(b.bootstrap, topic, [b"%d" % i for i in range(90)], 3)
    group = group_name()

    def consume(n: int) -> list[tuple[int, int]]:
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
            }
        )
        c.subscribe([topic])
        out: list[tuple[int, int]] = []
        deadline = time.monotonic() + TIMEOUT
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset()))
            c.commit(message=m, asynchronous=False)
        c.close()
        return out

    first = consume(30)
    second = consume(30)  # a new consumer resumes after the committed offsets
    assert not set(first) & set(second)
    b.restart()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    committed = committed_after_restart(c, [TopicPartition(topic, i) for i in range(3)], TIMEOUT)
    c.close()
    done = Counter(p for p, _ in first + second)
    # -1001: no committed offset for that partition
    assert {tp.partition: tp.offset for tp in committed} == {p: done.get(p, -1001) for p in range(3)}
    third = consume(30)
    assert sorted(first + second + third) == sorted((p, o) for p in range(3) for o in range(30))
    # kafka-python and aiokafka see the same committed offsets
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False)
    assert kc.committed(KTP(topic, 0)) == 30
    kc.close()


def test_cooperative_sticky_moves_only_what_it_must(broker):
    topic = unique_topic("coop")
    create_topic(broker.bootstrap, topic, 6)
    group = group_name()
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = ConfluentMember(broker.bootstrap, group, [topic], **conf)
    a.start()
    try:
        wait_assigned([a], topic, 6)
        b = ConfluentMember(broker.bootstrap, group, [topic], **conf)
        b.start()
        wait_assigned([a, b], topic, 6)
        c = ConfluentMember(broker.bootstrap, group, [topic], **conf)
        c.start()
        wait_assigned([a, b, c], topic, 6)
        assert all(len(m.assignment) == 2 for m in (a, b, c))
        # incremental: a only ever gave partitions away (never everything), b kept what it got
        revoked_a = [parts for kind, parts in a.events if kind == "revoke"]
        assert revoked_a and all(len(p) < 6 for p in revoked_a)
        assert sum(len(p) for p in revoked_a) == 4
        b_first = next(parts for kind, parts in b.events if kind == "assign" and parts)
        b_revoked = set().union(*[p for kind, p in b.events if kind == "revoke"])
        assert b_revoked <= b_first and len(b_revoked) <= 1
        # a member leaves: its two partitions go to the others, nobody else loses anything
        before = {id(m): set(m.assignment) for m in (a, b)}
        c.close()
        wait_assigned([a, b], topic, 6)
        for m in (a, b):
            assert before[id(m)] <= m.assignment
    finally:
        for m in (a, b, c):
            if m.is_alive():
                m.close()


@pytest.mark.moldau_only(reason="static membership: restart without a rebalance")
def test_static_member_restart_gets_same_partitions_without_rebalance(broker):
    topic = unique_topic("static")
    create_topic(broker.bootstrap, topic, 4)
    group = group_name()
    conf = {"session.timeout.ms": 30000}
    m1 = ConfluentMember(broker.bootstrap, group, [topic], **{"group.instance.id": "static-1"}, **conf)
    m2 = ConfluentMember(broker.bootstrap, group, [topic], **{"group.instance.id": "static-2"}, **conf)
    m1.start()
    m2.start()
    try:
        wait_assigned([m1, m2], topic, 4)
        time.sleep(1.0)
        before2 = set(m2.assignment)
        events_m1 = len(m1.events)
        m2.close()  # a static member does not send LeaveGroup on close
        m2b = ConfluentMember(broker.bootstrap, group, [topic], **{"group.instance.id": "static-2"}, **conf)
        m2b.start()
        wait_until(lambda: bool(m2b.assignment), what="restarted static member assignment")
        assert m2b.assignment == before2
        time.sleep(2.0)
        assert len(m1.events) == events_m1, f"the other member saw a rebalance: {m1.events[events_m1:]}"
        produce(broker.bootstrap, topic, [b"x%d" % i for i in range(40)], 4)
        wait_until(lambda: len(m1.records) + len(m2b.records) >= 40, what="records after the restart")
        assert {p for _, p, _, _ in m2b.records} <= {p for _, p in before2}
    finally:
        for m in (m1, m2, m2b) if "m2b" in locals() else (m1, m2):
            if m.is_alive():
                m.close()


def test_mixed_clients_share_one_group(broker):
    topic = unique_topic("mixed")
    create_topic(broker.bootstrap, topic, 6)
    group = group_name()
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRR
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KpRR

    members = [
        ConfluentMember(broker.bootstrap, group, [topic], **{"partition.assignment.strategy": "roundrobin"}),
        KafkaPythonMember(broker.bootstrap, group, [topic], partition_assignment_strategy=[KpRR]),
        AioKafkaMember(broker.bootstrap, group, [topic], partition_assignment_strategy=[AioRR]),
    ]
    for m in members:
        m.start()
    try:
        wait_assigned(members, topic, 6, timeout=45)
        produce(broker.bootstrap, topic, [b"%d" % i for i in range(120)], 6)
        wait_until(lambda: len(all_consumed(members)) >= 120, what="120 records")
        time.sleep(0.5)
        seen = Counter((p, o) for _, p, o, _ in all_consumed(members))
        assert len(seen) == 120 and set(seen.values()) == {1}
        assert all(m.records for m in members), [(m.lib, len(m.records)) for m in members]
    finally:
        for m in members:
            m.close()


KAFKA4_REMOVED = pytest.mark.kafka_differs(
    "Kafka 4.0 removed the request versions of 0.9 and 0.10 clients (JoinGroup v0, OffsetCommit v0-v1, "
    "Metadata v0-v3, Fetch v0-v3 ...: KIP-896) and closes their connections; moldau keeps serving them"
)


@pytest.mark.parametrize("api_version", [pytest.param((0, 9), marks=KAFKA4_REMOVED),
                                         pytest.param((0, 10, 1), marks=KAFKA4_REMOVED), (0, 11), (2, 0)])
def test_old_protocol_versions_from_kafka_python(broker, api_version):
    """kafka-python pinned to old brokers: JoinGroup v0/v1/v2, OffsetCommit v1/v2/v3, OffsetFetch v1/v3..."""
    topic = unique_topic("oldv")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"%d" % i for i in range(20)], 2)
    group = group_name("old")
    extra: dict[str, Any] = {"api_version": api_version}
    members = [KafkaPythonMember(broker.bootstrap, group, [topic], **extra) for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_assigned(members, topic, 2)
        wait_until(lambda: len(all_consumed(members)) >= 20, what="20 records")
        seen = Counter((p, o) for _, p, o, _ in all_consumed(members))
        assert len(seen) == 20
    finally:
        for m in members:
            m.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
    c.close()
    assert [tp.offset for tp in committed] == [10, 10]


# ---------------------------------------------------------------------------------------------- admin


@pytest.mark.tansu_gap(reason="tansu lists groups without their state")
def test_admin_groups_confluent(broker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

    topic = unique_topic("adm")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"%d" % i for i in range(20)], 2)
    active, idle = group_name("active"), group_name("idle")
    m = ConfluentMember(broker.bootstrap, active, [topic])
    m.start()
    try:
        wait_assigned([m], topic, 2)
        wait_until(lambda: len(m.records) == 20, what="20 records")
        # an idle group with committed offsets (a simple consumer's commit)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": idle})
        c.commit(
            offsets=[TopicPartition(topic, 0, 7, "meta-data"), TopicPartition(topic, 1, 3)],
            asynchronous=False,
        )
        c.close()
        adm = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = adm.list_consumer_groups().result(TIMEOUT)
        states = {g.group_id: g.state for g in listed.valid}
        assert states[active] == ConsumerGroupState.STABLE and states[idle] == ConsumerGroupState.EMPTY
        only_stable = adm.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(TIMEOUT)
        assert active in {g.group_id for g in only_stable.valid} and idle not in {
            g.group_id for g in only_stable.valid
        }
        desc = adm.describe_consumer_groups([active, idle])
        d = desc[active].result(TIMEOUT)
        assert d.state == ConsumerGroupState.STABLE and len(d.members) == 1
        assert {(tp.topic, tp.partition) for tp in d.members[0].assignment.topic_partitions} == {
            (topic, 0),
            (topic, 1),
        }
        assert d.members[0].host.startswith("/")
        offs = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(idle)])[idle].result(TIMEOUT)
        got = {tp.partition: (tp.offset, tp.metadata) for tp in offs.topic_partitions}
        assert got == {0: (7, "meta-data"), 1: (3, None)}  # librdkafka reports empty metadata as None
        # alter offsets (AlterConsumerGroupOffsets = OffsetCommit with generation -1): fine for the empty
        # group, refused while the group has members (confluent-kafka has no DeleteConsumerGroupOffsets;
        # OffsetDelete is covered with kafka-python below)
        res = adm.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(idle, [TopicPartition(topic, 0, 2)])]
        )[idle].result(TIMEOUT)
        assert [tp.error for tp in res.topic_partitions] == [None]
        try:
            res = adm.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(active, [TopicPartition(topic, 0, 1)])]
            )[active].result(TIMEOUT)
            errors = [tp.error.code() for tp in res.topic_partitions if tp.error is not None]
        except KafkaException as exc:
            errors = [exc.args[0].code()]
        assert errors == [KafkaError.UNKNOWN_MEMBER_ID]
        offs = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(idle)])[idle].result(TIMEOUT)
        assert {tp.partition: tp.offset for tp in offs.topic_partitions} == {0: 2, 1: 3}
        # delete groups: the active one is not empty
        futs = adm.delete_consumer_groups([active, idle])
        with pytest.raises(KafkaException) as ei:
            futs[active].result(TIMEOUT)
        assert ei.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        futs[idle].result(TIMEOUT)
        assert idle not in {g.group_id for g in adm.list_consumer_groups().result(TIMEOUT).valid}
        with pytest.raises(KafkaException) as ei:
            adm.delete_consumer_groups([idle])[idle].result(TIMEOUT)
        assert ei.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        m.close()


@pytest.mark.tansu_gap(reason="tansu lists groups without their state")
def test_admin_groups_kafka_python(broker):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    topic = unique_topic("kpadm")
    create_topic(broker.bootstrap, topic, 2)
    active, idle = group_name("kpa"), group_name("kpi")
    m = KafkaPythonMember(broker.bootstrap, active, [topic])
    m.start()
    try:
        wait_assigned([m], topic, 2)
        from kafka import KafkaConsumer

        kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=idle, enable_auto_commit=False)
        kc.commit(
            {KTP(topic, 0): OffsetAndMetadata(5, "m0", -1), KTP(topic, 1): OffsetAndMetadata(6, "", -1)}
        )
        kc.close()
        adm = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            groups = {g["group_id"]: g for g in adm.list_groups()}
            assert groups[active]["protocol_type"] == "consumer" and groups[active]["group_state"] == "Stable"
            assert groups[idle]["group_state"] == "Empty"
            assert [
                g["group_id"] for g in adm.list_groups(states_filter=["Stable"]) if g["group_id"] == idle
            ] == []
            d = adm.describe_groups([active])[active]
            assert (
                d["group_state"] == "Stable" and d["protocol_type"] == "consumer" and len(d["members"]) == 1
            )
            offs = adm.list_group_offsets({idle: None})[idle]
            assert {tp.partition: (om.offset, om.metadata) for tp, om in offs.items()} == {
                0: (5, "m0"),
                1: (6, ""),
            }
            assert isinstance(next(iter(offs.values())), OffsetAndMetadata)
            res = adm.delete_group_offsets(idle, [KTP(topic, 0)])
            assert [e.errno for e in res.values()] == [0]
            assert {tp.partition for tp in adm.list_group_offsets({idle: None})[idle]} == {1}
            res = adm.delete_group_offsets(active, [KTP(topic, 0)])
            assert [e.errno for e in res.values()] == [86]  # GROUP_SUBSCRIBED_TO_TOPIC
            res = dict(adm.delete_groups([idle, active]))
            assert res == {idle: "OK", active: "NonEmptyGroupError"}
            assert idle not in {g["group_id"] for g in adm.list_groups()}
        finally:
            adm.close()
    finally:
        m.close()


# ------------------------------------------------------------------------------------------- KIP-848


@pytest.mark.moldau_only(reason="KIP-848 consumer group protocol")
def test_kip848_group_protocol_consumer_confluent(broker):
    topic = unique_topic("kip848")
    create_topic(broker.bootstrap, topic, 6)
    group = group_name("kip848")
    conf = {"group.protocol": "consumer"}
    a = ConfluentMember(broker.bootstrap, group, [topic], **conf)
    a.start()
    b = c = None
    try:
        wait_assigned([a], topic, 6)
        b = ConfluentMember(broker.bootstrap, group, [topic], **conf)
        b.start()
        c = ConfluentMember(broker.bootstrap, group, [topic], **conf)
        c.start()
        wait_assigned([a, b, c], topic, 6, timeout=45)
        produce(broker.bootstrap, topic, [b"%d" % i for i in range(120)], 6)
        wait_until(lambda: len(all_consumed([a, b, c])) >= 120, what="120 records")
        time.sleep(0.3)
        seen = Counter((p, o) for _, p, o, _ in all_consumed([a, b, c]))
        assert len(seen) == 120 and set(seen.values()) == {1}
        adm = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = {g.group_id: g for g in adm.list_consumer_groups().result(TIMEOUT).valid}
        assert group in listed
        d = adm.describe_consumer_groups([group])[group].result(TIMEOUT)
        assert len(d.members) == 3
        c.close()
        wait_assigned([a, b], topic, 6, timeout=45)
    finally:
        for m in (a, b, c):
            if m is not None and m.is_alive():
                m.close()


# --------------------------------------------------------------------------------- time to first record


FIRST_RECORD_CLIENTS: dict[str, tuple[type[Member], dict[str, Any]]] = {
    "confluent-kafka": (ConfluentMember, {}),
    "kafka-python": (KafkaPythonMember, {}),
    "aiokafka": (AioKafkaMember, {}),
    "confluent-kafka (group.protocol=consumer)": (ConfluentMember, {"group.protocol": "consumer"}),
}


@pytest.mark.moldau_only(reason="measures moldau's join latency")
@pytest.mark.parametrize("name", list(FIRST_RECORD_CLIENTS))
def test_time_from_subscribe_to_first_record(broker, name, record_property):
    """A new group with one member: JoinGroup is answered at once (group.initial.rebalance.delay.ms=0), so the
    first record arrives well under a second after subscribe (client defaults otherwise)."""
    topic = unique_topic("first")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [b"first"])
    kind, conf = FIRST_RECORD_CLIENTS[name]
    extra = dict(conf, _defaults=True)
    m = kind(broker.bootstrap, group_name("first"), [topic], **extra)
    m.start()
    try:
        wait_until(lambda: m.t_first is not None, what="first record")
    finally:
        m.close()
    took = m.first_record_s
    record_property("subscribe_to_first_record_s", took)
    print(f"\nsubscribe -> first record, {name}: {took * 1000:.0f} ms")
    assert took is not None and took < 5.0


# -------------------------------------------------------------------------- every version, raw requests


class Raw:
    """Blocking raw requests with moldau's codec (versions the clients under test never send)."""

    def __init__(self, bootstrap: str) -> None:
        import socket

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.corr = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        import struct

        from moldau.protocol import frame
        from moldau.protocol import messages as msgs

        req = msgs.REQUESTS[api_key].new(**fields)
        self.corr += 1
        self.sock.sendall(frame.encode_request(api_key, version, self.corr, "groups-raw", req))
        size = struct.unpack(">i", self._read(4))[0]
        body = self._read(size)
        hdr, off = frame.decode_response_header(body, api_key, version)
        assert hdr.correlation_id == self.corr
        return msgs.RESPONSES[api_key].decode(body, version, off)[0]

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed by the broker"
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.moldau_only(reason="every version of the group APIs, moldau's codec")
@pytest.mark.kafka_differs("sends the group APIs' versions that Kafka 4.0 removed (KIP-896) too")
@pytest.mark.single_broker("raw requests to one address that coordinates every group and lists them all; a "
                           "cluster spreads the groups over three coordinators")
def test_group_apis_every_version(broker):
    from moldau.broker.groups.group import encode_assignment, encode_subscription
    from moldau.protocol import messages as msgs

    topic = unique_topic("raw")
    create_topic(broker.bootstrap, topic, 2)
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    r = Raw(broker.bootstrap)
    try:
        # FindCoordinator v0-6
        for v in range(0, 7):
            if v < 4:
                resp = r.call(10, v, key="g", key_type=0)
                assert (resp.error_code, resp.port) == (0, port)
            else:
                resp = r.call(10, v, key_type=0, coordinator_keys=["a", "b"])
                assert [(c.key, c.error_code, c.port) for c in resp.coordinators] == [
                    ("a", 0, port),
                    ("b", 0, port),
                ]
                resp = r.call(10, v, key_type=2, coordinator_keys=["s"])
                assert resp.coordinators[0].error_code == 42  # INVALID_REQUEST
        sub = encode_subscription([topic])
        J = msgs.JoinGroupRequest
        for v in range(0, 10):
            group = f"raw-join-{v}-{uuid.uuid4().hex[:6]}"
            kw = dict(
                group_id=group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id="",
                protocol_type="consumer",
                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=sub)],
            )
            resp = r.call(11, v, **kw)
            if v >= 4:
                assert resp.error_code == 79  # MEMBER_ID_REQUIRED
                kw["member_id"] = resp.member_id
                resp = r.call(11, v, **kw)
            assert resp.error_code == 0 and resp.generation_id == 1 and resp.leader == resp.member_id
            assert [(x.member_id, bytes(x.metadata)) for x in resp.members] == [(resp.member_id, sub)]
            if v >= 7:
                assert resp.protocol_type == "consumer"
            mid = resp.member_id
            sv = min(v, 5)
            S = msgs.SyncGroupRequest
            a = encode_assignment({topic: [0, 1]})
            sresp = r.call(
                14,
                sv,
                group_id=group,
                generation_id=1,
                member_id=mid,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[S.SyncGroupRequestAssignment(member_id=mid, assignment=a)],
            )
            assert sresp.error_code == 0 and bytes(sresp.assignment) == a
            assert r.call(12, min(v, 4), group_id=group, generation_id=1, member_id=mid).error_code == 0
            assert r.call(12, min(v, 4), group_id=group, generation_id=0, member_id=mid).error_code == 22
            for dv in range(0, 7):
                d = r.call(15, dv, groups=[group], include_authorized_operations=True).groups[0]
                assert (d.error_code, d.group_state, d.protocol_data) == (0, "Stable", "range")
                assert bytes(d.members[0].member_assignment) == a and d.members[0].client_id == "groups-raw"
                if dv >= 3:
                    assert d.authorized_operations > 0
            lv = min(v, 5)
            if lv <= 2:
                assert r.call(13, lv, group_id=group, member_id=mid).error_code == 0
            else:
                L = msgs.LeaveGroupRequest
                resp = r.call(
                    13,
                    lv,
                    group_id=group,
                    members=[L.MemberIdentity(member_id=mid), L.MemberIdentity(member_id="ghost")],
                )
                assert [x.error_code for x in resp.members] == [0, 25]
        # OffsetCommit v0-10 / OffsetFetch v0-10 on a simple group
        md = r.call(
            3,
            12,
            topics=[msgs.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False,
        )
        tid = md.topics[0].topic_id
        C = msgs.OffsetCommitRequest
        F = msgs.OffsetFetchRequest
        for v in range(0, 11):
            group = f"raw-commit-{v}-{uuid.uuid4().hex[:6]}"
            part = C.OffsetCommitRequestPartition(
                partition_index=1,
                committed_offset=100 + v,
                committed_leader_epoch=3,
                commit_timestamp=1_700_000_000_000,
                committed_metadata=f"m{v}",
            )
            t = C.OffsetCommitRequestTopic(name=topic, topic_id=tid, partitions=[part])
            resp = r.call(
                8,
                v,
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time_ms=-1,
                topics=[t],
            )
            assert [p.error_code for p in resp.topics[0].partitions] == [0], (v, resp)
            for fv in range(0, 11):
                if fv < 8:
                    fresp = r.call(
                        9,
                        fv,
                        group_id=group,
                        topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[1, 0])],
                    )
                    parts = {p.partition_index: p for p in fresp.topics[0].partitions}
                else:
                    fresp = r.call(
                        9,
                        fv,
                        groups=[
                            F.OffsetFetchRequestGroup(
                                group_id=group,
                                topics=[
                                    F.OffsetFetchRequestTopics(
                                        name=topic, topic_id=tid, partition_indexes=[1, 0]
                                    )
                                ],
                            )
                        ],
                    )
                    g = fresp.groups[0]
                    assert g.error_code == 0
                    parts = {p.partition_index: p for p in g.topics[0].partitions}
                assert (parts[1].committed_offset, parts[1].metadata) == (100 + v, f"m{v}"), (v, fv)
                assert parts[0].committed_offset == -1
                if fv >= 5:
                    assert parts[1].committed_leader_epoch == (3 if v >= 6 else -1)
        # unknown topic / partition
        t = C.OffsetCommitRequestTopic(
            name="no-such-topic",
            partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata=None)
            ],
        )
        t2 = C.OffsetCommitRequestTopic(
            name=topic,
            partitions=[
                C.OffsetCommitRequestPartition(partition_index=9, committed_offset=1, committed_metadata=None)
            ],
        )
        resp = r.call(8, 8, group_id="raw-x", generation_id_or_member_epoch=-1, member_id="", topics=[t, t2])
        assert [tt.partitions[0].error_code for tt in resp.topics] == [3, 3]
        # topics=null fetches everything the group has (v2+)
        fresp = r.call(9, 7, group_id=group, topics=None)
        assert [(tt.name, [p.partition_index for p in tt.partitions]) for tt in fresp.topics] == [
            (topic, [1])
        ]
        # ListGroups v0-5, OffsetDelete v0, DeleteGroups v0-2
        for v in range(0, 6):
            kw2: dict[str, Any] = {}
            if v >= 4:
                kw2["states_filter"] = ["Empty"]
            if v >= 5:
                kw2["types_filter"] = ["classic"]
            resp = r.call(16, v, **kw2)
            assert resp.error_code == 0 and group in {x.group_id for x in resp.groups}
        OD = msgs.OffsetDeleteRequest
        resp = r.call(
            47,
            0,
            group_id=group,
            topics=[
                OD.OffsetDeleteRequestTopic(
                    name=topic, partitions=[OD.OffsetDeleteRequestPartition(partition_index=1)]
                )
            ],
        )
        assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
        for v in range(0, 3):
            resp = r.call(42, v, groups_names=[f"raw-commit-{v}" + "-nope", group if v == 2 else "missing"])
            codes = [x.error_code for x in resp.results]
            assert codes == ([69, 0] if v == 2 else [69, 69])
    finally:
        r.close()
