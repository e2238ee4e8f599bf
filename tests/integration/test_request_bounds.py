"""Bounds on what one request can make the broker create, and KIP-599's controller mutation quota, against a
real broker process.

* A CreateTopics of 9,568,257 partitions (what a byte-flipping fuzzer once sent) or 10,001 is refused with
  POLICY_VIOLATION "Excessively large number of partitions per request." (Kafka's MAX_PARTITIONS_PER_BATCH)
  and nothing is created, while another client's requests keep being answered within 100 ms.
* A legal CreateTopics of 10,000 partitions is created, and then deleted, while another client's worst wait
  stays under 50 ms (the partitions are created, and their directories renamed, in slices off the request
  path); a topic of the same name created right after a deletion never meets the old files.
* ``controller_mutation_rate``: librdkafka (CreateTopics v4, below Kafka's strict v6: permissive) gets the
  throttle time in its throttle callback and its connection is held; v6+ requests are refused with
  THROTTLING_QUOTA_EXCEEDED once the bucket is exhausted.
* ``max.topic.partitions`` / ``max.broker.partitions`` and the other bounds answer their codes, and a refused
  request leaves nothing half-created.

The probe (``LatencyProbe``) is a thread sending ApiVersions and Metadata on its own connection every 3 ms and
recording each round trip; its worst round trip bounds the broker's event-loop stall from outside.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from moldau.protocol import messages as m

from .test_admin_moldau import Raw
from harness.brokerproc import moldau_command
from harness.kafkautil import unique_topic

pytestmark = [
    pytest.mark.moldau_only("moldau's bounds and files"),
    pytest.mark.single_broker("times one broker process's event loop and counts its partition directories"),
    pytest.mark.kafka_differs("moldau's own request bounds (max.topic.partitions, POLICY_VIOLATION, batch "
                              "limits), its event-loop timings and files (docs/compat.md lists what Kafka "
                              "answers instead)"),
]

POLICY_VIOLATION = 44
THROTTLING_QUOTA_EXCEEDED = 89
EXCESSIVE = "Excessively large number of partitions per request."
CT = m.CreateTopicsRequest
CP = m.CreatePartitionsRequest
ZERO_UUID = uuid.UUID(int=0)


_PROBE = r"""
import json, socket, struct, sys, threading, time
host, port, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
sock = socket.create_connection((host, port), timeout=30)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
trips, corr, failure = [], 0, None
print("ready", flush=True)
try:
    while not stop.is_set():
        corr += 1
        if corr % 2:  # ApiVersions v0
            body = struct.pack(">hhih", 18, 0, corr, 5) + b"probe"
        else:  # Metadata v1 for no topic: brokers and controller only
            body = struct.pack(">hhih", 3, 1, corr, 5) + b"probe" + struct.pack(">i", 0)
        t = time.monotonic()
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        sock.recv(size, socket.MSG_WAITALL)
        trips.append((t, time.monotonic()))
        time.sleep(interval)
except Exception as e:
    failure = repr(e)
