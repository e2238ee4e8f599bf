"""Share groups (KIP-932) with Kafka's Java KafkaShareConsumer against moldau: release / reject with explicit
acknowledgements, and a Java member and a confluent-kafka ShareConsumer in one group on one partition
(every record accepted exactly once across them). One broker: share groups are not served by the cluster yet.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from integration.test_share_groups import alter_group

from harness.brokerproc import BrokerProcess

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(autouse=True)
def _one_moldau_broker(target: BrokerProcess) -> None:
    if target.kind != "moldau":
        pytest.skip("share groups are served by one moldau broker so far")


def _produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0


def test_java_share_consumer_release_and_reject(
    target: BrokerProcess, jtopic: Callable[..., str], jrun: Callable[..., Any]
) -> None:
    topic = jtopic()
    group = f"jshare-{uuid.uuid4().hex[:8]}"
    alter_group(
        AdminClient({"bootstrap.servers": target.bootstrap}), group, **{"share.auto.offset.reset": "earliest"}
    )
    _produce(target.bootstrap, topic, range(20))
    events = jrun(
        "ShareConsume",
        "--topic",
        topic,
        "--group",
        group,
        "--expect",
        "20",
        "--release",
        "0",
        "--reject",
        "1",
        "--timeout-ms",
        "60000",
    )
    done = [e for e in events if e.get("event") == "done"][-1]
    assert done["error"] is None and done["settled"] == 20, done
    deliveries: dict[int, list[tuple[int, str]]] = {}
    for e in events:
        if e.get("event") == "record":
            deliveries.setdefault(int(e["offset"]), []).append((int(e["delivery_count"]), str(e["ack"])))
    assert deliveries[0] == [(1, "release"), (2, "accept")]
    assert deliveries[1] == [(1, "reject")]
    assert all(deliveries[o] == [(1, "accept")] for o in range(2, 20))


def test_java_and_python_members_share_one_partition(
    target: BrokerProcess, jtopic: Callable[..., str], jstart: Callable[..., Any]
) -> None:
    from confluent_kafka import ShareConsumer

    topic = jtopic()
    group = f"jmixed-{uuid.uuid4().hex[:8]}"
    n = 300
    alter_group(
        AdminClient({"bootstrap.servers": target.bootstrap}), group, **{"share.auto.offset.reset": "earliest"}
    )
    java = jstart(
        "ShareConsume", "--topic", topic, "--group", group, "--idle-ms", "3000", "--timeout-ms", "90000"
    )
    py: list[int] = []
    stop = threading.Event()

    def python_member() -> None:
        c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                py.extend(m.offset() for m in c.poll(0.2) if not m.error())
            c.commit_sync(10)
        finally:
            c.close()

    t = threading.Thread(target=python_member)
    t.start()
    time.sleep(4)  # both joined (the JVM starts slower)
    for k in range(30):
        _produce(target.bootstrap, topic, range(k * 10, k * 10 + 10))
        time.sleep(0.1)
    done = java.wait_for(lambda e: e.get("event") == "done", 120, "the Java member's end")
    stop.set()
    t.join(30)
    java.finish()
    jv = [int(e["offset"]) for e in java.events if e.get("event") == "record"]
    assert done["error"] is None, done
    assert sorted(jv + py) == list(range(n)), "every record delivered exactly once across Java and Python"
    assert jv and py, (len(jv), len(py))


@pytest.mark.jvm_full
def test_kafka_share_groups_tool(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-share-groups.sh (ShareGroupCommand): list, describe (offsets, members, state), reset-offsets,
    delete-offsets, delete."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from test_jvm_tools import tool

    topic = jtopic()
    group = f"jtool-{uuid.uuid4().hex[:8]}"
    alter_group(
        AdminClient({"bootstrap.servers": target.bootstrap}), group, **{"share.auto.offset.reset": "earliest"}
    )
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
        assert [group, topic, "0", "5", "5"] in rows  # start offset 5, lag 5
        members = cmd("--describe", "--group", group, "--members")
        assert f"{topic}:0" in members
        assert "Stable" in cmd("--describe", "--group", group, "--state")
    finally:
        c.close()
    assert "Empty" in cmd("--describe", "--group", group, "--state")
    cmd("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    rows = [ln.split() for ln in cmd("--describe", "--group", group).splitlines()]
    assert [group, topic, "0", "0", "10"] in rows
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
    group = f"jstate-{uuid.uuid4().hex[:8]}"
    alter_group(
        AdminClient({"bootstrap.servers": target.bootstrap}), group, **{"share.auto.offset.reset": "earliest"}
    )
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
    assert any("startOffset=10" in d for d in decoded), decoded  # every record accepted: the SPSO at the end
