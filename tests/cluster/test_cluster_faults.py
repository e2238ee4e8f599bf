"""Faults with real processes: a SIGSTOPped follower leaves the ISR and acks=all goes on; two of three
stopped:
NOT_ENOUGH_REPLICAS for acks=all, acks=1 still works, nothing acknowledged is lost when they return; kill -9
of the
controller: another broker takes over and topic creation works again; SIGTERM of a leader moves leadership
before the broker stops."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.clusterutil import (
    QUIET,
    admin,
    create_topic,
    fully_replicated,
    partitions,
    read_partition,
    wait_until,
)
from harness.rawkafka import RawConnection, produce_request

pytestmark = pytest.mark.timeout(150)


SESSION_TIMEOUT_S = 4.0  # zookeeper.session.timeout.ms of the test clusters (conftest.FAST)
LAG_MAX_S = 3.0  # replica.lag.time.max.ms


def _raw_produce(address: str, topic: str, value: bytes, acks: int) -> int:
    from kafka.protocol.producer import ProduceResponse

    from moldau.protocol.records import BatchBuilder

    bb = BatchBuilder()
    bb.append(int(time.time() * 1000), None, value, [])
    with RawConnection.to(address) as conn:
        resp = conn.call(produce_request(topic, 0, bytes(bb.build(0)), acks=acks), ProduceResponse, 8)
    return resp.responses[0].partition_responses[0].error_code


def _describe_json(bootstrap: str, topic: str, flag: str) -> list:
    import json
    import subprocess

    from moldau.broker.cluster.local import moldau_command

    out = subprocess.run([*moldau_command(), "topics", "describe", topic, flag, "--json", "-b", bootstrap],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def _controller(bootstrap: str) -> int:
    return admin(bootstrap).list_topics(timeout=5).controller_id


def _produce_acks_all(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
        }
    )
    errors = []
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(40) == 0 and not errors, errors


def _metrics(port: int) -> dict[str, float]:
    """The unlabelled samples of a broker's Prometheus endpoint."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_sigstop_followers_isr_and_min_insync(cluster_factory):
    # the ZooKeeper session outlives replica.lag.time.max.ms by far, so the stopped follower leaves the ISR
    # through the leader's lag check (counted in its isrshrinks metric), not through the controller seeing
    # its session expire first (Kafka's other way out of the ISR, which the leader does not count)
    cluster = cluster_factory(metrics=True, configs=["zookeeper.session.timeout.ms=12000"])
    bs = cluster.bootstrap
    create_topic(bs, "stall", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    wait_until(lambda: fully_replicated(bs, "stall", 3), 20, "ISR of 3")
    p0 = partitions(bs, "stall")[0]
    leader = p0.leader
    ctl = _controller(bs)
    followers = [r for r in p0.replicas if r != leader]
    first = next((f for f in followers if f != ctl), followers[0])
    second = next(f for f in followers if f != first)
    leader_addr = cluster.broker(leader).address
    # the leader's own view too (its metadata cache follows the controller's UpdateMetadata): the ISR of 3
    # must be what the leader answers before a follower is stopped, or a stale answer looks like a shrink
    wait_until(lambda: fully_replicated(leader_addr, "stall", 3), 20, "ISR of 3 at the leader")
    _produce_acks_all(leader_addr, "stall", [b"a-%d" % i for i in range(50)])

    # one follower stopped: it leaves the ISR within replica.lag.time.max.ms (+ the check interval and load)
    cluster.broker(first).signal(signal.SIGSTOP)
    t0 = time.monotonic()
    wait_until(lambda: first not in partitions(leader_addr, "stall")[0].isrs, LAG_MAX_S + 8, "ISR shrink")
    shrink_s = time.monotonic() - t0
    print(f"ISR shrink after {shrink_s:.1f} s (replica.lag.time.max.ms {LAG_MAX_S:.0f} s)")
    # what operators see: the partition listed as under-replicated, with the stopped follower out of the ISR
    urp = _describe_json(leader_addr, "stall", "--under-replicated-partitions")
    assert [p["partition"] for t in urp for p in t["partitions"]] == [0]
    assert first not in urp[0]["partitions"][0]["isr"]
    assert _describe_json(leader_addr, "stall", "--unavailable-partitions") == []
    # and in the leader's metrics; exactly one broker reports itself as the active controller
    m = _metrics(cluster.broker(leader).metrics_port)
    assert m["kafka_server_replicamanager_underreplicatedpartitions"] == 1
    assert m["kafka_server_replicamanager_isrshrinks_total"] >= 1
    active = [_metrics(b.metrics_port)["kafka_controller_kafkacontroller_activecontrollercount"]
              for b in cluster.brokers if b.node_id != first]
    assert active.count(1) <= 1 and (ctl == first or active.count(1) == 1)
    _produce_acks_all(leader_addr, "stall", [b"b-%d" % i for i in range(50)])  # acks=all goes on (ISR 2)

    # two stopped: acks=all refused before the append, acks=1 still works
    cluster.broker(second).signal(signal.SIGSTOP)
    # the leader's metadata answer follows the controller's UpdateMetadata: when the second follower is the
    # controller, a new controller (after that session's 12 s) sends it
    wait_until(
        lambda: partitions(leader_addr, "stall")[0].isrs == [leader],
        LAG_MAX_S + 8 + (12 if second == ctl else 0),
        "ISR of the leader",
    )
    assert _raw_produce(leader_addr, "stall", b"refused", -1) == 19  # NOT_ENOUGH_REPLICAS
    assert _raw_produce(leader_addr, "stall", b"c-0", 1) == 0

    # both back: they catch up and rejoin
    for f in (first, second):
        cluster.broker(f).signal(signal.SIGCONT)
    t1 = time.monotonic()
    wait_until(lambda: fully_replicated(bs, "stall", 3), 40, "both followers back in the ISR")
    print(f"rejoined the ISR {time.monotonic() - t1:.1f} s after SIGCONT")
    _produce_acks_all(bs, "stall", [b"d-%d" % i for i in range(20)])
    values = [v for _o, v in read_partition(bs, "stall", 0)]
    expected = (
        [b"a-%d" % i for i in range(50)]
        + [b"b-%d" % i for i in range(50)]
        + [b"c-0"]
        + [b"d-%d" % i for i in range(20)]
    )
    assert values == expected


def test_kill_controller_another_takes_over(cluster):
    bs = cluster.bootstrap
    old = _controller(bs)
    cluster.broker(old).kill()
    t0 = time.monotonic()
    others = [b for b in cluster.brokers if b.node_id != old]
    wait_until(
        lambda: all(_controller(b.address) not in (old, -1) for b in others),
        SESSION_TIMEOUT_S + 10,
        "a new controller",
    )
    took = time.monotonic() - t0
    print(f"new controller after {took:.1f} s (session timeout {SESSION_TIMEOUT_S:.0f} s)")
    assert took < SESSION_TIMEOUT_S + 5
    live = ",".join(b.address for b in others)
    create_topic(live, "after", partitions=2, rf=2)
    wait_until(lambda: fully_replicated(live, "after", 2), 20, "the new topic's ISR")
    _produce_acks_all(live, "after", [b"x"])
    # the old controller restarts as an ordinary broker and sees the new topic
    cluster.broker(old).start()
    cluster.broker(old).wait_listening()
    wait_until(
        lambda: len(admin(cluster.broker(old).address).list_topics("after", timeout=5).brokers) == 3,
        20,
        "the restarted broker in the cluster",
    )


def test_sigterm_leader_moves_leadership_first(cluster):
    bs = cluster.bootstrap
    create_topic(bs, "calm", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    wait_until(lambda: fully_replicated(bs, "calm", 3), 20, "ISR of 3")
    leader = partitions(bs, "calm")[0].leader
    p = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": bs,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )
    acked, errors = [], []

    def cb(err, msg):
        (errors if err else acked).append(msg.value())

    i = 0
    t_end = time.monotonic() + 6
    stopped = False
    while time.monotonic() < t_end:
        p.produce("calm", value=b"%d" % i, partition=0, on_delivery=cb)
        i += 1
        p.poll(0.003)
        if not stopped and time.monotonic() > t_end - 4:
            rc = cluster.broker(leader).stop(30)  # SIGTERM: controlled shutdown
            assert rc == 0
            stopped = True
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    log = Path(cluster.broker(leader).log_path).read_text()
    assert "controlled shutdown: leaderships moved" in log
    new = partitions(bs, "calm")[0]
    assert new.leader != leader and leader not in new.isrs
    values = [v for _o, v in read_partition(bs, "calm", 0)]
    assert len(values) == len(set(values)) and set(acked) <= set(values)
