"""Crash safety: kill -9 mid-stream, torn log tails, restarts on the same data dir and port.

moldau-only: the reference broker (tansu) keeps everything in memory.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.kafkautil import create_topic, produce_confluent, read_all_confluent, unique_topic, watermarks

pytestmark = [
    pytest.mark.moldau_only("needs a broker that persists to its data dir across restarts"),
    pytest.mark.durable("recovery of the data dir after kill -9, torn tails, restarts"),
    pytest.mark.single_broker("kill -9 of one broker process and the recovery of its one data dir; the "
                              "cluster's kill -9 cases (leader failover, nothing acknowledged lost) are "
                              "tests/cluster/test_cluster_failover.py"),
]


def _seq_value(p: int, seq: int) -> bytes:
    return b"%d:%08d:" % (p, seq) + b"x" * 40


class BackgroundProducer:
    """confluent-kafka, acks=all, idempotent; records every delivery report."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, limit: int) -> None:
        self.topic, self.partitions, self.limit = topic, partitions, limit
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.produced = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.p = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60000, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 50,
            # the broker is killed under this producer on purpose: its connection errors go to logging
            # (captured by pytest) instead of librdkafka's stderr
            "logger": logging.getLogger("test_crash.background_producer"),
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        seqs = [0] * self.partitions
        while not self._stop.is_set() and self.produced < self.limit:
            part = self.produced % self.partitions
            try:
                self.p.produce(
                    self.topic, value=_seq_value(part, seqs[part]), partition=part, on_delivery=self._cb
                )
            except BufferError:
                self.p.poll(0.05)
                continue
            seqs[part] += 1
            self.produced += 1
            if len(self.p) > 2000:  # keep the queue short: we want records in flight, not a backlog
                self.p.poll(0.01)
            else:
                self.p.poll(0)
        self.p.flush(60)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.acked_count() < n:
            assert time.monotonic() < deadline, f"only {self.acked_count()} of {n} acknowledged in {timeout}s"
            assert self.thread.is_alive() or self.acked_count() >= n
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(90)
        assert not self.thread.is_alive()


