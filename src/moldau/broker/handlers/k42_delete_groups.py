"""DeleteGroups (key 42), v0-2.

Deletes empty groups with their committed offsets (tombstones for every offset and the group metadata in
__consumer_offsets). NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND for unknown groups,
INVALID_GROUP_ID for an empty id. A share group (KIP-932) is deleted with its share-partitions' state
(tombstones in __share_group_state) and its group configs.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import DELETE, GROUP, allowed


@handler(api_key=42, min_version=0, max_version=2)
async def delete_groups(ctx: RequestContext, req: m.DeleteGroupsRequest) -> m.DeleteGroupsResponse:
    msg = m.DeleteGroupsResponse
    gc = coordinator_of(ctx)
    names = list(req.groups_names)
    denied = {g: E.GROUP_AUTHORIZATION_FAILED for g in names if not allowed(ctx, DELETE, GROUP, g)}
    names_ok = [g for g in names if g not in denied]
    results: dict[str, int]
    if gc is None:
        results = {g: E.COORDINATOR_NOT_AVAILABLE for g in names}
    else:
        svc = ctx.services.share
        share = [g for g in names_ok if svc is not None and gc.owns(g) and svc.known_group(g)]
        others = [g for g in names_ok if g not in share]
        results = await gc.delete_groups(others) if others else {}
        for g in share:
            assert svc is not None
            results[g] = await svc.delete_group(g)  # its share-partitions' state goes with it
    results.update(denied)
    return msg.new(
        throttle_time_ms=0,
        results=[msg.DeletableGroupResult(group_id=g, error_code=results[g]) for g in dict.fromkeys(names)],
    )
