"""InitProducerId (key 22), v0-6.

* Without a transactional id (idempotent producers; aiokafka sends v0, kafka-python 3 and the Java client by
  default too): a fresh producer id from the broker's ProducerIdManager (ids are handed out from blocks
  persisted in the data directory, so they are never reused after a restart), epoch 0. As in Kafka, a v3+
  request that names its current producer id/epoch (KIP-360) also gets a fresh id.
* transaction_timeout_ms above ``transaction.max.timeout.ms``: INVALID_TRANSACTION_TIMEOUT (50), like Kafka.
* With a transactional id: handed to ``svc.transaction_coordinator`` (moldau.broker.txn: epoch bumps,
  fencing, KIP-360 bumps with the current producer id/epoch of v3+, INVALID_TRANSACTION_TIMEOUT;
  PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4, KIP-588). Without a coordinator the answer
  is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): every client treats it as fatal and reports it at once
  instead of retrying for minutes as it would with the retriable COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR;
  the broker logs a line saying transactions are not supported.
* v6 fields (2PC, ongoing txn producer id/epoch) answered with -1.
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import TRANSACTIONAL_ID, WRITE, allowed, allowed_idempotent_write

log = logging.getLogger(__name__)



@handler(api_key=22, min_version=0, max_version=6)
async def init_producer_id(ctx: RequestContext, req: m.InitProducerIdRequest) -> m.InitProducerIdResponse:
    svc = ctx.services
    resp = m.InitProducerIdResponse.new(throttle_time_ms=0, error_code=0, producer_id=-1, producer_epoch=-1,
                                        ongoing_txn_producer_id=-1, ongoing_txn_producer_epoch=-1)
    if req.transactional_id is not None and not allowed(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return resp
    if req.transactional_id is None and not allowed_idempotent_write(ctx):
        # IdempotentWrite on the cluster or Write on a topic
        resp.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return resp
    if req.transactional_id is not None:
        coordinator = svc.transaction_coordinator
        if coordinator is not None:
            pid, epoch = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
            error, pid, epoch = await coordinator.handle_init_producer_id(
                req.transactional_id, req.transaction_timeout_ms, pid, epoch)
            if error == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
                error = ErrorCode.INVALID_PRODUCER_EPOCH  # KIP-588: older clients do not know PRODUCER_FENCED
            resp.error_code = error
            if error == 0:
                resp.producer_id, resp.producer_epoch = pid, epoch
            return resp
        max_timeout = int(svc.config.get("transaction.max.timeout.ms"))
        if req.transaction_timeout_ms <= 0 or req.transaction_timeout_ms > max_timeout:
            resp.error_code = ErrorCode.INVALID_TRANSACTION_TIMEOUT
            return resp
        log.warning("InitProducerId for transactional id %r from %s refused: transactions are not supported "
                    "by this broker yet", req.transactional_id, ctx.client_id)
        resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return resp
    resp.producer_id = svc.producer_ids.next_id()
    resp.producer_epoch = 0
    return resp
