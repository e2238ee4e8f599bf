"""ISR changes through the controller (AlterPartition, 56) and replica deletion (StopReplica with delete), on
one cluster of three brokers with real processes.

* A SIGSTOPped follower leaves the ISR and comes back: both changes reach ZooKeeper through the controller
  (its AlterPartition request count and its log), the state znode's version (the partition epoch) moves with
  each, the leader's isrshrinks / isrexpands count them.
* AlterPartition sent directly with moldau's protocol codec: a stale partition epoch gets
  INVALID_UPDATE_VERSION, an old leader epoch FENCED_LEADER_EPOCH, a non-controller NOT_CONTROLLER, a wrong
  broker epoch STALE_BROKER_EPOCH, an unknown topic id UNKNOWN_TOPIC_ID, a broker that is not live in the new
  ISR INELIGIBLE_REPLICA; none of them changes the znode.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import uuid
from pathlib import Path

import pytest

from moldau.broker.cluster import zkdata as zd
from moldau.protocol import messages as m

from harness.clusterutil import admin, create_topic, fully_replicated, partitions, wait_until

pytestmark = pytest.mark.timeout(180)

LAG_MAX_S = 3.0  # replica.lag.time.max.ms of the test clusters


def _samples(port: int) -> dict[str, float]:
    """Every sample of a broker's Prometheus endpoint, by its full name with labels."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


ALTER_COUNT = 'kafka_network_requestmetrics_requests_total{request="AlterPartition"}'


def _alter_requests(cluster, broker_id: int) -> float:
    return _samples(cluster.broker(broker_id).metrics_port).get(ALTER_COUNT, 0.0)


def _alter_partition(address: str, version: int, broker_id: int, broker_epoch: int, topic_key: object,
                     leader_epoch: int, isr: list[int], partition_epoch: int) -> m.AlterPartitionResponse:
    """One AlterPartition request with moldau's client connection and codec."""
    from moldau.client.conn import Connection

    Req = m.AlterPartitionRequest
    td = Req.TopicData(partitions=[Req.PartitionData(
        partition_index=0, leader_epoch=leader_epoch, new_isr=isr, leader_recovery_state=0,
        new_isr_with_epochs=[Req.BrokerState(broker_id=b, broker_epoch=-1) for b in isr],
        partition_epoch=partition_epoch)])
    if version >= 2:
        td.topic_id = topic_key
    else:
        td.topic_name = topic_key
    req = Req.new(broker_id=broker_id, broker_epoch=broker_epoch, topics=[td])
    host, port = address.split(":")

    async def go() -> m.AlterPartitionResponse:
        conn = await Connection.open(host, int(port), client_id="test-alter-partition")
        try:
            return await conn.send(56, req, version=version, timeout_ms=15000)
        finally:
            conn.close()

    return asyncio.run(go())


def _partition_error(resp: m.AlterPartitionResponse) -> int:
    assert resp.error_code == 0, resp
    [t] = resp.topics
    [p] = t.partitions
    return p.error_code