def test_kill9_mid_stream_keeps_every_acked_record(fresh_broker):
    b = fresh_broker
    topic = create_topic(b.bootstrap, unique_topic("crash"), 2)
    bp = BackgroundProducer(b.bootstrap, topic, 2, limit=60000)
    bp.thread.start()
    bp.wait_acked(3000, 30)

    b.kill9()
    acked_at_kill = bp.acked_count()
    time.sleep(0.3)  # the producer keeps queueing against a dead broker
    b.restart()
    bp.wait_acked(acked_at_kill + 3000, 60)  # and carries on after the restart
    bp.stop()

    assert not bp.errors, bp.errors[:5]
    recs = read_all_confluent(b.bootstrap, topic, 2, timeout=60)
    log = {(r.partition, r.offset): r.value for r in recs}
    for part in range(2):
        mine = sorted((r for r in recs if r.partition == part), key=lambda r: r.offset)
        assert [r.offset for r in mine] == list(range(len(mine))), f"partition {part}: offsets with gaps"
        seqs = [int(r.value.split(b":")[1]) for r in mine]
        assert len(set(seqs)) == len(seqs), f"partition {part}: duplicate records"
        assert seqs == sorted(seqs), f"partition {part}: records out of order"
        assert seqs == list(range(len(seqs))), f"partition {part}: records missing"
    missing = [(p, o) for p, o, v in bp.acked if log.get((p, o)) != v]
    assert not missing, f"{len(missing)} acknowledged records not at their offsets, e.g. {missing[:5]}"
    assert len(bp.acked) == bp.produced == len(recs)


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """(file position, base offset, total size) of each batch in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, base, 12 + length))
        pos += 12 + length
    return out


def _active_segment(data_dir: Path, topic: str, partition: int) -> Path:
    pdir = data_dir / f"{topic}-{partition}"
    logs = sorted(pdir.glob("*.log"))
    assert logs, f"no segment files in {pdir}: {sorted(os.listdir(data_dir))}"
    return logs[-1]


@pytest.mark.parametrize("damage", ["garbage", "zeros", "cut-mid-batch", "cut-mid-header"])
def test_torn_tail_is_truncated(fresh_broker, damage):
    b = fresh_broker
    topic = create_topic(b.bootstrap, unique_topic("torn"), 1)
    # linger.ms far above the test's pace: each chunk leaves as one batch when flush() sends it, however
    # slowly the loop runs on a loaded machine
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5000})
    for chunk in range(10):  # 10 flushed batches of 10 records
        for i in range(10):
            p.produce(topic, value=b"r%03d" % (chunk * 10 + i), partition=0)
        assert p.flush(15) == 0
    del p  # flushed: released before the kill (a live client would keep reconnecting)
    b.kill9()

    seg = _active_segment(b.data_dir, topic, 0)
    batches = _batches(seg)
    assert [base for _, base, _ in batches] == list(range(0, 100, 10)), batches
    last_pos, last_base, last_size = batches[-1]
    size = seg.stat().st_size
    assert size == last_pos + last_size
    rnd = random.Random(damage)
    with open(seg, "r+b") as f:
        if damage == "garbage":
            f.seek(size)
            f.write(bytes(rnd.getrandbits(8) for _ in range(1000)))
            expected = 100
        elif damage == "zeros":
            f.seek(size)
            f.write(b"\0" * 4096)
            expected = 100
        elif damage == "cut-mid-batch":
            f.truncate(last_pos + last_size // 2)
            expected = last_base
        else:  # the last batch's 61-byte header is cut
            f.truncate(last_pos + 30)
            expected = last_base

    b.restart()
    assert watermarks(b.bootstrap, topic, 0) == (0, expected)
    recs = read_all_confluent(b.bootstrap, topic, 1)
    assert [(r.offset, r.value) for r in recs] == [(o, b"r%03d" % o) for o in range(expected)]

    delivered = produce_confluent(
        b.bootstrap,
        topic,
        [dict(value=b"after-%d" % i, partition=0) for i in range(5)],
        conf={"acks": "all", "linger.ms": 5000},
    )  # one batch, sent by flush()
    assert sorted(m.offset() for m in delivered) == list(range(expected, expected + 5))
    recs = read_all_confluent(b.bootstrap, topic, 1)
    assert [r.offset for r in recs] == list(range(expected + 5))
    assert [r.value for r in recs[expected:]] == [b"after-%d" % i for i in range(5)]
    # the torn bytes are gone from the file too (the next batch follows the last valid one)
    assert _batches(_active_segment(b.data_dir, topic, 0))[-1][1] == expected


def test_graceful_restart_keeps_topics_configs_data_and_group_offsets(fresh_broker, kind):
    from confluent_kafka.admin import ConfigResource, ResourceType

    b = fresh_broker
    topic = create_topic(b.bootstrap, unique_topic("restart"), 3, config={"retention.ms": "7654321"})
    produce_confluent(b.bootstrap, topic, [dict(value=b"v%d" % i, key=b"k%d" % i, partition=i % 3)
                                           for i in range(30)])
    group = "restart-group"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 2, 7)], asynchronous=False)
    c.close()

    # a JVM ends with 143 (128 + SIGTERM) once its shutdown hooks (Kafka's controlled shutdown) have run
    assert b.stop() == (143 if kind == "kafka" else 0), f"broker exit code on SIGTERM:\n{b.output()}"
    b.start()

    from harness.kafkautil import admin

    a = admin(b.bootstrap)
    md = a.list_topics(topic=topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3
    res = ConfigResource(ResourceType.TOPIC, topic)
    cfg = a.describe_configs([res])[res].result(timeout=15)
    assert cfg["retention.ms"].value == "7654321"
    recs = read_all_confluent(b.bootstrap, topic, 3)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in recs) == sorted(
        (i % 3, i // 3, b"k%d" % i, b"v%d" % i) for i in range(30))
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=15)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 4), (1, -1001), (2, 7)]
    finally:
        c.close()
    # producing continues at the old end
    delivered = produce_confluent(b.bootstrap, topic, [dict(value=b"new", partition=1)])
    assert delivered[0].offset() == 10


def test_graceful_restart_serves_every_partition_with_its_own_records(broker_factory):
    """After a clean stop the broker opens its partitions with several threads
    (num.recovery.threads.per.data.dir): every partition of every topic is served again, with its own
    records, and takes new ones at its old end."""
    b = broker_factory({"num.recovery.threads.per.data.dir": "4"})
    topics = [create_topic(b.bootstrap, unique_topic(f"many{t}"), 40) for t in range(3)]
    for t, topic in enumerate(topics):
        produce_confluent(b.bootstrap, topic, [dict(value=b"%d-%d-%d" % (t, p, i), partition=p)
                                               for p in range(40) for i in range(1 + p % 3)])
    assert b.stop() == 0, f"broker exit code on SIGTERM:\n{b.output()}"
    b.start()
    for t, topic in enumerate(topics):
        recs = read_all_confluent(b.bootstrap, topic, 40)
        assert sorted((r.partition, r.offset, r.value) for r in recs) == sorted(
            (p, i, b"%d-%d-%d" % (t, p, i)) for p in range(40) for i in range(1 + p % 3))
    delivered = produce_confluent(b.bootstrap, topics[2], [dict(value=b"new", partition=p) for p in (0, 39)])
    assert sorted((d.partition(), d.offset()) for d in delivered) == [(0, 1), (39, 1)]


def test_deleted_topic_stays_deleted_after_crash(fresh_broker):
    b = fresh_broker
    keep = create_topic(b.bootstrap, unique_topic("keep"), 1)
    gone = create_topic(b.bootstrap, unique_topic("gone"), 1)
    produce_confluent(b.bootstrap, keep, [dict(value=b"k", partition=0)])
    produce_confluent(b.bootstrap, gone, [dict(value=b"g", partition=0)])
    from harness.kafkautil import admin

    a = admin(b.bootstrap)
    a.delete_topics([gone])[gone].result(timeout=15)
    del a  # released before the kill (a live client would keep reconnecting)
    b.kill9()
    b.restart()
    topics = admin(b.bootstrap).list_topics(timeout=10).topics
    assert keep in topics and gone not in topics
    assert [r.value for r in read_all_confluent(b.bootstrap, keep, 1)] == [b"k"]
