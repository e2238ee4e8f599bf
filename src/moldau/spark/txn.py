"""Kafka transactions for the sink's exactly-once mode: the coordinator requests, over the client's Cluster.

The streaming writers write each task's rows of a micro-batch in one Kafka transaction and leave it open;
the driver commits every task's transaction when Spark commits the micro-batch (``end_transactions``), or
aborts them when Spark aborts it. A transaction is named by its transactional id; the driver finishes it
with EndTxn carrying the producer id and epoch the task got from InitProducerId (what Kafka's own
producers send; the moldau client has no call for ending a transaction another process opened, so this
module speaks the protocol itself, as ``moldau.spark.produce`` does for Produce).

The *batch marker* makes a replayed micro-batch idempotent: inside the same transaction the task commits
the offset ``batch id`` for its transactional id used as a consumer group id (TxnOffsetCommit, key = the
partition 0 of a topic it writes, metadata = JSON naming the query and batch). The marker becomes visible
exactly when the rows do. A task of a replayed batch first calls InitProducerId (which fences and aborts
what an earlier attempt left open), then reads the group's committed offsets (OffsetFetch with
``require_stable``): a marker of the same query with a batch id >= its own means its rows are already
committed, and the task writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moldau.client.cluster import Cluster
from moldau.client.errors import Codes, KafkaConnectionError, KafkaTimeoutError, broker_error
from moldau.protocol import messages as m

log = logging.getLogger(__name__)

__all__ = [
    "BatchMarker",
    "TransactionError",
    "TxnChannel",
    "TxnHandle",
    "committed_markers",
    "end_transactions_async",
    "find_coordinator",
    "missing_transaction_apis",
    "probe_transactions",
    "txn_offset_commit",
]

_OFFSET_FETCH = 9
_FIND_COORDINATOR = 10
_INIT_PRODUCER_ID = 22
_ADD_PARTITIONS = 24
_ADD_OFFSETS = 25
_END_TXN = 26
_TXN_OFFSET_COMMIT = 28

TXN_APIS = {_INIT_PRODUCER_ID: "InitProducerId", _ADD_PARTITIONS: "AddPartitionsToTxn",
            _ADD_OFFSETS: "AddOffsetsToTxn", _END_TXN: "EndTxn", _TXN_OFFSET_COMMIT: "TxnOffsetCommit"}

_MOVED = frozenset({Codes.NOT_COORDINATOR, Codes.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({Codes.CONCURRENT_TRANSACTIONS, Codes.COORDINATOR_LOAD_IN_PROGRESS,
                    Codes.REQUEST_TIMED_OUT,
                    Codes.NOT_ENOUGH_REPLICAS, Codes.UNKNOWN_TOPIC_OR_PARTITION,
                    Codes.UNSTABLE_OFFSET_COMMIT}) | _MOVED
_FENCED = frozenset({Codes.PRODUCER_FENCED, Codes.INVALID_PRODUCER_EPOCH, Codes.INVALID_PRODUCER_ID_MAPPING})

MARKER_KEY = "moldau-spark"


class TransactionError(RuntimeError):
    """A transaction request failed for good (the message names the transactional id and the error)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def fenced(self) -> bool:
        return self.code in _FENCED


