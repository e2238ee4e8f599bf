"""TxnOffsetCommit (key 28), v0-5.

Offsets committed inside a transaction (send_offsets_to_transaction): written to ``__consumer_offsets`` as a
transactional batch of the producer (so the partition's last stable offset waits for the marker and a restart
finds them), visible to OffsetFetch only after the COMMIT marker, dropped by an ABORT.

* Checks, Kafka's order: Write on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the
  group (GROUP_AUTHORIZATION_FAILED), Read on each topic (TOPIC_AUTHORIZATION_FAILED), unknown topics or
  partitions (UNKNOWN_TOPIC_OR_PARTITION).
* The producer's transaction (KIP-890 part 1 verification): INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
  (INVALID_PRODUCER_EPOCH below v3), INVALID_TXN_STATE when the group's offsets partition was not added with
  AddOffsetsToTxn (v5, transactions V2, adds it implicitly, as Kafka does; in a cluster where the
  transaction's coordinator is another broker, with an inter-broker AddPartitionsToTxn v5 to it; below v5 a
  remote transaction is not checked).
* v3+ (KIP-447) carry the consumer's generation, member id and group instance id: checked as for OffsetCommit
  (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID) when given; v0-2 and generation -1 are not.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E

from ..context import RequestContext
from ..groups.api import coordinator_of, ensure_offsets_topic, topic_partitions
from ..groups.group import CommittedOffset
from ..metadata import OFFSETS_TOPIC
from ..registry import handler
from ..security.authorizer import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, allowed

log = logging.getLogger(__name__)


@handler(api_key=28, min_version=0, max_version=5)
async def txn_offset_commit(ctx: RequestContext, req: m.TxnOffsetCommitRequest) -> m.TxnOffsetCommitResponse:
    msg = m.TxnOffsetCommitResponse
    v = ctx.version
    now = ctx.services.clock.time_ms()
    gc = coordinator_of(ctx)
    tc = ctx.services.transaction_coordinator

    top_error = E.NONE
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        top_error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, READ, GROUP, req.group_id):
        top_error = E.GROUP_AUTHORIZATION_FAILED
    elif gc is None or tc is None:
        top_error = E.COORDINATOR_NOT_AVAILABLE

    errors: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for t in req.topics:
        count = topic_partitions(ctx, t.name)
        topic_ok = allowed(ctx, READ, TOPIC, t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if top_error != E.NONE:
                errors[tp] = top_error
            elif not topic_ok:
                errors[tp] = E.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= p.partition_index < count:
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if v >= 2 else -1,
                    metadata=p.committed_metadata if p.committed_metadata is not None else "",
                    commit_timestamp=now,
                )

    if offsets:
        assert gc is not None and tc is not None  # offsets are collected only when both coordinators run
        error = await _check_transaction(ctx, gc, tc, req, v)
        if error != E.NONE:
            errors.update({tp: error for tp in offsets})
        else:
            member_id = req.member_id if v >= 3 else ""
            generation = req.generation_id if v >= 3 else -1
            instance_id = req.group_instance_id if v >= 3 else None
            results = await gc.offsets.commit_transactional_offsets(
                req.group_id, req.producer_id, member_id, generation, instance_id, offsets, v,
                producer_epoch=req.producer_epoch)
            errors.update(results)
            if any(code == E.NONE for code in results.values()):
                tc.note_group(req.transactional_id, req.group_id)

    log.debug("TxnOffsetCommit v%d %s group %s producer %d/%d generation %d member %s: %s", v,
              req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
              req.generation_id if v >= 3 else -1, req.member_id if v >= 3 else "",
              sorted(set(errors.values())))
    topics_out = []
    for t in req.topics:
        parts = [msg.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                      error_code=errors.get((t.name, p.partition_index), 0))
                 for p in t.partitions]
        topics_out.append(msg.TxnOffsetCommitResponseTopic(name=t.name, partitions=parts))
    return msg.new(throttle_time_ms=0, topics=topics_out)


async def _check_transaction(ctx: RequestContext, gc: Any, tc: Any, req: Any, v: int) -> int:
    try:
        ensure_offsets_topic(gc)
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - metadata store refused
        log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
        return E.COORDINATOR_NOT_AVAILABLE
    part = (OFFSETS_TOPIC, gc.partition_for(req.group_id))
    if v >= 5 and not tc.owns(req.transactional_id):  # a cluster: the transaction's coordinator is elsewhere
        error = await _add_at_remote_coordinator(ctx, tc, req, part)
    elif v >= 5:  # transactions V2: the offsets partition joins the transaction implicitly
        error = await tc.handle_add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                               [part])
    else:
        error = tc.check_txn_offset_commit(req.transactional_id, req.producer_id, req.producer_epoch, part)
    if error == E.PRODUCER_FENCED and v < 3:
        error = E.INVALID_PRODUCER_EPOCH
    return error


async def _add_at_remote_coordinator(ctx: RequestContext, tc: Any, req: Any, part: tuple[str, int]) -> int:
    """Transactions V2 in a cluster: the group's offsets partition joins the transaction at the transaction's
    coordinator on another broker, with the inter-broker AddPartitionsToTxn v5 (Kafka's
    AddPartitionsToTxnManager), so its commit writes the marker that makes the offsets visible. Without a
    reachable coordinator: NOT_COORDINATOR (the client looks the coordinators up again and retries)."""
    from moldau.client.conn import Connection

    from ..metadata import TRANSACTION_STATE_TOPIC

    store = ctx.services.metadata
    view = store.partition_state(TRANSACTION_STATE_TOPIC, tc.partition_for(req.transactional_id))
    name = ctx.services.cluster.listener_name
    leader = view.leader if view is not None else None
    addr = next(((h, p) for node, h, p, _rack in store.live_brokers(name) if node == leader), None)
    if addr is None:
        return E.NOT_COORDINATOR
    host, port = addr
    Req = m.AddPartitionsToTxnRequest
    add = Req.new(transactions=[Req.AddPartitionsToTxnTransaction(
        transactional_id=req.transactional_id, producer_id=req.producer_id, producer_epoch=req.producer_epoch,
        verify_only=False, topics=[Req.AddPartitionsToTxnTopic(name=part[0], partitions=[part[1]])])])
    try:
        conn = await Connection.open(host, port, client_id=f"txn-offsets-{ctx.services.node_id}")
        try:
            resp = await conn.send(24, add, version=5, timeout_ms=30000)
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - answered with a retriable error
        log.info("AddPartitionsToTxn to broker %d failed: %s", view.leader, exc)
        return E.NOT_COORDINATOR
    if resp.error_code:
        return resp.error_code
    codes = [r.partition_error_code for res in resp.results_by_transaction for t in res.topic_results
             for r in t.results_by_partition]
    return next((c for c in codes if c), E.NONE)
