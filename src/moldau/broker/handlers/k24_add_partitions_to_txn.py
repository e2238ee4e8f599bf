"""AddPartitionsToTxn (key 24), v0-5.

* v0-3 (clients): one transaction (``v3_and_below_*`` fields). Per-partition errors, Kafka's order: Write on
  the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere); Write on each topic
  (TOPIC_AUTHORIZATION_FAILED) and unknown topics/partitions (UNKNOWN_TOPIC_OR_PARTITION), the other
  partitions then OPERATION_NOT_ATTEMPTED; otherwise the coordinator's answer for all of them
  (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, ...). PRODUCER_FENCED is
  INVALID_PRODUCER_EPOCH below v2 (KIP-588).
* v4+ (the batched form brokers use, KIP-890): ClusterAction on the cluster, else a top-level
  CLUSTER_AUTHORIZATION_FAILED. Each transaction either adds its partitions or, with ``verify_only``, reports
  per partition whether it is already in the ongoing transaction (NONE / TRANSACTION_ABORTABLE); an error of
  the whole transaction (fenced, unknown producer id, ...) is reported on each of its partitions.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..registry import handler
from ..security.authorizer import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    allowed,
)

log = logging.getLogger(__name__)


def _partitions(topics: Any) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _results(msg: Any, errors: dict[tuple[str, int], int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            msg.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [msg.AddPartitionsToTxnTopicResult(name=t, results_by_partition=rs) for t, rs in by_topic.items()]


async def _client_form(ctx: RequestContext, tc: Any, txn_id: str, pid: int, epoch: int,
                       parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, txn_id):
        return {tp: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in parts}
    store = ctx.services.metadata
    bad: dict[tuple[str, int], int] = {}
    for topic, p in parts:
        if not allowed(ctx, WRITE, TOPIC, topic):
            bad[(topic, p)] = E.TOPIC_AUTHORIZATION_FAILED
            continue
        info = store.get(topic)
        if info is None or not 0 <= p < info.num_partitions:
            bad[(topic, p)] = E.UNKNOWN_TOPIC_OR_PARTITION
    if bad:
        return {tp: bad.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in parts}
    if tc is None:
        return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in parts}
    error = await tc.handle_add_partitions(txn_id, pid, epoch, parts)
    if error == E.PRODUCER_FENCED and ctx.version < 2:
        error = E.INVALID_PRODUCER_EPOCH
    return {tp: error for tp in parts}


@handler(api_key=24, min_version=0, max_version=5)
async def add_partitions_to_txn(ctx: RequestContext,
                                req: m.AddPartitionsToTxnRequest) -> m.AddPartitionsToTxnResponse:
    msg = m.AddPartitionsToTxnResponse
    tc = ctx.services.transaction_coordinator
    if ctx.version < 4:
        parts = _partitions(req.v3_and_below_topics)
        errors = await _client_form(ctx, tc, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                    req.v3_and_below_producer_epoch, parts)
        log.debug("AddPartitionsToTxn v%d %s: %s", ctx.version, req.v3_and_below_transactional_id, errors)
        return msg.new(throttle_time_ms=0, results_by_topic_v3_and_below=_results(msg, errors))
    if not allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return msg.new(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                       results_by_transaction=[])
    out = []
    for txn in req.transactions:
        parts = _partitions(txn.topics)
        if tc is None:
            errors = {tp: E.COORDINATOR_NOT_AVAILABLE for tp in parts}
        elif not txn.transactional_id:
            errors = {tp: E.INVALID_REQUEST for tp in parts}
        elif txn.verify_only:
            top, per = tc.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, parts)
            errors = per if top == E.NONE else {tp: top for tp in parts}
        else:
            top = await tc.handle_add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                 parts)
            errors = {tp: top for tp in parts}
        out.append(msg.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                topic_results=_results(msg, errors)))
    return msg.new(throttle_time_ms=0, error_code=0, results_by_transaction=out)
