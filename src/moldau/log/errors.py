"""Exceptions raised by the storage engine, each carrying the Kafka error code a broker answers with.

``LogError.code`` is the Kafka error code (``OFFSET_OUT_OF_RANGE`` = 1, ...), ``name`` its Kafka name and
``retriable`` Kafka's retriable flag, so a handler maps any of them straight to a partition error:
``except LogError as e: error_code = e.code``.

``moldau.protocol.errors`` had no exception table when this was written; these classes only need ``code``,
``name`` and ``retriable``, so they can later derive from ``moldau.protocol.errors.KafkaError`` without any
change to callers.
"""

from __future__ import annotations

__all__ = [
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
    "UnexpectedAppendOffsetError",
    "OFFSET_OUT_OF_RANGE",
    "CORRUPT_MESSAGE",
    "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE",
    "INVALID_TIMESTAMP",
    "INVALID_TOPIC_EXCEPTION",
    "INVALID_CONFIG",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "INVALID_PRODUCER_EPOCH",
    "KAFKA_STORAGE_ERROR",
    "UNKNOWN_SERVER_ERROR",
]

UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
INVALID_CONFIG = 40
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56


class LogError(Exception):
    """Base class: a storage-engine failure with a Kafka error code."""

    code: int = UNKNOWN_SERVER_ERROR
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message or self.name)
        if code is not None:
            self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, {str(self)!r})"


class OffsetOutOfRangeError(LogError):
    code = OFFSET_OUT_OF_RANGE
    name = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(LogError):
    code = CORRUPT_MESSAGE
    name = "CORRUPT_MESSAGE"
    retriable = True


class MessageTooLargeError(LogError):
    code = MESSAGE_TOO_LARGE
    name = "MESSAGE_TOO_LARGE"


class RecordListTooLargeError(LogError):
    code = RECORD_LIST_TOO_LARGE
    name = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(LogError):
    code = INVALID_TIMESTAMP
    name = "INVALID_TIMESTAMP"


class InvalidTopicError(LogError):
    code = INVALID_TOPIC_EXCEPTION
    name = "INVALID_TOPIC_EXCEPTION"


class InvalidConfigError(LogError, ValueError):
    """A topic/log configuration value is invalid; ``key`` names the offending Kafka config key."""

    code = INVALID_CONFIG
    name = "INVALID_CONFIG"

    def __init__(self, message: str = "", *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class OutOfOrderSequenceError(LogError):
    code = OUT_OF_ORDER_SEQUENCE_NUMBER
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    code = INVALID_PRODUCER_EPOCH
    name = "INVALID_PRODUCER_EPOCH"


class StorageError(LogError):
    """KAFKA_STORAGE_ERROR: an I/O error on the log directory."""

    code = KAFKA_STORAGE_ERROR
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class UnexpectedAppendOffsetError(LogError):
    """A follower-style append (assign_offsets=False) whose offsets go backwards (Kafka's
    UnexpectedAppendOffsetException, reported as UNKNOWN_SERVER_ERROR)."""

    code = UNKNOWN_SERVER_ERROR
    name = "UNKNOWN_SERVER_ERROR"
