"""The transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager, one node).

    coordinator = create_transaction_coordinator(services)    # Broker.start: loads __transaction_state
    await coordinator.handle_init_producer_id(txn_id, timeout_ms, pid, epoch) -> (err, pid, epoch)
    await coordinator.handle_add_partitions(txn_id, pid, epoch, {(topic, p), ...}) -> err
    coordinator.verify_partitions(txn_id, pid, epoch, partitions) -> (err, {tp: err})  # AddPartitionsToTxn v4
    coordinator.verify_produce(txn_id, topic, partition, pid, epoch) -> err             # KIP-890 part 1
    coordinator.check_txn_offset_commit(txn_id, pid, epoch, offsets_partition) -> err
    await coordinator.handle_end_txn(txn_id, pid, epoch, commit, tv2=False) -> (err, pid, epoch)
    coordinator.describe(txn_id) -> TxnMetadata | None ; coordinator.list_transactions(...) -> [TxnMetadata]

Every transition is written to ``__transaction_state`` (partition abs(hash(txn id)) % partitions) before it
is applied. One asyncio lock per transactional id serialises the operations on it, so the in-memory state and
the log never disagree; other transactional ids proceed in parallel.

Choices (Kafka's behaviour unless said):

* InitProducerId while a transaction is Ongoing fences it: PrepareAbort with the epoch bumped, markers,
  CompleteAbort. Kafka then answers CONCURRENT_TRANSACTIONS and the client retries, getting the epoch bumped a
  second time; moldau does that second step at once and answers it (same end state, no client backoff).
* EndTxn writes PrepareCommit/PrepareAbort, the markers (in-process) and CompleteCommit/CompleteAbort before
  it answers (Kafka answers after the Prepare record and completes in the background), so a client's next
  transaction never meets CONCURRENT_TRANSACTIONS. A marker that cannot be written leaves the transaction
  prepared; a background task retries it (and the answer is still NONE: the outcome is decided).
* Transactions V2 (KIP-890 part 2): EndTxn v5 bumps the epoch at every end and answers the new producer id /
  epoch (rotating the producer id when the epoch is exhausted). moldau advertises no ``transaction.version``
  feature, so clients use V1; the V2 path exists for clients that send v5 anyway.
* A transaction whose ``transaction.timeout.ms`` passed while Ongoing is fenced and aborted by a task that
  runs every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
* Transactional ids idle in a completed state for ``transactional.id.expiration.ms`` are removed (tombstone)
  every ``transaction.remove.expired.transaction.cleanup.interval.ms``.
* At start the topic is read; transactions found in PrepareCommit / PrepareAbort (the broker stopped between
  the decision and its completion) get their markers and their Complete record before anything else touches
  them; Ongoing ones time out as usual.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import error_code_of

from ..coordinator import (
    CoordinatorLog,
    CoordinatorLogDeps,
    CoordinatorRuntime,
    ReplicaCoordinatorLog,
    TopicSpec,
)
from ..coordinator.runtime import LeadershipSource
from .markers import MarkerDeps, write_markers
from .state import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    SHORT_MAX,
    TRANSACTION_STATE_TOPIC,
    RecordFormatError,
    TxnMetadata,
    TxnState,
    TxnTransit,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)

log = logging.getLogger(__name__)

S = TxnState
MARKER_RETRY_S = 1.0


@dataclass(slots=True)
class TxnConfig:
    num_partitions: int = 50
    segment_bytes: int = 104857600
    replication_factor: int = 1
    min_isr: int = 1
    max_timeout_ms: int = 900000
    abort_interval_ms: int = 10000
    expiration_ms: int = 604800000
    remove_expired_interval_ms: int = 3600000
    verification: bool = True

    @classmethod
    def from_broker_config(cls, cfg: Any) -> TxnConfig:
        def get(key: str, default: Any) -> Any:
            try:
                v = cfg.get(key)
            except ValueError:  # pragma: no cover - ConfigError: a config without the key
                return default
            return default if v is None else v

        verification = get("transaction.partition.verification.enable", True)
        if isinstance(verification, str):
            verification = verification.strip().lower() == "true"
        return cls(
            num_partitions=int(get("transaction.state.log.num.partitions", 50)),
            segment_bytes=int(get("transaction.state.log.segment.bytes", 104857600)),
            replication_factor=int(get("transaction.state.log.replication.factor", 1)),
            min_isr=int(get("transaction.state.log.min.isr", 1)),
            max_timeout_ms=int(get("transaction.max.timeout.ms", 900000)),
            abort_interval_ms=int(get("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000)),
            expiration_ms=int(get("transactional.id.expiration.ms", 604800000)),
            remove_expired_interval_ms=int(get("transaction.remove.expired.transaction.cleanup.interval.ms",
                                               3600000)),
            verification=bool(verification),
        )


# ------------------------------------------------------------------------------------------------ services


class _ProducerIds(Protocol):
    def next_id(self) -> int: ...


class TxnDeps(CoordinatorLogDeps, MarkerDeps, Protocol):
    """The broker services the transaction coordinator uses (``services.BrokerServices`` is one): what its
    topic needs (``coordinator.CoordinatorLogDeps``), what writing markers needs (``MarkerDeps``), and
    producer ids."""

    @property
    def producer_ids(self) -> _ProducerIds: ...


# ------------------------------------------------------------------------------------------------ markers

MarkerWriter = Callable[[int, int, bool, Iterable[tuple[str, int]], int], Awaitable[dict[tuple[str, int],
                                                                                         int]]]


def _append_error(exc: BaseException) -> int:
    """Kafka's mapping of a failed __transaction_state append to the client's error."""
    code = error_code_of(exc)
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return code


# ------------------------------------------------------------------------------------------------ coordinator


class TransactionCoordinator:
    """The transaction coordinator, a ``CoordinatorShard`` on the coordinator runtime over
    ``__transaction_state`` (``storage``): it serves the transactional ids of the partitions this broker
    leads."""

    def __init__(self, config: TxnConfig, storage: CoordinatorLog, markers: MarkerWriter,
                 next_producer_id: Callable[[], int], now_ms: Callable[[], int]) -> None:
        self.config = config
        self.runtime = CoordinatorRuntime("transaction", storage, self, config.num_partitions)
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.now_ms = now_ms
        # whether a topic partition exists (the broker's metadata); a marker answered
        # UNKNOWN_TOPIC_OR_PARTITION is dropped only for a partition that does not (a deleted topic)
        self.partition_exists: Callable[[str, int], bool] = lambda topic, partition: False
        self.txns: dict[str, TxnMetadata] = {}
        self._retry_scheduled = False
        self._stopped = False
        self._started = False
        self._loaded_records = 0

    # ------------------------------------------------------------------------------------ helpers
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def owns(self, transactional_id: str) -> bool:
        """Whether this coordinator serves ``transactional_id`` (else NOT_COORDINATOR): the runtime serves its
        partition of ``__transaction_state`` (``CoordinatorRuntime.serves``)."""
        return self.runtime.serves(self.partition_for(transactional_id))

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.runtime.epoch(self.partition_for(transactional_id))

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` when missing (Kafka creates it on the first FindCoordinator)."""
        self.runtime.log.ensure_topic()

    @staticmethod
    def _lock(md: TxnMetadata) -> asyncio.Lock:
        if md.lock is None:
            md.lock = asyncio.Lock()
        return md.lock

    def _spawn(self, coro: Awaitable[Any]) -> None:
        self.runtime.spawn(coro)

    def _current(self, md: TxnMetadata) -> bool:
        """Whether ``md`` is still the metadata this coordinator serves for its transactional id. A request
        that waited (for the id's lock, for a write) may hold metadata that has been unloaded since (the
        partition's leadership moved) or replaced by a reload: it must not write or answer from it (Kafka
        compares the coordinator epoch before and after its append: NOT_COORDINATOR)."""
        return self.txns.get(md.transactional_id) is md and self.owns(md.transactional_id)

    async def _write(self, md: TxnMetadata, t: TxnTransit) -> int:
        """Persist ``t`` (the record the metadata moves to); an error code, 0 when durable. Refused with
        NOT_COORDINATOR when ``md`` is not current: the check and the append run without a suspension
        between them, so a later reload of the partition reads this record."""
        if not self._current(md):
            log.info("transactional id %s: not writing %s: its metadata was unloaded or reloaded meanwhile",
                     md.transactional_id, t.state.display_name)
            return E.NOT_COORDINATOR
        try:
            await self.runtime.append(self.partition_for(md.transactional_id),
                                      [(encode_key(md.transactional_id), encode_value(t.to_value()))])
        except Exception as exc:  # noqa: BLE001 - every append failure maps to an error code
            code = _append_error(exc)
            log.warning("transactional id %s: writing %s to %s failed: %s", md.transactional_id,
                        t.state.display_name, TRANSACTION_STATE_TOPIC, exc)
            return code or E.UNKNOWN_SERVER_ERROR
        return E.NONE

    async def _transition(self, md: TxnMetadata, t: TxnTransit) -> int:
        md.pending_state = t.state
        try:
            err = await self._write(md, t)
        finally:
            md.pending_state = None
        if err == E.NONE:
            md.complete_transition(t)
        return err

    # ------------------------------------------------------------------------------------ the runtime's shard
    def follow(self, source: LeadershipSource) -> None:
        """Serve the partitions of ``__transaction_state`` that ``source`` (the replica manager) says this
        broker leads, loading each when it is elected."""
        self.runtime.follow(source)

    def replay(self, partition: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        """The last record of each transactional id wins; null = removed."""
        self._loaded_records += 1
        try:
            txn_id = decode_key(key)
            if value is None:
                self.txns.pop(txn_id, None)
            else:
                self.txns[txn_id] = TxnMetadata.from_value(txn_id, decode_value(value))
        except RecordFormatError as exc:
            log.warning("%s-%d: skipping an unreadable record: %s", TRANSACTION_STATE_TOPIC, partition, exc)

    def replay_end_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """Nothing: the coordinator's own records are never transactional."""

    def on_loaded(self, partition: int) -> None:
        """Dead ids go; prepared transactions are completed (once the coordinator runs)."""
        mine = [md for md in self.txns.values() if self.partition_for(md.transactional_id) == partition]
        for md in mine:
            if md.state == S.DEAD:
                del self.txns[md.transactional_id]
        prepared = [md for md in mine if md.state in PREPARED]
        count, self._loaded_records = self._loaded_records, 0
        if count:
            log.info("loaded %d transactional ids (%d records) from %s-%d, %d to complete", len(mine), count,
                     TRANSACTION_STATE_TOPIC, partition, len(prepared))
        if self._started:
            for md in prepared:
                self._spawn(self._complete_locked(md))

    def on_unloaded(self, partition: int) -> None:
        """Leadership of ``__transaction_state-<partition>`` moved away: its transactional ids go."""
        for txn_id in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[txn_id]

    def start(self) -> None:
        """Complete transactions found prepared; start the timeout and expiration tasks."""
        self._started = True
        prepared = [md for md in self.txns.values() if md.state in PREPARED]
        for md in prepared:
            self._spawn(self._complete_locked(md))
        self._spawn(self._every(self.config.abort_interval_ms, self.abort_timed_out_transactions))
        self._spawn(self._every(self.config.remove_expired_interval_ms,
                                self.remove_expired_transactional_ids))

    async def _every(self, interval_ms: int, fn: Callable[[], Awaitable[Any]]) -> None:
        while not self._stopped:
            await asyncio.sleep(max(interval_ms, 1) / 1000.0)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the task die
                log.exception("transaction coordinator periodic task failed")

    async def stop(self) -> None:
        self._stopped = True
        await self.runtime.stop_tasks()

    # ------------------------------------------------------------------------------------ InitProducerId
    def _valid_expected_producer(self, md: TxnMetadata, pid: int, epoch: int) -> bool:
        return (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                or (pid == md.last_producer_id and epoch >= SHORT_MAX - 1))

    async def handle_init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                                      producer_epoch: int = -1) -> tuple[int, int, int]:
        if not transactional_id:
            return E.INVALID_REQUEST, -1, -1
        if not self.owns(transactional_id):
            return E.NOT_COORDINATOR, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return E.INVALID_REQUEST, -1, -1
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        try:
            self.ensure_topic()
        except Exception as exc:  # noqa: BLE001 - the metadata store refused: retriable for the client
            log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
            return E.COORDINATOR_NOT_AVAILABLE, -1, -1
        md = self.txns.get(transactional_id)
        if md is None:
            md = TxnMetadata(transactional_id, self.next_producer_id(), timeout_ms, self.now_ms())
            self.txns[transactional_id] = md
        async with self._lock(md):
            if self.txns.get(transactional_id) is not md:  # expired while we waited
                return E.CONCURRENT_TRANSACTIONS, -1, -1
            for _ in range(3):
                if expected is not None and not self._valid_expected_producer(md, *expected):
                    return E.PRODUCER_FENCED, -1, -1
                if md.state in PREPARED:
                    if not await self._complete_prepared(md):
                        return E.CONCURRENT_TRANSACTIONS, -1, -1
                    continue
                if md.state == S.ONGOING:
                    err = await self._fence_and_abort(md, "a new producer initialised the transactional id")
                    if err != E.NONE:
                        return err, -1, -1
                    continue
                now = self.now_ms()
                t: TxnTransit | int
                if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                    t = md.prepare_producer_id_rotation(self.next_producer_id(), timeout_ms, now,
                                                        expected is not None)
                else:
                    t = md.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
                if isinstance(t, int):
                    return t, -1, -1
                err = await self._transition(md, t)
                if err != E.NONE:
                    return err, -1, -1
                log.info("initialised transactional id %s: producer id %d epoch %d (%s-%d)", transactional_id,
                         md.producer_id, md.producer_epoch, TRANSACTION_STATE_TOPIC,
                         self.partition_for(transactional_id))
                return E.NONE, md.producer_id, md.producer_epoch
            return E.CONCURRENT_TRANSACTIONS, -1, -1

    # ------------------------------------------------------------------------------------ AddPartitionsToTxn
    def _check_producer(self, md: TxnMetadata | None, pid: int, epoch: int) -> int:
        if md is None or md.producer_id != pid:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    async def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: Iterable[tuple[str, int]]) -> int:
        parts = set(partitions)
        if not self.owns(transactional_id):
            return E.NOT_COORDINATOR
        md = self.txns.get(transactional_id)
        if md is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        async with self._lock(md):
            if not self._current(md):
                return E.NOT_COORDINATOR
            err = self._check_producer(md, producer_id, producer_epoch)
            if err != E.NONE:
                return err
            if md.pending or md.state in PREPARED:
                return E.CONCURRENT_TRANSACTIONS
            if md.state == S.ONGOING and parts <= md.partitions:
                return E.NONE
            if md.state not in COMPLETED and md.state != S.ONGOING:
                return E.INVALID_TXN_STATE
            t = md.prepare_add_partitions(parts, self.now_ms())
            return await self._transition(md, t)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """AddPartitionsToTxn v4+ verify_only: whether each partition is in the ongoing transaction."""
        md = self.txns.get(transactional_id)
        err = self._check_producer(md, producer_id, producer_epoch)
        if err != E.NONE:
            return err, {}
        assert md is not None
        if md.state in PREPARED:
            return E.CONCURRENT_TRANSACTIONS, {}
        ongoing = md.state == S.ONGOING
        return E.NONE, {tp: (E.NONE if ongoing and tp in md.partitions else E.TRANSACTION_ABORTABLE)
                        for tp in partitions}

    def verify_produce(self, transactional_id: str | None, topic: str, partition: int, producer_id: int,
                       producer_epoch: int) -> int:
        """KIP-890 part 1: a transactional batch is only appended to a partition of the producer's ongoing
        transaction (no hanging transactions). Produce error codes as Kafka maps them."""
        if not self.config.verification:
            return E.NONE
        if transactional_id and not self.owns(transactional_id):
            return E.NONE  # the coordinator is another broker's (a cluster): not verified here
        md = self.txns.get(transactional_id) if transactional_id else None
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != md.producer_epoch:
            return E.INVALID_PRODUCER_EPOCH
        if md.state in PREPARED or _ending(md):
            return E.NOT_ENOUGH_REPLICAS  # CONCURRENT_TRANSACTIONS, retriable for every produce version
        if md.state != S.ONGOING or (topic, partition) not in md.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                offsets_partition: tuple[str, int]) -> int:
        """TxnOffsetCommit: the producer's transaction must be ongoing with the group's offsets partition."""
        if not self.owns(transactional_id):
            return E.NONE  # the transaction's coordinator is another broker's (a cluster): not checked here
        md = self.txns.get(transactional_id)
        err = self._check_producer(md, producer_id, producer_epoch)
        if err != E.NONE:
            return err
        assert md is not None
        if md.state in PREPARED or _ending(md):
            return E.CONCURRENT_TRANSACTIONS
        if md.state != S.ONGOING or offsets_partition not in md.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    def note_group(self, transactional_id: str, group_id: str) -> None:
        md = self.txns.get(transactional_id)
        if md is not None:
            md.groups.add(group_id)

    # ------------------------------------------------------------------------------------ EndTxn
    async def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                             *, tv2: bool = False) -> tuple[int, int, int]:
        """(error, producer id, producer epoch): the id/epoch the client continues with (EndTxn v5)."""
        if not self.owns(transactional_id):
            return E.NOT_COORDINATOR, -1, -1
        md = self.txns.get(transactional_id)
        if md is None:
            return E.INVALID_PRODUCER_ID_MAPPING, -1, -1
        async with self._lock(md):
            if not self._current(md):
                return E.NOT_COORDINATOR, -1, -1
            retry_on_bump = (tv2 and producer_id == md.producer_id and md.last_producer_epoch >= 0
                             and producer_epoch == md.last_producer_epoch)
            retry_on_overflow = (tv2 and producer_id == md.last_producer_id and md.producer_epoch == 0
                                 and producer_epoch == SHORT_MAX - 1)
            is_retry = retry_on_bump or retry_on_overflow
            if md.pending:
                return E.CONCURRENT_TRANSACTIONS, -1, -1
            if md.producer_id != producer_id and not retry_on_overflow:
                return E.INVALID_PRODUCER_ID_MAPPING, -1, -1
            if producer_epoch != md.producer_epoch and not is_retry:
                return E.PRODUCER_FENCED, -1, -1
            st = md.state
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            ok = (E.NONE, md.producer_id, md.producer_epoch)
            if st == S.ONGOING:
                if is_retry:
                    return E.PRODUCER_FENCED, -1, -1
            elif st == S.COMPLETE_COMMIT:
                if commit:
                    return ok if (not tv2 or is_retry) else self._invalid(md, commit)
                if not tv2 or is_retry:
                    return self._invalid(md, commit)
            elif st == S.COMPLETE_ABORT:
                if not commit:
                    if not tv2 or is_retry:
                        return ok
                else:
                    return self._invalid(md, commit)
            elif st == S.PREPARE_COMMIT:
                return (E.CONCURRENT_TRANSACTIONS, -1, -1) if commit else self._invalid(md, commit)
            elif st == S.PREPARE_ABORT:
                return (E.CONCURRENT_TRANSACTIONS, -1, -1) if not commit else self._invalid(md, commit)
            elif st == S.EMPTY:
                if commit or not tv2:
                    return self._invalid(md, commit)
            else:
                return self._invalid(md, commit)
            now = self.now_ms()
            if tv2:
                t = md.prepare_abort_or_commit(target, now, producer_epoch=md.producer_epoch + 1,
                                               last_producer_epoch=md.producer_epoch,
                                               client_transaction_version=2)
                if md.epoch_exhausted:
                    t.next_producer_id = self.next_producer_id()
            else:
                t = md.prepare_abort_or_commit(target, now)
            err = await self._transition(md, t)
            if err != E.NONE:
                return err, -1, -1
            log.debug("transactional id %s: %s (producer id %d epoch %d, %d partitions)", transactional_id,
                      md.state.display_name, md.producer_id, md.producer_epoch, len(md.partitions))
            await self._complete_prepared(md)
            if md.state in PREPARED and md.next_producer_id != NO_PRODUCER_ID:
                return E.NONE, md.next_producer_id, 0
            return E.NONE, md.producer_id, md.producer_epoch

    @staticmethod
    def _invalid(md: TxnMetadata, commit: bool) -> tuple[int, int, int]:
        log.debug("transactional id %s: %s in state %s refused (INVALID_TXN_STATE)", md.transactional_id,
                  "commit" if commit else "abort", md.state.display_name)
        return E.INVALID_TXN_STATE, -1, -1

    # ------------------------------------------------------------------------------------ completion
    async def _fence_and_abort(self, md: TxnMetadata, why: str) -> int:
        """Ongoing -> (PrepareEpochFence) -> PrepareAbort with the bumped epoch -> markers -> CompleteAbort.
        The lock is held. Returns an error when the PrepareAbort record could not be written."""
        fence = md.prepare_fence_epoch()
        log.info("transactional id %s: aborting the ongoing transaction of producer id %d epoch %d (%s); "
                 "epoch now %d", md.transactional_id, md.producer_id, md.producer_epoch, why,
                 fence.producer_epoch)
        md.pending_state = S.PREPARE_EPOCH_FENCE
        t = md.prepare_abort_or_commit(S.PREPARE_ABORT, self.now_ms(), producer_epoch=fence.producer_epoch,
                                       last_producer_epoch=NO_PRODUCER_EPOCH)
        err = await self._transition(md, t)
        if err != E.NONE:
            # Kafka keeps the bumped epoch in memory: the old producer stays fenced, no second bump later
            md.producer_epoch = fence.producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
            md.failed_epoch_fence = True
            return err
        md.failed_epoch_fence = False
        await self._complete_prepared(md)
        return E.NONE

    async def _complete_locked(self, md: TxnMetadata) -> None:
        async with self._lock(md):
            if md.state in PREPARED:
                await self._complete_prepared(md)

    async def _complete_prepared(self, md: TxnMetadata) -> bool:
        """Markers for a PrepareCommit/PrepareAbort transaction, then its Complete record. The lock is held.
        True when the transaction is complete; otherwise a retry is scheduled."""
        if not self._current(md):
            return False  # unloaded or reloaded meanwhile: completed by the current metadata (or broker)
        commit = md.state == S.PREPARE_COMMIT
        todo = set(md.partitions) if md.markers_left is None else set(md.markers_left)
        if todo:
            try:
                results = await self.markers(md.producer_id, md.producer_epoch, commit, todo,
                                             self.coordinator_epoch(md.transactional_id))
            except Exception:
                log.exception("transactional id %s: writing markers failed", md.transactional_id)
                results = {tp: E.UNKNOWN_SERVER_ERROR for tp in todo}
            failed = set()
            for tp, code in results.items():
                if code == E.UNKNOWN_TOPIC_OR_PARTITION and not self.partition_exists(*tp):
                    log.info("transactional id %s: %s-%d is gone; its marker is dropped", md.transactional_id,
                             *tp)
                elif code != E.NONE:
                    # UNKNOWN_TOPIC_OR_PARTITION from a leader that does not have the partition yet (it was
                    # just restarted, or its LeaderAndIsr is on the way) is retried as Kafka retries it:
                    # dropping that marker left the records undecided, and the producer's next marker on
                    # the partition decided them (an aborted transaction shown, a committed one hidden)
                    failed.add(tp)
            if failed:
                md.markers_left = failed
                self._schedule_retry()
                return False
        md.markers_left = set()
        now = self.now_ms()
        t = md.prepare_complete(now)
        if md.next_producer_id != NO_PRODUCER_ID:  # TV2: the epoch overflowed, continue on the new id
            t.last_producer_id = md.producer_id
            t.producer_id = md.next_producer_id
            t.next_producer_id = NO_PRODUCER_ID
            t.producer_epoch = 0
        err = await self._transition(md, t)
        if err != E.NONE:
            self._schedule_retry()
            return False
        md.markers_left = None
        log.debug("transactional id %s: %s", md.transactional_id, md.state.display_name)
        return True

    def _schedule_retry(self) -> None:
        if self._retry_scheduled or self._stopped:
            return
        self._retry_scheduled = True

        async def retry() -> None:
            await asyncio.sleep(MARKER_RETRY_S)
            self._retry_scheduled = False
            for md in [m for m in self.txns.values() if m.state in PREPARED]:
                await self._complete_locked(md)

        try:
            self._spawn(retry())
        except RuntimeError:  # pragma: no cover - no running loop (unit tests driving by hand)
            self._retry_scheduled = False

    # ------------------------------------------------------------------------------------ periodic tasks
    async def abort_timed_out_transactions(self) -> int:
        now = self.now_ms()
        n = 0
        for md in list(self.txns.values()):
            if md.state == S.ONGOING and not md.pending and md.txn_start_ms + md.txn_timeout_ms < now:
                async with self._lock(md):
                    still_due = md.state == S.ONGOING and md.txn_start_ms + md.txn_timeout_ms < self.now_ms()
                    why = f"timed out after {md.txn_timeout_ms} ms"
                    if still_due and await self._fence_and_abort(md, why) == E.NONE:
                        n += 1
            elif md.state in PREPARED and not md.pending and not (md.lock and md.lock.locked()):
                await self._complete_locked(md)
        return n

    async def remove_expired_transactional_ids(self) -> int:
        now = self.now_ms()
        n = 0
        for txn_id, md in list(self.txns.items()):
            expired = md.txn_last_update_ms + self.config.expiration_ms <= now
            if md.state in COMPLETED and not md.pending and expired:
                async with self._lock(md):
                    if self.txns.get(txn_id) is not md or md.state not in COMPLETED:
                        continue
                    try:
                        await self.runtime.append(self.partition_for(txn_id), [(encode_key(txn_id), None)])
                    except Exception as exc:  # noqa: BLE001 - tried again at the next run
                        log.warning("transactional id %s: cannot write its tombstone: %s", txn_id, exc)
                        continue
                    del self.txns[txn_id]
                    n += 1
                    log.info("transactional id %s expired (idle since %d)", txn_id, md.txn_last_update_ms)
        return n

    # ------------------------------------------------------------------------------------ describe / list
    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1, pattern: str | None = None
                          ) -> tuple[list[TxnMetadata], list[str]]:
        """(matching transactions, unknown state filter names). Raises re.error for a bad pattern."""
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for name in states:
            st = TxnState.from_name(name)
            if st is None:
                unknown.append(name)
            else:
                wanted.add(st)
        state_filter = bool(list(states))
        pids = set(producer_ids)
        rx = re.compile(pattern) if pattern else None
        now = self.now_ms()
        out = []
        for txn_id, md in sorted(self.txns.items()):
            if md.state == S.DEAD:
                continue
            if state_filter and md.state not in wanted:
                continue
            if pids and md.producer_id not in pids:
                continue
            if duration_ms >= 0 and (md.txn_start_ms < 0 or now - md.txn_start_ms <= duration_ms):
                continue
            if rx is not None and not rx.fullmatch(txn_id):
                continue
            out.append(md)
        return out, unknown


