"""ListGroups (key 16), v0-5.

Every group the coordinator knows (classic groups, including "simple" groups that only commit offsets, and
KIP-848 consumer groups) and the share groups of KIP-932 (protocol type "share", state Empty / Stable).
v4+: group_state and states_filter (case-insensitive); v5+: group_type ("classic" / "consumer" / "share") and
types_filter (case-insensitive).
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..groups.model import ListedGroup
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, allowed, allowed_cluster


def _share_groups(ctx: RequestContext, req: m.ListGroupsRequest, v: int) -> list[ListedGroup]:
    svc = ctx.services.share
    gc = coordinator_of(ctx)
    if svc is None or gc is None:
        return []
    states = {s.lower() for s in (req.states_filter if v >= 4 else None) or []}
    types = {t.lower() for t in (req.types_filter if v >= 5 else None) or []}
    if types and "share" not in types:
        return []
    out = []
    for gid in sorted(svc.group_ids()):
        if not gc.owns(gid):
            continue
        g = svc.groups.groups.get(gid)
        state = g.state if g is not None else "Empty"
        if states and state.lower() not in states:
            continue
        out.append(ListedGroup(gid, "share", state, "share"))
    return out


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
    listed += _share_groups(ctx, req, v)
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
