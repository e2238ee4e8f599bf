"""AddOffsetsToTxn (key 25), v0-4.

Adds the group's ``__consumer_offsets`` partition (abs(hash(group)) % partitions, as the group coordinator
places it) to the producer's transaction, so the commit/abort marker reaches the transactional offset commits
(TxnOffsetCommit) of that group. Errors: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Write on the transactional
id), GROUP_AUTHORIZATION_FAILED (Read on the group), COORDINATOR_NOT_AVAILABLE without a group coordinator,
then the transaction coordinator's answer as for AddPartitionsToTxn (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
below v2, KIP-588).
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import ensure_offsets_topic
from ..metadata import OFFSETS_TOPIC
from ..registry import handler
from ..security.authorizer import GROUP, READ, TRANSACTIONAL_ID, WRITE, allowed

log = logging.getLogger(__name__)


@handler(api_key=25, min_version=0, max_version=4)
async def add_offsets_to_txn(ctx: RequestContext, req: m.AddOffsetsToTxnRequest) -> m.AddOffsetsToTxnResponse:
    resp = m.AddOffsetsToTxnResponse.new(throttle_time_ms=0, error_code=0)
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        resp.error_code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return resp
    if not allowed(ctx, READ, GROUP, req.group_id):
        resp.error_code = E.GROUP_AUTHORIZATION_FAILED
        return resp
    tc = ctx.services.transaction_coordinator
    gc = ctx.services.group_coordinator
    if tc is None or gc is None:
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        return resp
    try:
        ensure_offsets_topic(gc)
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - metadata store refused
        log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        return resp
    part = (OFFSETS_TOPIC, gc.partition_for(req.group_id))
    error = await tc.handle_add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [part])
    if error == E.PRODUCER_FENCED and ctx.version < 2:
        error = E.INVALID_PRODUCER_EPOCH
    if error == E.NONE:
        tc.note_group(req.transactional_id, req.group_id)
    resp.error_code = error
    return resp
