"""LeaderAndIsr (key 4), v0-5: the controller tells a replica to lead or follow (docs/cluster.md).

* Needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka.
* A broker that is not in a cluster (no ``zookeeper.connect``) has no controller: STALE_CONTROLLER_EPOCH.
* Per partition: the replica manager becomes leader (leader epoch in leader-epoch-checkpoint, follower
  positions reset) or follower (replica fetcher, truncation first); an older controller epoch or leader epoch:
  STALE_CONTROLLER_EPOCH. A topic this broker's ZooKeeper watch has not reported yet (the request can overtake
  it) is read from ZooKeeper first; one ZooKeeper does not have: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..cluster.replica import ClusterReplicaManager
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.LeaderAndIsrResponse


@handler(api_key=4, min_version=2, max_version=5)
async def leader_and_isr(ctx: RequestContext, req: m.LeaderAndIsrRequest) -> m.LeaderAndIsrResponse:
    rm = ctx.services.replica_manager
    errors = []
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), partition_errors=[])
    if not isinstance(rm, ClusterReplicaManager):  # no cluster, no controller
        return RESP.new(error_code=int(ErrorCode.STALE_CONTROLLER_EPOCH), partition_errors=[])
    rm.note_live_leaders(req.live_leaders)
    store = ctx.services.metadata
    for ts in req.topic_states:
        if store.get(ts.topic_name) is None:
            # a new topic's LeaderAndIsr can overtake this broker's ZooKeeper watch: without the topic the
            # partition was refused (UNKNOWN_TOPIC_OR_PARTITION) and, on its leader, never created
            await store.learn_topic(ts.topic_name)
        for ps in ts.partition_states:
            code = rm.leader_and_isr(req.controller_id, req.controller_epoch, ts.topic_name, ps)
            errors.append(
                RESP.LeaderAndIsrPartitionError(
                    topic_name=ts.topic_name, partition_index=ps.partition_index, error_code=int(code)
                )
            )
    return RESP.new(error_code=0, partition_errors=errors)
