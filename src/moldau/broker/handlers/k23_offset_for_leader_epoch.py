"""OffsetForLeaderEpoch (key 23), v0-4 (Kafka 4.1: 2-4; moldau keeps v0-1).

moldau is one node; each partition's leader epoch is the replica manager's ``leader_epoch`` (0 unless the
partition was ever led under a higher epoch).  The answer follows Kafka's leader-epoch cache rules:
* requested epoch -1 (undefined): leader_epoch -1, end_offset -1;
* requested epoch = current epoch: the log end offset;
* requested epoch above the current: UNDEFINED_EPOCH_OFFSET (leader_epoch -1, end_offset -1);
* requested epoch below the current: the start offset of the next epoch when the log knows it
  (``end_offset_for_epoch``), else the log end offset (a single node never truncates).
v2+: current_leader_epoch (-1 = not checked): below ours FENCED_LEADER_EPOCH, above ours UNKNOWN_LEADER_EPOCH.
v1+: leader_epoch in the response.  v3+: replica_id (consumers send -1; a follower id is answered the same).
Unknown topic / partition: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, TOPIC, allowed

log = logging.getLogger(__name__)

REQ = m.OffsetForLeaderEpochRequest
RESP = m.OffsetForLeaderEpochResponse

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def end_offset_for(p: Any, requested: int) -> tuple[int, int]:
    """(leader_epoch, end_offset) for ``requested`` on partition ``p``."""
    current = int(p.leader_epoch)
    if requested == UNDEFINED_EPOCH or requested > current:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if requested == current:
        return current, int(p.log_end_offset)
    epoch, end = p.log.end_offset_for_epoch(requested)
    return int(epoch), int(end)


def _answer(ctx: RequestContext, topic: str, part: Any) -> Any:
    if not allowed(ctx, DESCRIBE, TOPIC, topic):
        return RESP.EpochEndOffset(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   partition=part.partition,
                                   leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET)
    p = ctx.services.replica_manager.get_partition(topic, part.partition)
    if p is None:
        return RESP.EpochEndOffset(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                   partition=part.partition,
                                   leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET)
    current = int(p.leader_epoch)
    checked = part.current_leader_epoch if ctx.version >= 2 else -1
    if checked is not None and checked != -1:
        if checked < current:
            return RESP.EpochEndOffset(error_code=int(ErrorCode.FENCED_LEADER_EPOCH),
                                       partition=part.partition,
                                       leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET)
        if checked > current:
            return RESP.EpochEndOffset(error_code=int(ErrorCode.UNKNOWN_LEADER_EPOCH),
                                       partition=part.partition,
                                       leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET)
    epoch, end = end_offset_for(p, part.leader_epoch)
    return RESP.EpochEndOffset(error_code=0, partition=part.partition, leader_epoch=epoch, end_offset=end)


@handler(23, REQ.min_version, REQ.max_version)
async def offset_for_leader_epoch(ctx: RequestContext,
                                  req: m.OffsetForLeaderEpochRequest) -> m.OffsetForLeaderEpochResponse:
    topics = []
    for t in req.topics:
        topics.append(RESP.OffsetForLeaderTopicResult(
            topic=t.topic, partitions=[_answer(ctx, t.topic, part) for part in t.partitions]))
    return RESP.new(throttle_time_ms=0, topics=topics)
