"""ElectLeaders (key 43), v0-2: preferred (type 0) or unclean (type 1, v1+) leader election.

* Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top level from v1, per partition in v0).
* In a cluster the active controller elects (docs/cluster.md): preferred = the first replica of the
  assignment when it is alive and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise), unclean = any live
  replica of a partition without a leader (ELIGIBLE_LEADERS_NOT_AVAILABLE when there is none); a partition
  already led by that replica answers ELECTION_NOT_NEEDED. Other brokers answer NOT_CONTROLLER (clients send
  ElectLeaders to the controller Metadata names).
* One node: every partition is led by its only replica: ELECTION_NOT_NEEDED.
* ``topic_partitions`` null: every partition; unknown ones UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER, allowed_cluster

RESP = m.ElectLeadersResponse


def _response(ctx: RequestContext, top: int, results: dict[tuple[str, int], tuple[int, str | None]]
              ) -> m.ElectLeadersResponse:
    by_topic: dict[str, list[m.ElectLeadersResponse.PartitionResult]] = {}
    for (topic, p), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            RESP.PartitionResult(partition_id=p, error_code=int(code), error_message=message))
    return RESP.new(throttle_time_ms=0, error_code=int(top), replica_election_results=[
        RESP.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


@handler(api_key=43, min_version=0, max_version=2)
async def elect_leaders(ctx: RequestContext, req: m.ElectLeadersRequest) -> m.ElectLeadersResponse:
    svc = ctx.services
    unclean = ctx.version >= 1 and req.election_type == 1
    tps = None if req.topic_partitions is None else [
        (t.topic, p) for t in req.topic_partitions for p in t.partitions]
    if not allowed_cluster(ctx, ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _response(ctx, code if ctx.version >= 1 else 0, {tp: (code, None) for tp in tps or []})
    cluster = svc.cluster
    if cluster is None:  # one node: each partition is led by its only replica
        store = svc.metadata
        every = tps if tps is not None else [(t.name, p) for t in store.topics.values()
                                             for p in range(t.num_partitions)]
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        for topic, p in every:
            t = store.get(topic)
            known = t is not None and 0 <= p < t.num_partitions
            results[(topic, p)] = (ErrorCode.ELECTION_NOT_NEEDED if known
                                   else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return _response(ctx, ErrorCode.NONE, results)
    controller = cluster.controller
    if controller is None or not controller.active:
        code = ErrorCode.NOT_CONTROLLER
        return _response(ctx, code if ctx.version >= 1 else 0, {tp: (code, None) for tp in tps or []})
    return _response(ctx, ErrorCode.NONE, await controller.elect_leaders(unclean, tps))
