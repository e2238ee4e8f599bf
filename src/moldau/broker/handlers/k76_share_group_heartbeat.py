"""ShareGroupHeartbeat (key 76), v1 (Kafka 4.2): membership of a share group (KIP-932).

* member_epoch 0 joins with the client's own member id (a UUID), -1 leaves; other epochs must be the one
  the coordinator answered last (FENCED_MEMBER_EPOCH), unknown members get UNKNOWN_MEMBER_ID.
* The coordinator of a share group is the group coordinator's (the group's ``__consumer_offsets`` partition,
  NOT_COORDINATOR elsewhere); the assignment (topic ids and partitions, several members may share one) is
  sent when it changed. Semantics: moldau.broker.share.groups.
* A group id used by a classic or consumer group answers GROUP_ID_NOT_FOUND; share groups turned off
  (``share.version`` 0, no ``share`` in group.coordinator.rebalance.protocols) UNSUPPORTED_VERSION.
* ACLs: Read on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import client_host, client_id, coordinator_of
from ..registry import handler
from ..security.authorizer import GROUP, READ, allowed


@handler(api_key=76, min_version=1, max_version=1)
async def share_group_heartbeat(
    ctx: RequestContext, req: m.ShareGroupHeartbeatRequest
) -> m.ShareGroupHeartbeatResponse:
    msg = m.ShareGroupHeartbeatResponse

    def fail(code: int, text: str | None = None) -> m.ShareGroupHeartbeatResponse:
        return msg.new(error_code=code, error_message=text, member_epoch=-1, heartbeat_interval_ms=0)

    svc = ctx.services.share
    gc = coordinator_of(ctx)
    if svc is None or gc is None:
        return fail(E.COORDINATOR_NOT_AVAILABLE)
    if not svc.enabled:
        return fail(E.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker.")
    if not allowed(ctx, READ, GROUP, req.group_id):
        return fail(E.GROUP_AUTHORIZATION_FAILED)
    if req.group_id and not gc.owns(req.group_id):
        return fail(E.NOT_COORDINATOR)
    if req.group_id and gc.groups.get(req.group_id) is not None:
        return fail(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
    st = svc.settings(req.group_id)
    r = svc.groups.heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.rack_id,
        None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        client_id(ctx),
        client_host(ctx),
        st.session_timeout_ms,
        st.heartbeat_interval_ms,
    )
    if r.error:
        return fail(r.error, r.error_message)
    assignment = None
    if r.assignment is not None:
        tps = []
        for topic, parts in sorted(r.assignment.items()):
            info = ctx.services.metadata.get(topic)
            if info is not None:
                tps.append(msg.TopicPartitions(topic_id=info.topic_id, partitions=sorted(parts)))
        assignment = msg.Assignment(topic_partitions=tps)
    return msg.new(
        error_code=E.NONE,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )
