"""DeleteShareGroupOffsets (key 92), v0: a share group's state for whole topics deleted (tombstones in
``__share_group_state``; the next fetch starts over from share.auto.offset.reset). The group must have no
members (NON_EMPTY_GROUP); Delete on the group; UNKNOWN_TOPIC_OR_PARTITION per unknown topic."""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import DELETE
from ._share_admin import ZERO_UUID, checked_empty_group, named_topics


@handler(api_key=92, min_version=0, max_version=0)
async def delete_share_group_offsets(ctx: RequestContext, req: m.DeleteShareGroupOffsetsRequest
                                     ) -> m.DeleteShareGroupOffsetsResponse:
    msg = m.DeleteShareGroupOffsetsResponse
    svc, refused = checked_empty_group(ctx, msg, req.group_id, DELETE)
    if svc is None:
        return refused
    out = []
    for t, info in named_topics(ctx, req.topics):
        err, etext = E.NONE, None
        if info is None:
            err = E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                await svc.delete_topic_state(req.group_id, t.topic_name)
            except KafkaError as e:
                err, etext = e.code, str(e)
        out.append(msg.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=ZERO_UUID if info is None else info.topic_id, error_code=err,
            error_message=etext))
    return msg.new(throttle_time_ms=0, error_code=E.NONE, responses=out)
