"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments, KIP-455) on a real
three-broker cluster while a producer writes with acks=all: the added replica catches up and joins the ISR,
the removed one (the leader) leaves, leadership moves to a target replica; nothing acknowledged is lost."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer

from moldau.broker.cluster.local import moldau_command
from moldau.client import Admin, TopicPartition
from moldau.protocol.errors import ErrorCode

from harness.clusterutil import QUIET, create_topic, fully_replicated, partitions, read_partition, wait_until

pytestmark = pytest.mark.timeout(150)

SEG = "00000000000000000000.log"


def _produce_until(bootstrap: str, stop: threading.Event, acked: list[bytes], errors: list) -> None:
    p = Producer({"logger": QUIET, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 30000, "linger.ms": 5})

    def done(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.value())

    i = 0
    while not stop.is_set():
        p.produce("move", value=b"v-%06d" % i, partition=0, on_delivery=done)
        i += 1
        p.poll(0.002)
    p.flush(40)


def _code(exc: BaseException | None) -> int | None:
    return getattr(exc, "code", None)


def test_reassign_partition_while_producing(cluster):
    bs = cluster.bootstrap
    create_topic(bs, "move", partitions=1, rf=2)
    wait_until(lambda: fully_replicated(bs, "move", 2), 20, "ISR of 2")
    p0 = partitions(bs, "move")[0]
    old_leader = p0.leader
    other = next(r for r in p0.replicas if r != old_leader)
    new = next(b.node_id for b in cluster.brokers if b.node_id not in p0.replicas)
    target = [new, other]  # the leader is removed: leadership has to move

    acked: list[bytes] = []
    errors: list = []
    stop = threading.Event()
    t = threading.Thread(target=_produce_until, args=(bs, stop, acked, errors), daemon=True)
    t.start()
    wait_until(lambda: len(acked) > 200, 30, "the producer under way")

    tp = TopicPartition("move", 0)
    # the command line starts it (AlterPartitionReassignments to the controller) and waits until it is done
    cli = subprocess.Popen([*moldau_command(), "topics", "reassign", "move", "--partition", "0", "--replicas",
                            ",".join(map(str, target)), "--wait", "-b", bs],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with Admin(bootstrap_servers=bs) as a:
        # bad requests: the proper error codes, nothing changes
        bad = a.alter_partition_reassignments({tp: [new, new]}, raise_errors=False)
        assert _code(bad[tp]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        bad = a.alter_partition_reassignments({tp: [new, 99]}, raise_errors=False)
        assert _code(bad[tp]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        unknown = TopicPartition("move", 7)
        bad = a.alter_partition_reassignments({unknown: target}, raise_errors=False)
        assert _code(bad[unknown]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        out, _ = cli.communicate(timeout=90)
        assert cli.returncode == 0 and f"moved to {target}: move-0" in out, out
        assert a.list_partition_reassignments() == {}
        late = a.alter_partition_reassignments({tp: None}, raise_errors=False)
        assert _code(late[tp]) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS

    def moved() -> bool:
        q = partitions(bs, "move")[0]
        return q.replicas == target and sorted(q.isrs) == sorted(target) and q.leader in target

    wait_until(moved, 30, "replicas, ISR and leader on the target brokers")
    listed = subprocess.run([*moldau_command(), "topics", "reassignments", "--json", "-b", bs],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(listed) == []
    time.sleep(1.0)  # a few more records through the new leader
    stop.set()
    t.join(60)
    assert not errors, errors[:5]

    # the topic znode: Kafka's JSON with the new replicas and no reassignment left
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zk.connect)
    zk.start(10)
    try:
        znode = json.loads(zk.get("/brokers/topics/move")[0])
    finally:
        zk.stop()
        zk.close()
    assert znode["partitions"]["0"] == target
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas")

    values = [v for _o, v in read_partition(bs, "move", 0, timeout=60)]
    assert len(values) == len(set(values)), "duplicates"
    assert values == sorted(values), "order"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost"
    # the added replica holds the data on disk
    seg = os.path.join(cluster.broker(new).data_dir, "move-0", SEG)
    with open(seg, "rb") as f:
        data = f.read()
    assert acked[0] in data and acked[-1] in data
    # manual replica assignments: CreatePartitions and CreateTopics place replicas where they are told to
    from moldau.client import NewPartitions, NewTopic

    with Admin(bootstrap_servers=bs) as a:
        a.create_partitions({"move": NewPartitions(2, [[old_leader, new]])})
        a.create_topics([NewTopic("placed", replica_assignment={0: [other, new], 1: [new, old_leader]})])
        bad = a.create_partitions({"move": NewPartitions(3, [[old_leader, 99]])}, raise_errors=False)
        assert _code(bad["move"]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    wait_until(lambda: partitions(bs, "move")[1].replicas == [old_leader, new]
               and partitions(bs, "move")[1].leader == old_leader, 20, "the added partition placed")
    wait_until(lambda: [q.replicas for _i, q in sorted(partitions(bs, "placed").items())]
               == [[other, new], [new, old_leader]], 20, "the new topic's replicas where they were placed")
    print(f"{len(acked)} records acknowledged while the partition moved from {p0.replicas} to {target}")
