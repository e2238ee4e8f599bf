"""A leader cut off past its ZooKeeper session (SIGSTOP) while it holds records nobody else has: another
replica is elected (unclean election enabled on the topic: the cut-off leader was the whole ISR), new records
are
written there; when the old leader comes back it truncates its divergent tail (OffsetForLeaderEpoch, KIP-101),
checked on its segment files, and the tail is never served."""

from __future__ import annotations

import os
import signal

import pytest
from clusterutil import QUIET, create_topic, fully_replicated, partitions, read_partition, wait_until
from confluent_kafka import Producer

pytestmark = pytest.mark.timeout(150)

SEG = "00000000000000000000.log"


def _produce(bootstrap: str, values: list[bytes], acks: str) -> None:
    p = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": False,
            "retries": 0,
            "message.timeout.ms": 20000,
        }
    )
    errors = []
    for v in values:
        p.produce("div", value=v, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors


def _leader_among(bootstrap: str, ids: tuple[int, int]) -> int | None:
    leader = partitions(bootstrap, "div")[0].leader
    return leader if leader in ids else None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_cut_off_leader_truncates_divergent_tail(cluster):
    bs = cluster.bootstrap
    create_topic(bs, "div", partitions=1, rf=3, configs={"unclean.leader.election.enable": "true"})
    wait_until(lambda: fully_replicated(bs, "div", 3), 20, "ISR of 3")
    p0 = partitions(bs, "div")[0]
    old = p0.leader
    f1, f2 = [r for r in p0.replicas if r != old]
    old_b = cluster.broker(old)
    _produce(old_b.address, [b"base-%d" % i for i in range(10)], "all")

    # the followers stall past their sessions: the ISR is the leader alone
    for f in (f1, f2):
        cluster.broker(f).signal(signal.SIGSTOP)
    wait_until(lambda: partitions(old_b.address, "div")[0].isrs == [old], 15, "ISR of the leader alone")
    _produce(old_b.address, [b"tail-%d" % i for i in range(3)], "1")  # only the old leader has these
    tail_size = os.path.getsize(os.path.join(old_b.data_dir, "div-0", SEG))

    # the leader is cut off; the followers come back; after its session expires one of them leads
    old_b.signal(signal.SIGSTOP)
    for f in (f1, f2):
        cluster.broker(f).signal(signal.SIGCONT)
    live = ",".join(cluster.broker(f).address for f in (f1, f2))
    new_leader = wait_until(lambda: _leader_among(live, (f1, f2)), 30, "a new leader")
    _produce(live, [b"new-%d" % i for i in range(5)], "1")

    # the old leader comes back: follower of the new one, its tail truncated away, the new records copied
    old_b.signal(signal.SIGCONT)
    wait_until(lambda: old in partitions(live, "div")[0].isrs, 40, "the old leader back in the ISR")
    new_seg = os.path.join(cluster.broker(new_leader).data_dir, "div-0", SEG)
    old_seg = os.path.join(old_b.data_dir, "div-0", SEG)
    wait_until(
        lambda: _read(old_seg) == _read(new_seg), 20, "the old leader's segment equal to the new leader's"
    )
    data = _read(old_seg)
    assert b"tail-" not in data and b"new-4" in data
    assert len(data) != tail_size
    values = [v for _o, v in read_partition(bs, "div", 0)]
    assert values == [b"base-%d" % i for i in range(10)] + [b"new-%d" % i for i in range(5)]
    assert b"truncating from" in _read(old_b.log_path)
