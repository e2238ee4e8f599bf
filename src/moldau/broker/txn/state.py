"""Transaction state: the state machine of one transactional id and the records of ``__transaction_state``.

States (Kafka's ``TransactionState``; the id is what ``TransactionStatus`` holds on disk, the name is what
DescribeTransactions / ListTransactions report)::

    0 Empty  1 Ongoing  2 PrepareCommit  3 PrepareAbort  4 CompleteCommit  5 CompleteAbort  6 Dead
    7 PrepareEpochFence

Legal transitions (Kafka's ``validPreviousStates``; the TV2 additions let an EndTxn v5 abort bump the epoch
of a producer that has no transaction open)::

    Empty             <- Empty, CompleteCommit, CompleteAbort
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit     <- Ongoing
    PrepareAbort      <- Ongoing, PrepareEpochFence, (TV2: Empty, CompleteCommit, CompleteAbort)
    CompleteCommit    <- PrepareCommit
    CompleteAbort     <- PrepareAbort
    Dead              <- Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence <- Ongoing

``PrepareEpochFence`` is never written: it is the in-memory step between "this transaction must be fenced"
(a new producer with the same transactional id, or the transaction timed out) and the PrepareAbort record
that carries the bumped epoch.

Records (Kafka's formats byte for byte; every key and value starts with an int16 version):

* key, ``TransactionLogKey`` v0: ``transactional_id`` (int16-length string).
* value, ``TransactionLogValue`` v0: producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
  transaction_status int8, transaction_partitions (nullable int32-count array of (topic string, int32-count
  array of int32)), transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64.
* value v1 (flexible, written by Kafka for transactions V2 clients): the same fields with compact arrays and
  strings, per-struct tagged-field sections, and tagged fields 0 previous_producer_id (int64, default -1),
  1 next_producer_id (int64, default -1), 2 client_transaction_version (int16, default 0).
* a null value (tombstone) removes an expired transactional id.

``transaction_partitions`` is null for Empty (Kafka writes no partitions then) and a list otherwise (empty
for the Complete states).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from moldau.protocol.errors import ErrorCode
from moldau.protocol.primitives import (
    read_tagged_fields,
    read_uvarint,
    write_tagged_fields,
    write_uvarint,
)

from ..metadata import TRANSACTION_STATE_TOPIC  # noqa: F401  (re-exported)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">qhib")      # producer id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")        # last update, start


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        return STATE_NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in STATE_NAMES.items()}

S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class RecordFormatError(ValueError):
    """A __transaction_state key or value that cannot be parsed."""


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow (a bug, never a client error)."""


# ------------------------------------------------------------------------------------------- records


@dataclass(slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: list[tuple[str, list[int]]] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # tag 0, v1+
    next_producer_id: int = NO_PRODUCER_ID  # tag 1, v1+
    client_transaction_version: int = 0  # tag 2, v1+
    version: int = 0
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    if len(raw) > 32767:
        raise RecordFormatError("transactional id too long")
    return _I16.pack(0) + _I16.pack(len(raw)) + raw


def decode_key(buf: bytes | bytearray | memoryview) -> str:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise RecordFormatError(f"unknown TransactionLogKey version {version}")
        (n,) = _I16.unpack_from(buf, 2)
        if n < 0 or 4 + n > len(buf):
            raise RecordFormatError("bad transactional id length")
        return bytes(buf[4:4 + n]).decode("utf-8")
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"unreadable TransactionLogKey: {exc}") from exc


def encode_value(v: TransactionLogValue) -> bytes:
    out = bytearray(_I16.pack(v.version))
    out += _VALUE_HEAD.pack(v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status)
    parts = v.transaction_partitions
    if v.version == 0:
        if parts is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(parts))
            for topic, ids in parts:
                raw = topic.encode("utf-8")
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
                for i in ids:
                    out += _I32.pack(i)
        out += _VALUE_TAIL.pack(v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms)
        return bytes(out)
    if v.version != 1:
        raise RecordFormatError(f"unknown TransactionLogValue version {v.version}")
    if parts is None:
        out.append(0)
    else:
        write_uvarint(out, len(parts) + 1)
        for topic, ids in parts:
            raw = topic.encode("utf-8")
            write_uvarint(out, len(raw) + 1)
            out += raw
            write_uvarint(out, len(ids) + 1)
            for i in ids:
                out += _I32.pack(i)
            out.append(0)  # no tagged fields in PartitionsSchema
    out += _VALUE_TAIL.pack(v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms)
    tags = dict(v.unknown_tags)
    if v.previous_producer_id != NO_PRODUCER_ID:
        tags[0] = _I64.pack(v.previous_producer_id)
    if v.next_producer_id != NO_PRODUCER_ID:
        tags[1] = _I64.pack(v.next_producer_id)
    if v.client_transaction_version != 0:
        tags[2] = _I16.pack(v.client_transaction_version)
    write_tagged_fields(out, tags)
    return bytes(out)