def test_isr_changes_go_through_the_controller(cluster_factory):
    # the session outlives replica.lag.time.max.ms: the stopped follower leaves the ISR by the leader's lag
    # check, not by its session expiring
    cluster = cluster_factory(metrics=True, configs=["zookeeper.session.timeout.ms=12000"])
    bs = cluster.bootstrap
    ctl = admin(bs).list_topics(timeout=5).controller_id
    leader, victim = [b for b in (1, 2, 3) if b != ctl]  # neither of them is the controller
    from moldau.client import Admin, NewTopic

    with Admin(bootstrap_servers=bs) as a:
        a.create_topics([NewTopic("isr", replica_assignment={0: [leader, victim, ctl]},
                                  config={"min.insync.replicas": "2"})])
    wait_until(lambda: fully_replicated(bs, "isr", 3), 20, "ISR of 3")
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zk.connect)
    zk.start(10)
    try:
        state_path = zd.partition_state_path("isr", 0)

        def state() -> tuple[dict, int]:
            data, stat = zk.get(state_path)
            return json.loads(data), stat.version

        st0, v0 = state()
        assert st0["leader"] == leader
        leader_addr = cluster.broker(leader).address
        wait_until(lambda: fully_replicated(leader_addr, "isr", 3), 20, "ISR of 3 at the leader")
        before = _alter_requests(cluster, ctl)

        # shrink: the leader proposes, the controller writes the znode (version + 1) and answers
        cluster.broker(victim).signal(signal.SIGSTOP)
        try:
            wait_until(lambda: victim not in state()[0]["isr"], LAG_MAX_S + 10, "the shrink in ZooKeeper")
            st1, v1 = state()
            assert v1 == v0 + 1 and sorted(st1["isr"]) == sorted(set(st0["isr"]) - {victim})
            assert st1["leader_epoch"] == st0["leader_epoch"]  # an ISR change keeps the leader epoch
            wait_until(lambda: victim not in partitions(leader_addr, "isr")[0].isrs, 10, "the leader's view")
            after_shrink = _alter_requests(cluster, ctl)
            assert after_shrink >= before + 1
        finally:
            cluster.broker(victim).signal(signal.SIGCONT)

        # expand: the follower catches up and the leader asks again
        wait_until(lambda: victim in state()[0]["isr"], 30, "the expansion in ZooKeeper")
        st2, v2 = state()
        assert v2 == v1 + 1 and sorted(st2["isr"]) == [1, 2, 3]
        assert _alter_requests(cluster, ctl) >= after_shrink + 1
        ctl_log = Path(cluster.broker(ctl).log_path).read_text()
        assert f"AlterPartition from broker {leader}, partition epoch {v1}" in ctl_log
        assert f"AlterPartition from broker {leader}, partition epoch {v2}" in ctl_log
        lm = _samples(cluster.broker(leader).metrics_port)
        assert lm["kafka_server_replicamanager_isrshrinks_total"] >= 1
        assert lm["kafka_server_replicamanager_isrexpands_total"] >= 1
        wait_until(lambda: fully_replicated(bs, "isr", 3), 20, "every broker's metadata with the ISR of 3")

        # direct requests to the controller with the leader's identity
        epoch = zk.get(zd.broker_path(leader))[1].czxid  # the broker epoch in ZooKeeper mode
        topic_id = zd.TopicAssignment.decode(zk.get(zd.topic_path("isr"))[0]).topic_id
        ctl_addr = cluster.broker(ctl).address
        le = st2["leader_epoch"]
        smaller = [leader, ctl]

        def send(version: int = 2, **kw: object) -> m.AlterPartitionResponse:
            args: dict = dict(broker_id=leader, broker_epoch=epoch, topic_key=topic_id, leader_epoch=le,
                              isr=smaller, partition_epoch=v2)
            args.update(kw)
            return _alter_partition(ctl_addr, version, **args)

        assert _partition_error(send(partition_epoch=v2 - 1)) == 95  # INVALID_UPDATE_VERSION
        assert _partition_error(send(leader_epoch=le - 1)) == 74  # FENCED_LEADER_EPOCH
        assert _partition_error(send(isr=[leader, 99])) == 107  # INELIGIBLE_REPLICA
        assert _partition_error(send(topic_key=uuid.uuid4())) == 100  # UNKNOWN_TOPIC_ID
        assert _partition_error(send(version=1, topic_key="nosuch")) == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert send(broker_epoch=epoch + 1).error_code == 77  # STALE_BROKER_EPOCH
        other = next(b for b in (1, 2, 3) if b != ctl)
        assert _alter_partition(cluster.broker(other).address, 2, leader, epoch, topic_id, le, smaller,
                                v2).error_code == 41  # NOT_CONTROLLER
        # an unchanged ISR with the current epochs is answered with the state as it is (a retry)
        ok = send(version=1, topic_key="isr", isr=list(st2["isr"]))
        [p] = ok.topics[0].partitions
        assert (p.error_code, p.leader_id, p.leader_epoch, sorted(p.isr), p.partition_epoch) == (
            0, leader, le, [1, 2, 3], v2)
        time.sleep(0.5)
        assert state() == (st2, v2)  # nothing was written

        # controller failover mid-request: the controller is stopped while the leader's shrink waits for its
        # answer; another broker takes over (the test removes /controller, as a lost controller session
        # would, but the stopped brokers' sessions outlive the test's wait: their registrations stay, so the
        # ISR change can only come from the leader's AlterPartition)
        leader_log = Path(cluster.broker(leader).log_path)
        proposals = leader_log.read_text().count("proposing ISR")
        for b in (ctl, victim):
            cluster.broker(b).signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            wait_until(lambda: leader_log.read_text().count("proposing ISR") > proposals, LAG_MAX_S + 5,
                       "the leader's shrink proposal to the stopped controller")
            zk.delete(zd.CONTROLLER)
            wait_until(lambda: state()[0]["isr"] == [leader], 8, "the shrink through the new controller")
            assert time.monotonic() - t0 < 11  # before the stopped brokers' 12 s sessions end
            assert sorted(zk.get_children(zd.BROKER_IDS)) == ["1", "2", "3"]
            assert json.loads(zk.get(zd.CONTROLLER)[0])["brokerid"] == leader  # the only one running
            st3, v3 = state()
            assert v3 == v2 + 1 and st3["leader_epoch"] == le
            text = leader_log.read_text()
            assert f"the controller moved from {ctl} to {leader}" in text
            assert f"AlterPartition from broker {leader}, partition epoch {v3}" in text
        finally:
            for b in (ctl, victim):
                cluster.broker(b).signal(signal.SIGCONT)
        wait_until(lambda: sorted(state()[0]["isr"]) == [1, 2, 3], 30, "both back in the ISR")
    finally:
        zk.stop()


