"""Exactly-once consume-transform-produce in the cluster (replication factor 3 everywhere, internal topics
too):
a confluent-kafka transactional processor keeps running through a kill -9 of the broker that hosts its
transaction coordinator; every input record is in the output exactly once (read_committed)."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness.clusterutil import QUIET, admin, create_topic, fully_replicated, wait_until

pytestmark = pytest.mark.timeout(200)

TXN_ID = "xform-1"


def _txn_partition(bootstrap: str, txn_id: str) -> object | None:
    """The metadata of the __transaction_state partition of ``txn_id`` (None while it does not exist)."""
    from moldau.protocol.consumer_offsets import partition_for

    md = admin(bootstrap).list_topics("__transaction_state", timeout=5)
    parts = md.topics["__transaction_state"].partitions
    if not parts:
        return None
    return parts[partition_for(txn_id, len(parts))]


def _txn_coordinator_of(bootstrap: str, txn_id: str) -> int | None:
    part = _txn_partition(bootstrap, txn_id)
    leader = part.leader if part is not None else -1
    return leader if leader > 0 else None


def _txn_replicas_of(bootstrap: str, txn_id: str) -> set[int]:
    part = _txn_partition(bootstrap, txn_id)
    return set(part.replicas) if part is not None else set()


def _txn_coordinator(bootstrap: str) -> int | None:
    return _txn_coordinator_of(bootstrap, TXN_ID)


def _feed(bootstrap: str, start: int, n: int) -> None:
    p = Producer({"logger": QUIET, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce("in", key=b"%d" % i, value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0


def _process(bootstrap: str, group: str, stop: threading.Event, problems: list) -> None:
    c = Consumer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    p = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "transactional.id": TXN_ID,
            "transaction.timeout.ms": 30000,
            "message.timeout.ms": 30000,
        }
    )
    p.init_transactions(30)
    c.subscribe(["in"])

    def rewind() -> None:
        parts = c.assignment()
        for tp in c.committed(parts, timeout=20):
            c.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

    try:
        while not stop.is_set():
            msgs = [m for m in c.consume(100, 0.5) if m.error() is None]
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce("out", key=m.key(), value=m.value() + b"-out", partition=m.partition())
            while True:
                try:
                    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
                    p.commit_transaction(30)
                    break
                except KafkaException as e:
                    err = e.args[0]
                    problems.append(str(err))
                    if err.txn_requires_abort():
                        p.abort_transaction(30)
                        rewind()
                        break
                    if err.retriable():
                        time.sleep(0.2)
                        continue
                    raise
    finally:
        c.close()


def _read_committed_out(bootstrap: str, topic: str = "out", partitions: int = 3) -> list[bytes]:
    c = Consumer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        idle = 0
        while idle < 6:
            msgs = c.consume(500, 0.5)
            idle = idle + 1 if not msgs else 0
            out.extend(m.value() for m in msgs if m.error() is None)
    finally:
        c.close()
    return out


def test_transactional_processor_survives_coordinator_kill(cluster):
    bs = cluster.bootstrap
    for t in ("in", "out"):
        create_topic(bs, t, partitions=3, rf=3, configs={"min.insync.replicas": "2"})
        wait_until(lambda t=t: fully_replicated(bs, t, 3), 20, f"ISR of {t}")
    _feed(bs, 0, 300)
    # The group's coordinator is placed on another broker than the transaction coordinator killed below:
    # librdkafka (2.16) waits for good in send_offsets_to_transaction, past its timeout, when the group
    # coordinator it cached is killed and leaves the metadata (librdkafka issues 5511 and 5456), whatever
    # the broker does. A group coordinator killed under a consumer group is test_cluster_groups'.
    init = Producer({"logger": QUIET, "bootstrap.servers": bs, "transactional.id": TXN_ID})
    init.init_transactions(30)  # creates __transaction_state; the processor's producer fences this one
    coord = wait_until(lambda: _txn_coordinator(bs), 30, "the transaction coordinator")
    group = _group_led_elsewhere(bs, coord)
    stop = threading.Event()
    problems: list[str] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _process(bs, group, stop, problems)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert wait_until(lambda: _txn_coordinator(bs), 30, "the transaction coordinator") == coord
    wait_until(lambda: len(_read_committed_out(bs)) >= 100 or failure, 60, "the first outputs")
    cluster.broker(coord).kill()
    live = ",".join(b.address for b in cluster.brokers if b.node_id != coord)
    _feed(live, 300, 300)
    wait_until(lambda: len(set(_read_committed_out(live))) >= 600 or failure, 120, "every input processed")
    stop.set()
    worker.join(60)
    assert not failure, failure
    out = _read_committed_out(live)
    assert sorted(out) == sorted(b"%d-out" % i for i in range(600)), (len(out), len(set(out)), problems[:5])


def _group_led_elsewhere(bootstrap: str, broker: int) -> str:
    """A group id whose __consumer_offsets partition another broker than ``broker`` leads (the topic is
    created by the first coordinator lookup)."""
    from moldau.protocol.consumer_offsets import partition_for

    probe = Consumer({"logger": QUIET, "bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        probe.committed([TopicPartition("in", 0)], timeout=20)
    except KafkaException:
        pass  # the topic may still be on its way: waited for below
    finally:
        probe.close()
    topic = "__consumer_offsets"
    wait_until(lambda: fully_replicated(bootstrap, topic, 3), 30, topic)
    parts = admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions
    return next(g for g in (f"xform-{i}" for i in range(100))
                if parts[partition_for(g, len(parts))].leader not in (broker, -1))


def test_commit_waits_for_its_markers_to_be_replicated(cluster_factory):
    """A COMMIT marker counts as written only once the partition's ISR has it (Kafka writes markers with
    acks=all): while the only follower of the output partition is stopped, commit_transaction does not
    return; once it runs again the commit completes and read_committed readers see the records. (A marker
    acknowledged on the leader alone is lost when that leader dies, leaving the transaction open on the new
    leader: its last stable offset never moves again.)"""
    c = cluster_factory(
        3,
        configs=[
            # __transaction_state on two brokers, so the third can be the output's only follower
            "transaction.state.log.replication.factor=2",
            "transaction.state.log.min.isr=1",
            # the stopped follower stays in the ISR and keeps its ZooKeeper session during the test
            "replica.lag.time.max.ms=60000",
            "zookeeper.session.timeout.ms=30000",
        ],
    )
    bs = c.bootstrap
    p = Producer({"logger": QUIET, "bootstrap.servers": bs, "transactional.id": "marker-isr"})
    p.init_transactions(30)
    coord = wait_until(lambda: _txn_coordinator_of(bs, "marker-isr"), 30, "the transaction coordinator")
    txn_replicas = _txn_replicas_of(bs, "marker-isr")
    follower = next(b.node_id for b in c.brokers if b.node_id not in txn_replicas)
    kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
    try:  # the partition's replicas chosen: leader = the coordinator, the only follower = the third broker
        kadmin.create_topics([NewTopic("marked", -1, -1, replica_assignments={0: [coord, follower]})])
    finally:
        kadmin.close()
    wait_until(lambda: fully_replicated(bs, "marked", 2), 20, "ISR of marked")
    p.begin_transaction()
    for i in range(10):
        p.produce("marked", value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    c.broker(follower).signal(signal.SIGSTOP)
    done = threading.Event()
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            p.commit_transaction(60)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        done.set()

    try:
        threading.Thread(target=commit, daemon=True).start()
        assert not done.wait(3), "the commit returned before its marker reached the ISR"
    finally:
        c.broker(follower).signal(signal.SIGCONT)
    assert done.wait(60), "the commit did not complete after the follower came back"
    assert not errors, errors
    got = _read_committed_out(bs, "marked", 1)
    assert sorted(got) == sorted(b"%d" % i for i in range(10))


def test_leader_keeps_its_coordinator_when_the_controller_shrinks_its_isr(cluster_factory):
    """A follower dies while a commit waits for it: the controller takes it out of the ISRs with a new
    leader epoch, the leader staying. That is no leadership change (Kafka's makeLeaders skips partitions it
    already leads): the transaction coordinator keeps its state instead of reloading it from the log under
    the commit in flight, which then completed the transaction twice (two COMMIT markers on a partition:
    a late one can decide the producer's next transaction there)."""
    c = cluster_factory(
        3,
        configs=[
            # the leaders never drop the dead follower themselves: the controller does (session expiry)
            "replica.lag.time.max.ms=60000",
        ],
    )
    # led by the coordinator (markers written in-process), followed by the broker to be killed
    p, _coord, follower = _producer_and_placed_topic(c, "isr-bump", "bumped", coordinator_leads=True)
    _begin_with(p, "bumped", [b"%d" % i for i in range(10)])
    c.broker(follower).kill()
    live = ",".join(b.address for b in c.brokers if b.node_id != follower)
    p.commit_transaction(60)  # waits for the controller to take the dead follower out of the ISRs
    wait_until(lambda: fully_replicated(live, "bumped", 1), 20, "the dead follower out of the ISR")
    got = _read_committed_out(live, "bumped", 1)
    assert sorted(got) == sorted(b"%d" % i for i in range(10))
    # the records and one COMMIT marker, nothing after it
    assert _end_offset(live, "bumped", 0) == 11
    # the coordinator goes on serving the transactional id: a second transaction commits
    p.begin_transaction()
    p.produce("bumped", value=b"10", partition=0)
    p.commit_transaction(30)
    assert _end_offset(live, "bumped", 0) == 13


def _producer_and_placed_topic(c: Any, txn_id: str, topic: str, *, coordinator_leads: bool
                               ) -> tuple[Producer, int, int]:
    """A transactional producer ``txn_id`` (initialised) and ``topic``, one partition on two brokers: the
    transaction coordinator and another that is not the controller either (a killed controller's successor
    would have to notice the death itself); led by the coordinator when ``coordinator_leads``.
    (producer, coordinator, the other broker)."""
    bs = c.bootstrap
    p = Producer({"logger": QUIET, "bootstrap.servers": bs, "transactional.id": txn_id})
    p.init_transactions(30)
    coord = wait_until(lambda: _txn_coordinator_of(bs, txn_id), 30, "the transaction coordinator")
    controller = admin(bs).list_topics(timeout=10).controller_id
    other = next(b.node_id for b in c.brokers if b.node_id not in (coord, controller))
    replicas = [coord, other] if coordinator_leads else [other, coord]
    kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
    try:
        kadmin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: replicas})])
    finally:
        kadmin.close()
    wait_until(lambda: fully_replicated(bs, topic, 2), 20, f"ISR of {topic}")
    return p, coord, other


