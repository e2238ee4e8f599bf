"""LeaveGroup (key 13), v0-5.

* v0-2: one member_id; the answer's error_code is that member's error.
* v3+: a batch of members (member_id, group_instance_id); a member named only by group_instance_id (empty
  member id) is removed administratively (AdminClient.removeMembersFromConsumerGroup). Per-member errors:
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID. v5: a reason per member (logged).
* The group rebalances; when the last member leaves it becomes Empty (a new generation, stored).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import GROUP, READ, require


@handler(api_key=13, min_version=0, max_version=5)
async def leave_group(ctx: RequestContext, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
    require(ctx, READ, GROUP, req.group_id)  # GROUP_AUTHORIZATION_FAILED (top-level)
    msg = m.LeaveGroupResponse
    v = ctx.version
    gc = coordinator_of(ctx)
    members: list[tuple[str, str | None, str | None]]
    top: int
    errors: list[int]
    if v <= 2:
        members = [(req.member_id, None, None)]
    else:
        members = [(x.member_id, x.group_instance_id, x.reason if v >= 5 else None) for x in req.members]
    if gc is None:
        top, errors = E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(members)
    else:
        top, errors = await gc.classic.leave_group(req.group_id, members)
    if v <= 2:
        error = top if top != E.NONE else next((e for e in errors if e != E.NONE), E.NONE)
        return msg.new(throttle_time_ms=0, error_code=error)
    return msg.new(
        throttle_time_ms=0,
        error_code=top,
        members=[
            msg.MemberResponse(member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid, _), err in zip(members, errors)
        ]
        if top == E.NONE
        else [],
    )