print(json.dumps({"trips": trips, "failure": failure}), flush=True)
"""


class LatencyProbe:
    """ApiVersions v0 and Metadata v1 (no topics) round trips, one every ``interval`` seconds, on a raw
    connection of a process of its own (so that nothing the test process does delays it); records (sent,
    answered) monotonic times, comparable with the test's."""

    def __init__(self, bootstrap: str, interval: float = 0.003) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.proc = subprocess.Popen([sys.executable, "-c", _PROBE, host, port, str(interval)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.trips: list[tuple[float, float]] = []

    def start(self) -> None:
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def worst(self, start: float, end: float) -> float:
        """The longest round trip sent or answered between ``start`` and ``end``."""
        lat = [b - a for a, b in self.trips if b >= start and a <= end]
        assert lat, "the probe got no answer in the interval"
        return max(lat)

    def count(self, start: float, end: float) -> int:
        return sum(1 for a, b in self.trips if start <= b <= end)

    def stop(self) -> None:
        """Stop the probe and collect its round trips."""
        out, _ = self.proc.communicate("stop\n", timeout=60)
        doc = json.loads(out.strip().splitlines()[-1])
        self.trips = [(a, b) for a, b in doc["trips"]]
        assert doc["failure"] is None, f"the probe failed: {doc['failure']}"


def stall_bound(bound: float) -> float:
    """``bound`` for the probe's worst round trip; on a machine whose run queue is longer than its cores (a
    shared development machine) the probe and the broker also wait for a CPU, and the bound is on gross stalls
    (600 ms: one blocking creation of 10,000 partitions took tens of seconds)."""
    return bound if os.getloadavg()[0] <= (os.cpu_count() or 1) else 0.600


def partition_dirs(data_dir: str | Path, topic: str) -> int:
    return sum(1 for e in os.scandir(data_dir) if e.is_dir() and e.name.rpartition("-")[0] == topic)


def topic_partitions(bootstrap: str, topic: str) -> int | None:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    t = md.topics.get(topic)
    return None if t is None or t.error is not None else len(t.partitions)


def all_led(a: AdminClient, topic: str, count: int) -> bool:
    """Whether Metadata lists ``count`` partitions of ``topic``, each with a leader and no error."""
    t = a.list_topics(topic, timeout=20).topics.get(topic)
    return (t is not None and t.error is None and len(t.partitions) == count
            and all(p.leader >= 0 and p.error is None for p in t.partitions.values()))


def new_topic(name: str, partitions: int) -> Any:
    return CT.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                             configs=[])


def test_excessive_partitions_refused_while_others_are_answered(broker_factory: Any) -> None:
    b = broker_factory()
    probe = LatencyProbe(b.bootstrap)
    probe.start()
    name = unique_topic("huge")
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        with Raw(b.bootstrap) as raw:
            # the refusals, over and over for a quarter of a second, so that the probe's round trips overlap
            # them however fast one round is
            rounds = 0
            while rounds < 3 or time.monotonic() - t0 < 0.25:
                rounds += 1
                # the fuzzer's frame: v0, one topic of 9,568,257 partitions
                r = raw.call(19, 0, CT.new(timeout_ms=5000, topics=[new_topic(name, 9_568_257)]))
                assert [(t.name, t.error_code) for t in r.topics] == [(name, POLICY_VIOLATION)]
                # v7: the message too
                r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False,
                                           topics=[new_topic(name, 9_568_257)]))
                assert r.topics[0].error_code == POLICY_VIOLATION and r.topics[0].error_message == EXCESSIVE
                # 10,001 over two topics: the whole request is refused, neither topic is created
                r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
                    new_topic(name, 5000), new_topic(name + "-b", 5001)]))
                assert [(t.name, t.error_code, t.error_message) for t in r.topics] == [
                    (name, POLICY_VIOLATION, EXCESSIVE), (name + "-b", POLICY_VIOLATION, EXCESSIVE)]
                # the default partition count counts too (-1 = num.partitions = 1)
                default_count = CT.CreatableTopic(name=name + "-c", num_partitions=-1, replication_factor=-1,
                                                  assignments=[], configs=[])
                r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
                    new_topic(name, 10_000), default_count]))
                assert {t.error_code for t in r.topics} == {POLICY_VIOLATION}
        # librdkafka sees Kafka's PolicyViolationException
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        fut = a.create_topics([NewTopic(name, 10_001, 1)], request_timeout=30)[name]
        with pytest.raises(KafkaException) as info:
            fut.result(timeout=30)
        err = info.value.args[0]
        assert err.code() == CKError.POLICY_VIOLATION and EXCESSIVE in err.str()
        t1 = time.monotonic()
        time.sleep(0.2)
    finally:
        probe.stop()
    worst = probe.worst(t0, t1)
    # a round trip every ~3 ms: about 80 in the quarter of a second; 10 show the probe answered throughout
    assert probe.count(t0, t1) >= 10, f"{probe.count(t0, t1)} round trips in {rounds} rounds of refusals"
    load = os.getloadavg()[0]
    print(f"refusals: the probe's worst round trip {worst * 1000:.1f} ms; load average {load:.1f}")
    assert worst < stall_bound(0.100), (f"another client waited {worst * 1000:.0f} ms while huge creations "
                                        f"were refused (load average {load:.1f})")
    # nothing created: no topic, no directory
    for n in (name, name + "-b", name + "-c"):
        assert topic_partitions(b.bootstrap, n) is None
        assert partition_dirs(b.data_dir, n) == 0
    del a


