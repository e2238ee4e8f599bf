"""ShareGroupDescribe (key 77), v1: share groups' state, epochs, members and assignments (KIP-932).

* Per group: GROUP_ID_NOT_FOUND when it is not a share group this coordinator knows, NOT_COORDINATOR when the
  group's ``__consumer_offsets`` partition is not led here, GROUP_AUTHORIZATION_FAILED without Describe.
* AssignorName is ``simple`` (moldau.broker.share.groups); GroupState Empty or Stable.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, allowed


@handler(api_key=77, min_version=1, max_version=1)
async def share_group_describe(
    ctx: RequestContext, req: m.ShareGroupDescribeRequest
) -> m.ShareGroupDescribeResponse:
    msg = m.ShareGroupDescribeResponse
    svc = ctx.services.share
    gc = coordinator_of(ctx)
    out = []
    for gid in req.group_ids or []:

        def err(code: int, text: str | None = None) -> None:
            out.append(
                msg.DescribedGroup(
                    error_code=code,
                    error_message=text,
                    group_id=gid,
                    group_state="",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=[],
                )
            )

        if not allowed(ctx, DESCRIBE, GROUP, gid):
            err(E.GROUP_AUTHORIZATION_FAILED)
            continue
        if svc is None or gc is None:
            err(E.COORDINATOR_NOT_AVAILABLE)
            continue
        if not gc.owns(gid):
            err(E.NOT_COORDINATOR)
            continue
        g = svc.groups.groups.get(gid)
        if g is None:
            if svc.known_group(gid):
                out.append(
                    msg.DescribedGroup(
                        error_code=E.NONE,
                        group_id=gid,
                        group_state="Empty",
                        group_epoch=0,
                        assignment_epoch=0,
                        assignor_name="simple",
                        members=[],
                    )
                )
            else:
                err(E.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            continue
        members = []
        for mem in g.members.values():
            tps = []
            for topic, parts in sorted(mem.assignment.items()):
                info = ctx.services.metadata.get(topic)
                if info is not None:
                    tps.append(
                        msg.TopicPartitions(
                            topic_id=info.topic_id, topic_name=topic, partitions=sorted(parts)
                        )
                    )
            members.append(
                msg.Member(
                    member_id=mem.member_id,
                    rack_id=mem.rack_id,
                    member_epoch=mem.epoch,
                    client_id=mem.client_id,
                    client_host=mem.client_host,
                    subscribed_topic_names=list(mem.topics),
                    assignment=msg.Assignment(topic_partitions=tps),
                )
            )
        out.append(
            msg.DescribedGroup(
                error_code=E.NONE,
                group_id=gid,
                group_state=g.state,
                group_epoch=g.epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name="simple",
                members=members,
            )
        )
    return msg.new(throttle_time_ms=0, groups=out)
