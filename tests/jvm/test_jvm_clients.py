"""Kafka's Java producer and consumer against moldau (and, in the whole matrix, the three-broker cluster and
the Apache Kafka broker as the control), alone and mixed with Python clients in one group and one pipeline.

The default run: the acks=all idempotent round trip (Java producer, Java consumer, confluent-kafka reading the
same records). Everything else with ``MOLDAU_JVM_FULL=1``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.brokerproc import BrokerProcess

N = 200


def _records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == "record"]


def _last(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [e for e in events if e.get("event") == name]
    assert found, f"no {name!r} event among {events[-5:]}"
    return found[-1]


Read = list[tuple[int, int, bytes | None, bytes]]


def _python_read(bootstrap: str, topic: str, expected: int, *, isolation: str = "read_uncommitted",
                 group: str | None = None, timeout: float = 60.0) -> Read:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"py-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation})
    out: Read = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value()))
        # nothing more than expected arrives
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def _check_roundtrip(target: BrokerProcess, jtopic: Callable[..., str], jrun: Callable[..., Any],
                     acks: str, idempotent: bool) -> None:
    topic = jtopic(partitions=3)
    produced = jrun("Produce", "--topic", topic, "--count", str(N), "--acks", acks,
                    "--idempotent", str(idempotent).lower(), "--prefix", f"acks{acks}")
    done = _last(produced, "produced")
    assert done["count"] == N and done["errors"] == 0, done
    sent = [e for e in produced if e["event"] == "sent"]
    assert sum(e["count"] for e in sent) == N
    if acks == "0":
        assert all(e["first"] == -1 and e["last"] == -1 for e in sent), "acks=0 has no offsets"
    else:
        # one partition's records take consecutive offsets from 0
        assert all(e["first"] == 0 and e["last"] == e["count"] - 1 for e in sent), sent
    consumed = jrun("Consume", "--topic", topic, "--group", f"g-{uuid.uuid4().hex[:8]}", "--expect", str(N),
                    "--timeout-ms", "60000")
    recs = _records(consumed)
    assert _last(consumed, "done")["error"] is None
    assert sorted(r["value"] for r in recs) == sorted(f"acks{acks}-{i}" for i in range(N))
    assert all(r["key"] == f"k-{r['value'].rsplit('-', 1)[1]}" for r in recs)
    assert all(r["header"] == r["value"].rsplit("-", 1)[1] for r in recs)
    # offsets are unique per partition, in order
    for p in range(3):
        offs = [r["offset"] for r in recs if r["partition"] == p]
        assert offs == sorted(offs) and len(set(offs)) == len(offs)
    # and a Python client reads the same records
    py = _python_read(target.bootstrap, topic, N)
    assert sorted(v.decode() for _, _, _, v in py) == sorted(r["value"] for r in recs)


def test_java_roundtrip_acks_all_idempotent(target: BrokerProcess, jtopic: Callable[..., str],
                                            jrun: Callable[..., Any]) -> None:
    _check_roundtrip(target, jtopic, jrun, "all", True)


@pytest.mark.jvm_full
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_java_roundtrip_acks(target: BrokerProcess, jtopic: Callable[..., str], jrun: Callable[..., Any],
                             acks: str) -> None:
    _check_roundtrip(target, jtopic, jrun, acks, False)


@pytest.mark.jvm_full
def test_python_producer_java_consumer(target: BrokerProcess, jtopic: Callable[..., str],
                                       jrun: Callable[..., Any]) -> None:
    topic = jtopic(partitions=2)
    p = Producer({"bootstrap.servers": target.bootstrap, "enable.idempotence": True})
    for i in range(N):
        p.produce(topic, key=f"k-{i}".encode(), value=f"py-{i}".encode(), headers=[("i", str(i).encode())])
    assert p.flush(30) == 0
    del p
    events = jrun("Consume", "--topic", topic, "--group", f"g-{uuid.uuid4().hex[:8]}", "--expect", str(N))
    recs = _records(events)
    assert sorted(r["value"] for r in recs) == sorted(f"py-{i}" for i in range(N))
    assert all(r["header"] == r["value"][3:] and r["key"] == f"k-{r['value'][3:]}" for r in recs)


def _produce_keyed(bootstrap: str, topic: str, partitions: int, count: int, prefix: str) -> set[str]:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = set()
    for i in range(count):
        v = f"{prefix}-{i}"
        p.produce(topic, value=v.encode(), partition=i % partitions)
        values.add(v)
    assert p.flush(30) == 0
    return values


def _assigned(events: list[dict[str, Any]]) -> set[str]:
    """The partitions a consumer holds after its assigned/revoked callbacks so far (cooperative: deltas)."""
    held: set[str] = set()
    for e in events:
        if e.get("event") == "assigned":
            held |= set(e["partitions"])
        elif e.get("event") == "revoked":
            held -= set(e["partitions"])
    return held


@pytest.mark.jvm_full
def test_java_and_python_in_one_cooperative_group(target: BrokerProcess, jtopic: Callable[..., str],
                                                  jstart: Callable[..., Any]) -> None:
    """A Java consumer (CooperativeStickyAssignor) and a confluent-kafka consumer (cooperative-sticky) share a
    group: the Java member gives up half its partitions without losing the other half, and the records
    produced after both joined are read once, each by one of them."""
    topic = jtopic(partitions=4)
    group = f"mixed-{uuid.uuid4().hex[:8]}"
    j = jstart("Consume", "--topic", topic, "--group", group, "--assignor", "cooperative-sticky",
               "--until-eof", "true", "--timeout-ms", "180000")
    j.wait_for(lambda e: e.get("event") == "assigned" and len(e["partitions"]) == 4, 90, "4 partitions")
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": True})
    got: list[str] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (c.assignment() and len(_assigned(j.events)) == 2):
            c.poll(0.5)  # nothing is produced yet: polls only to take part in the rebalance
        assert len(c.assignment()) == 2, f"python member holds {c.assignment()}"
        java_held = _assigned(j.events)
        assert len(java_held) == 2 and not java_held & {f"{tp.topic}:{tp.partition}" for tp in c.assignment()}
        revoked = [e for e in j.events if e.get("event") == "revoked" and e["partitions"]]
        assert all(len(e["partitions"]) < 4 for e in revoked), f"eager-style revocation: {revoked}"
        values = _produce_keyed(target.bootstrap, topic, 4, 400, "mixed")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(got) + len(_records(j.events)) < 400:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    assert j.finish(60) == 0, j.stderr()
    java_got = [r["value"] for r in _records(j.events)]
    assert got and java_got, (len(got), len(java_got))
    assert sorted(got + java_got) == sorted(values), "each record read once, by one member"


@pytest.mark.jvm_full
def test_java_consumer_group_protocol_consumer(target: BrokerProcess, jtopic: Callable[..., str],
                                               jstart: Callable[..., Any]) -> None:
    """Two Java consumers with group.protocol=consumer (KIP-848: ConsumerGroupHeartbeat, the broker assigns)
    split four partitions and read every record once."""
    topic = jtopic(partitions=4)
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    args = ["--topic", topic, "--group", group, "--protocol", "consumer", "--until-eof", "true",
            "--timeout-ms", "180000"]
    a = jstart("Consume", *args)
    a.wait_for(lambda e: e.get("event") == "assigned" and len(_assigned(a.events)) == 4, 90, "4 partitions")
    b = jstart("Consume", *args)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (_assigned(b.events) and len(_assigned(a.events)) < 4):
        time.sleep(0.2)
    held_a, held_b = _assigned(a.events), _assigned(b.events)
    assert held_a and held_b and not held_a & held_b and len(held_a | held_b) == 4, (held_a, held_b)
    values = _produce_keyed(target.bootstrap, topic, 4, 400, "kip848")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(_records(a.events)) + len(_records(b.events)) < 400:
        time.sleep(0.2)
    assert a.finish(60) == 0 and b.finish(60) == 0, a.stderr() + b.stderr()
    got = [r["value"] for r in _records(a.events) + _records(b.events)]
    assert sorted(got) == sorted(values)
    assert _records(a.events) and _records(b.events)


@pytest.mark.jvm_full
def test_java_exactly_once_pipeline_with_python_ends(target: BrokerProcess, jtopic: Callable[..., str],
                                                     jrun: Callable[..., Any]) -> None:
    """A Python transactional producer commits 300 records and aborts 50 more; a Java
    consume-transform-produce loop (read_committed, sendOffsetsToTransaction, its first transaction aborted
    and redone) writes each committed record once; a Python read_committed consumer reads exactly those, and
    the group's offsets that Java committed inside its transactions are where a Python consumer of that
    group resumes."""
    src, dst = jtopic(partitions=2), jtopic(partitions=2)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"py-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(300):
        p.produce(src, key=f"k{i}".encode(), value=f"in-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(src, value=f"aborted-{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    del p
    events = jrun("Transact", "--input", src, "--output", dst, "--group", group, "--transactional-id",
                  f"java-{uuid.uuid4().hex[:8]}", "--expect", "300", "--per-txn", "40",
                  "--abort-first", "true", timeout=180)
    done = _last(events, "done")
    assert done["error"] is None and done["committed"] == 300 and done["aborted"] > 0, done
    out = _python_read(target.bootstrap, dst, 300, isolation="read_committed")
    assert sorted(v.decode() for *_, v in out) == sorted(f"T:in-{i}" for i in range(300))
    # the offsets Java committed in its transactions: past every record of the input (and its markers)
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], timeout=30)
        for tp in committed:
            lo, hi = c.get_watermark_offsets(tp, timeout=30)
            assert tp.offset >= 150, f"{tp} committed before the last committed record"
            assert tp.offset <= hi
    finally:
        c.close()
