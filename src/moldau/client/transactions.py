"""The transactional producer (``transactional.id``): Kafka's TransactionManager for moldau's producer.

::

    async with AsyncProducer(bootstrap_servers=..., transactional_id="my-app-1") as p:
        await p.init_transactions()            # fences older producers with the same id
        p.begin_transaction()
        await p.send("out", b"v")
        await p.send_offsets_to_transaction({TopicPartition("in", 0): 42}, consumer)   # or a group id
        await p.commit_transaction()           # or abort_transaction()

The sync ``Producer`` has the same methods (blocking). Protocol (transactions V1, what every broker serves):

* ``init_transactions``: FindCoordinator (key type 1) and InitProducerId with the transactional id and
  ``transaction.timeout.ms``; retried on CONCURRENT_TRANSACTIONS and coordinator errors. The producer id and
  epoch it returns stamp every batch; sequences restart at 0.
* While a transaction is open the sender adds each partition to it (AddPartitionsToTxn) before the first
  batch for that partition goes out; batches carry the transactional attribute and Produce requests the
  transactional id.
* ``send_offsets_to_transaction``: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to
  the group's coordinator (with the consumer's generation / member id when a consumer or
  ``ConsumerGroupMetadata`` is given: KIP-447 fencing of zombie consumers).
* ``commit_transaction``: flush, then EndTxn(commit). A batch that failed inside the transaction makes the
  transaction abortable: commit raises, and ``abort_transaction`` is the way out.
* ``abort_transaction``: batches not sent yet fail with ``TransactionAbortedError``, in-flight ones are
awaited,
  EndTxn(abort); after sequence trouble the epoch is bumped with InitProducerId (KIP-360).
* Fatal (the producer can only be closed): PRODUCER_FENCED / INVALID_PRODUCER_EPOCH (another producer with
  the same transactional id, or the transaction timed out), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  INVALID_PRODUCER_ID_MAPPING, UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, TypeAlias, TypeVar

from moldau.protocol import messages as m

from .cluster import Cluster
from .errors import (
    ClientError,
    Codes,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    broker_error,
)

if TYPE_CHECKING:
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

    from .config import ProducerConfig
    from .types import Offsets

log = logging.getLogger(__name__)

_Resp = TypeVar("_Resp", bound="ApiMessage")

__all__ = ["ConsumerGroupMetadata", "GroupMember", "GroupRef", "ProducerHooks", "ProducerIds",
           "TransactionAbortedError", "TransactionManager", "TransactionState", "group_metadata_of"]

_FIND_COORDINATOR = 10
_INIT_PRODUCER_ID = 22
_ADD_PARTITIONS = 24
_ADD_OFFSETS = 25
_END_TXN = 26
_TXN_OFFSET_COMMIT = 28

_FATAL = frozenset({
    Codes.PRODUCER_FENCED, Codes.INVALID_PRODUCER_EPOCH, Codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    Codes.INVALID_PRODUCER_ID_MAPPING, Codes.UNSUPPORTED_VERSION, Codes.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    Codes.INVALID_TRANSACTION_TIMEOUT, Codes.CLUSTER_AUTHORIZATION_FAILED,
})
_COORDINATOR_MOVED = frozenset({Codes.NOT_COORDINATOR, Codes.COORDINATOR_NOT_AVAILABLE})
_RETRY = (
    frozenset(
        {
            Codes.CONCURRENT_TRANSACTIONS,
            Codes.COORDINATOR_LOAD_IN_PROGRESS,
            Codes.REQUEST_TIMED_OUT,
            Codes.UNKNOWN_TOPIC_OR_PARTITION,
            Codes.NOT_ENOUGH_REPLICAS,
        }
    )
    | _COORDINATOR_MOVED
)


class TransactionAbortedError(ClientError):
    """The record was not sent: its transaction was aborted."""


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


@dataclass(slots=True, frozen=True)
class ConsumerGroupMetadata:
    """What TxnOffsetCommit needs to know about the consuming group member (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class GroupMember(Protocol):
    """A consumer that is a member of a group (async or sync moldau consumer), as
    ``send_offsets_to_transaction`` takes it."""

    @property
    def config(self) -> Mapping[str, object]: ...

    def consumer_group_metadata(self) -> ConsumerGroupMetadata: ...


# the group of send_offsets_to_transaction: its id, its member's metadata, or the consumer
GroupRef: TypeAlias = "str | ConsumerGroupMetadata | GroupMember"


def group_metadata_of(group: GroupRef) -> ConsumerGroupMetadata:
    """A group id, a ConsumerGroupMetadata, or a moldau consumer (async or sync) -> ConsumerGroupMetadata."""
    if isinstance(group, ConsumerGroupMetadata):
        return group
    if isinstance(group, str):
        return ConsumerGroupMetadata(group)
    meta = getattr(group, "consumer_group_metadata", None)  # a moldau consumer (sync or async)
    cfg = getattr(group, "config", None)
    if meta is None or cfg is None or not cfg.get("group.id"):
        raise ValueError(
            "send_offsets_to_transaction needs a group id, a ConsumerGroupMetadata or a consumer "
            "with a group.id"
        )
    result = meta()
    if not isinstance(result, ConsumerGroupMetadata):
        raise ValueError(f"consumer_group_metadata() of {group!r} is not a ConsumerGroupMetadata: {result!r}")
    return result


class ProducerIds:
    """An idempotent producer's identity: its producer id and epoch, and the next sequence number of each
    partition it writes (Kafka's ProducerIdAndEpoch and the TransactionManager's sequence bookkeeping). The
    producer's sender asks it for the sequence of every batch it sends for the first time; a new id or epoch
    restarts every partition at 0. Loop thread only."""

    __slots__ = ("producer_id", "producer_epoch", "need_bump", "_next")

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.need_bump = False  # the broker's sequence state may differ from ours: bump the epoch first
        self._next: dict[tuple[str, int], int] = {}

    def next_sequence(self, topic: str, partition: int, records: int) -> int:
        """The base sequence of the next batch (of ``records`` records) of the partition; reserves them."""
        key = (topic, partition)
        base = self._next.get(key, 0)
        self._next[key] = (base + records) & 0x7FFFFFFF
        return base

    def reset(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch: every partition's sequence restarts at 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.need_bump = False
        self._next.clear()

    def forget(self) -> None:
        """Drop the producer id (the broker refused to bump its epoch): the next InitProducerId gets a new
        one."""
        self.producer_id = -1
        self.need_bump = False


class ProducerHooks(Protocol):
    """What the transaction manager asks of its producer."""

    def check_started(self) -> None:
        """Raise IllegalStateError when the producer is not started."""

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued record was sent and answered."""

    def queued_partitions(self) -> list[tuple[str, int]]:
        """The partitions that have batches waiting to be sent."""

    def fail_unsent(self, exc: BaseException) -> bool:
        """Fail every batch not in flight with ``exc``; True when one of them had a sequence number."""

    def resequence(self) -> None:
        """After a new producer id or epoch: the batches not yet acknowledged take new sequences."""


class TransactionManager:
    """One per transactional producer; runs on the producer's event loop. Owns the producer's ``ProducerIds``
    (InitProducerId is the manager's to send) and asks the producer only through ``ProducerHooks``."""

    def __init__(self, cfg: ProducerConfig, cluster: Cluster, producer: ProducerHooks) -> None:
        self.p = producer
        self.cluster = cluster
        self.ids = ProducerIds()
        tid = cfg["transactional.id"]
        assert tid is not None  # a producer makes its manager only when it has a transactional.id
        self.transactional_id: str = tid
        self.timeout_ms: int = int(cfg["transaction.timeout.ms"])
        self.retry_backoff = cfg["retry.backoff.ms"] / 1000.0
        self.default_timeout = cfg["max.block.ms"] / 1000.0
        self.state = TransactionState.UNINITIALIZED
        self.coordinator: int | None = None
        self.added: set[tuple[str, int]] = set()        # partitions in the open transaction
        self.offsets_added = False
        self.error: BaseException | None = None         # abortable (or fatal) error of the transaction
        self.need_epoch_bump = False
        self._op_lock = asyncio.Lock()

    # ------------------------------------------------------------------------------------------- helpers
    def _fatal(self, exc: BaseException) -> BaseException:
        self.state = TransactionState.FATAL_ERROR
        self.error = exc
        log.error("transactional producer %s: fatal error: %s", self.transactional_id, exc)
        return exc

    def _check_not_fatal(self) -> None:
        if self.state == TransactionState.FATAL_ERROR:
            raise IllegalStateError(f"the transactional producer failed for good ({self.error}); close it")

    def check_send(self) -> None:
        """send() is only allowed inside a transaction."""
        if self.state == TransactionState.IN_TRANSACTION:
            return
        if self.state == TransactionState.ABORTABLE_ERROR:
            raise IllegalStateError(f"the transaction must be aborted: {self.error}")
        self._check_not_fatal()
        raise IllegalStateError(f"cannot send: no transaction is open (state {self.state.value}); "
                                "call begin_transaction() first")

    async def _find_coordinator(self, deadline: float) -> int:
        if self.coordinator is not None and self.coordinator in self.cluster.brokers:
            return self.coordinator
        cluster = self.cluster
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                conn = await cluster.any_connection()
                if conn.api_version(_FIND_COORDINATOR) < 1:
                    raise self._fatal(ClientError("the broker's FindCoordinator has no transaction key type"))
                code, node_id = await cluster.find_coordinator(self.transactional_id, 1, conn)
                if code == 0:
                    self.coordinator = node_id
                    return node_id
                last = broker_error(code, f"FindCoordinator for transactional id {self.transactional_id!r}")
                if code in _FATAL:
                    raise self._fatal(last)
                if code not in _RETRY:
                    raise last
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
            await asyncio.sleep(self.retry_backoff)
        raise KafkaTimeoutError(f"no transaction coordinator found for {self.transactional_id!r}: {last}")

    async def _coordinator_call(self, api_key: int, make: Callable[[int], ApiRequest[_Resp]], deadline: float,
                                what: str) -> _Resp:
        """Send ``make(version)`` to the transaction coordinator until it answers without a retriable
        error; returns the response (its error code is the caller's to judge)."""
        while True:
            node = await self._find_coordinator(deadline)
            try:
                conn = await self.cluster.connection(node)
                version = conn.api_version(api_key)
                resp = await conn.send(api_key, make(version))
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.coordinator = None
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"{what}: {exc}") from exc
                await asyncio.sleep(self.retry_backoff)
                continue
            code = _error_of(resp)
            if code in _COORDINATOR_MOVED:
                self.coordinator = None
            if code in _RETRY and time.monotonic() < deadline:
                log.debug("transactional producer %s: %s answered %s; retrying", self.transactional_id, what,
                          code)
                await asyncio.sleep(self.retry_backoff)
                continue
            return resp

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.default_timeout if timeout is None else timeout)

    # ------------------------------------------------------------------------------------------- API
    async def init_transactions(self, timeout: float | None = None) -> None:
        self._check_not_fatal()
        if self.state not in (TransactionState.UNINITIALIZED, TransactionState.READY):
            raise IllegalStateError(f"init_transactions() in state {self.state.value}")
        async with self._op_lock:
            await self._init_producer_id(self._deadline(timeout), bump=False)
            self.state = TransactionState.READY

    async def _init_producer_id(self, deadline: float, *, bump: bool) -> None:
        self.p.check_started()
        s = self.ids

        def make(version: int) -> m.InitProducerIdRequest:
            if bump and version >= 3:
                return m.InitProducerIdRequest.new(transactional_id=self.transactional_id,
                                                   transaction_timeout_ms=self.timeout_ms,
                                                   producer_id=s.producer_id, producer_epoch=s.producer_epoch)
            return m.InitProducerIdRequest.new(transactional_id=self.transactional_id,
                                               transaction_timeout_ms=self.timeout_ms)

        resp = await self._coordinator_call(_INIT_PRODUCER_ID, make, deadline, "InitProducerId")
        if resp.error_code:
            err = broker_error(resp.error_code, f"InitProducerId for {self.transactional_id!r}")
            if resp.error_code in _FATAL or not bump:
                raise self._fatal(err)
            raise err
        log.info(
            "transactional producer %s: producer id %d epoch %d",
            self.transactional_id,
            resp.producer_id,
            resp.producer_epoch,
        )
        s.reset(resp.producer_id, resp.producer_epoch)
        self.need_epoch_bump = False
        self.p.resequence()

    def begin_transaction(self) -> None:
        self._check_not_fatal()
        if self.state == TransactionState.UNINITIALIZED:
            raise IllegalStateError("call init_transactions() before begin_transaction()")
        if self.state != TransactionState.READY:
            raise IllegalStateError(f"begin_transaction() in state {self.state.value}")
        self.added.clear()
        self.offsets_added = False
        self.error = None
        self.state = TransactionState.IN_TRANSACTION

    async def send_offsets_to_transaction(self, offsets: Offsets, group: GroupRef,
                                          timeout: float | None = None) -> None:
        """Commit ``offsets`` ({TopicPartition: offset | OffsetAndMetadata}) for ``group`` (group id,
        ConsumerGroupMetadata or consumer) with the transaction."""
        if self.state == TransactionState.ABORTABLE_ERROR:
            raise IllegalStateError(f"the transaction must be aborted: {self.error}")
        self._check_not_fatal()
        if self.state != TransactionState.IN_TRANSACTION:
            raise IllegalStateError(f"send_offsets_to_transaction() in state {self.state.value}")
        meta = group_metadata_of(group)
        deadline = self._deadline(timeout)
        s = self.ids
        async with self._op_lock:
            resp = await self._coordinator_call(
                _ADD_OFFSETS,
                lambda v: m.AddOffsetsToTxnRequest.new(
                    transactional_id=self.transactional_id,
                    producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch,
                    group_id=meta.group_id,
                ),
                deadline,
                "AddOffsetsToTxn",
            )
            if resp.error_code:
                raise self._txn_error(resp.error_code, "AddOffsetsToTxn")
            self.offsets_added = True
            await self._txn_offset_commit(offsets, meta, deadline)

    async def _txn_offset_commit(self, offsets: Offsets, meta: ConsumerGroupMetadata,
                                 deadline: float) -> None:
        s = self.ids
        R = m.TxnOffsetCommitRequest
        by_topic: dict[str, list[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, om in offsets.items():
            topic, partition = tp[0], tp[1]
            if isinstance(om, int):
                offset, metadata, epoch = om, "", -1
            else:
                offset = om[0]
                metadata = om[1] if len(om) > 1 and om[1] is not None else ""
                epoch = om[2] if len(om) > 2 and om[2] is not None else -1
            by_topic.setdefault(topic, []).append(R.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
                committed_metadata=metadata))
        req = R.new(
            transactional_id=self.transactional_id,
            group_id=meta.group_id,
            producer_id=s.producer_id,
            producer_epoch=s.producer_epoch,
            generation_id=meta.generation_id,
            member_id=meta.member_id,
            group_instance_id=meta.group_instance_id,
            topics=[R.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        cluster = self.cluster
        group_node: int | None = None
        while True:
            try:
                if group_node is None:
                    group_node = await _find_group_coordinator(cluster, meta.group_id, deadline,
                                                               self.retry_backoff)
                resp = await cluster.send(group_node, _TXN_OFFSET_COMMIT, req)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                group_node = None
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"TxnOffsetCommit: {exc}") from exc
                await asyncio.sleep(self.retry_backoff)
                continue
            codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if not codes:
                return
            if codes & _COORDINATOR_MOVED:
                group_node = None
            if codes <= _RETRY and time.monotonic() < deadline:
                await asyncio.sleep(self.retry_backoff)
                continue
            raise self._txn_error(min(codes), "TxnOffsetCommit")

    def _txn_error(self, code: int, what: str) -> BaseException:
        err = broker_error(code, f"{what} for transactional id {self.transactional_id!r}")
        if code in _FATAL:
            return self._fatal(err)
        self.state = TransactionState.ABORTABLE_ERROR
        self.error = err
        return err

    async def commit_transaction(self, timeout: float | None = None) -> None:
        if self.state == TransactionState.ABORTABLE_ERROR:
            raise IllegalStateError(f"cannot commit, the transaction must be aborted: {self.error}")
        self._check_not_fatal()
        if self.state != TransactionState.IN_TRANSACTION:
            raise IllegalStateError(f"commit_transaction() in state {self.state.value}")
        deadline = self._deadline(timeout)
        async with self._op_lock:
            self.state = TransactionState.COMMITTING
            try:
                await self.p.flush(max(deadline - time.monotonic(), 0.001))
            except KafkaTimeoutError:
                self.state = TransactionState.IN_TRANSACTION  # commit may be called again
                raise
            if self.error is not None:
                if self.state != TransactionState.FATAL_ERROR:
                    self.state = TransactionState.ABORTABLE_ERROR
                raise self.error
            await self._end(True, deadline)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        self._check_not_fatal()
        if self.state not in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            raise IllegalStateError(f"abort_transaction() in state {self.state.value}")
        deadline = self._deadline(timeout)
        async with self._op_lock:
            self.state = TransactionState.ABORTING
            self._fail_queued(TransactionAbortedError(
                f"transaction of {self.transactional_id!r} aborted before the record was sent"))
            try:
                await self.p.flush(max(deadline - time.monotonic(), 0.001))
            except KafkaTimeoutError:
                self.state = TransactionState.ABORTABLE_ERROR
                raise
            self._check_not_fatal()
            await self._end(False, deadline)
            if self.need_epoch_bump or self.ids.need_bump:
                await self._init_producer_id(deadline, bump=True)

    async def _end(self, commit: bool, deadline: float) -> None:
        s = self.ids
        if self.added or self.offsets_added:
            resp = await self._coordinator_call(
                _END_TXN,
                lambda v: m.EndTxnRequest.new(
                    transactional_id=self.transactional_id,
                    producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch,
                    committed=commit,
                ),
                deadline,
                "EndTxn",
            )
            if resp.error_code:
                err = self._txn_error(resp.error_code, "EndTxn(commit)" if commit else "EndTxn(abort)")
                raise err
        self.added.clear()
        self.offsets_added = False
        self.error = None
        self.state = TransactionState.READY

    def _fail_queued(self, exc: BaseException) -> None:
        if self.p.fail_unsent(exc):
            self.need_epoch_bump = True  # sequences were assigned and will never reach the broker

    # ------------------------------------------------------------------------------------------- sender hooks
    async def before_send(self) -> bool:
        """Called by the sender before it drains: False when nothing may be sent now. Adds the partitions
        that have queued batches to the open transaction (AddPartitionsToTxn) first."""
        s = self.ids
        if s.producer_id < 0 or self.state == TransactionState.FATAL_ERROR:
            return False
        if s.need_bump:
            # a sequence gap or a batch failed for good: the transaction cannot commit any more
            s.need_bump = False
            self.need_epoch_bump = True
            self.batch_failed(ClientError("a batch of the transaction failed (sequence state lost)"))
        if self.state in (TransactionState.ABORTABLE_ERROR,):
            self._fail_queued(self.error or TransactionAbortedError("transaction is being aborted"))
            return False
        wanted = [tp for tp in self.p.queued_partitions() if tp not in self.added]
        if not wanted:
            return True
        if self.state not in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
            return True
        await self._add_partitions(wanted)
        return True

    async def _add_partitions(self, parts: list[tuple[str, int]]) -> None:
        s = self.ids
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        R = m.AddPartitionsToTxnRequest
        topics = [R.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps)) for t, ps in by_topic.items()]
        deadline = time.monotonic() + self.default_timeout
        try:
            resp = await self._coordinator_call(
                _ADD_PARTITIONS,
                lambda v: R.new(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=s.producer_id,
                    v3_and_below_producer_epoch=s.producer_epoch,
                    v3_and_below_topics=topics,
                ),
                deadline,
                "AddPartitionsToTxn",
            )
        except (KafkaTimeoutError, ClientError) as exc:
            self.batch_failed(exc)
            return
        bad = {}
        for rt in resp.results_by_topic_v3_and_below:
            for pr in rt.results_by_partition:
                if pr.partition_error_code == 0:
                    self.added.add((rt.name, pr.partition_index))
                elif pr.partition_error_code != Codes.OPERATION_NOT_ATTEMPTED:
                    bad[(rt.name, pr.partition_index)] = pr.partition_error_code
        if bad:
            code = next(iter(bad.values()))
            self.batch_failed(broker_error(code, f"AddPartitionsToTxn {sorted(bad)}"))

    @staticmethod
    def is_fatal(code: int) -> bool:
        return code in _FATAL

    def batch_failed(self, exc: BaseException) -> None:
        """A batch of the open transaction failed for good (the sender's _fail)."""
        if self.state in (TransactionState.ABORTING, TransactionState.FATAL_ERROR):
            return
        if isinstance(exc, TransactionAbortedError):
            return
        code = getattr(getattr(exc, "code", None), "code", getattr(exc, "code", None))
        try:
            code = int(code) if code is not None else None
        except (TypeError, ValueError):
            code = None
        if code in _FATAL:
            self._fatal(exc)
            return
        if self.error is None:
            self.error = exc
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
            self.state = TransactionState.ABORTABLE_ERROR
        log.warning(
            "transactional producer %s: the transaction must be aborted: %s", self.transactional_id, exc
        )


def _error_of(resp: ApiMessage) -> int:
    code = getattr(resp, "error_code", 0) or 0
    if code:
        return code
    for t in getattr(resp, "results_by_topic_v3_and_below", None) or ():
        for pr in t.results_by_partition:
            if pr.partition_error_code in _RETRY:
                return pr.partition_error_code
    return 0


async def _find_group_coordinator(cluster: Cluster, group_id: str, deadline: float, backoff: float) -> int:
    last: BaseException | None = None
    while time.monotonic() < deadline:
        code, node_id = await cluster.find_coordinator(group_id)
        if code == 0:
            return node_id
        last = broker_error(code, f"FindCoordinator for group {group_id!r}")
        if code not in _RETRY:
            raise last
        await asyncio.sleep(backoff)
    raise KafkaTimeoutError(f"no coordinator found for group {group_id!r}: {last}")
