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
import signal
import time
import uuid
from pathlib import Path

import pytest
from clusterutil import admin, create_topic, fully_replicated, partitions, wait_until

from moldau.broker.cluster import zkdata as zd
from moldau.protocol import messages as m

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
    create_topic(bs, "isr", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
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
        leader = st0["leader"]
        ctl = admin(bs).list_topics(timeout=5).controller_id
        followers = [r for r in (1, 2, 3) if r != leader]
        victim = next((f for f in followers if f != ctl), followers[0])
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
        smaller = [leader, next(f for f in followers if f != victim)]

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
    finally:
        zk.stop()
