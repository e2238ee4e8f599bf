"""ListOffsets (key 2), v0-11.

Timestamps:
* -1 LATEST: the high watermark (read_committed, v2+: the last stable offset);
* -2 EARLIEST: the log start offset;
* -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the record with the largest timestamp;
* -4 EARLIEST_LOCAL (v8+): the log start offset (no tiered storage, local = whole log);
* -5 LATEST_TIERED (v9+) / -6 EARLIEST_PENDING_UPLOAD (v11): offset -1, as Kafka without tiered storage;
* t >= 0: the first offset whose record timestamp is >= t (the time index), below the high watermark /
  last stable offset; none: offset -1, timestamp -1.
v0 answers old_style_offsets (the latest / earliest offset; up to max_num_offsets for LATEST: the high
watermark followed by the segment base offsets, newest first). leader_epoch (v4+) is the partition's epoch.
current_leader_epoch (v4+) older / newer than the partition's: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
In a cluster only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, also for consumers that fetch from a
follower; replica id -2, Kafka's debugging id, may ask any replica), and a new leader whose high watermark has
not reached the start of its leader epoch answers OFFSET_NOT_AVAILABLE (v2+, except EARLIEST), as Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, error_code_of

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE, TOPIC, allowed

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR = -1

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


def lookup(rm: Any, p: Any, ts: int, isolation: int) -> tuple[int, int]:
    """(offset, timestamp) for one ListOffsets query."""
    if ts == LATEST:
        return (p.last_stable_offset if isolation == 1 else p.high_watermark), -1
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return p.log_start_offset, -1
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1
    limit = p.last_stable_offset if isolation == 1 else p.high_watermark
    if ts == MAX_TIMESTAMP:
        r = p.log.max_timestamp_offset()
        if r is None:
            return -1, -1
        off, t = r
        if off < 0 or off >= limit:
            return -1, -1
        return int(off), int(t)
    if ts < 0:
        return -1, -1
    found = rm.offset_for_timestamp(p, ts, limit)
    if found is None or found[0] >= limit:
        return -1, -1
    return found


def _old_style(p: Any, ts: int, max_num: int, rm: Any) -> list[int]:
    if ts == LATEST:
        offsets = [p.high_watermark]
        bases = [seg.base_offset for seg in p.log.segments]
        for b in sorted(bases or [p.log_start_offset], reverse=True):
            if b < offsets[-1]:
                offsets.append(b)
        return offsets[:max(max_num, 1)]
    if ts == EARLIEST:
        return [p.log_start_offset]
    off, _t = lookup(rm, p, ts, 0)
    return [off] if off >= 0 else []


@handler(api_key=2, min_version=0, max_version=11)
async def list_offsets(ctx: RequestContext, req: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
    svc = ctx.services
    rm = svc.replica_manager
    v = ctx.version
    msg = m.ListOffsetsResponse
    isolation = req.isolation_level if v >= 2 else 0
    topics_out = []
    for t in req.topics:
        parts_out = []
        topic = svc.metadata.get(t.name)
        denied = not allowed(ctx, DESCRIBE, TOPIC, t.name)
        for q in t.partitions:
            pr = msg.ListOffsetsPartitionResponse(partition_index=q.partition_index, error_code=0,
                                                  old_style_offsets=[], timestamp=-1, offset=-1,
                                                  leader_epoch=-1)
            parts_out.append(pr)
            if denied:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            p = rm.get_partition(topic.name, q.partition_index) if topic is not None else None
            if p is None:
                pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            cle = q.current_leader_epoch if v >= 4 else -1
            if cle >= 0 and cle != p.leader_epoch:
                pr.error_code = (ErrorCode.FENCED_LEADER_EPOCH if cle < p.leader_epoch
                                 else ErrorCode.UNKNOWN_LEADER_EPOCH)
                continue
            code = rm.list_offsets_error(p, req.replica_id, q.timestamp, v)
            if code:
                pr.error_code = code
                continue
            try:
                if v == 0:
                    pr.old_style_offsets = _old_style(p, q.timestamp, q.max_num_offsets, rm)
                    continue
                off, ts = lookup(rm, p, q.timestamp, isolation)
            except Exception as e:
                code = error_code_of(e)
                if code == UNKNOWN_SERVER_ERROR:
                    log.exception("ListOffsets on %s-%d failed", p.topic, p.index)
                pr.error_code = code
                continue
            pr.offset = off
            pr.timestamp = ts
            pr.leader_epoch = p.leader_epoch if off >= 0 else -1
        topics_out.append(msg.ListOffsetsTopicResponse(name=t.name, partitions=parts_out))
    return msg.new(throttle_time_ms=0, topics=topics_out)
