"""DescribeGroups (key 15), v0-6.

* Stable groups: the selected protocol and each member's metadata (subscription) and assignment; other
  states: members without metadata/assignment and an empty protocol (Kafka's summary rules).
* Unknown groups (and KIP-848 consumer groups, described by ConsumerGroupDescribe): v0-5 state "Dead" with
  no error; v6 GROUP_ID_NOT_FOUND with an error message.
* Share groups (KIP-932): protocol type "share", state Empty / Stable, members without metadata or
  assignment (ShareGroupDescribe describes them fully).
* v3+: authorized_operations when requested (no authorizer: every group operation), else INT32_MIN.
* v4+: group_instance_id of static members.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import AUTHORIZED_OPERATIONS_OMITTED, coordinator_of, group_authorized_operations
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, allowed


def _share_group(ctx: RequestContext, msg: Any, group_id: str, include_ops: bool) -> Any:
    """A share group (KIP-932) as DescribeGroups shows it: protocol type "share", no protocol, members
    without metadata or assignment (ShareGroupDescribe has those)."""
    svc = ctx.services.share
    assert svc is not None
    g = svc.groups.groups.get(group_id)
    members = [] if g is None else [
        msg.DescribedGroupMember(member_id=x.member_id, group_instance_id=None, client_id=x.client_id,
                                 client_host=x.client_host, member_metadata=b"", member_assignment=b"")
        for x in g.members.values()]
    return msg.DescribedGroup(error_code=E.NONE, error_message=None, group_id=group_id,
                              group_state=g.state if g is not None else "Empty", protocol_type="share",
                              protocol_data="", members=members,
                              authorized_operations=group_authorized_operations(ctx, group_id, include_ops))


@handler(api_key=15, min_version=0, max_version=6)
async def describe_groups(ctx: RequestContext, req: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
    msg = m.DescribeGroupsResponse
    v = ctx.version
    gc = coordinator_of(ctx)
    include_ops = bool(v >= 3 and req.include_authorized_operations)
    out = []

    def no_group(group_id: str, error_code: int, error_message: str | None = None, state: str = "",
                 **kw: Any) -> Any:
        return msg.DescribedGroup(error_code=error_code, error_message=error_message, group_id=group_id,
                                  group_state=state, protocol_type="", protocol_data="", members=[], **kw)

    for group_id in req.groups:
        if gc is None:
            out.append(no_group(group_id, E.COORDINATOR_NOT_AVAILABLE))
            continue
        if not allowed(ctx, DESCRIBE, GROUP, group_id):
            out.append(no_group(group_id, E.GROUP_AUTHORIZATION_FAILED,
                                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        d = gc.describe_group(group_id)
        svc = ctx.services.share
        if d.error == E.GROUP_ID_NOT_FOUND and svc is not None and gc.owns(group_id) \
                and svc.known_group(group_id):
            out.append(_share_group(ctx, msg, group_id, include_ops))
            continue
        if d.error == E.GROUP_ID_NOT_FOUND:
            out.append(no_group(group_id, E.GROUP_ID_NOT_FOUND if v >= 6 else E.NONE,
                                d.error_message if v >= 6 else None, "Dead",
                                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        out.append(
            msg.DescribedGroup(
                error_code=d.error,
                error_message=d.error_message,
                group_id=group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol,
                members=[
                    msg.DescribedGroupMember(
                        member_id=x.member_id,
                        group_instance_id=x.group_instance_id,
                        client_id=x.client_id,
                        client_host=x.client_host,
                        member_metadata=x.metadata,
                        member_assignment=x.assignment,
                    )
                    for x in d.members
                ],
                authorized_operations=group_authorized_operations(ctx, group_id, include_ops),
            )
        )
    return msg.new(throttle_time_ms=0, groups=out)
