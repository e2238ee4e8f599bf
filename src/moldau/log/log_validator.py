"""What an append checks and computes before and after its one write (Kafka's
``UnifiedLog.analyzeAndValidateRecords``, ``analyzeAndValidateProducerState``, the offset assignment of
``LogValidator`` and ``updateProducers``), on the batches' parsed headers: records are not decoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from moldau.protocol.records.batch import (
    CONTROL_FLAG,
    INT32,
    INT64,
    TRANSACTIONAL_FLAG,
    control_type,
    increment_sequence,
    set_log_append_time,
)

from .config import LONG_MAX, LogConfig
from .errors import (
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from .producer_state import BatchMetadata, ProducerStateManager
from .txn_state import AbortedTransactions

__all__ = ["AppendAnalysis", "analyze", "check_producers", "assign_offsets", "update_producers"]


@dataclass(slots=True)
class AppendAnalysis:
    first_pos: int  # position of the first batch in the buffer
    end: int  # end of the last batch
    contiguous: bool  # the batches are one run of the buffer
    total: int  # bytes
    max_timestamp: int


def analyze(
    batches: Sequence[tuple[int, Any]], cfg: LogConfig, topic: str, partition: int, now_ms: int, leader: bool
) -> AppendAnalysis:
    """Sizes (max.message.bytes per batch, segment.bytes for the whole append) and, on a leader of a
    CreateTime topic, Kafka's timestamp bounds. ``topic``, ``partition``: for the errors."""
    max_msg = cfg.max_message_bytes
    first_pos = batches[0][0]
    end = first_pos
    contiguous = True
    total = 0
    append_max_ts = -1
    ts_checks = leader and not cfg.log_append_time and (
        cfg.message_timestamp_difference_max_ms < LONG_MAX
        or cfg.message_timestamp_before_max_ms < LONG_MAX
        or cfg.message_timestamp_after_max_ms < LONG_MAX
    )
    for pos, h in batches:
        size = h.batch_length + 12
        if size > max_msg:
            raise MessageTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes={max_msg} for {topic}-{partition}"
            )
        if pos != end:
            contiguous = False
        end = pos + size
        total += size
        if h.max_timestamp > append_max_ts:
            append_max_ts = h.max_timestamp
        if ts_checks:
            _check_timestamps(cfg, h, topic, partition, now_ms)
    if total > cfg.segment_bytes:
        raise RecordListTooLargeError(f"{total} bytes exceed segment.bytes={cfg.segment_bytes}")
    return AppendAnalysis(first_pos, end, contiguous, total, append_max_ts)


def _check_timestamps(cfg: LogConfig, h: Any, topic: str, partition: int, now_ms: int) -> None:
    """Kafka's CreateTime bounds, checked on the batch's base and max timestamps (records are not decoded;
    Kafka checks every record)."""
    for ts in (h.base_timestamp, h.max_timestamp):
        if ts < 0:
            continue
        if (
            abs(ts - now_ms) > cfg.message_timestamp_difference_max_ms
            or now_ms - ts > cfg.message_timestamp_before_max_ms
            or ts - now_ms > cfg.message_timestamp_after_max_ms
        ):
            raise InvalidTimestampError(
                f"timestamp {ts} of a batch for {topic}-{partition} is out of the accepted range around "
                f"{now_ms}"
            )


def check_producers(
    ps: ProducerStateManager, batches: Sequence[tuple[int, Any]]
) -> tuple[bool, BatchMetadata | None]:
    """A leader's idempotent-producer checks (duplicates, fencing, sequence gaps), before any byte is
    touched: (whether a batch has a producer id, the original batch when the append is a duplicate)."""
    has_pid = False
    pending: dict[int, tuple[int, int]] | None = None
    for _pos, h in batches:
        if h.producer_id >= 0:
            has_pid = True
            if h.base_sequence >= 0 and not h.attributes & CONTROL_FLAG:
                if pending is None:
                    pending = {}
                dup = ps.check(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    increment_sequence(h.base_sequence, h.last_offset_delta),
                    pending,
                )
                if dup is not None:
                    return has_pid, dup
            elif not h.attributes & CONTROL_FLAG:
                # a coordinator's batch without sequences (transactional offsets): fenced by a newer epoch all
                # the same (Kafka's checkProducerEpoch for every origin)
                ps.check_epoch(h.producer_id, h.producer_epoch)
    return has_pid, None


def assign_offsets(
    buf: Any, batches: Sequence[tuple[int, Any]], next_offset: int, leader_epoch: int, leader: bool,
    log_append_time: bool, now_ms: int,
) -> list[tuple[int, int, int, int]]:
    """(base, last offset, max timestamp, size) of each batch. A ``leader`` writes the base offsets from
    ``next_offset`` and ``leader_epoch`` into ``buf`` (and with ``log_append_time`` the batches' timestamps);
    a follower's batches keep the leader's offsets, which must not go below ``next_offset``."""
    metas: list[tuple[int, int, int, int]] = []
    next_off = next_offset
    for pos, h in batches:
        size = h.batch_length + 12
        if leader:
            base = next_off
            INT64.pack_into(buf, pos, base)
            INT32.pack_into(buf, pos + 12, leader_epoch)
        else:
            (base,) = INT64.unpack_from(buf, pos)
            if base < next_off:
                raise UnexpectedAppendOffsetError(
                    f"append at offset {base} below the log end offset {next_off}"
                )
        ts = h.max_timestamp
        if log_append_time:
            set_log_append_time(buf, pos, now_ms)
            ts = now_ms
        last = base + h.last_offset_delta
        metas.append((base, last, ts, size))
        next_off = last + 1
    return metas


def update_producers(
    ps: ProducerStateManager, aborted: AbortedTransactions, buf: Any, batches: Sequence[tuple[int, Any]],
    metas: list[tuple[int, int, int, int]],
) -> None:
    """After the write: each producer's last batches, and the transactions ended by markers."""
    for (pos, h), (base, last, ts, _size) in zip(batches, metas):
        pid = h.producer_id
        if pid < 0:
            continue
        if h.attributes & CONTROL_FLAG:
            aborted.on_marker(pid, h.producer_epoch, ts, base, control_type(buf, pos))
        else:
            bs = h.base_sequence
            ps.update(
                pid, h.producer_epoch, bs,
                increment_sequence(bs, h.last_offset_delta) if bs >= 0 else -1,
                base, last, ts, bool(h.attributes & TRANSACTIONAL_FLAG),
            )
