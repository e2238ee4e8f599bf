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


def test_follower_become_leader_serves_the_same_0_7_view(tmp_path: Path) -> None:
    require_zookeeper()
    if not shutil.which("node"):
        pytest.skip("node is missing: scripts/setup.sh --test installs it")
    from kafka07.conftest import Client07, franz_consume, franz_produce, walk, walk_all
    from kafka07.test_kafka06_interop import consume06, produce06

    c = LocalCluster(str(tmp_path / "cluster"), 3, broker_configs=FAST + ["default.replication.factor=3"])
    legacy = {}
    for b in c.brokers:
        legacy[b.node_id] = free_port()
        b.extra.append(f"listeners=PLAINTEXT://127.0.0.1:{b.port},KAFKA07://127.0.0.1:{legacy[b.node_id]}")
    try:
        c.start()
        wait_formed(c)
        create_topic(c.bootstrap, TOPIC, partitions=1, rf=3)
        leader = wait_until(lambda: partitions(c.bootstrap, TOPIC)[0].leader, 20, "a leader")
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
        c.broker(leader).kill()
        others = [b for b in c.brokers if b.node_id != leader]
        boot = ",".join(b.address for b in others)
        new = wait_until(lambda: (lambda x: x if x not in (-1, leader) else None)(
            partitions(boot, TOPIC)[0].leader), 30, "a new leader")
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
