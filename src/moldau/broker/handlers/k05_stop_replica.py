"""StopReplica (key 5), v1-3: the controller stops a replica (and deletes it with ``delete_partitions``).

* v1-2 name the partitions per topic with one ``delete_partitions`` flag; v3 (KIP-570) gives each partition
  its own delete flag and the leader epoch the controller knows: as Kafka's ReplicaManager.stopReplicas, an
  epoch of -2 (topic deletion) or -1 (none) or newer than this broker's stops the replica, an older or equal
  one is refused with FENCED_LEADER_EPOCH (a late request from before the partition moved back here).
* ClusterAction on the cluster; no cluster: STALE_CONTROLLER_EPOCH (see k04).
* The partition stops following or leading; its log goes with the topic (the topic's znode disappearing
  deletes it on every broker, ``ZkMetadataStore``).
* A topic deletion names every replica of the topic on this broker in one request, and a deleted replica's
  directory is renamed at once: the handler gives the event loop back every ``SLICE_S`` so that other
  clients are answered meanwhile (renaming 10,000 directories takes about 200 ms).
"""

from __future__ import annotations

import asyncio
import time

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..cluster.replica import ClusterReplicaManager
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.StopReplicaResponse
NO_EPOCH = -1  # the controller gives no epoch: stop whatever this broker's is
EPOCH_DURING_DELETE = -2  # topic deletion: always stop
SLICE_S = 0.002  # the longest the handler holds the event loop between two yields


@handler(api_key=5, min_version=1, max_version=3)
async def stop_replica(ctx: RequestContext, req: m.StopReplicaRequest) -> m.StopReplicaResponse:
    rm = ctx.services.replica_manager
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), partition_errors=[])
    if not isinstance(rm, ClusterReplicaManager):  # no cluster, no controller
        return RESP.new(error_code=int(ErrorCode.STALE_CONTROLLER_EPOCH), partition_errors=[])
    stops: list[tuple[str, int, int, bool]] = []  # topic, partition, leader epoch, delete
    if ctx.version >= 3:
        for ts in req.topic_states:
            for ps in ts.partition_states:
                stops.append((ts.topic_name, ps.partition_index, ps.leader_epoch, bool(ps.delete_partition)))
    else:
        for t in req.topics:
            for idx in t.partition_indexes:
                stops.append((t.name, idx, NO_EPOCH, bool(req.delete_partitions)))
    errors = []
    until = time.monotonic() + SLICE_S
    for topic, idx, epoch, delete in stops:
        if time.monotonic() > until:
            await asyncio.sleep(0)
            until = time.monotonic() + SLICE_S
        current = rm.leader_epoch_of(topic, idx)
        if epoch not in (NO_EPOCH, EPOCH_DURING_DELETE) and current is not None and epoch <= current:
            code = int(ErrorCode.FENCED_LEADER_EPOCH)
        else:
            code = int(rm.stop_replica(topic, idx, delete))
        errors.append(RESP.StopReplicaPartitionError(topic_name=topic, partition_index=idx, error_code=code))
    return RESP.new(error_code=0, partition_errors=errors)
