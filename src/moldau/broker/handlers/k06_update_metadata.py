"""UpdateMetadata (key 6), v5-7: the controller's view of the cluster (live brokers with their endpoints and
racks, each partition's leader, leader epoch, replicas, ISR, offline replicas), kept by the metadata store and
answered by Metadata / DescribeCluster.

* ClusterAction on the cluster; no cluster: STALE_CONTROLLER_EPOCH (see k04); an older controller epoch than
the
  last one seen: STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..cluster.store import LiveBroker, PartitionView, ZkMetadataStore
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.UpdateMetadataResponse


@handler(api_key=6, min_version=5, max_version=7)
async def update_metadata(ctx: RequestContext, req: m.UpdateMetadataRequest) -> m.UpdateMetadataResponse:
    store = ctx.services.metadata
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if not isinstance(store, ZkMetadataStore):  # no cluster, no controller
        return RESP.new(error_code=int(ErrorCode.STALE_CONTROLLER_EPOCH))
    brokers = [
        LiveBroker(b.id, {ep.listener: (ep.host, ep.port) for ep in b.endpoints}, b.rack)
        for b in req.live_brokers
    ]
    states = []
    for ts in req.topic_states:
        for ps in ts.partition_states:
            states.append(
                (
                    ts.topic_name,
                    ps.partition_index,
                    PartitionView(
                        ps.leader,
                        ps.leader_epoch,
                        list(ps.replicas),
                        list(ps.isr),
                        list(ps.offline_replicas or []),
                        ps.zk_version,
                    ),
                )
            )
    ok = store.update_metadata(req.controller_id, req.controller_epoch, brokers, states)
    return RESP.new(error_code=0 if ok else int(ErrorCode.STALE_CONTROLLER_EPOCH))
