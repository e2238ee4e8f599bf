"""StopReplica (key 5), v1-3: the controller stops a replica (and deletes it with ``delete_partitions``).

* ClusterAction on the cluster; no cluster: STALE_CONTROLLER_EPOCH (see k04).
* The partition stops following or leading; its log goes with the topic (the topic's znode disappearing
  deletes it on every broker, ``ZkMetadataStore``).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..cluster.replica import ClusterReplicaManager
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.StopReplicaResponse


@handler(api_key=5, min_version=1, max_version=3)
async def stop_replica(ctx: RequestContext, req: m.StopReplicaRequest) -> m.StopReplicaResponse:
    rm = ctx.services.replica_manager
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), partition_errors=[])
    if not isinstance(rm, ClusterReplicaManager):  # no cluster, no controller
        return RESP.new(error_code=int(ErrorCode.STALE_CONTROLLER_EPOCH), partition_errors=[])
    errors = []
    for t in req.topics:
        for idx in t.partition_indexes:
            code = rm.stop_replica(t.name, idx, bool(req.delete_partitions))
            errors.append(
                RESP.StopReplicaPartitionError(topic_name=t.name, partition_index=idx, error_code=int(code))
            )
    return RESP.new(error_code=0, partition_errors=errors)