# ------------------------------------------------------------------------------------ KIP-392, deletion
SELECTOR = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _raw(address: str, api_key: int, req: object, version: int) -> object:
    from moldau.client.conn import Connection

    host, port = address.split(":")

    async def go() -> object:
        conn = await Connection.open(host, int(port), client_id="test-raw")
        try:
            return await conn.send(api_key, req, version=version, timeout_ms=15000)
        finally:
            conn.close()

    return asyncio.run(go())


def _consumer_fetch_error(address: str, topic: str, version: int) -> int:
    Req = m.FetchRequest
    req = Req.new(cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                  isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                  topics=[Req.FetchTopic(topic=topic, partitions=[Req.FetchPartition(
                      partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                      log_start_offset=-1, partition_max_bytes=1 << 20)])])
    resp = _raw(address, 1, req, version)
    return resp.responses[0].partitions[0].error_code


def _list_offsets_error(address: str, topic: str) -> int:
    Req = m.ListOffsetsRequest
    req = Req.new(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[Req.ListOffsetsTopic(
        name=topic, partitions=[Req.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                         timestamp=-1)])])
    resp = _raw(address, 2, req, 5)
    return resp.topics[0].partitions[0].error_code


def _topic_sample(cluster, broker_id: int, family: str, topic: str) -> float:
    return _samples(cluster.broker(broker_id).metrics_port).get(f'{family}{{topic="{topic}"}}', 0.0)


