"""ControlledShutdown (key 7), v1-3: a broker about to stop asks the controller to move its leaderships.

* ClusterAction on the cluster. Answered by the active controller only (NOT_CONTROLLER elsewhere, and on a
  broker without a cluster). The answer comes once the new leaders have been told; remaining_partitions lists
  the partitions that had no other in-sync replica to take over.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.ControlledShutdownResponse


@handler(api_key=7, min_version=1, max_version=3)
async def controlled_shutdown(
    ctx: RequestContext, req: m.ControlledShutdownRequest
) -> m.ControlledShutdownResponse:
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), remaining_partitions=[])
    cluster = ctx.services.cluster
    controller = cluster.controller if cluster is not None else None
    if controller is None or not controller.active:
        return RESP.new(error_code=int(ErrorCode.NOT_CONTROLLER), remaining_partitions=[])
    code, remaining = await controller.controlled_shutdown(req.broker_id)
    return RESP.new(
        error_code=int(code),
        remaining_partitions=[RESP.RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining],
    )