def test_ten_thousand_partitions_created_without_stalling_other_clients(broker_factory: Any) -> None:
    b = broker_factory()
    name = unique_topic("big")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.list_topics(timeout=20)  # connected before timing
    probe = LatencyProbe(b.bootstrap)
    probe.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        # operation_timeout 0: answered at once; the partitions follow (LEADER_NOT_AVAILABLE till made)
        a.create_topics([NewTopic(name, 10_000, 1)], operation_timeout=0, request_timeout=60)[name].result(60)
        answered_at = time.monotonic()
        deadline = t0 + 600
        while partition_dirs(b.data_dir, name) < 10_000:
            assert time.monotonic() < deadline, f"{partition_dirs(b.data_dir, name)} partitions after 600 s"
            time.sleep(0.5)
        t1 = time.monotonic()
        time.sleep(0.2)
    finally:
        probe.stop()
    worst = probe.worst(t0, t1)
    answered = probe.count(t0, t1)
    slowest = sorted(((y - x, x - t0) for x, y in probe.trips if y >= t0 and x <= t1), reverse=True)[:8]
    print("slowest round trips (ms, at s):", [(round(x * 1000, 1), round(at, 2)) for x, at in slowest])
    p99 = sorted(y - x for x, y in probe.trips if y >= t0 and x <= t1)[-max(1, answered // 100)]
    print(f"10,000 partitions: answered in {answered_at - t0:.2f} s, all made after {t1 - t0:.2f} s; the "
          f"probe's worst round trip {worst * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms over {answered} round "
          f"trips; load average {os.getloadavg()[0]:.1f}")
    assert answered >= 10
    assert worst < stall_bound(0.050), (f"another client waited {worst * 1000:.0f} ms while 10,000 "
                                        f"partitions were created (load average {os.getloadavg()[0]:.1f})")
    assert partition_dirs(b.data_dir, name) == 10_000
    deadline = time.monotonic() + 60
    while not all_led(a, name, 10_000):  # the last chunk is registered just after its files exist
        assert time.monotonic() < deadline
        time.sleep(0.5)
    # and deleted: the partitions go at once, their directories are renamed in slices of the event loop and
    # removed by a worker thread (Kafka's asyncDelete); removing them on the event loop stalled every client
    # for seconds (found by the unguarded fuzzer), renaming them all at once for 200 ms
    probe = LatencyProbe(b.bootstrap)
    probe.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        a.delete_topics([name], request_timeout=60)[name].result(60)
        t1 = time.monotonic() + 0.5
        time.sleep(0.8)
    finally:
        probe.stop()
    worst = probe.worst(t0, t1)
    print(f"10,000 partitions deleted: answered in {t1 - 0.5 - t0:.2f} s; the probe's worst round trip "
          f"{worst * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}")
    assert worst < stall_bound(0.050), (f"another client waited {worst * 1000:.0f} ms while a topic of "
                                        f"10,000 partitions was deleted")
    deadline = time.monotonic() + 120
    while any(e.name.startswith(name + "-") for e in os.scandir(b.data_dir)):
        assert time.monotonic() < deadline, "directories of the deleted topic still there after 120 s"
        time.sleep(0.5)
    del a


def quotas_alter(bootstrap: str, *args: str) -> None:
    r = subprocess.run(moldau_command() + ["quotas", "alter", "--bootstrap-server", bootstrap, *args],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr


def test_controller_mutation_rate_throttles_librdkafka(broker_factory: Any) -> None:
    b = broker_factory()
    quotas_alter(b.bootstrap, "--client-id", "mutator", "--set", "controller_mutation_rate=10")
    throttles: list[int] = []
    a = AdminClient({"bootstrap.servers": b.bootstrap, "client.id": "mutator",
                     "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})
    names = [unique_topic("mut") for _ in range(3)]
    # a burst of 10/s x 11 windows = 110 partitions: 100 then 50 are accepted (the second drives the bucket to
    # -40: 4 s of throttle); librdkafka's CreateTopics v4 is below v6, so the quota is permissive
    a.create_topics([NewTopic(names[0], 100, 1)], request_timeout=30)[names[0]].result(timeout=30)
    a.create_topics([NewTopic(names[1], 50, 1)], request_timeout=30)[names[1]].result(timeout=30)
    t0 = time.monotonic()
    deadline = time.monotonic() + 10
    while not throttles and time.monotonic() < deadline:
        a.poll(0.1)
    # the throttle is the time to refill, less the time the answer took (its partitions were made meanwhile)
    assert throttles and 0 < max(throttles) <= 4000, throttles
    # the connection is held: the next request is answered only once the throttle time has passed
    a.create_topics([NewTopic(names[2], 1, 1)], request_timeout=30)[names[2]].result(timeout=30)
    assert time.monotonic() - t0 >= max(throttles) / 1000 - 0.3
    for n in names:
        assert topic_partitions(b.bootstrap, n) is not None
    # another client id has no quota and is not held
    other = AdminClient({"bootstrap.servers": b.bootstrap, "client.id": "free"})
    t0 = time.monotonic()
    n = unique_topic("free")
    other.create_topics([NewTopic(n, 200, 1)], request_timeout=30)[n].result(timeout=30)
    assert time.monotonic() - t0 < 2.5
    del a, other


def test_controller_mutation_rate_strict_versions(broker_factory: Any) -> None:
    b = broker_factory()
    quotas_alter(b.bootstrap, "--client-id", "admin-test", "--set", "controller_mutation_rate=10")
    name = unique_topic("strict")
    with Raw(b.bootstrap) as raw:
        r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
            new_topic(name, 105), new_topic(name + "-b", 3)]))
        # 105 of 110 tokens, then 3 (5 left: accepted, 2 remain)
        assert [t.error_code for t in r.topics] == [0, 0] and r.throttle_time_ms == 0
        r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
            new_topic(name + "-c", 20), new_topic(name + "-d", 1)]))
        # 20 accepted (the bucket was not negative: at most -18 now, less the refill while the first answer
        # waited for its partitions), the next topic refused with the time to refill
        assert [t.error_code for t in r.topics] == [0, THROTTLING_QUOTA_EXCEEDED]
        assert r.topics[1].error_message == "The throttling quota has been exceeded."
        assert 0 < r.throttle_time_ms <= 1800
        time.sleep(r.throttle_time_ms / 1000 + 0.3)
        # CreatePartitions v3 and DeleteTopics v6 are strict too: drain the bucket, then both are refused
        r = raw.call(37, 3, CP.new(timeout_ms=5000, validate_only=False, topics=[
            CP.CreatePartitionsTopic(name=name, count=200, assignments=None)]))
        assert r.results[0].error_code == 0
        r = raw.call(37, 3, CP.new(timeout_ms=5000, validate_only=False, topics=[
            CP.CreatePartitionsTopic(name=name + "-b", count=4, assignments=None)]))
        assert r.results[0].error_code == THROTTLING_QUOTA_EXCEEDED and r.throttle_time_ms > 0
        time.sleep(r.throttle_time_ms / 1000 + 0.3)
        DT = m.DeleteTopicsRequest
        r = raw.call(20, 6, DT.new(timeout_ms=5000, topics=[
            DT.DeleteTopicState(name=name, topic_id=ZERO_UUID)]))
        assert r.responses[0].error_code == 0
        r = raw.call(20, 6, DT.new(timeout_ms=5000, topics=[
            DT.DeleteTopicState(name=name + "-b", topic_id=ZERO_UUID)]))
        assert r.responses[0].error_code == THROTTLING_QUOTA_EXCEEDED and r.throttle_time_ms > 0
    assert topic_partitions(b.bootstrap, name) is None
    assert topic_partitions(b.bootstrap, name + "-b") == 3
    assert topic_partitions(b.bootstrap, name + "-d") is None