def test_fetch_from_follower_and_replica_deletion(cluster_factory):
    from confluent_kafka import Consumer, Producer

    from harness.clusterutil import QUIET

    # racks r1..r3; broker 1 keeps a deleted replica's directory for a minute (then a restart removes it)
    cluster = cluster_factory(metrics=True, configs=[SELECTOR, "log.segment.delete.delay.ms=500"],
                              per_broker={i: [f"broker.rack=r{i}"] for i in (1, 2, 3)}
                              | {1: ["broker.rack=r1", "log.segment.delete.delay.ms=600000"]})
    bs = cluster.bootstrap
    create_topic(bs, "near", partitions=1, rf=3)
    wait_until(lambda: fully_replicated(bs, "near", 3), 20, "ISR of 3")
    p0 = partitions(bs, "near")[0]
    leader = p0.leader
    near, far = [r for r in p0.replicas if r != leader]
    prod = Producer({"logger": QUIET, "bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    first = [b"n-%04d" % i for i in range(300)]
    for v in first:
        prod.produce("near", value=v, partition=0)
    assert prod.flush(30) == 0

    # a consumer in the rack of one follower reads everything from that follower
    c = Consumer({"logger": QUIET, "bootstrap.servers": bs, "group.id": "near-g", "client.rack": f"r{near}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    got: list[bytes] = []
    try:
        c.subscribe(["near"])
        deadline = time.monotonic() + 40
        while len(got) < len(first) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == first
        # records written now reach the consumer through the follower (it learns the HW from the leader)
        second = [b"m-%04d" % i for i in range(200)]
        for v in second:
            prod.produce("near", value=v, partition=0)
        assert prod.flush(30) == 0
        deadline = time.monotonic() + 40
        while len(got) < len(first) + len(second) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == first + second
    finally:
        c.close()
    # proof from the brokers' own counters: the follower in the consumer's rack served the reads, the leader
    # and the other follower sent no record of the topic to a consumer
    served = _topic_sample(cluster, near, "kafka_server_brokertopicmetrics_bytesout_total", "near")
    assert served > sum(len(v) for v in first + second)
    fetches = "kafka_server_brokertopicmetrics_totalfetchrequests_total"
    assert _topic_sample(cluster, near, fetches, "near") >= 2
    assert _topic_sample(cluster, leader, "kafka_server_brokertopicmetrics_bytesout_total", "near") == 0
    assert _topic_sample(cluster, far, "kafka_server_brokertopicmetrics_bytesout_total", "near") == 0
    # Fetch before v11 (no client metadata) and ListOffsets stay with the leader
    follower = cluster.broker(near).address
    assert _consumer_fetch_error(follower, "near", 10) == 6  # NOT_LEADER_OR_FOLLOWER
    assert _consumer_fetch_error(follower, "near", 11) == 0
    assert _list_offsets_error(follower, "near") == 6
    assert _list_offsets_error(cluster.broker(leader).address, "near") == 0

    # StopReplica v3 (KIP-570) carrying a leader epoch not newer than the replica's (a late request) is
    # fenced: the replica stays, keeps its files and keeps following
    SR = m.StopReplicaRequest
    stale = SR.new(controller_id=leader, controller_epoch=1, broker_epoch=-1, topic_states=[
        SR.StopReplicaTopicState(topic_name="near", partition_states=[
            SR.StopReplicaPartitionState(partition_index=0, leader_epoch=0, delete_partition=True)])])
    resp = _raw(cluster.broker(far).address, 5, stale, 3)
    answer = [(e.topic_name, e.partition_index, e.error_code) for e in resp.partition_errors]
    assert answer == [("near", 0, 74)]  # FENCED_LEADER_EPOCH
    far_log = Path(cluster.broker(far).data_dir) / "near-0" / "00000000000000000000.log"
    prod.produce("near", value=b"after-fenced-stop", partition=0)
    assert prod.flush(30) == 0
    wait_until(lambda: b"after-fenced-stop" in far_log.read_bytes(), 20, "the far follower still follows")

    # StopReplica with delete: a partition reassigned away from brokers 1 and 3 leaves their data dirs
    from moldau.client import Admin, NewTopic, TopicPartition

    with Admin(bootstrap_servers=bs) as a:
        a.create_topics([NewTopic("gone", replica_assignment={0: [1, 3]})])
        wait_until(lambda: fully_replicated(bs, "gone", 2), 20, "ISR of 2")
        prod.produce("gone", value=b"x" * 1000, partition=0)
        assert prod.flush(30) == 0
        wait_until(lambda: all((Path(cluster.broker(b).data_dir) / "gone-0" / "00000000000000000000.log")
                               .stat().st_size > 1000 for b in (1, 3)), 20, "the record on brokers 1 and 3")
        a.alter_partition_reassignments({TopicPartition("gone", 0): [2]})
        wait_until(lambda: partitions(bs, "gone")[0].replicas == [2], 30, "the partition moved to broker 2")

    def leftovers(b: int) -> list[str]:
        return sorted(d.name for d in Path(cluster.broker(b).data_dir).iterdir()
                      if d.name.startswith("gone-"))

    wait_until(lambda: leftovers(3) == [], 20, "broker 3's replica removed")
    wait_until(lambda: len(leftovers(1)) == 1 and leftovers(1)[0] != "gone-0", 20, "broker 1's rename")
    [doomed] = leftovers(1)
    assert re.fullmatch(r"gone-0\.[0-9a-f]{32}-delete", doomed), doomed
    assert leftovers(2) == ["gone-0"]
    # broker 1 dies before its delayed removal: the restart finishes it
    cluster.broker(1).kill()
    cluster.broker(1).start()
    cluster.broker(1).wait_listening()
    wait_until(lambda: leftovers(1) == [], 20, "the pending delete finished at the restart")
    assert "gone-0" in Path(cluster.broker(1).log_path).read_text().split("removing", 1)[-1]
