"""OffsetDelete (key 47), v0.

Deletes committed offsets of a group (tombstones in __consumer_offsets). GROUP_ID_NOT_FOUND for an unknown
group; NON_EMPTY_GROUP (top level) for an active group that does not use the consumer protocol type;
GROUP_SUBSCRIBED_TO_TOPIC for partitions of topics the active consumer group subscribes to;
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, topic_partitions
from ..registry import handler
from ..security.authorizer import DELETE, GROUP, READ, TOPIC, allowed, require


@handler(api_key=47, min_version=0, max_version=0)
async def offset_delete(ctx: RequestContext, req: m.OffsetDeleteRequest) -> m.OffsetDeleteResponse:
    require(ctx, DELETE, GROUP, req.group_id)  # GROUP_AUTHORIZATION_FAILED (top-level)
    msg = m.OffsetDeleteResponse
    gc = coordinator_of(ctx)
    if gc is None:
        return msg.new(error_code=E.COORDINATOR_NOT_AVAILABLE, throttle_time_ms=0, topics=[])
    wanted: list[tuple[str, int]] = []
    invalid: dict[tuple[str, int], int] = {}
    for t in req.topics:
        count = topic_partitions(ctx, t.name)
        topic_denied = not allowed(ctx, READ, TOPIC, t.name)
        for p in t.partitions:
            if topic_denied:
                invalid[(t.name, p.partition_index)] = E.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= p.partition_index < count:
                invalid[(t.name, p.partition_index)] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append((t.name, p.partition_index))
    error, results = await gc.offsets.delete_offsets(req.group_id, wanted)
    if error != E.NONE:
        return msg.new(error_code=error, throttle_time_ms=0, topics=[])
    results.update(invalid)
    topics_out = [
        msg.OffsetDeleteResponseTopic(
            name=t.name,
            partitions=[
                msg.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index,
                    error_code=results.get((t.name, p.partition_index), E.NONE),
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return msg.new(error_code=E.NONE, throttle_time_ms=0, topics=topics_out)
