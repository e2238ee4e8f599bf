"""DescribeTopicPartitions (key 75) on three brokers: every broker answers from the controller's view
(replicas, leader, ISR as Metadata has them), and a killed broker shows as an offline replica, out of the ISR,
no longer a leader."""

from __future__ import annotations

import pytest

from harness.clusterutil import create_topic, fully_replicated, partitions, wait_until
from harness.rawkafka import RawConnection

pytestmark = pytest.mark.timeout(120)



def _dtp(address: str, topic: str) -> dict[int, object]:
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as Req
    from kafka.protocol.admin import DescribeTopicPartitionsResponse as Resp

    with RawConnection.to(address) as conn:
        r = conn.call(Req(topics=[Req.TopicRequest(name=topic)], response_partition_limit=2000, cursor=None),
                      Resp, 0)
    (t,) = r.topics
    assert t.error_code == 0 and r.next_cursor is None
    return {p.partition_index: p for p in t.partitions}


def test_describe_topic_partitions_follows_the_controller(cluster):
    create_topic(cluster.bootstrap, "dtp", partitions=3, rf=3)
    wait_until(lambda: fully_replicated(cluster.bootstrap, "dtp", 3), 20, "ISR of 3 everywhere")
    md = partitions(cluster.bootstrap, "dtp")
    for b in cluster.brokers:
        got = _dtp(b.address, "dtp")
        assert sorted(got) == [0, 1, 2]
        for i, p in got.items():
            assert p.error_code == 0 and p.leader_id == md[i].leader
            assert sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
            assert p.offline_replicas == [] and p.eligible_leader_replicas == []

    victim = md[0].leader
    cluster.broker(victim).kill()
    live = next(b for b in cluster.brokers if b.node_id != victim)

    def settled() -> bool:
        got = _dtp(live.address, "dtp")
        return all(p.leader_id not in (victim, -1) and victim not in p.isr_nodes
                   and p.offline_replicas == [victim] for p in got.values())

    wait_until(settled, 60, f"broker {victim} offline in DescribeTopicPartitions")
    for p in _dtp(live.address, "dtp").values():
        assert sorted(p.replica_nodes) == [1, 2, 3]  # still assigned, offline
