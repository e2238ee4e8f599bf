"""ListGroups (key 16), v0-5.

Every group the coordinator knows (classic groups, including "simple" groups that only commit offsets, and
KIP-848 consumer groups). v4+: group_state and states_filter (case-insensitive); v5+: group_type ("classic" /
"consumer") and types_filter (case-insensitive).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, allowed, allowed_cluster


@handler(api_key=16, min_version=0, max_version=5)
async def list_groups(ctx: RequestContext, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
    msg = m.ListGroupsResponse
    gc = coordinator_of(ctx)
    if gc is None:
        return msg.new(throttle_time_ms=0, error_code=E.COORDINATOR_NOT_AVAILABLE, groups=[])
    v = ctx.version
    listed = gc.list_groups(
        list(req.states_filter) if v >= 4 else None, list(req.types_filter) if v >= 5 else None
    )
    if ctx.services.authorizer is not None and not allowed_cluster(ctx, DESCRIBE):
        listed = [g for g in listed if allowed(ctx, DESCRIBE, GROUP, g.group_id)]  # only describable groups
    return msg.new(
        throttle_time_ms=0,
        error_code=E.NONE,
        groups=[
            msg.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listed
        ],
    )
