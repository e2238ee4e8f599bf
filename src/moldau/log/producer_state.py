"""Idempotent / transactional producer state of one partition (Kafka's ProducerStateManager, reduced).

Per producer id: the current epoch, the metadata of its last 5 batches (first/last sequence, first/last
offset, max timestamp), the coordinator epoch and the first offset of an ongoing transaction.

Append rules (``check``), for a batch with producer_id >= 0 and base_sequence >= 0:

* same epoch and the (first, last) sequence of one of the last 5 batches -> duplicate: the log returns the
  original offsets without writing;
* epoch older than the known one -> INVALID_PRODUCER_EPOCH (47);
* epoch newer -> the batch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
* same epoch, sequence not last + 1 (with Kafka's wrap at Int.MaxValue) -> OUT_OF_ORDER_SEQUENCE_NUMBER;
* unknown producer id -> accepted whatever the sequence (Kafka >= 2.x after KIP-360: a producer whose state
  was lost with retention or expiry continues; UNKNOWN_PRODUCER_ID is no longer raised).

Producers are forgotten after ``producer.id.expiration.ms`` without a write (unless in a transaction), not
when the log start offset passes them (as in Kafka 3.x).

Snapshot files ``<20-digit offset>.snapshot`` use Kafka's version-1 layout: int16 version, uint32 CRC-32C of
everything after the CRC field, int32 entry count, entries of (producer_id int64, epoch int16, last_sequence
int32, last_offset int64, offset_delta int32, timestamp int64, coordinator_epoch int32,
current_txn_first_offset int64). moldau writes one entry per cached batch (oldest first), so it restores the
full 5-batch dedupe window; Kafka reading the same file keeps the last entry per producer, which is its own
state. The snapshot at offset N holds the state for all offsets < N.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from crc32c import crc32c

from moldau.protocol.records.batch import (
    increment_sequence,
)

from .checkpoint import atomic_write
from .errors import InvalidProducerEpochError, OutOfOrderSequenceError

log = logging.getLogger(__name__)

__all__ = ["BatchMetadata", "ProducerEntry", "ProducerStateManager", "CorruptSnapshotError", "MAX_BATCHES"]

MAX_BATCHES = 5
INT_MAX = 2147483647
_SNAP_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
SNAPSHOT_VERSION = 1


class CorruptSnapshotError(Exception):
    pass


def _decrease_sequence(seq: int, delta: int) -> int:
    if seq - delta < 0:
        return INT_MAX - (delta - seq) + 1
    return seq - delta


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    __slots__ = (
        "producer_id",
        "epoch",
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
    )

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=MAX_BATCHES)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1
        self.last_timestamp = -1

    def __repr__(self) -> str:
        return (
            f"ProducerEntry(pid={self.producer_id}, epoch={self.epoch}, last_seq={self.last_seq}, "
            f"txn_first={self.current_txn_first_offset}, batches={list(self.batches)})"
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class ProducerStateManager:
    def __init__(self, expiration_ms: int = 86400000) -> None:
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def clear(self) -> None:
        self.producers.clear()

    # ------------------------------------------------------------------------------------------ append
    def check(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        pending: dict[int, tuple[int, int]],
    ) -> BatchMetadata | None:
        """Validate one idempotent batch. Returns the original batch's metadata for a duplicate, None when the
        batch may be appended; raises on a fenced epoch or a sequence gap. ``pending`` carries (epoch, last
        sequence) of earlier batches of the same append and is updated."""
        cur = pending.get(producer_id)
        if cur is None:
            entry = self.producers.get(producer_id)
            if entry is None:
                pending[producer_id] = (epoch, last_seq)
                return None
            if epoch == entry.epoch:
                dup = entry.find_duplicate(first_seq, last_seq)
                if dup is not None:
                    return dup
            cur_epoch, cur_last = entry.epoch, entry.last_seq
        else:
            cur_epoch, cur_last = cur
        if epoch < cur_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {epoch} is older than the current epoch {cur_epoch}"
            )
        if epoch > cur_epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id}: invalid sequence {first_seq} for new epoch {epoch} (expected 0)"
                )
        elif not (first_seq == cur_last + 1 or (first_seq == 0 and cur_last == INT_MAX)):
            raise OutOfOrderSequenceError(
                f"producer {producer_id}: out of order sequence {first_seq} (epoch {epoch}), expected "
                f"{cur_last + 1}"
            )
        pending[producer_id] = (epoch, last_seq)
        return None

    def check_epoch(self, producer_id: int, epoch: int) -> None:
        """INVALID_PRODUCER_EPOCH for a batch of an epoch older than the producer's current one."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {epoch} is older than the current epoch {entry.epoch}"
            )

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        transactional: bool,
    ) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch)
        else:
            entry.set_epoch(epoch)
        if first_seq >= 0:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset

    def update_from_header(self, f: tuple, base_offset: int) -> None:
        """Replay one batch (header tuple from ``HEADER_STRUCT``) during load: no validation."""
        pid = f[9]
        if pid < 0:
            return
        attrs = f[5]
        if attrs & 0x20:  # control batch: transaction marker
            self.on_control(pid, f[10], f[8])
            return
        base_seq = f[11]
        lod = f[6]
        last_seq = increment_sequence(base_seq, lod) if base_seq >= 0 else -1
        self.update(pid, f[10], base_seq, last_seq, base_offset, base_offset + lod, f[8], bool(attrs & 0x10))

    def on_control(self, producer_id: int, epoch: int, timestamp: int, coordinator_epoch: int = -1) -> None:
        """A transaction marker (COMMIT or ABORT) ends the producer's ongoing transaction."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch > entry.epoch:
            entry.set_epoch(epoch)
        entry.current_txn_first_offset = -1
        if coordinator_epoch >= 0:
            entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest ongoing transaction (the LSO bound), None when there is none."""
        offsets = [
            e.current_txn_first_offset for e in self.producers.values() if e.current_txn_first_offset >= 0
        ]
        return min(offsets) if offsets else None

    # ------------------------------------------------------------------------------------------ expiry
    def remove_expired(self, now_ms: int) -> int:
        exp = self.expiration_ms
        dead = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= exp
        ]
        for pid in dead:
            del self.producers[pid]
        return len(dead)

    # ------------------------------------------------------------------------------------------ snapshots
    def snapshot_entries(self) -> list[tuple[int, int, int, int, int, int, int, int]]:
        """The snapshot's entries (as ``parse_snapshot`` returns them, for ``load_entries``): one per cached
        batch, oldest first, or one without a batch for a producer that has none."""
        out: list[tuple[int, int, int, int, int, int, int, int]] = []
        for pid, e in self.producers.items():
            if e.batches:
                for b in e.batches:
                    out.append((pid, e.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset,
                                b.timestamp, e.coordinator_epoch, e.current_txn_first_offset))
            else:
                out.append((pid, e.epoch, -1, -1, 0, e.last_timestamp, e.coordinator_epoch,
                            e.current_txn_first_offset))
        return out

    def snapshot_bytes(self) -> bytes:
        pack = _ENTRY.pack
        entries = self.snapshot_entries()
        body = _COUNT.pack(len(entries)) + b"".join(pack(*e) for e in entries)
        return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    def write_snapshot(self, path: str) -> None:
        """Durable on return (directory fsynced too): a clean-shutdown marker written after it never points
        at a snapshot that a power loss took away."""
        atomic_write(path, self.snapshot_bytes())

    @staticmethod
    def parse_snapshot(data: bytes) -> list[tuple[int, int, int, int, int, int, int, int]]:
        if len(data) < _SNAP_HEAD.size + _COUNT.size:
            raise CorruptSnapshotError("snapshot too short")
        version, crc = _SNAP_HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        body = memoryview(data)[_SNAP_HEAD.size :]
        if crc32c(body) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        (count,) = _COUNT.unpack_from(body, 0)
        if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
            raise CorruptSnapshotError("snapshot size does not match its entry count")
        return list(_ENTRY.iter_unpack(body[_COUNT.size :]))

    def load_snapshot(self, path: str, now_ms: int | None = None) -> None:
        with open(path, "rb") as f:
            data = f.read()
        entries = self.parse_snapshot(data)
        self.producers.clear()
        self.load_entries(entries, now_ms)

    def load_entries(
        self, entries: Iterable[tuple[int, int, int, int, int, int, int, int]], now_ms: int | None
    ) -> None:
        for pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first in entries:
            e = self.producers.get(pid)
            if e is None:
                e = self.producers[pid] = ProducerEntry(pid, epoch)
            else:
                e.set_epoch(epoch)
            e.coordinator_epoch = coord_epoch
            e.current_txn_first_offset = txn_first
            e.last_timestamp = ts
            if last_offset >= 0 and last_seq >= 0:
                e.batches.append(
                    BatchMetadata(
                        _decrease_sequence(last_seq, delta), last_seq, last_offset - delta, last_offset, ts
                    )
                )
        if now_ms is not None:
            self.remove_expired(now_ms)
