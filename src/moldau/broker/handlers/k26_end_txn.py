"""EndTxn (key 26), v0-5.

Commits or aborts the producer's transaction: PrepareCommit/PrepareAbort in ``__transaction_state``,
COMMIT/ABORT markers on every partition of the transaction (and its transactional offset commits),
CompleteCommit / CompleteAbort; moldau answers once all of that is written (see
moldau.broker.txn.coordinator).

* Errors: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Write on the transactional id), INVALID_PRODUCER_ID_MAPPING,
  PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2, KIP-588), INVALID_TXN_STATE (e.g. commit after an abort,
  or no transaction), CONCURRENT_TRANSACTIONS (markers of the previous transaction still being retried). A
  retried commit of a completed commit (or abort of an abort) answers NONE.
* v5 is transactions V2 (KIP-890 part 2, as Kafka decides by the version): the epoch is bumped by every end
  and the response carries the producer id and epoch to continue with; below v5 those fields are absent.
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import TRANSACTIONAL_ID, WRITE, allowed

log = logging.getLogger(__name__)


@handler(api_key=26, min_version=0, max_version=5)
async def end_txn(ctx: RequestContext, req: m.EndTxnRequest) -> m.EndTxnResponse:
    resp = m.EndTxnResponse.new(throttle_time_ms=0, error_code=0, producer_id=-1, producer_epoch=-1)
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        resp.error_code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return resp
    tc = ctx.services.transaction_coordinator
    if tc is None:
        resp.error_code = E.COORDINATOR_NOT_AVAILABLE
        return resp
    error, pid, epoch = await tc.handle_end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                                bool(req.committed), tv2=ctx.version >= 5)
    log.debug("EndTxn v%d %s pid %d epoch %d %s: %d", ctx.version, req.transactional_id, req.producer_id,
              req.producer_epoch, "commit" if req.committed else "abort", error)
    if error == E.PRODUCER_FENCED and ctx.version < 2:
        error = E.INVALID_PRODUCER_EPOCH
    resp.error_code = error
    if error == E.NONE:
        resp.producer_id, resp.producer_epoch = pid, epoch
    return resp
