"""AlterPartition (key 56), v0-3: a partition leader asks the controller to change the ISR (KIP-497, KIP-841).

* ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED). Answered by the active controller only:
  NOT_CONTROLLER elsewhere (and on a broker without a cluster), so the leader finds the controller again.
* v0-1 name topics, v2+ by id (an unknown id: UNKNOWN_TOPIC_ID for its partitions); v3's ISR with broker
  epochs is read as its broker ids (ZooKeeper mode does not check the members' epochs).
* The controller's validation and answers are in ``cluster.alter_partition.process``: STALE_BROKER_EPOCH
  (top level), then per partition UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (the leader knows a newer state),
  FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION (stale partition epoch), INVALID_REQUEST, INELIGIBLE_REPLICA
  (a proposed member that is not a live broker); on success the new leader epoch, ISR and partition epoch.
"""

from __future__ import annotations

import uuid

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..cluster.alter_partition import decode_request, topic_data
from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import CLUSTER_ACTION, allowed_cluster

RESP = m.AlterPartitionResponse


@handler(api_key=56, min_version=0, max_version=3)
async def alter_partition(ctx: RequestContext, req: m.AlterPartitionRequest) -> m.AlterPartitionResponse:
    if not allowed_cluster(ctx, CLUSTER_ACTION):
        return RESP.new(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), topics=[])
    cluster = ctx.services.cluster
    controller = cluster.controller if cluster is not None else None
    if controller is None or not controller.active:
        return RESP.new(throttle_time_ms=0, error_code=int(ErrorCode.NOT_CONTROLLER), topics=[])
    v = ctx.version

    def name_of(topic_id: uuid.UUID) -> str | None:
        t = ctx.services.metadata.get_by_id(topic_id)
        return t.name if t is not None else None

    changes, unknown_ids = decode_request(req, v, name_of)
    code, results = await controller.alter_partition(req.broker_id, req.broker_epoch, changes)
    if code:
        return RESP.new(throttle_time_ms=0, error_code=int(code), topics=[])
    ids = {}
    for t in req.topics:
        if v >= 2:
            n = name_of(t.topic_id)
            if n is not None:
                ids[n] = t.topic_id
    by_topic: dict[str, list[m.AlterPartitionResponse.PartitionData]] = {}
    for ch in changes:
        r = results.get((ch.topic, ch.partition))
        err = int(r.error) if r is not None else int(ErrorCode.UNKNOWN_SERVER_ERROR)
        pd = RESP.PartitionData(partition_index=ch.partition, error_code=err, leader_id=-1, leader_epoch=-1,
                                isr=[], leader_recovery_state=0, partition_epoch=-1)
        if r is not None and not err:
            pd.leader_id, pd.leader_epoch = r.leader, r.leader_epoch
            pd.isr, pd.partition_epoch = list(r.isr), r.partition_epoch
        by_topic.setdefault(ch.topic, []).append(pd)
    topics = [topic_data(RESP.TopicData, v, name, ids.get(name), parts) for name, parts in by_topic.items()]
    unknown_id = int(ErrorCode.UNKNOWN_TOPIC_ID)
    for t in req.topics:
        if v >= 2 and t.topic_id in unknown_ids:
            topics.append(RESP.TopicData(topic_id=t.topic_id, partitions=[
                RESP.PartitionData(partition_index=pd.partition_index, error_code=unknown_id, leader_id=-1,
                                   leader_epoch=-1, isr=[], leader_recovery_state=0, partition_epoch=-1)
                for pd in t.partitions]))
    return RESP.new(throttle_time_ms=0, error_code=0, topics=topics)
