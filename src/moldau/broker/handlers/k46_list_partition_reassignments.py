"""ListPartitionReassignments (key 46), v0: the ongoing reassignments (KIP-455).

* Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
* In a cluster the active controller answers from the topic znodes' ``adding_replicas`` /
  ``removing_replicas``: replicas (target first, then the ones being removed), adding, removing. Other
  brokers answer NOT_CONTROLLER.
* ``topics`` null: every ongoing reassignment; partitions without one are left out.
* One node: none is ever ongoing.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, allowed_cluster

RESP = m.ListPartitionReassignmentsResponse


@handler(api_key=46, min_version=0, max_version=0)
async def list_partition_reassignments(
    ctx: RequestContext, req: m.ListPartitionReassignmentsRequest
) -> m.ListPartitionReassignmentsResponse:
    if not allowed_cluster(ctx, DESCRIBE):
        return RESP.new(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                        error_message=None, topics=[])
    cluster = ctx.services.cluster
    if cluster is None:
        return RESP.new(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
    controller = cluster.controller
    if controller is None or not controller.active:
        return RESP.new(throttle_time_ms=0, error_code=int(ErrorCode.NOT_CONTROLLER), error_message=None,
                        topics=[])
    tps = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    by_topic: dict[str, list[m.ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(controller.list_reassignments(tps).items()):
        by_topic.setdefault(topic, []).append(RESP.OngoingPartitionReassignment(
            partition_index=p, replicas=replicas, adding_replicas=adding, removing_replicas=removing))
    return RESP.new(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        RESP.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])
