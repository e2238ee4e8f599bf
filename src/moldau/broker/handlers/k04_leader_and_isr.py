"""LeaderAndIsr (key 4), v0-5: the controller tells a replica to lead or follow (docs/cluster.md).

* Needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka.
* A broker that is not in a cluster (no ``zookeeper.connect``) has no controller: STALE_CONTROLLER_EPOCH.
* Per partition: the replica manager becomes leader (leader epoch in leader-epoch-checkpoint, follower
  positions reset) or follower (replica fetcher, truncation first); an older controller epoch or leader epoch:
  STALE_CONTROLLER_EPOCH; a topic this broker does not know yet: UNKNOWN_TOPIC_OR_PARTITION (the controller's
  next request repeats it).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.LeaderAndIsrResponse


@handler(api_key=4, min_version=2, max_version=5)
async def leader_and_isr(ctx: Any, req: Any) -> Any:
    rm = ctx.broker.replica_manager
    apply = getattr(rm, "leader_and_isr", None) if ctx.broker.cluster is not None else None
    errors = []
    top = ErrorCode.NONE
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif apply is None:
        top = ErrorCode.STALE_CONTROLLER_EPOCH
    if top:
        return RESP.new(error_code=int(top), partition_errors=[])
    rm.note_live_leaders(req.live_leaders)
    for ts in req.topic_states:
        for ps in ts.partition_states:
            code = apply(req.controller_id, req.controller_epoch, ts.topic_name, ps)
            errors.append(RESP.LeaderAndIsrPartitionError(topic_name=ts.topic_name,
                                                          partition_index=ps.partition_index, error_code=int(code)))
    return RESP.new(error_code=0, partition_errors=errors)
