"""ShareFetch (key 78), v1-2 (Kafka 4.2): records acquired for a member of a share group (KIP-932).

* Share sessions: epoch 0 opens one (replacing the member's previous one; SHARE_SESSION_LIMIT_REACHED beyond
  ``group.share.max.share.sessions``), then each request carries the next epoch (INVALID_SHARE_SESSION_EPOCH,
  SHARE_SESSION_NOT_FOUND); the session keeps the partitions named so far, ForgottenTopicsData removes some;
  epoch -1 only acknowledges and closes it (the member's acquired records go back).
* Acknowledgements in the request are applied first (AcknowledgeErrorCode per partition); then records are
  acquired from the session's partitions, released ones first, up to MaxRecords (v1+) and MaxBytes; in the
  batch-optimized mode (v1, and v2 ShareAcquireMode 0) a new batch is acquired to its end even past
  MaxRecords, in the record-limit mode (v2, 1) MaxRecords is kept exactly; with nothing to give the request
  waits up to MaxWaitMs for new records or released / expired ones. v2 IsRenewAck: acknowledgements only
  (Renew), nothing acquired.
* Response: whole batches holding the acquired offsets and AcquiredRecords (first, last, delivery count);
  AcquisitionLockTimeoutMs is the group's ``share.record.lock.duration.ms``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError

from ..context import RequestContext
from ..registry import handler
from ._share import acknowledge, check_request, session_for, topic_name

DEFAULT_MAX_RECORDS = 500
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (v2); v1 acquires batch-optimized
WAIT_SLICE_S = 1.0  # a long poll looks at its connection this often (a closed one ends it)


@handler(api_key=78, min_version=1, max_version=2)
async def share_fetch(ctx: RequestContext, req: m.ShareFetchRequest) -> m.ShareFetchResponse:
    msg = m.ShareFetchResponse
    code, text = check_request(ctx, req.group_id, req.member_id)
    if code:
        return msg.new(error_code=code, error_message=text, responses=[], node_endpoints=[])
    svc = ctx.services.share
    assert svc is not None and req.group_id and req.member_id
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    try:
        session = session_for(ctx, group, member, epoch, may_open=True)
    except KafkaError as e:
        return msg.new(error_code=e.code, error_message=str(e), responses=[], node_endpoints=[])
    results: dict[tuple[Any, int], dict[str, Any]] = {}
    names: dict[Any, str | None] = {}
    for t in req.topics or []:
        name, terr = topic_name(ctx, t.topic_id)
        names[t.topic_id] = name
        for p in t.partitions or []:
            key = (t.topic_id, p.partition_index)
            r = results.setdefault(key, {"error": terr, "ack": E.NONE})
            if epoch != -1 and key not in session.partitions:
                session.partitions.append(key)
            if p.acknowledgement_batches:
                if name is None:
                    r["ack"] = terr
                else:
                    r["ack"] = await acknowledge(
                        ctx, group, member, name, p.partition_index, p.acknowledgement_batches
                    )
    for f in req.forgotten_topics_data or []:
        for idx in f.partitions or []:
            if (f.topic_id, idx) in session.partitions:
                session.partitions.remove((f.topic_id, idx))
    if epoch == -1:
        svc.close_session(group, member)
    else:
        session.epoch += 1
    acquired: dict[tuple[Any, int], Any] = {}
    renew_only = ctx.version >= 2 and req.is_renew_ack
    if epoch != -1 and not renew_only:
        max_records = req.max_records if req.max_records and req.max_records > 0 else DEFAULT_MAX_RECORDS
        deadline = asyncio.get_running_loop().time() + max(0, req.max_wait_ms) / 1000
        while True:
            await _acquire(
                ctx,
                group,
                member,
                session.partitions,
                names,
                results,
                acquired,
                max_records,
                max(req.max_bytes, 1),
                not (ctx.version >= 2 and req.share_acquire_mode == RECORD_LIMIT),
            )
            left = deadline - asyncio.get_running_loop().time()
            if acquired or left <= 0 or ctx.connection.closed or ctx.services.replica_manager.shutting_down:
                break
            if not await _wait(ctx, session.partitions, names, min(left, WAIT_SLICE_S)):
                break  # nothing to wait for: no partition of the session exists here
    out = []
    by_topic: dict[Any, list[Any]] = {}
    for key, r in results.items():
        a = acquired.get(key)
        if a is None and r["error"] == E.NONE and key not in _acked(req, key):
            continue
        by_topic.setdefault(key[0], []).append(_partition(msg, key[1], r, a))
    for key, a in acquired.items():
        if key not in results:
            by_topic.setdefault(key[0], []).append(
                _partition(msg, key[1], {"error": E.NONE, "ack": E.NONE}, a)
            )
    for tid, parts in by_topic.items():
        out.append(msg.ShareFetchableTopicResponse(topic_id=tid, partitions=parts))
    return msg.new(
        error_code=E.NONE,
        acquisition_lock_timeout_ms=svc.lock_duration_ms(group),
        responses=out,
        node_endpoints=[],
    )


def _acked(req: m.ShareFetchRequest, key: tuple[Any, int]) -> set[tuple[Any, int]]:
    for t in req.topics or []:
        for p in t.partitions or []:
            if (t.topic_id, p.partition_index) == key and p.acknowledgement_batches:
                return {key}
    return set()


def _partition(msg: Any, index: int, r: dict[str, Any], a: Any) -> Any:
    records = b""  # librdkafka refuses a null record set
    acquired = []
    if a is not None:
        records = b"".join(bytes(c) for c in a.chunks)
        acquired = [
            msg.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c) for f, la, c in a.ranges
        ]
    return msg.PartitionData(
        partition_index=index,
        error_code=r["error"],
        acknowledge_error_code=r["ack"],
        current_leader=msg.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
        records=records,
        acquired_records=acquired,
    )


async def _acquire(
    ctx: RequestContext,
    group: str,
    member: str,
    partitions: list[tuple[Any, int]],
    names: dict[Any, str | None],
    results: dict[tuple[Any, int], dict[str, Any]],
    acquired: dict[tuple[Any, int], Any],
    max_records: int,
    max_bytes: int,
    whole_batches: bool,
) -> None:
    svc = ctx.services.share
    assert svc is not None
    budget = max_records
    for key in list(partitions):
        if budget <= 0:
            break
        tid, idx = key
        name = names.get(tid)
        if name is None:
            name, err = topic_name(ctx, tid)
            names[tid] = name
            if name is None:
                results.setdefault(key, {"error": err, "ack": E.NONE})
                continue
        try:
            a = await svc.acquire(group, member, name, idx, budget, max_bytes, whole_batches)
        except KafkaError as e:
            results.setdefault(key, {"error": e.code, "ack": E.NONE})["error"] = e.code
            continue
        if key in results:  # an error of an earlier pass of this long poll (the share coordinator was not
            results[key]["error"] = E.NONE  # ready yet) is over: records acquired now reach the member
        if a.ranges:
            acquired[key] = a
            budget -= a.count


async def _wait(
    ctx: RequestContext, partitions: list[tuple[Any, int]], names: dict[Any, str | None], timeout: float
) -> bool:
    """Wait up to ``timeout`` for new records in the session's partitions or records given back; False at
    once when none of its partitions exists here."""
    svc = ctx.services.share
    assert svc is not None
    rm = ctx.services.replica_manager
    parts = [p for tid, idx in partitions if (n := names.get(tid)) and (p := rm.get_partition(n, idx))]
    if not parts:
        return False
    waits: list[asyncio.Future[Any]] = [
        asyncio.ensure_future(svc.changed.wait()),
        asyncio.ensure_future(rm.wait_for_data(parts, timeout)),
    ]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return True
