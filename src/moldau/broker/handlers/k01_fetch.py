"""Fetch (key 1), v0-18.

* Long poll: the answer is computed; while it holds fewer than min_bytes, no partition has an error and
  max_wait_ms has not passed, the request waits on a future woken by appends to any requested partition
  (never a sleep loop), then recomputes.
* Limits (KIP-74): partitions are read in request order, each up to min(partition_max_bytes, what is left of
  max_bytes (v3+)); the first batch of the first partition that returns data comes whole even when larger than
  both limits, so a consumer always progresses. A fetch offset inside a batch returns that whole batch (the
  client skips the records before its offset).
* Offsets outside [log start, log end]: OFFSET_OUT_OF_RANGE. Offsets between the high watermark and the log
  end: empty. read_committed (v4+) reads up to the last stable offset (the first offset of the oldest
  ongoing transaction, or the high watermark) and gets the aborted transactions (producer id, first offset)
  overlapping the returned range, from the segments' .txnindex (read_uncommitted: null).
* Errors: UNKNOWN_TOPIC_OR_PARTITION; UNKNOWN_TOPIC_ID (v13+, topics by id); FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH when current_leader_epoch (v9+) is older / newer than the partition's.
* Fetch sessions (KIP-227, v7+): epoch -1 = sessionless full fetch (closes session_id if given); epoch 0 =
  full fetch that opens a new session when it names partitions; epoch > 0 = incremental fetch: the request's
  partitions are added/updated, forgotten_topics_data removed, and the answer carries only partitions with
  records or a changed high watermark / last stable offset / log start offset, or an error. Unknown session:
  FETCH_SESSION_ID_NOT_FOUND; wrong epoch: INVALID_FETCH_SESSION_EPOCH; switching between topic names and ids
  inside a session: FETCH_SESSION_TOPIC_ID_ERROR.
* v0-3 (message format 0/1 clients): v2 batches are down-converted (magic 0 for v0-1, magic 1 for v2-3);
  topics with message.downconversion.enable=false answer UNSUPPORTED_VERSION instead, as Kafka.
* Records go out as the log's chunks (a list), which the encoder writes without copying; v4+ answers on a
  connection that can send files (plaintext, ``Connection.sendfile_ok``) get them as ``FileRegion``s of the
  segment files, which the connection sends with ``os.sendfile`` (zero-copy fetch).
* Follower fetches (replica_id >= 0; v15+ replica_state.replica_id) need ClusterAction on the cluster (not
  Read on the topics; otherwise TOPIC_AUTHORIZATION_FAILED on every partition, as Kafka) and go to the
  replica manager with the replica id: in a cluster the leader reads up to its log end offset for them and
  records the follower's position (docs/cluster.md).
* Fetch from the closest replica (KIP-392, a cluster with replica.selector.class): v11+ consumers with a
  rack_id may get preferred_read_replica (the in-sync follower in their rack) from the leader, with no records
  (the answer does not wait); a follower serves v11+ consumers up to its own high watermark (older versions:
  NOT_LEADER_OR_FOLLOWER). Otherwise preferred_read_replica is -1.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.constants import INT32_MAX
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..replica_manager import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionError,
    Partition,
    ReadInfo,
)
from ..security.authorizer import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC, allowed

log = logging.getLogger(__name__)



class _Item:
    """One partition of this fetch."""

    __slots__ = ("topic", "topic_id", "index", "offset", "max_bytes", "leader_epoch", "partition", "error",
                 "cached", "info", "preferred")

    def __init__(self, topic: str | None, topic_id: Any, index: int, offset: int, max_bytes: int,
                 leader_epoch: int, cached: CachedPartition | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.offset = offset
        self.max_bytes = max_bytes
        self.leader_epoch = leader_epoch
        self.partition: Partition | None = None
        self.error = ErrorCode.NONE
        self.cached = cached
        self.info: ReadInfo | None = None
        self.preferred = -1  # preferred_read_replica (KIP-392)


def _resolve(ctx: RequestContext, items: list[_Item], by_id: bool, follower: bool = False) -> None:
    store = ctx.services.metadata
    rm = ctx.services.replica_manager
    if follower and not allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        for it in items:  # a follower's fetch needs ClusterAction, not Read (Kafka: every partition refused)
            it.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if by_id and it.topic is None:
                t = store.get_by_id(it.topic_id)
                it.topic = t.name if t is not None else None
        return
    for it in items:
        if by_id:
            t = store.get_by_id(it.topic_id)
            if t is None:
                it.error = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            it.topic = t.name
            if not allowed(ctx, READ, TOPIC, t.name):
                it.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
        else:
            if it.topic is not None and not allowed(ctx, READ, TOPIC, it.topic):
                it.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # checked before existence, as Kafka
                continue
            t = store.get(it.topic) if it.topic is not None else None
            if t is None:
                it.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            it.topic_id = t.topic_id
        p = rm.get_partition(t.name, it.index)
        if p is None:
            it.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if it.leader_epoch >= 0 and it.leader_epoch != p.leader_epoch:
            it.error = (ErrorCode.FENCED_LEADER_EPOCH if it.leader_epoch < p.leader_epoch
                        else ErrorCode.UNKNOWN_LEADER_EPOCH)
            continue
        it.partition = p


def _read_all(rm: Any, items: list[_Item], max_bytes: int, isolation: int, replica_id: int = -1,
              follower_ok: bool = False, regions: bool = False) -> tuple[int, bool]:
    remaining = max_bytes
    first = True
    total = 0
    has_error = False
    for it in items:
        p = it.partition
        if p is None or p.deleted:
            if p is not None:
                it.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            it.info = None
            has_error = True
            continue
        if it.preferred >= 0:  # no records: the consumer goes to the preferred replica
            plog = p.log
            it.info = ReadInfo(ErrorCode.NONE, None, 0, plog.high_watermark, plog.last_stable_offset,
                               plog.log_start_offset)
            continue
        limit = min(it.max_bytes, remaining)
        info = rm.read(p, it.offset, limit, min_one=first, isolation_level=isolation, replica_id=replica_id,
                       follower_ok=follower_ok, regions=regions)
        it.info = info
        if info.error:
            has_error = True
            continue
        if info.size:
            first = False
            remaining = max(0, remaining - info.size)
            total += info.size
    return total, has_error


@handler(api_key=1, min_version=0, max_version=18)
async def fetch(ctx: RequestContext, req: m.FetchRequest) -> m.FetchResponse:
    svc = ctx.services
    rm = svc.replica_manager
    v = ctx.version
    msg = m.FetchResponse
    by_id = v >= 13
    isolation = req.isolation_level if v >= 4 else 0
    max_bytes = req.max_bytes if v >= 3 else INT32_MAX
    if max_bytes <= 0:
        max_bytes = INT32_MAX if v < 3 else 0
    cache = rm.fetch_sessions
    replica_id = (req.replica_state.replica_id if v >= 15 and req.replica_state is not None
                  else req.replica_id if v < 15 else -1)

    # ------------------------------------------------------------------ session handling
    session = None
    session_id_out = 0
    incremental = False
    new_session_wanted = False
    if v >= 7:
        sid, epoch = req.session_id, req.session_epoch
        if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
            if sid != 0:
                cache.remove(sid)
            new_session_wanted = epoch == INITIAL_EPOCH
        else:
            try:
                session = cache.get(sid, epoch)
                if session.uses_topic_ids != by_id:
                    raise FetchSessionError(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
            except FetchSessionError as e:
                return msg.new(throttle_time_ms=0, error_code=e.code, session_id=0, responses=[])
            incremental = True

    items: list[_Item] = []
    if incremental:
        assert session is not None
        parts = session.partitions
        for ft in req.topics:
            tkey = ft.topic_id if by_id else ft.topic
            for fp in ft.partitions:
                key = (tkey, fp.partition)
                cp = parts.get(key)
                if cp is None:
                    parts[key] = CachedPartition(None if by_id else ft.topic, ft.topic_id if by_id else None,
                                                 fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                                                 fp.current_leader_epoch if v >= 9 else -1)
                else:
                    cp.fetch_offset = fp.fetch_offset
                    cp.max_bytes = fp.partition_max_bytes
                    cp.current_leader_epoch = fp.current_leader_epoch if v >= 9 else -1
        for fg in req.forgotten_topics_data:
            tkey = fg.topic_id if by_id else fg.topic
            for idx in fg.partitions:
                parts.pop((tkey, idx), None)
        cache.next_epoch(session)
        session_id_out = session.session_id
        for cp in parts.values():
            items.append(_Item(cp.topic, cp.topic_id, cp.partition_index, cp.fetch_offset, cp.max_bytes,
                               cp.current_leader_epoch, cp))
    else:
        for ft in req.topics:
            for fp in ft.partitions:
                items.append(_Item(None if by_id else ft.topic, ft.topic_id if by_id else None, fp.partition,
                                   fp.fetch_offset, fp.partition_max_bytes,
                                   fp.current_leader_epoch if v >= 9 else -1))
        if new_session_wanted and items:
            cps = [CachedPartition(it.topic, it.topic_id, it.index, it.offset, it.max_bytes, it.leader_epoch)
                   for it in items]
            session = cache.create(by_id, cps)
            if session is not None:
                session_id_out = session.session_id
                for it, cp in zip(items, cps):
                    it.cached = cp

    _resolve(ctx, items, by_id, follower=replica_id >= 0)
    follower_ok = replica_id < 0 and v >= 11  # KIP-392: consumers with client metadata may use followers
    preferred = False
    if follower_ok and req.rack_id:
        for it in items:
            if it.partition is not None and not it.error:
                it.preferred = rm.preferred_read_replica(it.partition, req.rack_id, it.offset)
                preferred = preferred or it.preferred >= 0

    # ------------------------------------------------------------------ read, long poll
    # zero-copy: v4+ answers (no down-conversion) on a connection that can sendfile get the records as
    # regions of the segment files, which the connection sends with os.sendfile
    regions = v >= 4 and ctx.connection.sendfile_ok
    total, has_error = _read_all(rm, items, max_bytes, isolation, replica_id, follower_ok, regions)
    max_wait = req.max_wait_ms
    if max_wait > 0 and total < req.min_bytes and not has_error and items and not preferred:
        deadline = time.monotonic() + max_wait / 1000.0
        waitable = [it.partition for it in items if it.partition is not None]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or ctx.connection.closed or rm.shutting_down:
                break
            await rm.wait_for_data(waitable, remaining)
            total, has_error = _read_all(rm, items, max_bytes, isolation, replica_id, follower_ok, regions)
            if total >= req.min_bytes or has_error:
                break

    # ------------------------------------------------------------------ response
    magic = 0 if v <= 1 else (1 if v <= 3 else 2)
    PD = msg.PartitionData
    AbortedTxn = msg.AbortedTransaction
    topics_out: list[Any] = []
    current = None
    current_key: Any = object()
    for it in items:
        info = it.info
        error = it.error if it.error else (info.error if info is not None
                                           else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if error:
            hw = lso = lstart = -1
            if info is not None and error not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  ErrorCode.UNKNOWN_TOPIC_ID):
                hw, lso, lstart = info.high_watermark, info.last_stable_offset, info.log_start_offset
            records: Any = b""
            aborted = None
        else:
            assert info is not None
            hw, lso, lstart = info.high_watermark, info.last_stable_offset, info.log_start_offset
            records = info.records if info.records is not None else b""
            aborted = None
            if isolation == 1:  # the log's (producer_id, first_offset) pairs -> AbortedTransaction
                aborted = [AbortedTxn(producer_id=pid, first_offset=first)
                           for pid, first in (info.aborted_transactions or ())]
            if magic < 2 and info.size:
                p = it.partition
                if p is not None and not p.config.message_downconversion_enable:
                    error = ErrorCode.UNSUPPORTED_VERSION  # Kafka: message.downconversion.enable=false
                    records = b""
                else:
                    records = _down_convert(records, magic)
        if it.cached is not None:
            respond = it.cached.must_respond(error, bool(info is not None and info.size), hw, lso, lstart)
            if incremental and not respond and it.preferred < 0:
                continue
        pd = PD(partition_index=it.index, error_code=error, high_watermark=hw, last_stable_offset=lso,
                log_start_offset=lstart, aborted_transactions=aborted, preferred_read_replica=it.preferred,
                records=records)
        topic_key = it.topic_id if by_id else it.topic
        if current is None or topic_key != current_key:
            current = msg.FetchableTopicResponse(partitions=[])
            if by_id:
                current.topic_id = it.topic_id
            else:
                assert it.topic is not None  # requests by name carry names
                current.topic = it.topic
            topics_out.append(current)
            current_key = topic_key
        current.partitions.append(pd)

    if session is not None:
        # round robin (as Kafka): partitions that returned records go to the end of the session's order, so
        # a response limit cannot starve the partitions behind them
        parts = session.partitions
        for it in items:
            if it.cached is not None and it.info is not None and it.info.size:
                session_key = (it.topic_id if by_id else it.topic, it.index)
                if session_key in parts:
                    parts.move_to_end(session_key)

    return msg.new(throttle_time_ms=0, error_code=0, session_id=session_id_out, responses=topics_out)


def _down_convert(chunks: list[Any], magic: int) -> bytes:
    from moldau.protocol.records import v2_to_legacy

    return v2_to_legacy(b"".join(chunks), magic)
