"""JoinGroup (key 11), v0-9.

* v0: the rebalance timeout is the session timeout. v4+: a member joining with an empty member id first gets
  MEMBER_ID_REQUIRED with its new id (client_id-UUID, or group.instance.id-UUID for static members, which skip
  that step). v5+: group_instance_id (static membership, KIP-345). v7+: protocol_type in the answer and
  protocol_name nullable. v8+: reason. v9: skip_assignment (a restarted static leader must not reassign).
* The answer waits until the join phase completes (all known members joined, the rebalance timeout, or the
  initial rebalance delay of a new group); the leader gets every member's metadata, followers an empty list.
* Semantics: moldau.broker.groups.coordinator.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import client_host, client_id, coordinator_of
from ..groups.model import JoinRequest
from ..registry import handler
from ..security.authorizer import GROUP, READ, require


@handler(api_key=11, min_version=0, max_version=9)
async def join_group(ctx: RequestContext, req: m.JoinGroupRequest) -> m.JoinGroupResponse:
    require(ctx, READ, GROUP, req.group_id)  # GROUP_AUTHORIZATION_FAILED (top-level)
    msg = m.JoinGroupResponse
    v = ctx.version
    gc = coordinator_of(ctx)
    if gc is None:
        return msg.new(
            error_code=E.COORDINATOR_NOT_AVAILABLE,
            generation_id=-1,
            member_id=req.member_id,
            protocol_name=None if v >= 7 else "",
            leader="",
            members=[],
        )
    rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
    result = await gc.classic.join_group(
        JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            group_instance_id=req.group_instance_id if v >= 5 else None,
            client_id=client_id(ctx),
            client_host=client_host(ctx),
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
            reason=req.reason if v >= 8 else None,
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return msg.new(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            msg.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in result.members
        ],
    )
