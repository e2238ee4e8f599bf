"""AlterPartitionReassignments (key 45), v0-1: move a partition's replicas (Kafka 2.4+, KIP-455).

* Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top level).
* In a cluster the active controller reassigns (docs/cluster.md): the added replicas join the replica set
  and catch up; once every target replica is in the ISR the removed ones leave (StopReplica), the leader
  moves if it was on a removed replica. ``replicas`` null cancels an ongoing reassignment
  (NO_REASSIGNMENT_IN_PROGRESS when there is none). Other brokers answer NOT_CONTROLLER (clients send it to
  the controller Metadata names).
* Bad target lists (empty, duplicates, brokers that are not live): INVALID_REPLICA_ASSIGNMENT; unknown
  partitions: UNKNOWN_TOPIC_OR_PARTITION.
* One node: the only valid target is this node, which already holds every partition.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER, allowed_cluster

RESP = m.AlterPartitionReassignmentsResponse
TP = tuple[str, int]


def _response(top: int, message: str | None, results: dict[TP, tuple[int, str | None]],
              allow_rf_change: bool) -> m.AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[m.AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]] = {}
    for (topic, p), (code, msg) in results.items():
        by_topic.setdefault(topic, []).append(
            RESP.ReassignablePartitionResponse(partition_index=p, error_code=int(code), error_message=msg))
    return RESP.new(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change, error_code=int(top),
                    error_message=message, responses=[
                        RESP.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


def _single_node(ctx: RequestContext, req: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
    store = ctx.services.metadata
    out: dict[TP, tuple[int, str | None]] = {}
    for (topic, p), target in req.items():
        t = store.get(topic)
        if t is None or not 0 <= p < t.num_partitions:
            out[(topic, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif target is None:
            out[(topic, p)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        elif target != [ctx.services.node_id]:
            out[(topic, p)] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"replicas {target}: the only broker is {ctx.services.node_id}")
        else:
            out[(topic, p)] = (ErrorCode.NONE, None)
    return out


@handler(api_key=45, min_version=0, max_version=1)
async def alter_partition_reassignments(
    ctx: RequestContext, req: m.AlterPartitionReassignmentsRequest
) -> m.AlterPartitionReassignmentsResponse:
    allow_rf_change = ctx.version < 1 or bool(req.allow_replication_factor_change)
    wanted: dict[TP, list[int] | None] = {}
    for t in req.topics:
        for p in t.partitions:
            wanted[(t.name, p.partition_index)] = None if p.replicas is None else list(p.replicas)
    if not allowed_cluster(ctx, ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _response(code, None, {tp: (code, None) for tp in wanted}, allow_rf_change)
    cluster = ctx.services.cluster
    if cluster is None:
        return _response(ErrorCode.NONE, None, _single_node(ctx, wanted), allow_rf_change)
    controller = cluster.controller
    if controller is None or not controller.active:
        code = ErrorCode.NOT_CONTROLLER
        return _response(code, None, {tp: (code, None) for tp in wanted}, allow_rf_change)
    results: dict[TP, tuple[int, str | None]] = {}
    if not allow_rf_change:  # v1 with allow_replication_factor_change false (KIP-860)
        for tp, target in list(wanted.items()):
            a = controller.ctx.assignments.get(tp[0])
            have = a.partitions.get(tp[1]) if a is not None else None
            if target is not None and a is not None and have is not None:
                original = [r for r in have if r not in a.adding.get(tp[1], [])]
                if len(target) != len(original):
                    del wanted[tp]
                    results[tp] = (ErrorCode.INVALID_REPLICATION_FACTOR,
                                   f"{len(target)} replicas instead of {len(original)}")
    results.update(await controller.reassign(wanted))
    return _response(ErrorCode.NONE, None, results, allow_rf_change)
