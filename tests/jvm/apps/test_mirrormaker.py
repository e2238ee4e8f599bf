"""MirrorMaker 2 (Kafka's ``connect-mirror`` driver, ``org.apache.kafka.connect.mirror.MirrorMaker``) between
two moldau clusters: a topic's records replicated in order to ``<source alias>.<topic>``, and a consumer
group's committed offsets translated onto the target cluster (checkpoints, ``sync.group.offsets.enabled``),
so that the group resumes there where it stopped on the source.

Part of the whole JVM matrix (two single moldau brokers; two three-broker clusters; two Apache Kafka brokers
as the control)::

    MOLDAU_JVM_FULL=1 .venv/bin/python -m pytest -q tests/jvm/apps/test_mirrormaker.py
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness.brokerproc import BrokerProcess
from harness.connectproc import JavaService, write_properties
from harness.jvmtarget import make_broker
from harness.kafkautil import admin, produce_confluent

pytestmark = [pytest.mark.jvm_full, pytest.mark.timeout(1500)]

PARTITIONS = 3


@pytest.fixture(scope="module")
def downstream(target: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A second broker (or cluster) of the same kind as ``target``: MirrorMaker's target cluster."""
    b = make_broker(target.kind, tmp_path_factory.mktemp(f"mm2-{target.kind}"))
    try:
        yield b
    finally:
        b.close()


def _read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out: dict[int, list[bytes]] = {}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        n = 0
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out.setdefault(m.partition(), []).append(m.value())
                    n += 1
    finally:
        c.close()
    return out


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                                timeout=15)]
    finally:
        c.close()


def _wait(what: str, cond: Callable[[], Any], timeout: float, mm: JavaService) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        assert mm.alive(), f"MirrorMaker exited with {mm.proc.returncode}\n{mm.output()}"
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - the topic may not exist yet
            last = e
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})\n{mm.output()}")


def test_topics_and_group_offsets_replicated(target: BrokerProcess, downstream: BrokerProcess,
                                             jtopic: Callable[..., str], tmp_path: Path) -> None:
    topic = jtopic(partitions=PARTITIONS)
    group = f"mm2-group-{uuid.uuid4().hex[:8]}"
    rf = 3 if target.kind == "cluster" else 1
    props = {
        "clusters": "up, down",
        "up.bootstrap.servers": target.bootstrap,
        "down.bootstrap.servers": downstream.bootstrap,
        "up->down.enabled": "true",
        "down->up.enabled": "false",
        "up->down.topics": topic,
        "up->down.groups": group,
        "replication.factor": str(rf),
        "checkpoints.topic.replication.factor": str(rf),
        "heartbeats.topic.replication.factor": str(rf),
        "offset-syncs.topic.replication.factor": str(rf),
        "offset.storage.replication.factor": str(rf),
        "status.storage.replication.factor": str(rf),
        "config.storage.replication.factor": str(rf),
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        # an offset sync for every record
        "offset.lag.max": "0",
        "tasks.max": "1",
    }
    path = write_properties(tmp_path / "mm2.properties", props)
    mm = JavaService("org.apache.kafka.connect.mirror.MirrorMaker", [str(path), "--clusters", "down"],
                     tmp_path / "mm2.log")
    remote = f"up.{topic}"
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        _wait(f"{remote} on the target cluster",
              lambda: remote in admin(downstream.bootstrap).list_topics(timeout=5).topics, 480, mm)
        # the group runs while MirrorMaker does: records arrive, the group commits a little behind the end.
        # MirrorMaker translates offsets through the offset syncs it read after its checkpoint task started
        # (on its first read of the offset-syncs topic it keeps only the latest sync per partition, so an
        # offset committed before that cannot be translated: KAFKA-14666's OffsetSyncStore), hence rounds
        # until the group's offsets show up on the target.
        sent = 0
        committed = [0] * PARTITIONS

        def one_round() -> list[int] | None:
            nonlocal sent
            produce_confluent(target.bootstrap, topic, (
                {"value": b"r%05d" % i, "key": b"k%d" % i, "partition": i % PARTITIONS}
                for i in range(sent, sent + 3 * PARTITIONS)))
            sent += 3 * PARTITIONS
            committed[:] = [sent // PARTITIONS - 1] * PARTITIONS
            c.commit(offsets=[TopicPartition(topic, p, committed[p]) for p in range(PARTITIONS)],
                     asynchronous=False)
            got = _committed(downstream.bootstrap, group, remote)
            return got if all(o > 0 for o in got) else None

        _wait("the group's offsets on the target cluster", one_round, 480, mm)
        # nothing more is produced or committed: the target's offsets settle at the last commit's translation
        final = list(committed)
        assert _committed(target.bootstrap, group, topic) == final

        def settled() -> list[int] | None:
            a = _committed(downstream.bootstrap, group, remote)
            time.sleep(3)
            b = _committed(downstream.bootstrap, group, remote)
            return b if a == b and all(x > 0 for x in b) else None

        offsets = _wait("the translated offsets to settle", settled, 300, mm)
        # never past the source's committed offset (MirrorMaker translates conservatively)
        assert all(0 < o <= f for o, f in zip(offsets, final)), (offsets, final)

        def all_copied() -> dict[int, list[bytes]] | None:
            r = _read_all(downstream.bootstrap, remote, sent, 10)
            return r if sum(len(v) for v in r.values()) >= sent else None

        copied = _wait("every record replicated", all_copied, 300, mm)
        assert copied == {p: [b"r%05d" % i for i in range(p, sent, PARTITIONS)] for p in range(PARTITIONS)}
        # the group resumes on the target from the translated offsets: exactly the records from there on
        expected = sorted(b"r%05d" % i for i in range(sent) if i // PARTITIONS >= offsets[i % PARTITIONS])
        t = Consumer({"bootstrap.servers": downstream.bootstrap, "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        t.subscribe([remote])
        rest: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(rest) < len(expected) and time.monotonic() < deadline:
            rest += [m.value() for m in t.consume(num_messages=100, timeout=0.5) if m.error() is None]
        t.close()
        assert sorted(rest) == expected
    finally:
        c.close()
        mm.stop()
