"""moldau's storage engine: Kafka's on-disk log layout (segments, indexes, checkpoints), append/read by offset,
recovery, retention, idempotent-producer state. See docs/architecture.md, section "moldau.log"."""

from .config import LogConfig
from .errors import (
    LogError,
    OffsetOutOfRangeError,
    CorruptRecordError,
    MessageTooLargeError,
    RecordListTooLargeError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidConfigError,
    OutOfOrderSequenceError,
    InvalidProducerEpochError,
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