@dataclass(slots=True, frozen=True)
class TxnHandle:
    """What the driver needs to end a task's transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(slots=True, frozen=True)
class BatchMarker:
    """The committed micro-batch of a transactional id (its group's committed offset and metadata)."""

    query_id: str
    batch_id: int

    def metadata(self, rows: int) -> str:
        return json.dumps({MARKER_KEY: 1, "query": self.query_id, "batch": self.batch_id, "rows": rows},
                          separators=(",", ":"))

    @staticmethod
    def parse(offset: int, metadata: str | None) -> BatchMarker | None:
        try:
            d = json.loads(metadata or "")
        except ValueError:
            return None
        if not isinstance(d, dict) or d.get(MARKER_KEY) != 1 or not isinstance(d.get("query"), str):
            return None
        if d.get("batch") != offset:
            return None
        return BatchMarker(d["query"], offset)


def missing_transaction_apis(conn: Any) -> list[str]:
    """Names of the transaction APIs (and FindCoordinator v1+, the transaction key type) that ``conn``'s
    broker does not offer in a version the client speaks."""
    out = [name for key, name in TXN_APIS.items() if not conn.supports(key)]
    try:
        if conn.api_version(_FIND_COORDINATOR) < 1:
            out.append("FindCoordinator v1+ (transaction coordinators)")
    except Exception:  # noqa: BLE001 - not offered at all
        out.append("FindCoordinator")
    return out


async def find_coordinator(cluster: Cluster, key: str, key_type: int, deadline: float, backoff: float) -> int:
    """The node id of the coordinator of a group (key_type 0) or transactional id (1)."""
    last: Any = None
    while True:
        try:
            code, node_id = await cluster.find_coordinator(key, key_type)
            if code == 0:
                return int(node_id)
            last = broker_error(code, f"FindCoordinator({'transaction' if key_type else 'group'} {key!r})")
            if code not in _RETRY:
                raise TransactionError(str(last), code)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            last = exc
        if time.monotonic() + backoff > deadline:
            raise TransactionError(f"no coordinator found for {key!r}: {last}")
        await asyncio.sleep(backoff)


class TxnChannel:
    """Requests to the transaction coordinator of one transactional id, retried as Kafka's producer does
    (coordinator moved or loading, concurrent transactions) until ``timeout`` seconds have passed."""

    def __init__(self, cluster: Cluster, transactional_id: str, timeout: float, backoff: float) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.timeout = timeout
        self.backoff = backoff
        self.node: int | None = None

    async def call(self, api_key: int, make: Callable[[], Any], what: str,
                   error_of: Callable[[Any], int] | None = None) -> Any:
        deadline = time.monotonic() + self.timeout
        last: Any = None
        while True:
            try:
                if self.node is None:
                    self.node = await find_coordinator(self.cluster, self.transactional_id, 1, deadline,
                                                       self.backoff)
                resp = await self.cluster.send(self.node, api_key, make())
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
                self.node = None
                last = exc
            else:
                code = error_of(resp) if error_of is not None else resp.error_code
                if code == 0:
                    return resp
                last = broker_error(code, f"{what} for transactional id {self.transactional_id!r}")
                if code in _MOVED:
                    self.node = None
                if code not in _RETRY:
                    raise TransactionError(str(last), code)
            if time.monotonic() + self.backoff > deadline:
                raise TransactionError(
                    f"{what} for transactional id {self.transactional_id!r} failed: {last}"
                )
            log.debug("%s for %s: %s; retrying", what, self.transactional_id, last)
            await asyncio.sleep(self.backoff)

    async def init(self, timeout_ms: int) -> tuple[int, int]:
        """InitProducerId: a producer id and a new epoch; aborts the id's open transaction (fencing)."""
        resp = await self.call(_INIT_PRODUCER_ID, lambda: m.InitProducerIdRequest.new(
            transactional_id=self.transactional_id, transaction_timeout_ms=timeout_ms), "InitProducerId")
        return int(resp.producer_id), int(resp.producer_epoch)

    async def add_partitions(self, pid: int, epoch: int, parts: Iterable[tuple[str, int]]) -> None:
        R = m.AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        topics = [
            R.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
        ]

        def error_of(resp: Any) -> int:
            codes = {pr.partition_error_code for t in resp.results_by_topic_v3_and_below
                     for pr in t.results_by_partition} - {0, Codes.OPERATION_NOT_ATTEMPTED}
            if not codes:
                return int(getattr(resp, "error_code", 0) or 0)
            retry = codes & _RETRY
            return min(retry) if retry else min(codes)

        await self.call(_ADD_PARTITIONS, lambda: R.new(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics), "AddPartitionsToTxn", error_of)

    async def add_offsets(self, pid: int, epoch: int, group: str) -> None:
        await self.call(_ADD_OFFSETS, lambda: m.AddOffsetsToTxnRequest.new(
            transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, group_id=group),
            "AddOffsetsToTxn")

    async def end(self, pid: int, epoch: int, commit: bool) -> None:
        await self.call(_END_TXN, lambda: m.EndTxnRequest.new(
            transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit),
            "EndTxn(commit)" if commit else "EndTxn(abort)")


async def txn_offset_commit(cluster: Cluster, transactional_id: str, group: str, pid: int, epoch: int,
                            offsets: dict[tuple[str, int], tuple[int, str]], timeout: float,
                            backoff: float) -> None:
    """TxnOffsetCommit of ``offsets`` ({(topic, partition): (offset, metadata)}) to the group's
    coordinator (the group was added to the transaction with AddOffsetsToTxn)."""
    R = m.TxnOffsetCommitRequest
    by_topic: dict[str, list[Any]] = {}
    for (t, p), (off, meta) in sorted(offsets.items()):
        by_topic.setdefault(t, []).append(R.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=meta))
    req = R.new(transactional_id=transactional_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=-1, member_id="", group_instance_id=None,
                topics=[R.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    deadline = time.monotonic() + timeout
    node: int | None = None
    last: Any = None
    while True:
        try:
            if node is None:
                node = await find_coordinator(cluster, group, 0, deadline, backoff)
            resp = await cluster.send(node, _TXN_OFFSET_COMMIT, req)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            node = None
            last = exc
        else:
            codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if not codes:
                return
            code = min(codes)
            last = broker_error(code, f"TxnOffsetCommit of group {group!r} for {transactional_id!r}")
            if codes & _MOVED:
                node = None
            if not codes <= _RETRY:
                raise TransactionError(str(last), min(codes - _RETRY))
        if time.monotonic() + backoff > deadline:
            raise TransactionError(f"TxnOffsetCommit of group {group!r} failed: {last}")
        await asyncio.sleep(backoff)


async def committed_markers(
    cluster: Cluster, group: str, timeout: float, backoff: float
) -> list[BatchMarker]:
    """The batch markers committed for ``group`` (OffsetFetch of all its offsets; stable offsets only,
    when the broker has OffsetFetch v7)."""
    R = m.OffsetFetchRequest
    deadline = time.monotonic() + timeout
    node: int | None = None
    last: Any = None
    while True:
        try:
            if node is None:
                node = await find_coordinator(cluster, group, 0, deadline, backoff)
            resp = await cluster.send(
                node, _OFFSET_FETCH, R.new(group_id=group, topics=None, require_stable=True)
            )
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            node = None
            last = exc
        else:
            codes = {int(getattr(resp, "error_code", 0) or 0)}
            codes |= {p.error_code for t in resp.topics or () for p in t.partitions}
            codes.discard(0)
            if not codes:
                out = []
                for t in resp.topics or ():
                    for p in t.partitions:
                        mk = BatchMarker.parse(p.committed_offset, p.metadata)
                        if mk is not None:
                            out.append(mk)
                return out
            last = broker_error(min(codes), f"OffsetFetch of group {group!r}")
            if codes & _MOVED:
                node = None
            if not codes <= _RETRY:
                raise TransactionError(str(last), min(codes - _RETRY))
        if time.monotonic() + backoff > deadline:
            raise TransactionError(f"reading the batch markers of {group!r} failed: {last}")
        await asyncio.sleep(backoff)


async def end_transactions_async(cluster: Cluster, handles: list[TxnHandle], commit: bool, timeout: float,
                                 backoff: float) -> list[tuple[TxnHandle, BaseException]]:
    """EndTxn for every handle, concurrently; returns the failures."""

    async def one(h: TxnHandle) -> None:
        await TxnChannel(cluster, h.transactional_id, timeout, backoff).end(
            h.producer_id, h.producer_epoch, commit
        )

    results = await asyncio.gather(*(one(h) for h in handles), return_exceptions=True)
    return [(h, r) for h, r in zip(handles, results) if isinstance(r, BaseException)]


async def probe_transactions(cluster: Cluster, probe_id: str, timeout_ms: int, timeout: float,
                             backoff: float) -> str | None:
    """Why transactions cannot be used on this cluster, or None when they can: the broker must offer the
    transaction APIs, name a coordinator for ``probe_id`` and give it a producer id (InitProducerId with
    ``timeout_ms``; this also checks that the principal may use transactional ids, where the broker
    authorizes). A transaction timeout the broker refuses raises TransactionError (a setting to fix, not a
    reason to fall back)."""
    conn = await cluster.any_connection()
    missing = missing_transaction_apis(conn)
    if missing:
        return f"the broker does not support transactions (ApiVersions lacks {', '.join(missing)})"
    try:
        await find_coordinator(cluster, probe_id, 1, time.monotonic() + timeout, backoff)
        await TxnChannel(cluster, probe_id, timeout, backoff).init(timeout_ms)
    except TransactionError as exc:
        if exc.code == Codes.INVALID_TRANSACTION_TIMEOUT:
            raise
        return f"transactional id {probe_id!r} cannot be used: {exc}"
    return None