def _ending(md: TxnMetadata) -> bool:
    """The transaction is being ended or fenced (a write of that decision is in flight). Adding partitions
    (pending Ongoing) does not stop produce or offset commits to partitions already in it."""
    return md.pending_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE)


# ------------------------------------------------------------------------------------------------ broker hook


def create_transaction_coordinator(services: TxnDeps, markers: MarkerWriter | None = None
                                   ) -> TransactionCoordinator:
    """A coordinator on the runtime over ``__transaction_state`` written through the replica manager,
    following its leadership (on one node: loaded now). ``markers``: how markers reach the partitions'
    leaders (by default written in this process: one node)."""
    config = TxnConfig.from_broker_config(services.config)
    existing = services.metadata.get(TRANSACTION_STATE_TOPIC)
    if existing is not None and int(existing.num_partitions) != config.num_partitions:
        log.warning("%s has %d partitions, transaction.state.log.num.partitions is %d: using %d",
                    TRANSACTION_STATE_TOPIC, existing.num_partitions, config.num_partitions,
                    existing.num_partitions)
        config.num_partitions = int(existing.num_partitions)
    clock = services.clock

    async def local_markers(pid: int, epoch: int, commit: bool, partitions: Iterable[tuple[str, int]],
                            coordinator_epoch: int) -> dict[tuple[str, int], int]:
        return await write_markers(services, pid, epoch, commit, partitions, coordinator_epoch)

    # Created on first use with Kafka's settings: compacted, internal, the configured partitions,
    # min.insync.replicas = transaction.state.log.min.isr
    spec = TopicSpec(TRANSACTION_STATE_TOPIC, config.num_partitions, config.replication_factor, {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(config.min_isr),
        "unclean.leader.election.enable": "false",
        "segment.bytes": str(config.segment_bytes),
    })
    coordinator = TransactionCoordinator(config, ReplicaCoordinatorLog(services, spec),
                                         markers or local_markers, services.producer_ids.next_id,
                                         clock.time_ms)

    def partition_exists(topic: str, partition: int) -> bool:
        t = services.metadata.get(topic)
        return t is not None and 0 <= partition < int(t.num_partitions)

    coordinator.partition_exists = partition_exists
    coordinator.follow(services.replica_manager)
    return coordinator