def test_partition_ceilings_and_other_bounds_leave_nothing_half_created(broker_factory: Any) -> None:
    b = broker_factory({"max.topic.partitions": "100", "max.broker.partitions": "150"})
    name = unique_topic("ceil")
    with Raw(b.bootstrap) as raw:
        r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[new_topic(name, 101)]))
        assert r.topics[0].error_code == POLICY_VIOLATION
        assert "max.topic.partitions" in r.topics[0].error_message
        r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
            new_topic(name, 100), new_topic(name + "-b", 60)]))
        assert [t.error_code for t in r.topics] == [0, POLICY_VIOLATION]
        assert "max.broker.partitions" in r.topics[1].error_message
        r = raw.call(37, 3, CP.new(timeout_ms=5000, validate_only=False, topics=[
            CP.CreatePartitionsTopic(name=name, count=101, assignments=None)]))
        assert r.results[0].error_code == POLICY_VIOLATION
        r = raw.call(37, 3, CP.new(timeout_ms=5000, validate_only=False, topics=[
            CP.CreatePartitionsTopic(name=name, count=9_568_257, assignments=None)]))
        assert r.results[0].error_code == POLICY_VIOLATION and r.results[0].error_message == EXCESSIVE
        # a topic name of 250 characters, a replication factor above the brokers
        r = raw.call(19, 7, CT.new(timeout_ms=5000, validate_only=False, topics=[
            new_topic("x" * 250, 1),
            CT.CreatableTopic(name=name + "-rf", num_partitions=1, replication_factor=2, assignments=[],
                              configs=[])]))
        assert [t.error_code for t in r.topics] == [17, 38]
    assert topic_partitions(b.bootstrap, name) == 100
    assert partition_dirs(b.data_dir, name) == 100
    for n in (name + "-b", name + "-rf", "x" * 250):
        assert topic_partitions(b.bootstrap, n) is None and partition_dirs(b.data_dir, n) == 0
    # librdkafka's CreatePartitions sees the same
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    fut = a.create_partitions([NewPartitions(name, 120)], request_timeout=30)[name]
    with pytest.raises(KafkaException) as info:
        fut.result(timeout=30)
    assert info.value.args[0].code() == CKError.POLICY_VIOLATION
    del a


