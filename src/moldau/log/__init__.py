"""moldau's storage engine: Kafka's on-disk log layout (segments, indexes, checkpoints), append/read by
offset, recovery, retention, idempotent-producer and transaction state. Contract: docs/architecture.md,
"moldau.log".

API summary::

    lm = LogManager(log_dirs, default_config, clock=time, *, node_id=1, cluster_id=None,
                    max_open_segments=None, flush_executor=None,
                    retention_check_interval_ms=300000, checkpoint_interval_ms=60000)   # loads at once
    lm.cluster_id / lm.node_id                      # from/into meta.properties
    lm.create(topic, partition, config=None, topic_id=None) -> PartitionLog   # alias get_or_create_log
    lm.get(topic, partition) -> PartitionLog | None; lm.partitions(); lm.topic_id(topic)
    lm.delete(topic, partition); lm.delete_topic(topic); lm.update_config(topic, config)
    lm.tick(now_ms)   # roll by segment.ms, retention, background flushes, checkpoints
    lm.checkpoint(); lm.drain(); lm.close()

    log.append(buf, batches, now_ms, *, assign_offsets=True, leader_epoch=0) -> AppendInfo(
        base_offset, last_offset, log_append_time, log_start_offset, duplicate)
    log.read(offset, max_bytes, *, max_offset=None, min_one=True) -> ReadResult(
        chunks, first_offset, last_offset_exclusive, size, aborted_transactions)
    log.offset_for_timestamp(ts) -> (offset, timestamp) | None; log.max_timestamp_offset()
    log.log_start_offset, log.log_end_offset, log.high_watermark (set by the broker), log.last_stable_offset,
    log.recovery_point, log.unflushed_messages, log.needs_flush(), log.flush()  (thread-safe)
    log.delete_records_before(offset), log.truncate_to(offset), log.enforce_retention(now_ms), log.roll()
    log.end_offset_for_epoch(epoch), log.leader_epochs, log.update_config(config), log.close(), log.delete()

Errors are ``LogError`` subclasses (``moldau.protocol.errors.KafkaError``s) carrying the Kafka error ``code``.
"""

from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidTimestampError,
    InvalidTopicError,
    LogError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    StorageError,
)
from .manager import LogManager
from .partition_log import AppendInfo, PartitionLog, ReadResult
from .producer_state import ProducerStateManager
from .segment import Segment, SegmentCache

__all__ = [
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "AppendInfo",
    "ReadResult",
    "Segment",
    "SegmentCache",
    "ProducerStateManager",
    "LogError",
    "OffsetOutOfRangeError",
    "CorruptRecordError",
    "MessageTooLargeError",
    "RecordListTooLargeError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidConfigError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "StorageError",
]
