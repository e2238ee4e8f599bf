"""OffsetFetch (key 9), v0-10.

* v0-7: one group; ``topics`` null (v2+) = every partition the group has an offset for. v8+: several groups,
  each with its topics (null = all) and a group-level error. v9+: member_id / member_epoch of a KIP-848
  member (STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID). v10: topics by id.
* v0 (ZooKeeper offsets in Kafka) is served like v1 from __consumer_offsets.
* A partition without a committed offset answers offset -1, leader epoch -1, metadata "" and no error.
* require_stable (v7+): partitions with offsets pending in an open transaction answer UNSTABLE_OFFSET_COMMIT.
* Group-level errors (coordinator unavailable): top-level error_code v2-7, per partition v0-1, per group v8+.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, topic_by_id
from ..groups.model import PartitionOffset
from ..registry import handler
from ..security.authorizer import DESCRIBE, GROUP, TOPIC, allowed


def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    require_stable: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[int, list[Any]]:
    if not allowed(ctx, DESCRIBE, GROUP, group_id):
        return E.GROUP_AUTHORIZATION_FAILED, []
    gc = coordinator_of(ctx)
    if gc is None:
        return E.COORDINATOR_NOT_AVAILABLE, []
    partitions = None if topics is None else [(t, p) for t, ps in topics for p in ps]
    error, results = gc.offsets.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)
    if (
        ctx.services.authorizer is not None
    ):  # topics the principal may not Describe: named -> error, all -> left out
        results = [
            r
            if allowed(ctx, DESCRIBE, TOPIC, r.topic)
            else PartitionOffset(r.topic, r.partition, error=E.TOPIC_AUTHORIZATION_FAILED)
            for r in results
            if topics is not None or allowed(ctx, DESCRIBE, TOPIC, r.topic)
        ]
    return error, results


def _group_by_topic(results: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in results:
        out.setdefault(r.topic, []).append(r)
    return out


def _partitions(cls: Any, results: list[PartitionOffset]) -> list[Any]:
    """The response's partitions (``cls``: the v0-7 or the v8+ struct) for one topic's results."""
    return [
        cls(partition_index=r.partition, committed_offset=r.offset, committed_leader_epoch=r.leader_epoch,
            metadata=r.metadata, error_code=r.error)
        for r in results
    ]


@handler(api_key=9, min_version=0, max_version=10)
async def offset_fetch(ctx: RequestContext, req: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
    msg = m.OffsetFetchResponse
    v = ctx.version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v < 8:
        topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        error, results = _fetch(ctx, req.group_id, topics, require_stable)
        if error != E.NONE and v < 2 and topics is not None:
            # no top-level error field: every partition carries it
            results = [PartitionOffset(t, p, error=error) for t, ps in topics for p in ps]
        topics_out = [
            msg.OffsetFetchResponseTopic(
                name=name,
                partitions=_partitions(msg.OffsetFetchResponsePartition, rs),
            )
            for name, rs in _group_by_topic(results).items()
        ]
        return msg.new(throttle_time_ms=0, topics=topics_out, error_code=error if v >= 2 else 0)

    groups_out = []
    for g in req.groups:
        topic_ids: dict[str, Any] = {}
        unknown_ids: list[tuple[Any, list[int]]] = []
        if g.topics is None:
            topics = None
        else:
            topics = []
            for t in g.topics:
                if v >= 10:
                    info = topic_by_id(ctx, t.topic_id)
                    if info is None:
                        unknown_ids.append((t.topic_id, list(t.partition_indexes)))
                        continue
                    topic_ids[info.name] = t.topic_id
                    topics.append((info.name, list(t.partition_indexes)))
                else:
                    topics.append((t.name, list(t.partition_indexes)))
        error, results = _fetch(
            ctx,
            g.group_id,
            topics,
            require_stable,
            g.member_id if v >= 9 else None,
            g.member_epoch if v >= 9 else -1,
        )
        group_topics: list[m.OffsetFetchResponse.OffsetFetchResponseTopics] = []
        for name, rs in _group_by_topic(results).items():
            parts_out = _partitions(msg.OffsetFetchResponsePartitions, rs)
            topic = msg.OffsetFetchResponseTopics(partitions=parts_out)
            if v >= 10:  # the topic id from v10, the name before
                tid = topic_ids.get(name)
                if tid is None:
                    info = ctx.services.metadata.get(name)
                    if info is None:
                        continue  # the topic is gone: it has no id to answer with
                    tid = info.topic_id
                topic.topic_id = tid
            else:
                topic.name = name
            group_topics.append(topic)
        for tid, parts in unknown_ids:
            group_topics.append(
                msg.OffsetFetchResponseTopics(
                    topic_id=tid,
                    partitions=[
                        msg.OffsetFetchResponsePartitions(
                            partition_index=p,
                            committed_offset=-1,
                            committed_leader_epoch=-1,
                            metadata="",
                            error_code=E.UNKNOWN_TOPIC_ID,
                        )
                        for p in parts
                    ],
                )
            )
        groups_out.append(
            msg.OffsetFetchResponseGroup(group_id=g.group_id, topics=group_topics, error_code=error)
        )
    return msg.new(throttle_time_ms=0, groups=groups_out)
