"""DescribeShareGroupOffsets (key 90), v0-1: each share-partition's start offset (SPSO; -1 when it has no
state yet) and v1 its lag (records from the SPSO to the high watermark not yet acknowledged or archived).
Topics null: every topic the group has state for. Group errors: GROUP_AUTHORIZATION_FAILED (Describe),
NOT_COORDINATOR, GROUP_ID_NOT_FOUND for a classic or consumer group; UNKNOWN_TOPIC_OR_PARTITION per
partition for unknown topics."""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DESCRIBE
from ._share_admin import group_error


@handler(api_key=90, min_version=0, max_version=1)
async def describe_share_group_offsets(ctx: RequestContext, req: m.DescribeShareGroupOffsetsRequest
                                       ) -> m.DescribeShareGroupOffsetsResponse:
    msg = m.DescribeShareGroupOffsetsResponse
    groups = []
    for g in req.groups or []:
        code, text = group_error(ctx, g.group_id, DESCRIBE, empty=False)
        if code:
            groups.append(msg.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[],
                                                                     error_code=code, error_message=text))
            continue
        svc = ctx.services.share
        assert svc is not None
        wanted: list[tuple[str, list[int] | None]]
        if g.topics is None:
            wanted = [(t, None) for t in sorted(svc.group_topics(g.group_id))]
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        topics = []
        for name, parts in wanted:
            info = ctx.services.metadata.get(name)
            if info is None:
                plist = [msg.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1,
                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION, error_message=None) for p in parts or []]
                topics.append(msg.DescribeShareGroupOffsetsResponseTopic(topic_name=name, partitions=plist))
                continue
            plist = []
            for p in parts if parts is not None else range(int(info.num_partitions)):
                if not 0 <= p < int(info.num_partitions):
                    plist.append(msg.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=-1,
                        error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                try:
                    d = await svc.describe_offsets(g.group_id, name, p)
                except KafkaError as e:  # the share coordinator of the key could not be asked
                    plist.append(msg.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=-1, error_code=e.code,
                        error_message=str(e)))
                    continue
                start, lag = d if d is not None else (-1, -1)
                plist.append(msg.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=start, leader_epoch=0 if d is not None else -1, lag=lag,
                    error_code=E.NONE))
            if g.topics is None and all(x.start_offset < 0 and not x.error_code for x in plist):
                continue  # a topic the members subscribed to that the group has no state for
            topics.append(msg.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=info.topic_id,
                                                                     partitions=plist))
        groups.append(msg.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics,
                                                                 error_code=E.NONE))
    return msg.new(throttle_time_ms=0, groups=groups)