def _begin_with(p: Producer, topic: str, values: list[bytes]) -> None:
    """A transaction with ``values`` written to partition 0 of ``topic`` (delivered, not yet ended)."""
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0


def _end_offset(bootstrap: str, topic: str, partition: int) -> int:
    cons = Consumer({"logger": QUIET, "bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return int(cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        cons.close()


def test_marker_to_a_restarted_leader_is_retried(cluster_factory):
    """The leader of a transaction's partition is killed and started again: until its ZooKeeper session
    expires it is still the leader in the metadata, but, restarted, it has no replicas (they come with its
    LeaderAndIsr) and answers WriteTxnMarkers with UNKNOWN_TOPIC_OR_PARTITION. The coordinator retries that
    marker (the topic exists) until the partition's new leader writes it, as Kafka retries it. (It used to
    drop it as if the topic had been deleted: the aborted records stayed undecided, and the producer's next
    COMMIT on the partition showed them to read_committed readers.)"""
    c = cluster_factory(3)
    bs = c.bootstrap
    # led by the other broker: markers go out with WriteTxnMarkers
    p, _coord, leader = _producer_and_placed_topic(c, "marker-retry", "restarted", coordinator_leads=False)
    _begin_with(p, "restarted", [b"aborted-%d" % i for i in range(5)])
    c.broker(leader).kill()
    c.broker(leader).start()
    c.broker(leader).wait_listening(30)
    p.abort_transaction(60)
    p.begin_transaction()
    for i in range(3):
        p.produce("restarted", value=b"committed-%d" % i, partition=0)
    p.commit_transaction(60)
    got = _read_committed_out(bs, "restarted", 1)
    assert sorted(got) == [b"committed-%d" % i for i in range(3)]
