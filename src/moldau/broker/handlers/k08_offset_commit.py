"""OffsetCommit (key 8), v0-10.

* v0: no generation / member id (a "simple" commit); v1: per-partition commit timestamp (-1 = now); v2-v4:
  retention_time_ms (-1 = the broker's offsets.retention.minutes; otherwise the offset carries an expire
  timestamp and is written as OffsetCommitValue v1, as Kafka does); v6+: committed_leader_epoch; v7+:
  group_instance_id; v8+ flexible; v9+: an unknown group with a generation answers GROUP_ID_NOT_FOUND
  (ILLEGAL_GENERATION before), and KIP-848 members commit with their member epoch; v10: topics by id
  (UNKNOWN_TOPIC_ID).
* Commits with generation -1 and an empty member id are accepted for groups that have no active members
  (a group is created for them). Unknown topics or partitions: UNKNOWN_TOPIC_OR_PARTITION.
  Metadata longer than offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE. Null metadata is stored as "".
* Offsets are durable (OffsetCommitKey v1 + OffsetCommitValue v3 records in __consumer_offsets) before the
  answer.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, topic_by_id, topic_partitions
from ..groups.group import CommittedOffset
from ..registry import handler
from ..security.authorizer import GROUP, READ, TOPIC, allowed


@handler(api_key=8, min_version=0, max_version=10)
async def offset_commit(ctx: RequestContext, req: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
    msg = m.OffsetCommitResponse
    v = ctx.version
    gc = coordinator_of(ctx)
    now = ctx.services.clock.time_ms()
    generation = req.generation_id_or_member_epoch if v >= 1 else -1
    member_id = req.member_id if v >= 1 else ""
    instance_id = req.group_instance_id if v >= 7 else None
    retention = req.retention_time_ms if 2 <= v <= 4 else -1

    # per topic: (name or None, topic id or None, [(partition, error or None, CommittedOffset)])
    plan: list[tuple[str | None, Any, list[tuple[int, int | None, CommittedOffset | None]]]] = []
    group_allowed = allowed(ctx, READ, GROUP, req.group_id)
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for t in req.topics:
        if v >= 10:
            info = topic_by_id(ctx, t.topic_id)
            name = info.name if info is not None else None
            missing_error = E.UNKNOWN_TOPIC_ID
        else:
            name = t.name
            missing_error = E.UNKNOWN_TOPIC_OR_PARTITION
        count = topic_partitions(ctx, name) if name is not None else None
        entries: list[tuple[int, int | None, CommittedOffset | None]] = []
        denied = (
            E.GROUP_AUTHORIZATION_FAILED
            if not group_allowed
            else (
                E.TOPIC_AUTHORIZATION_FAILED
                if name is not None and not allowed(ctx, READ, TOPIC, name)
                else None
            )
        )
        for p in t.partitions:
            if denied is not None:
                entries.append((p.partition_index, denied, None))
                continue
            if count is None:
                entries.append((p.partition_index, missing_error, None))
                continue
            if not 0 <= p.partition_index < count:
                entries.append((p.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION, None))
                continue
            commit_ts = now
            if v == 1 and p.commit_timestamp != -1:
                commit_ts = p.commit_timestamp
            co = CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=commit_ts,
                # an int64 as Kafka stores it: a retention near the type's range saturates, not overflows
                expire_timestamp=max(-(2**63), min(now + retention, 2**63 - 1)) if retention != -1 else -1,
            )
            entries.append((p.partition_index, None, co))
            assert name is not None
            offsets[(name, p.partition_index)] = co
        plan.append((name, t.topic_id if v >= 10 else None, entries))

    results: dict[tuple[str, int], int]
    if gc is None:
        results = {tp: E.COORDINATOR_NOT_AVAILABLE for tp in offsets}
    elif offsets:
        results = await gc.offsets.commit_offsets(
            req.group_id, member_id, generation, instance_id, offsets, v)
    else:
        results = {}

    topics_out = []
    for (name, topic_id, entries), t in zip(plan, req.topics):
        parts = []
        for index, error, _co in entries:
            if error is None:
                error = results.get((name, index), E.NONE)  # type: ignore[arg-type]
            parts.append(msg.OffsetCommitResponsePartition(partition_index=index, error_code=error))
        topic = msg.OffsetCommitResponseTopic(topic_id=topic_id, partitions=parts)
        if v < 10:  # the name up to v9, the topic id from v10
            topic.name = t.name
        topics_out.append(topic)
    return msg.new(throttle_time_ms=0, topics=topics_out)
