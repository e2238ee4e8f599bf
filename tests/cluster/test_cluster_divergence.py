"""A leader cut off past its ZooKeeper session (SIGSTOP) while it holds records nobody else has: another
replica is elected, new records are written there; when the old leader comes back it truncates its divergent
tail (OffsetForLeaderEpoch, KIP-101), checked on its segment files, and the tail is never served.

Two cases: the common one with a clean election (the followers stalled only briefly, for less than
replica.lag.time.max.ms, so they are still in the ISR when the leader is cut off), and the one where the
cut-off leader was the whole ISR (unclean election enabled on the topic)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer

from harness.clusterutil import QUIET, create_topic, fully_replicated, partitions, read_partition, wait_until

pytestmark = pytest.mark.timeout(150)

SEG = "00000000000000000000.log"


def _produce(bootstrap: str, values: list[bytes], acks: str, topic: str = "div") -> None:
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
        p.produce(topic, value=v, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors


def _leader_among(bootstrap: str, ids: tuple[int, int], topic: str = "div") -> int | None:
    leader = partitions(bootstrap, topic)[0].leader
    return leader if leader in ids else None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _topic_with_base(cluster, topic: str, unclean: bool) -> tuple[int, int, int]:
    """One partition, replication factor 3, ten acks=all records: (leader, follower, follower)."""
    bs = cluster.bootstrap
    create_topic(bs, topic, partitions=1, rf=3,
                 configs={"unclean.leader.election.enable": "true" if unclean else "false"})
    wait_until(lambda: fully_replicated(bs, topic, 3), 20, "ISR of 3")
    p0 = partitions(bs, topic)[0]
    f1, f2 = [r for r in p0.replicas if r != p0.leader]
    _produce(cluster.broker(p0.leader).address, [b"base-%d" % i for i in range(10)], "all", topic)
    return p0.leader, f1, f2


def test_cut_off_leader_truncates_divergent_tail(cluster):
    bs = cluster.bootstrap
    old, f1, f2 = _topic_with_base(cluster, "div", unclean=True)
    old_b = cluster.broker(old)

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


def test_cut_off_leader_clean_election_truncates_divergent_tail(cluster_factory):
    # followers stay in the ISR through a short stall: replica.lag.time.max.ms far above the test's stalls
    cluster = cluster_factory(configs=["replica.lag.time.max.ms=60000"])
    bs = cluster.bootstrap
    old, f1, f2 = _topic_with_base(cluster, "clean", unclean=False)
    old_b = cluster.broker(old)
    old_seg = os.path.join(old_b.data_dir, "clean-0", SEG)

    # both followers stall for much less than the session timeout: only the leader gets the tail (acks=1)
    for f in (f1, f2):
        cluster.broker(f).signal(signal.SIGSTOP)
    # a fetch the followers sent before they stopped is answered within replica.fetch.wait.max.ms (0.2 s) and
    # waits in their sockets: the tail goes after it, so no follower ever asked for it
    time.sleep(1.0)
    _produce(old_b.address, [b"tail-%d" % i for i in range(3)], "1", "clean")
    assert b"tail-2" in _read(old_seg)
    # the leader is cut off; the followers, still in the ISR, come back before their own sessions expire
    old_b.signal(signal.SIGSTOP)
    for f in (f1, f2):
        cluster.broker(f).signal(signal.SIGCONT)
    live = ",".join(cluster.broker(f).address for f in (f1, f2))
    new_leader = wait_until(lambda: _leader_among(live, (f1, f2), "clean"), 30, "a new leader from the ISR")
    assert old not in partitions(live, "clean")[0].isrs
    new_seg = os.path.join(cluster.broker(new_leader).data_dir, "clean-0", SEG)
    assert b"tail-" not in _read(new_seg)  # the tail was the old leader's alone
    _produce(live, [b"new-%d" % i for i in range(5)], "all", "clean")

    # the old leader comes back as a follower: tail truncated, the new records copied, the tail never served
    old_b.signal(signal.SIGCONT)
    wait_until(lambda: old in partitions(live, "clean")[0].isrs, 40, "the old leader back in the ISR")
    wait_until(
        lambda: _read(old_seg) == _read(new_seg), 20, "the old leader's segment equal to the new leader's"
    )
    data = _read(old_seg)
    assert b"tail-" not in data and b"new-4" in data
    expected = [b"base-%d" % i for i in range(10)] + [b"new-%d" % i for i in range(5)]
    assert [v for _o, v in read_partition(bs, "clean", 0)] == expected
    assert b"truncating from" in _read(old_b.log_path)
    # the election was clean: the controller never chose a replica outside the ISR
    assert not any(b"unclean leader election" in _read(b.log_path) for b in cluster.brokers)