def test_topic_deleted_while_its_partitions_are_made(broker_factory: Any) -> None:
    """A topic deleted while its partitions are still being made in the background: the task stops, every
    directory goes (those made after the deletion too), the name can be used again, nothing is logged as a
    failure."""
    b = broker_factory()
    name = unique_topic("gone")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(name, 3000, 1)], operation_timeout=0, request_timeout=60)[name].result(60)
    a.delete_topics([name], request_timeout=60)[name].result(60)
    deadline = time.monotonic() + 120
    while partition_dirs(b.data_dir, name) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)  # chunks being made at the deletion are registered and deleted when done
    assert partition_dirs(b.data_dir, name) == 0
    assert topic_partitions(b.bootstrap, name) is None
    a.create_topics([NewTopic(name, 40, 1)], operation_timeout=60, request_timeout=70)[name].result(70)
    assert all_led(a, name, 40) and partition_dirs(b.data_dir, name) == 40
    out = b.output(10_000_000)
    assert "Traceback" not in out and " ERROR " not in out, out[-3000:]
    made = re.search(rf"created (\d+) partitions of {name} in", out)  # the first creation, cut short
    assert made is not None and int(made.group(1)) < 3000, made
    del a


def test_topic_recreated_right_after_its_deletion(broker_factory: Any) -> None:
    """A topic of 3,000 partitions deleted and at once created again with one partition (its old directories
    are renamed in slices of the event loop meanwhile): the new topic holds exactly the record produced to it
    after, none of the old one's, and every old directory goes."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker_factory()
    name = unique_topic("again")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(name, 3000, 1)], operation_timeout=60, request_timeout=70)[name].result(70)
    deadline = time.monotonic() + 60
    while not all_led(a, name, 3000):
        assert time.monotonic() < deadline
        time.sleep(0.3)

    def produce(value: bytes) -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        errors: list[Any] = []
        p.produce(name, value, partition=0, on_delivery=lambda err, _m: errors.append(err))
        assert p.flush(30) == 0 and errors == [None], errors

    produce(b"old")
    a.delete_topics([name], request_timeout=60)[name].result(60)
    a.create_topics([NewTopic(name, 1, 1)], operation_timeout=30, request_timeout=40)[name].result(40)
    assert any(e.name.endswith("-delete") or e.name.rpartition("-")[0] == name and e.name != f"{name}-0"
               for e in os.scandir(b.data_dir) if e.name.startswith(name + "-")), \
        "the old directories were all gone already: nothing overlapped the new topic"
    produce(b"new")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique_topic("g"),
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(name, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, got
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == CKError._PARTITION_EOF, msg.error()
                if got:
                    break
                continue
            got.append(msg.value())
    finally:
        c.close()
    assert got == [b"new"]
    assert topic_partitions(b.bootstrap, name) == 1
    deadline = time.monotonic() + 60
    while (left := sorted(e.name for e in os.scandir(b.data_dir) if e.name.startswith(name + "-"))) != [
            f"{name}-0"]:
        assert time.monotonic() < deadline, f"{len(left)} directories: {left[:5]}"
        time.sleep(0.3)
    out = b.output(10_000_000)
    assert "Traceback" not in out and " ERROR " not in out, out[-3000:]
    del a


def test_acl_and_quota_batches_over_ten_thousand_refused_whole(broker_factory: Any) -> None:
    """More than 10,000 ACL bindings in one CreateAcls, or quota entities in one AlterClientQuotas, are
    refused with POLICY_VIOLATION, each item, nothing stored (Kafka's MAX_RECORDS_PER_USER_OP); 10,000
    pass."""
    b = broker_factory({"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"})
    CA, AQ = m.CreateAclsRequest, m.AlterClientQuotasRequest

    def acls(n: int, tag: str) -> Any:
        return CA.new(creations=[
            CA.AclCreation(resource_type=2, resource_name=f"{tag}-{i}", resource_pattern_type=3,
                           principal="User:bob", host="*", operation=3, permission_type=3) for i in range(n)])

    def quotas(n: int, tag: str) -> Any:
        return AQ.new(validate_only=False, entries=[AQ.EntryData(
            entity=[AQ.EntityData(entity_type="client-id", entity_name=f"{tag}-{i}")],
            ops=[AQ.OpData(key="producer_byte_rate", value=1e6, remove=False)]) for i in range(n)])

    with Raw(b.bootstrap) as raw:
        r = raw.call(30, 3, acls(10_001, "big"))
        assert len(r.results) == 10_001
        assert {(x.error_code, x.error_message) for x in r.results} == {
            (POLICY_VIOLATION, "Unable to perform excessively large batch operation.")}
        r = raw.call(49, 1, quotas(10_001, "big"))
        assert {x.error_code for x in r.entries} == {POLICY_VIOLATION}
        described = raw.call(29, 3, m.DescribeAclsRequest.new(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert described.error_code == 0 and described.resources == []
        r = raw.call(30, 3, acls(10_000, "ok"))
        assert {x.error_code for x in r.results} == {0}
