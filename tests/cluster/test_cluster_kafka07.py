"""The Kafka 0.7 legacy listener in the three-broker cluster: magic-0 messages of the 0.6-era client
(``kafka`` 0.2.3) and magic-1 messages of franz-kafka 0.7.5, produced to the leader, are served by a follower
that became leader (the old one killed with kill -9) as they were written: same magics, same bytes, same byte
offsets (the marker of magic 0 travels with the replicated batches)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from moldau.broker.cluster.local import LocalCluster, free_port

from harness.cluster import FAST, require_zookeeper, wait_formed
from harness.clusterutil import create_topic, partitions, read_partition, wait_until

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

TOPIC = "legacy07"


def _cluster(tmp_path: Path, configs: list[str]) -> tuple[LocalCluster, dict[int, int]]:
    """Three brokers (FAST + ``configs``), each with a KAFKA07 listener: (cluster, node id -> its port)."""
    c = LocalCluster(str(tmp_path / "cluster"), 3,
                     broker_configs=FAST + ["default.replication.factor=3", *configs])
    legacy = {}
    for b in c.brokers:
        legacy[b.node_id] = free_port()
        b.extra.append(f"listeners=PLAINTEXT://127.0.0.1:{b.port},KAFKA07://127.0.0.1:{legacy[b.node_id]}")
    return c, legacy


def _start(c: LocalCluster, topic: str) -> int:
    """Start the cluster, create ``topic`` (one partition, three replicas); its leader."""
    c.start()
    wait_formed(c)
    create_topic(c.bootstrap, topic, partitions=1, rf=3)
    return int(wait_until(lambda: partitions(c.bootstrap, topic)[0].leader, 20, "a leader"))


def _fail_over(c: LocalCluster, topic: str, leader: int) -> tuple[str, int]:
    """kill -9 the leader: (bootstrap of the other two, the new leader)."""
    c.broker(leader).kill()
    boot = ",".join(b.address for b in c.brokers if b.node_id != leader)
    new = wait_until(lambda: (lambda x: x if x not in (-1, leader) else None)(
        partitions(boot, topic)[0].leader), 30, "a new leader")
    return boot, int(new)


def test_follower_become_leader_serves_the_same_0_7_view(tmp_path: Path) -> None:
    require_zookeeper()
    if not shutil.which("node"):
        pytest.skip("node is missing: scripts/setup.sh --test installs it")
    from kafka07.conftest import Client07, franz_consume, franz_produce, walk, walk_all
    from kafka07.test_kafka06_interop import consume06, produce06

    c, legacy = _cluster(tmp_path, [])
    try:
        leader = _start(c, TOPIC)
        p06 = [f"zero-{i}" for i in range(6)]
        p07 = [f"one-{i}".encode() for i in range(5)]
        produce06(legacy[leader], TOPIC, [p06[:3], p06[3:]])
        with Client07("127.0.0.1", legacy[leader]) as cl:
            walk_all(cl, TOPIC, 0, len(p06))
        franz_produce(legacy[leader], TOPIC, p07, "none", batch_size=5)
        with Client07("127.0.0.1", legacy[leader]) as cl:
            before = walk_all(cl, TOPIC, 0, len(p06) + len(p07))
        assert [m.magic for _o, m in before] == [0] * len(p06) + [1] * len(p07)
        payloads = [p.encode() for p in p06] + p07
        # every replica has all of it (the ISR is whole and the records are readable from the others)
        wait_until(lambda: len(partitions(c.bootstrap, TOPIC)[0].isrs) == 3, 30, "a full ISR")
        boot, new = _fail_over(c, TOPIC, leader)
        with Client07("127.0.0.1", legacy[new]) as cl:
            after = wait_until(lambda: (lambda w: w if len(w) == len(before) else None)(walk(cl, TOPIC, 0)),
                               20, "the new leader's 0.7 view")
        assert after == before  # same magics, bytes and byte offsets
        ends = [o + m.size for o, m in before]
        assert consume06(legacy[new], TOPIC, len(p06)) == list(zip(p06, ends))
        got, fetches = franz_consume(legacy[new], TOPIC, len(payloads))
        # franz-kafka 0.7.5 drops the first payload byte of a magic-0 message (tests/kafka07)
        assert got == [p[1:] for p in payloads[:len(p06)]] + p07
        assert set(fetches) <= {o for o, _m in before} | set(ends)
        assert [v for _o, v in read_partition(boot, TOPIC, 0)] == payloads
    finally:
        c.stop(graceful=False)


COMPACTED = "legacy07c"


def _checkpoint(data_dir: str, topic: str) -> int | None:
    """The cleaner's first dirty offset of ``topic``-0 in a broker's ``cleaner-offset-checkpoint``."""
    for path in Path(data_dir).rglob("cleaner-offset-checkpoint"):
        for line in path.read_text().splitlines()[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
                return int(parts[2])
    return None


def test_byte_offsets_of_a_compacted_topic_are_the_same_on_every_replica(tmp_path: Path) -> None:
    """Every replica cleans on its own, and only the leader was read by a 0.7 client before compaction was
    turned on. Each broker with a legacy listener indexes a compacted partition before cleaning it, so the
    byte positions are sums of the view sizes of the batches as they were written on every replica: after
    the cleaning passes, the follower that becomes leader serves the same messages, fillers and padded gzip
    messages at the same byte offsets as the old leader did, and a modern consumer reads the survivors."""
    require_zookeeper()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from kafka07.conftest import Client07, message_payloads, walk, walk_all

    from harness.clusterutil import admin

    c, legacy = _cluster(tmp_path, ["log.segment.bytes=1500", "log.cleaner.backoff.ms=200"])
    try:
        leader = _start(c, COMPACTED)
        sent: list[bytes] = []
        latest: dict[bytes, bytes] = {}
        for codec, rounds in (("none", 6), ("gzip", 3), ("none", 2)):
            p = Producer({"bootstrap.servers": c.bootstrap, "compression.type": codec, "linger.ms": 20,
                          "batch.num.messages": 12, "acks": "all"})
            for r in range(rounds):
                for k in range(6):
                    v = (f"{codec}{r}{k}".encode() if k % 2
                         else f"{codec}-round-{r}-key-{k}-".encode() * 3)
                    key = f"key-{k}".encode() if codec == "none" else f"gzip-key-{k % 3}".encode()
                    p.produce(COMPACTED, v, key=key, partition=0)
                    sent.append(v)
                    latest[key] = v
                p.flush(10)
            assert p.flush(10) == 0
        wait_until(lambda: len(partitions(c.bootstrap, COMPACTED)[0].isrs) == 3, 30, "a full ISR")
        with Client07("127.0.0.1", legacy[leader]) as cl:
            before = walk_all(cl, COMPACTED, 0, len(sent))  # the leader's index: made by this 0.7 read
        assert message_payloads(before) == sent
        a = admin(c.bootstrap)
        res = ConfigResource(ConfigResource.Type.TOPIC, COMPACTED, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
        for f in a.incremental_alter_configs([res]).values():
            f.result(15)

        def cleaned_everywhere() -> int | None:
            marks = {_checkpoint(b.data_dir, COMPACTED) for b in c.brokers}
            return marks.pop() if len(marks) == 1 and None not in marks else None

        # every replica cleaned up to the same point (the same segments: rolls follow the same batches)
        mark = wait_until(cleaned_everywhere, 60, "cleaning passes on the three replicas")
        assert mark > 0
        with Client07("127.0.0.1", legacy[leader]) as cl:
            after = walk(cl, COMPACTED, 0)
        starts = {o for o, _m in before}
        assert all(o in starts for o, _m in after)  # nothing moved
        survivors = message_payloads(after)
        assert len(survivors) < len(sent) and set(latest.values()) <= set(survivors)
        boot, new = _fail_over(c, COMPACTED, leader)
        with Client07("127.0.0.1", legacy[new]) as cl:
            moved = wait_until(lambda: (lambda w: w if len(w) == len(after) else None)(
                walk(cl, COMPACTED, 0)), 20, "the new leader's 0.7 view")
        assert moved == after  # the same messages, fillers and padded units at the same byte offsets
        assert [v for _o, v in read_partition(boot, COMPACTED, 0)] == survivors
    finally:
        c.stop(graceful=False)
