"""Exactly-once consume-transform-produce in the cluster (replication factor 3 everywhere, internal topics
too):
a confluent-kafka transactional processor keeps running through a kill -9 of the broker that hosts its
transaction coordinator; every input record is in the output exactly once (read_committed)."""

from __future__ import annotations

import threading
import time

import pytest
from clusterutil import QUIET, admin, create_topic, fully_replicated, wait_until
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

pytestmark = pytest.mark.timeout(200)

TXN_ID = "xform-1"
GROUP = "xform"


def _txn_coordinator(bootstrap: str) -> int | None:
    from moldau.protocol.consumer_offsets import partition_for

    md = admin(bootstrap).list_topics("__transaction_state", timeout=5)
    parts = md.topics["__transaction_state"].partitions
    if not parts:
        return None
    leader = parts[partition_for(TXN_ID, len(parts))].leader
    return leader if leader > 0 else None


def _feed(bootstrap: str, start: int, n: int) -> None:
    p = Producer({"logger": QUIET, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce("in", key=b"%d" % i, value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0


def _process(bootstrap: str, stop: threading.Event, problems: list) -> None:
    c = Consumer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
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


def _read_committed_out(bootstrap: str) -> list[bytes]:
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
        c.assign([TopicPartition("out", p, 0) for p in range(3)])
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
    stop = threading.Event()
    problems: list[str] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _process(bs, stop, problems)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    coord = wait_until(lambda: _txn_coordinator(bs), 30, "the transaction coordinator")
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
