"""Heartbeat (key 12), v0-4.

NONE while Stable or CompletingRebalance (clients heartbeat between their JoinGroup and SyncGroup answers),
REBALANCE_IN_PROGRESS while PreparingRebalance (the member must rejoin), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
(also for an unknown group), FENCED_INSTANCE_ID (v3+, a replaced static member). Each accepted heartbeat
restarts the member's session timeout.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import GROUP, READ, require


@handler(api_key=12, min_version=0, max_version=4)
async def heartbeat(ctx: RequestContext, req: m.HeartbeatRequest) -> m.HeartbeatResponse:
    require(ctx, READ, GROUP, req.group_id)  # GROUP_AUTHORIZATION_FAILED (top-level)
    gc = coordinator_of(ctx)
    if gc is None:
        return m.HeartbeatResponse.new(error_code=E.COORDINATOR_NOT_AVAILABLE)
    error = gc.classic.sync.heartbeat(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if ctx.version >= 3 else None
    )
    return m.HeartbeatResponse.new(throttle_time_ms=0, error_code=error)
