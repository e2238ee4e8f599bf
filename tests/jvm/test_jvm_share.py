"""Share groups (KIP-932) with Kafka's Java KafkaShareConsumer (``clients`` module, ``ShareConsume``).

Against every target (the default run: one moldau broker; ``MOLDAU_JVM_FULL=1``: also the three-broker moldau
cluster and the Apache Kafka control broker):
* release / reject / the delivery-count limit with explicit acknowledgements;
* three Java members of one group on one partition, every record accepted exactly once across them;
* a Java member and a confluent-kafka ShareConsumer in one group on one partition;
* a Java member killed with SIGKILL: its acquired records come back (when its connection closes, at the
  latest when their lock expires) to the next Java member with delivery count 2 (whole matrix only);
* ``kafka-share-groups.sh`` (ShareGroupCommand) on the group, and the ``__share_group_state`` records decoded
  by Kafka's own classes (whole matrix only);
* the group's state surviving a restart: of the broker (one moldau broker, the Kafka broker), of the share
  coordinator's broker followed by a kill -9 of the share-partition leader (the cluster) (whole matrix only).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from integration.test_share_groups import alter_group, wait_group_configs

from harness.brokerproc import BrokerProcess, ClusterProcess

ck = pytest.importorskip("confluent_kafka")

LOCK_MS = 2000
# a lock shorter than the default minimum (15 s) for the killed member's scenario
BROKER_SETTINGS = {kind: {"group.share.min.record.lock.duration.ms": "1000"}
                   for kind in ("moldau", "cluster", "kafka")}
# the cluster's __share_group_state replicated on all three brokers (as Kafka's default), for the restart;
# its partition count moldau's (and Kafka's) default
STATE_PARTITIONS = 50
BROKER_SETTINGS["cluster"].update({"share.coordinator.state.topic.replication.factor": "3",
                                   "share.coordinator.state.topic.min.isr": "2"})


def _group(target: BrokerProcess, prefix: str, **configs: str) -> str:
    """A new share group reading from the earliest offset (its configs shown by the broker before it is used:
    a Kafka broker shows a group config a moment after IncrementalAlterConfigs)."""
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    configs = {"share.auto.offset.reset": "earliest", **configs}
    alter_group(admin, group, **configs)
    wait_group_configs(admin, group, configs)
    return group


def _produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0


def _deliveries(events: list[dict[str, Any]]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for e in events:
        if e.get("event") == "record":
            out.setdefault(int(e["offset"]), []).append((int(e["delivery_count"]), str(e["ack"])))
    return out


def _waves(target: BrokerProcess, topic: str, members_have_some: Callable[[], bool],
           received: Callable[[], int], n: int = 300) -> int:
    """Batches of 10 records while the members poll (with max.poll.records 5 a fetch acquires one batch), at
    least ``n``, more while a member has had none (Kafka gives members the partition a heartbeat or two after
    they join); waits until the members received them all; the number produced."""
    p = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
    produced = 0
    while produced < n or (not members_have_some() and produced < 4 * n):
        for i in range(produced, produced + 10):
            p.produce(topic, value=b"%d" % i)
        assert p.flush(30) == 0
        produced += 10
        time.sleep(0.1)
    end = time.time() + 40
    while time.time() < end and received() < produced:
        time.sleep(0.2)
    return produced


def test_java_share_consumer_release_reject_and_delivery_limit(
    target: BrokerProcess, jtopic: Callable[..., str], jrun: Callable[..., Any]
) -> None:
    topic = jtopic()
    group = _group(target, "jshare", **{"share.delivery.count.limit": "2"})
    _produce(target.bootstrap, topic, range(20))
    # 0 released once then accepted, 1 rejected, 2 released at every delivery; then 1.5 s more polling
    events = jrun("ShareConsume", "--topic", topic, "--group", group, "--expect", "19", "--linger-ms", "1500",
                  "--release", "0", "--reject", "1", "--release-always", "2", "--timeout-ms", "60000")
    done = [e for e in events if e.get("event") == "done"][-1]
    deliveries = _deliveries(events)
    assert done["error"] is None and done["settled"] == 19, (done, deliveries)
    assert deliveries[0] == [(1, "release"), (2, "accept")], "released: redelivered, delivery count 2"
    assert deliveries[1] == [(1, "reject")], "a rejected record is never redelivered"
    assert deliveries[2] == [(1, "release"), (2, "release")], "past the delivery-count limit (2): archived"
    assert all(deliveries[o] == [(1, "accept")] for o in range(3, 20))


def test_java_three_members_accept_every_record_once(
    target: BrokerProcess, jtopic: Callable[..., str], jstart: Callable[..., Any]
) -> None:
    """Three KafkaShareConsumers (one JVM, a thread each) on a one-partition topic: all receive records,
    every record accepted exactly once across them."""
    topic = jtopic()
    group = _group(target, "jthree")
    java = jstart("ShareConsume", "--topic", topic, "--group", group, "--members", "3", "--stdin", "true",
                  "--prop", "max.poll.records=5", "--timeout-ms", "150000")

    def records() -> list[dict[str, Any]]:
        return [e for e in list(java.events) if e.get("event") == "record"]

    time.sleep(4)  # the JVM started and the members joined
    n = _waves(target, topic, lambda: len({e["member"] for e in records()}) == 3, lambda: len(records()))
    java.close_stdin()
    done = java.wait_for(lambda e: e.get("event") == "done", 60, "the Java members' end")
    assert done["error"] is None, done
    got = records()
    assert sorted(int(e["offset"]) for e in got) == list(range(n)), "every record accepted exactly once"
    per_member = {m: sum(1 for e in got if e["member"] == m) for m in range(3)}
    assert all(per_member.values()), per_member
    assert all(e["delivery_count"] == 1 and e["ack"] == "accept" for e in got)


def test_java_and_python_members_share_one_partition(
    target: BrokerProcess, jtopic: Callable[..., str], jstart: Callable[..., Any]
) -> None:
    from confluent_kafka import ShareConsumer

    topic = jtopic()
    group = _group(target, "jmixed")
    java = jstart("ShareConsume", "--topic", topic, "--group", group, "--stdin", "true",
                  "--prop", "max.poll.records=5", "--timeout-ms", "150000")
    py: list[int] = []
    stop = threading.Event()

    def python_member() -> None:
        c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group, "max.poll.records": 5})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                py.extend(m.offset() for m in c.poll(0.2) if not m.error())
            c.commit_sync(10)
        finally:
            c.close()

    def jv() -> list[int]:
        return [int(e["offset"]) for e in list(java.events) if e.get("event") == "record"]

    t = threading.Thread(target=python_member)
    t.start()
    try:
        time.sleep(4)  # both joined (the JVM starts slower)
        n = _waves(target, topic, lambda: bool(py and jv()), lambda: len(py) + len(jv()))
    finally:
        stop.set()
        t.join(30)
    java.close_stdin()
    done = java.wait_for(lambda e: e.get("event") == "done", 60, "the Java member's end")
    assert done["error"] is None, done
    assert sorted(jv() + py) == list(range(n)), "every record delivered exactly once across Java and Python"
    assert jv() and py, (len(jv()), len(py))


@pytest.mark.jvm_full
def test_java_member_killed_records_come_back(
    target: BrokerProcess, jtopic: Callable[..., str], jstart: Callable[..., Any], jrun: Callable[..., Any]
) -> None:
    """A Java member acquires records and is killed with SIGKILL before acknowledging them: they come back
    to the next Java member with delivery count 2, at the latest once their lock (2 s) expired (moldau and
    Kafka release them as soon as the dead member's connection closes)."""
    topic = jtopic()
    group = _group(target, "jkill", **{"share.record.lock.duration.ms": str(LOCK_MS)})
    _produce(target.bootstrap, topic, range(5))
    victim = jstart("ShareConsume", "--topic", topic, "--group", group, "--hold", "true",
                    "--timeout-ms", "120000")
    held = victim.wait_for(lambda e: e.get("event") == "held", 90, "the member holding records")["offsets"]
    assert held, held
    os.kill(victim.proc.pid, signal.SIGKILL)
    killed_at = time.time()
    events = jrun("ShareConsume", "--topic", topic, "--group", group, "--expect", "5",
                  "--timeout-ms", "60000")
    took = time.time() - killed_at
    done = [e for e in events if e.get("event") == "done"][-1]
    assert done["error"] is None and done["settled"] == 5, done
    deliveries = _deliveries(events)
    assert sorted(deliveries) == [0, 1, 2, 3, 4]
    assert all(deliveries[o] == [(2, "accept")] for o in held), "the killed member's records, delivered again"
    assert all(deliveries[o] == [(1, "accept")] for o in range(5) if o not in held)
    assert took < LOCK_MS / 1000 + 30, took  # a JVM start, the join, the fetch


@pytest.mark.jvm_full
def test_kafka_share_groups_tool(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-share-groups.sh (ShareGroupCommand): list, describe (offsets, members, state), reset-offsets (the
    group then reads from there), delete-offsets, delete."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from test_jvm_tools import tool

    topic = jtopic()
    group = _group(target, "jtool")
    _produce(target.bootstrap, topic, range(10))

    def cmd(*args: str) -> str:
        return tool("consumer.group.ShareGroupCommand", "--bootstrap-server", target.bootstrap, *args).stdout

    c = ShareConsumer(
        {"bootstrap.servers": target.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([topic])
    try:
        n, end = 0, time.time() + 20
        while n < 10 and time.time() < end:
            for m in c.poll(0.5):
                c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 5 else AcknowledgeType.RELEASE)
                n += 1
        c.commit_sync(10)
        assert group in cmd("--list").split()
        rows = [ln.split() for ln in cmd("--describe", "--group", group).splitlines()]
        # start offset 5, lag 5 (Kafka's start offset as the share coordinator has it trails by one write)
        starts = ["5"] if target.kind != "kafka" else [str(i) for i in range(6)]
        assert any(r[:3] == [group, topic, "0"] and r[3:] in ([s, "5"] for s in starts) for r in rows), rows
        members = cmd("--describe", "--group", group, "--members")
        assert f"{topic}:0" in members
        assert "Stable" in cmd("--describe", "--group", group, "--state")
    finally:
        c.close()
    assert "Empty" in cmd("--describe", "--group", group, "--state")
    cmd("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    rows = [ln.split() for ln in cmd("--describe", "--group", group).splitlines()]
    assert [group, topic, "0", "0", "10"] in rows
    # the group reads from the reset offset: every record again, as a first delivery
    c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    c.subscribe([topic])
    again: list[tuple[int, int]] = []
    try:
        end = time.time() + 30
        while len(again) < 10 and time.time() < end:
            again.extend((m.offset(), m.delivery_count()) for m in c.poll(0.5) if not m.error())
        c.commit_sync(10)
    finally:
        c.close()
    assert sorted(again) == [(o, 1) for o in range(10)], again
    assert "Successful" in cmd("--delete-offsets", "--group", group, "--topic", topic)
    assert "successful" in cmd("--delete", "--group", group)
    assert group not in cmd("--list").split()


@pytest.mark.jvm_full
def test_share_state_records_read_by_kafkas_classes(
    target: BrokerProcess, jtopic: Callable[..., str]
) -> None:
    """The records a share group leaves in ``__share_group_state`` decode with Kafka's own generated classes
    (kafka-share-coordinator's ShareSnapshotKey/Value, ShareUpdateKey/Value), every byte consumed."""
    import subprocess

    from confluent_kafka import Consumer, ShareConsumer, TopicPartition

    from harness import jvm

    topic = jtopic()
    group = _group(target, "jstate")
    _produce(target.bootstrap, topic, range(10))
    c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        n, end = 0, time.time() + 20
        while n < 10 and time.time() < end:
            n += sum(1 for m in c.poll(0.5) if not m.error())
        c.commit_sync(10)
    finally:
        c.close()
    reader = Consumer(
        {"bootstrap.servers": target.bootstrap, "group.id": f"r-{group}", "enable.auto.commit": False}
    )
    lines = []
    try:
        reader.assign([TopicPartition("__share_group_state", p, 0) for p in range(50)])
        end = time.time() + 10
        while time.time() < end:
            m = reader.poll(0.5)
            if m is None:
                if lines:
                    break
                continue
            if not m.error() and group.encode() in m.key():
                lines.append(f"{m.key().hex()} {m.value().hex() if m.value() is not None else '-'}")
    finally:
        reader.close()
    assert lines, "no share-state records of the group"
    source = Path(__file__).parent / "share_state" / "ShareStateDecode.java"
    out = subprocess.run(
        [jvm.java_binary(), "-cp", ":".join(jvm.classpath("kafka")), str(source)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    decoded = out.stdout.splitlines()
    assert len(decoded) == len(lines) and not [d for d in decoded if d.startswith("ERROR")], decoded
    assert decoded[0].startswith("0 ShareSnapshotKey(groupId='" + group)  # initialized: a snapshot first
    # every record accepted: the start offset past them (Kafka's may trail by one write: then the records
    # past it are in a state batch of acknowledged ones, deliveryState 2)
    done = "firstOffset=0, lastOffset=9, deliveryState=2" if target.kind == "kafka" else "startOffset=10"
    assert any("startOffset=10" in d or done in d for d in decoded), decoded


def _restart(target: BrokerProcess, group: str, topic: str) -> None:
    """One broker: a restart (SIGTERM). The cluster: a restart of the share coordinator's broker, then a
    kill -9 of the share-partition leader, started again once a new leader took over (that one reads the
    state)."""
    if not isinstance(target, ClusterProcess):
        target.restart()
        return
    from harness.clusterutil import restart_share_coordinator_and_kill_leader

    leader, _, new_leader, _ = restart_share_coordinator_and_kill_leader(target.cluster, group, topic,
                                                                       STATE_PARTITIONS)
    target.cluster.broker(leader).start()
    target.cluster.broker(leader).wait_listening()
    assert new_leader != leader


@pytest.mark.jvm_full
def test_java_share_state_survives_a_restart(target: BrokerProcess, jtopic: Callable[..., str],
                                              jrun: Callable[..., Any]) -> None:
    """A Java member accepts 0-4, rejects 5 and releases 6-9; after the restart a new Java member gets exactly
    6-9, each with delivery count 2."""
    topic = jtopic()
    group = _group(target, "jrestart")
    _produce(target.bootstrap, topic, range(10))
    events = jrun("ShareConsume", "--topic", topic, "--group", group, "--expect", "6", "--reject", "5",
                  "--release-always", "6,7,8,9", "--timeout-ms", "60000")
    done = [e for e in events if e.get("event") == "done"][-1]
    first = _deliveries(events)
    assert done["error"] is None and done["settled"] == 6, (done, first)
    assert {o: d[0] for o, d in first.items()} == {
        **{o: (1, "accept") for o in range(5)}, 5: (1, "reject"), **{o: (1, "release") for o in range(6, 10)}
    }, first
    # released at every delivery: a member that kept polling may have had 6-9 again before it stopped
    before = {o: len(first[o]) for o in range(6, 10)}
    _restart(target, group, topic)
    events = jrun("ShareConsume", "--topic", topic, "--group", group, "--expect", "4", "--linger-ms", "1500",
                  "--timeout-ms", "90000", timeout=150)
    done = [e for e in events if e.get("event") == "done"][-1]
    again = _deliveries(events)
    assert done["error"] is None and done["settled"] == 4, (done, again)
    assert again == {o: [(before[o] + 1, "accept")] for o in range(6, 10)}, (before, again)