def decode_value(buf: bytes | bytearray | memoryview) -> TransactionLogValue:
    try:
        return _decode_value(buf)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, RecordFormatError):
            raise
        raise RecordFormatError(f"unreadable TransactionLogValue: {exc}") from exc


def _decode_value(buf: Any) -> TransactionLogValue:
    (version,) = _I16.unpack_from(buf, 0)
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 2)
    pos = 2 + _VALUE_HEAD.size
    parts: list[tuple[str, list[int]]] | None
    if version == 0:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if n < 0:
            parts = None
        else:
            parts = []
            for _ in range(n):
                (tl,) = _I16.unpack_from(buf, pos)
                pos += 2
                topic = bytes(buf[pos:pos + tl]).decode("utf-8")
                pos += tl
                (k,) = _I32.unpack_from(buf, pos)
                pos += 4
                ids = [x for (x,) in struct.iter_unpack(">i", bytes(buf[pos:pos + 4 * k]))] if k > 0 else []
                pos += 4 * max(k, 0)
                parts.append((topic, ids))
        last, start = _VALUE_TAIL.unpack_from(buf, pos)
        return TransactionLogValue(pid, epoch, timeout, status, parts, last, start, version=0)
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        parts = None
    else:
        parts = []
        for _ in range(n - 1):
            tl, pos = read_uvarint(buf, pos)
            tl -= 1
            topic = bytes(buf[pos:pos + tl]).decode("utf-8")
            pos += tl
            k, pos = read_uvarint(buf, pos)
            k -= 1
            ids = [x for (x,) in struct.iter_unpack(">i", bytes(buf[pos:pos + 4 * k]))] if k > 0 else []
            pos += 4 * max(k, 0)
            _tags, pos = read_tagged_fields(buf, pos)
            parts.append((topic, ids))
    last, start = _VALUE_TAIL.unpack_from(buf, pos)
    pos += _VALUE_TAIL.size
    tags, pos = read_tagged_fields(buf, pos)
    tags = dict(tags or {})
    v = TransactionLogValue(pid, epoch, timeout, status, parts, last, start, version=1)
    if 0 in tags:
        (v.previous_producer_id,) = _I64.unpack(tags.pop(0))
    if 1 in tags:
        (v.next_producer_id,) = _I64.unpack(tags.pop(1))
    if 2 in tags:
        (v.client_transaction_version,) = _I16.unpack(tags.pop(2))
    v.unknown_tags = tags
    return v


def group_partitions(partitions: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """{(topic, partition)} -> [(topic, [partitions...])] sorted (deterministic records)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The __transaction_state partition of ``transactional_id``: abs(String.hashCode) % partitions."""
    from moldau.protocol.consumer_offsets import partition_for as pf

    return pf(transactional_id, num_partitions)


# ------------------------------------------------------------------------------------------- metadata


@dataclass(slots=True)
class TxnTransit:
    """The target of one transition: what gets written, and what the metadata becomes once it is."""

    producer_id: int
    last_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    txn_start_ms: int
    txn_last_update_ms: int
    client_transaction_version: int = 0

    def to_value(self) -> TransactionLogValue:
        parts = None if self.state == TxnState.EMPTY else group_partitions(self.partitions)
        tv2 = self.client_transaction_version >= 2
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=parts,
            transaction_last_update_timestamp_ms=self.txn_last_update_ms,
            transaction_start_timestamp_ms=self.txn_start_ms,
            previous_producer_id=self.last_producer_id if tv2 else NO_PRODUCER_ID,
            next_producer_id=self.next_producer_id if tv2 else NO_PRODUCER_ID,
            client_transaction_version=self.client_transaction_version if tv2 else 0,
            version=1 if tv2 else 0,
        )


