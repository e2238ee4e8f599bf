"""ShareAcknowledge (key 79), v1-2 (Kafka 4.2): acknowledgements of acquired records in a share session.

* The session must exist (SHARE_SESSION_NOT_FOUND) and the epoch be its next one
  (INVALID_SHARE_SESSION_EPOCH);
  epoch -1 acknowledges and closes the session (the member's records still acquired go back). Epoch 0 cannot
  open one (INVALID_SHARE_SESSION_EPOCH).
* Per partition: Accept (1), Release (2), Reject (3), Gap (0), and v2 Renew (4, restarts the lock); an offset
  not acquired by the member answers INVALID_RECORD_STATE (the partition's acknowledgement is not applied).
* v2: AcquisitionLockTimeoutMs. Semantics: moldau.broker.share.partition.
"""

from __future__ import annotations

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..registry import handler
from ._share import acknowledge, check_request, session_for, topic_name


@handler(api_key=79, min_version=1, max_version=2)
async def share_acknowledge(
    ctx: RequestContext, req: m.ShareAcknowledgeRequest
) -> m.ShareAcknowledgeResponse:
    msg = m.ShareAcknowledgeResponse
    code, text = check_request(ctx, req.group_id, req.member_id)
    if code:
        return msg.new(error_code=code, error_message=text, responses=[], node_endpoints=[])
    svc = ctx.services.share
    assert svc is not None and req.group_id and req.member_id
    epoch = req.share_session_epoch
    try:
        session_for(ctx, req.group_id, req.member_id, epoch, may_open=False)
    except KafkaError as e:
        return msg.new(error_code=e.code, error_message=str(e), responses=[], node_endpoints=[])
    topics = []
    for t in req.topics or []:
        name, terr = topic_name(ctx, t.topic_id)
        parts = []
        for p in t.partitions or []:
            err = (
                terr
                if name is None
                else await acknowledge(
                    ctx, req.group_id, req.member_id, name, p.partition_index, p.acknowledgement_batches
                )
            )
            parts.append(
                msg.PartitionData(
                    partition_index=p.partition_index,
                    error_code=err,
                    current_leader=msg.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                )
            )
        topics.append(msg.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if epoch == -1:
        svc.close_session(req.group_id, req.member_id)
    else:
        svc.sessions.get(req.group_id, req.member_id, epoch).epoch += 1
    return msg.new(
        error_code=E.NONE,
        acquisition_lock_timeout_ms=svc.lock_duration_ms(req.group_id),
        responses=topics,
        node_endpoints=[],
    )
