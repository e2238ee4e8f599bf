"""SyncGroup (key 14), v0-5.

* The leader sends the assignment of every member; every member's answer waits until the assignment is
  stored in __consumer_offsets (GroupMetadataValue v3), then carries that member's bytes.
* v3+: group_instance_id (FENCED_INSTANCE_ID for a replaced static member). v5: protocol_type and
  protocol_name must be given and match the group (else INCONSISTENT_GROUP_PROTOCOL); the answer carries them.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import GROUP, READ, require


@handler(api_key=14, min_version=0, max_version=5)
async def sync_group(ctx: RequestContext, req: m.SyncGroupRequest) -> m.SyncGroupResponse:
    require(ctx, READ, GROUP, req.group_id)  # GROUP_AUTHORIZATION_FAILED (top-level)
    msg = m.SyncGroupResponse
    v = ctx.version
    gc = coordinator_of(ctx)
    if gc is None:
        return msg.new(error_code=E.COORDINATOR_NOT_AVAILABLE, assignment=b"")
    if v >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return msg.new(error_code=E.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
    assignments: dict[str, bytes] = {}
    for a in req.assignments:
        assignments[a.member_id] = bytes(a.assignment) if a.assignment is not None else b""
    result = await gc.classic.sync.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
        assignments=assignments,
    )
    ok = result.error == E.NONE
    return msg.new(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type if ok else None,
        protocol_name=result.protocol_name if ok else None,
        assignment=result.assignment,
    )
