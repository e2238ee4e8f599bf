"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer group protocol (group.protocol=consumer).

* member_epoch 0 joins (v0: the coordinator generates the member id; v1: the client sends its own UUID),
  -1 leaves, -2 leaves temporarily (static members, instance_id). Fields left null mean "unchanged".
* The broker assigns partitions with a server-side assignor (``uniform`` default, ``range``; others:
  UNSUPPORTED_ASSIGNOR) and hands each member its assignment (topic ids) as it reconciles.
* Errors: INVALID_REQUEST (malformed), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
  GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (the id belongs to a non-empty classic group),
  INVALID_REGULAR_EXPRESSION (v1).
* ACLs: Read on the group (GROUP_AUTHORIZATION_FAILED).
* Semantics: moldau.broker.groups.consumer.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import client_host, client_id, coordinator_of
from ..registry import handler
from ..security.authorizer import GROUP, READ, allowed


@handler(api_key=68, min_version=0, max_version=1)
async def consumer_group_heartbeat(ctx: RequestContext,
                                   req: m.ConsumerGroupHeartbeatRequest) -> m.ConsumerGroupHeartbeatResponse:
    msg = m.ConsumerGroupHeartbeatResponse
    gc = coordinator_of(ctx)
    if gc is None:
        return msg.new(error_code=E.COORDINATOR_NOT_AVAILABLE, member_epoch=-1, heartbeat_interval_ms=0)
    if not allowed(ctx, READ, GROUP, req.group_id):
        return msg.new(error_code=E.GROUP_AUTHORIZATION_FAILED, member_epoch=-1, heartbeat_interval_ms=0)
    v = ctx.version
    owned = (
        None
        if req.topic_partitions is None
        else [(tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions]
    )
    r = gc.consumer.heartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=None
        if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
        subscribed_topic_regex=req.subscribed_topic_regex if v >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
        api_version=v,
    )
    assignment = None
    if r.error == E.NONE and r.assignment is not None:
        tps = []
        for topic, parts in sorted(r.assignment.items()):
            tid = gc.consumer.topic_id(topic)
            if tid is not None:
                tps.append(msg.TopicPartitions(topic_id=tid, partitions=sorted(parts)))
        assignment = msg.Assignment(topic_partitions=tps)
    return msg.new(
        throttle_time_ms=0,
        error_code=r.error,
        error_message=r.error_message,
        member_id=r.member_id if r.error == E.NONE else None,
        member_epoch=r.member_epoch if r.error == E.NONE else -1,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )
