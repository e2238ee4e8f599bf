"""AlterShareGroupOffsets (key 91), v0: share-partitions restarted at the given start offsets (their
in-flight state dropped; the share coordinator initializes them at the next state epoch). The group must
have no members (NON_EMPTY_GROUP); Alter on the group; UNKNOWN_TOPIC_OR_PARTITION per unknown partition."""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import ALTER
from ._share_admin import ZERO_UUID, checked_empty_group, named_topics


@handler(api_key=91, min_version=0, max_version=0)
async def alter_share_group_offsets(ctx: RequestContext, req: m.AlterShareGroupOffsetsRequest
                                    ) -> m.AlterShareGroupOffsetsResponse:
    msg = m.AlterShareGroupOffsetsResponse
    svc, refused = checked_empty_group(ctx, msg, req.group_id, ALTER)
    if svc is None:
        return refused
    out = []
    for t, info in named_topics(ctx, req.topics):
        parts = []
        for p in t.partitions or []:
            err, etext = E.NONE, None
            if info is None or not 0 <= p.partition_index < int(info.num_partitions):
                err = E.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                err, etext = E.INVALID_REQUEST, "The start offset must not be negative."
            else:
                try:
                    await svc.reset_offsets(req.group_id, t.topic_name, p.partition_index, p.start_offset)
                except KafkaError as e:
                    err, etext = e.code, str(e)
            parts.append(msg.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                     error_code=err, error_message=etext))
        out.append(msg.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=ZERO_UUID if info is None else info.topic_id, partitions=parts))
    return msg.new(throttle_time_ms=0, error_code=E.NONE, responses=out)