class TxnMetadata:
    """The coordinator's view of one transactional id (Kafka's TransactionMetadata)."""

    __slots__ = (
        "client_transaction_version",
        "failed_epoch_fence",
        "groups",
        "last_producer_epoch",
        "last_producer_id",
        "lock",
        "markers_left",
        "next_producer_id",
        "partitions",
        "pending_state",
        "producer_epoch",
        "producer_id",
        "state",
        "transactional_id",
        "txn_last_update_ms",
        "txn_start_ms",
        "txn_timeout_ms",
    )

    def __init__(self, transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int, *,
                 last_producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, state: TxnState = TxnState.EMPTY,
                 partitions: Iterable[tuple[str, int]] = (), txn_start_ms: int = -1,
                 client_transaction_version: int = 0) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.next_producer_id = NO_PRODUCER_ID
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[tuple[str, int]] = set(partitions)
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = now_ms
        self.client_transaction_version = client_transaction_version
        self.pending_state: TxnState | None = None
        self.groups: set[str] = set()     # groups of TxnOffsetCommit in this transaction (in memory only)
        self.failed_epoch_fence = False
        self.markers_left: set[tuple[str, int]] | None = None  # partitions whose marker is still due
        self.lock: Any = None             # asyncio.Lock, made by the coordinator

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, "
                f"state={self.state.display_name}, partitions={sorted(self.partitions)})")

    # -------------------------------------------------------------------------------------- queries
    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= SHORT_MAX - 1

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    # -------------------------------------------------------------------------------------- transitions
    def _transit(self, state: TxnState, *, producer_id: int | None = None,
                 last_producer_id: int | None = None,
                 producer_epoch: int | None = None, last_producer_epoch: int | None = None,
                 txn_timeout_ms: int | None = None, partitions: Iterable[tuple[str, int]] | None = None,
                 txn_start_ms: int | None = None, now_ms: int | None = None,
                 client_transaction_version: int | None = None) -> TxnTransit:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: cannot go from {self.state.display_name} to {state.display_name}")
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id if last_producer_id is None else last_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(self.last_producer_epoch if last_producer_epoch is None
                                 else last_producer_epoch),
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            partitions=frozenset(self.partitions if partitions is None else partitions),
            txn_start_ms=self.txn_start_ms if txn_start_ms is None else txn_start_ms,
            txn_last_update_ms=self.txn_last_update_ms if now_ms is None else now_ms,
            client_transaction_version=(self.client_transaction_version if client_transaction_version is None
                                        else client_transaction_version),
        )

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int
                                ) -> TxnTransit | int:
        """InitProducerId on a completed transaction: bump the epoch. Returns the transit or an error code
        (PRODUCER_FENCED when the expected epoch is neither the current nor the previous one)."""
        if self.epoch_exhausted:
            raise IllegalTransitionError(f"no more epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            nxt, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            nxt, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            nxt, last = self.producer_epoch, self.last_producer_epoch  # retry of a bump that succeeded
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._transit(TxnState.EMPTY, producer_epoch=nxt, last_producer_epoch=last,
                             txn_timeout_ms=timeout_ms, partitions=(), txn_start_ms=-1, now_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: a new producer id, epoch 0."""
        return self._transit(TxnState.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
                             producer_epoch=0,
                             last_producer_epoch=(self.producer_epoch if record_last_epoch
                                                  else NO_PRODUCER_EPOCH),
                             txn_timeout_ms=timeout_ms, partitions=(), txn_start_ms=-1, now_ms=now_ms)

    def prepare_fence_epoch(self) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with the epoch bumped (never twice after a failed fence write)."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTransitionError(f"cannot fence producer id {self.producer_id} at epoch {SHORT_MAX}")
        bumped = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._transit(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=bumped,
                             last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_add_partitions(self, partitions: Iterable[tuple[str, int]], now_ms: int,
                               client_transaction_version: int | None = None) -> TxnTransit:
        new = set(self.partitions) | set(partitions)
        start = now_ms if self.state in COMPLETED else self.txn_start_ms
        return self._transit(TxnState.ONGOING, partitions=new, txn_start_ms=start, now_ms=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, *, producer_epoch: int | None = None,
                                last_producer_epoch: int | None = None,
                                client_transaction_version: int | None = None) -> TxnTransit:
        return self._transit(state, producer_epoch=producer_epoch, last_producer_epoch=last_producer_epoch,
                             now_ms=now_ms, client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        committing = self.state == TxnState.PREPARE_COMMIT
        target = TxnState.COMPLETE_COMMIT if committing else TxnState.COMPLETE_ABORT
        return self._transit(target, partitions=(), now_ms=now_ms)

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply a transit once its record is written."""
        if self.state not in VALID_PREVIOUS[t.state] and not (
                t.state == TxnState.PREPARE_ABORT and self.state == TxnState.PREPARE_EPOCH_FENCE):
            raise IllegalTransitionError(
                f"{self.transactional_id}: cannot complete {self.state.display_name} -> "
                f"{t.state.display_name}")
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.txn_start_ms = t.txn_start_ms
        self.txn_last_update_ms = t.txn_last_update_ms
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None
        if t.state in COMPLETED:
            self.groups.clear()

    @classmethod
    def from_value(cls, transactional_id: str, v: TransactionLogValue) -> TxnMetadata:
        try:
            state = TxnState(v.transaction_status)
        except ValueError as exc:
            raise RecordFormatError(
                f"{transactional_id}: unknown transaction status {v.transaction_status}") from exc
        parts = [(t, p) for t, ps in (v.transaction_partitions or []) for p in ps]
        md = cls(transactional_id, v.producer_id, v.transaction_timeout_ms,
                 v.transaction_last_update_timestamp_ms,
                 last_producer_id=v.previous_producer_id, producer_epoch=v.producer_epoch, state=state,
                 partitions=parts, txn_start_ms=v.transaction_start_timestamp_ms,
                 client_transaction_version=v.client_transaction_version)
        md.next_producer_id = v.next_producer_id
        return md
