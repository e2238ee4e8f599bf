"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 consumer groups.

State (Empty, Assigning, Reconciling, Stable), group and assignment epochs, the assignor, and per member its
epoch, subscription, current and target assignment (topic id + name). Classic or unknown groups answer
GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID. v1: member_type 1 (consumer protocol member).
authorized_operations when requested (no authorizer: every group operation), else INT32_MIN. ACLs: Describe on
the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, group_authorized_operations
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, allowed


def _assignment(msg: Any, gc: Any, a: dict[str, set[int]]) -> Any:
    tps = []
    for topic, parts in sorted(a.items()):
        tid = gc.consumer.topic_id(topic)
        if tid is not None:
            tps.append(msg.TopicPartitions(topic_id=tid, topic_name=topic, partitions=sorted(parts)))
    return msg.Assignment(topic_partitions=tps)


@handler(api_key=69, min_version=0, max_version=1)
async def consumer_group_describe(ctx: RequestContext,
                                  req: m.ConsumerGroupDescribeRequest) -> m.ConsumerGroupDescribeResponse:
    msg = m.ConsumerGroupDescribeResponse
    gc = coordinator_of(ctx)
    out = []

    def no_group(group_id: str, error_code: int, error_message: str | None = None, state: str = "") -> Any:
        return msg.DescribedGroup(error_code=error_code, error_message=error_message, group_id=group_id,
                                  group_state=state, group_epoch=-1, assignment_epoch=-1, assignor_name="",
                                  members=[])

    for group_id in req.group_ids:
        if gc is None:
            out.append(no_group(group_id, E.COORDINATOR_NOT_AVAILABLE))
            continue
        if not group_id:
            out.append(no_group(group_id, E.INVALID_GROUP_ID, "Group id can't be empty."))
            continue
        if not allowed(ctx, DESCRIBE, GROUP, group_id):
            out.append(no_group(group_id, E.GROUP_AUTHORIZATION_FAILED))
            continue
        error, message, g = gc.consumer.describe(group_id)
        if g is None:
            out.append(no_group(group_id, error, message, "Dead"))
            continue
        members = [
            msg.Member(
                member_id=x.member_id,
                instance_id=x.instance_id,
                rack_id=x.rack_id,
                member_epoch=x.member_epoch,
                client_id=x.client_id,
                client_host=x.client_host,
                subscribed_topic_names=sorted(x.subscribed_topic_names),
                subscribed_topic_regex=x.subscribed_topic_regex,
                assignment=_assignment(msg, gc, x.assigned),
                target_assignment=_assignment(msg, gc, g.target.get(x.member_id, {})),
                member_type=1,
            )
            for x in g.members.values()
        ]
        out.append(
            msg.DescribedGroup(
                error_code=E.NONE,
                group_id=group_id,
                group_state=g.state_name,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name,
                members=members,
                authorized_operations=group_authorized_operations(
                    ctx, group_id, req.include_authorized_operations),
            )
        )
    return msg.new(throttle_time_ms=0, groups=out)
