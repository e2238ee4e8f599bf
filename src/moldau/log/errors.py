"""Exceptions raised by the storage engine: ``moldau.protocol.errors.KafkaError`` subclasses.

Each class derives from ``LogError`` and from the protocol's per-code class (``OffsetOutOfRangeError`` is also
a ``moldau.protocol.errors.OffsetOutOfRangeError``), so ``except LogError``, ``except KafkaError`` and
``except`` on the per-code class all work. ``.code`` is the ``ErrorCode`` (an int, ``OFFSET_OUT_OF_RANGE`` ==
1), ``.name`` its Kafka name and ``.retriable`` Kafka's retriable flag, all from the protocol's error table; a
handler maps any of them straight to a partition error: ``except LogError as e: error_code = e.code``.

Unlike a plain KafkaError, ``str()`` of a LogError is its message alone (no ``[NAME (code)]`` prefix): the
broker answers it as the partition's ``error_message``.
"""

from __future__ import annotations

from moldau.protocol import errors as _perr
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records.exceptions import CorruptRecordError as _RecordsCorruptRecordError

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

# The codes the engine raises (ErrorCode members, equal to the plain ints).
UNKNOWN_SERVER_ERROR = ErrorCode.UNKNOWN_SERVER_ERROR
OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE
CORRUPT_MESSAGE = ErrorCode.CORRUPT_MESSAGE
MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE
INVALID_TOPIC_EXCEPTION = ErrorCode.INVALID_TOPIC_EXCEPTION
RECORD_LIST_TOO_LARGE = ErrorCode.RECORD_LIST_TOO_LARGE
INVALID_TIMESTAMP = ErrorCode.INVALID_TIMESTAMP
INVALID_CONFIG = ErrorCode.INVALID_CONFIG
OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
INVALID_PRODUCER_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH
KAFKA_STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR


class LogError(KafkaError):
    """Base class: a storage-engine failure with a Kafka error code (UNKNOWN_SERVER_ERROR unless a subclass or
    ``code=`` says otherwise). The code comes from the per-code protocol class each subclass also derives
    from, so LogError itself sets none."""

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message or None, code)
        if not message:
            self.args = (self.name,)

    def __str__(self) -> str:
        return Exception.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, {str(self)!r})"


# The per-code protocol classes are generated at import time, hence the type: ignore on each base.


class OffsetOutOfRangeError(LogError, _perr.OffsetOutOfRangeError):  # type: ignore[name-defined]
    """OFFSET_OUT_OF_RANGE (1)."""


class CorruptRecordError(LogError, _RecordsCorruptRecordError):
    """CORRUPT_MESSAGE (2), retriable; also the record format's ``CorruptRecordError``."""


class MessageTooLargeError(LogError, _perr.MessageTooLargeError):  # type: ignore[name-defined]
    """MESSAGE_TOO_LARGE (10): a batch above max.message.bytes."""


class RecordListTooLargeError(LogError, _perr.RecordListTooLargeError):  # type: ignore[name-defined]
    """RECORD_LIST_TOO_LARGE (18): an append larger than segment.bytes."""


class InvalidTimestampError(LogError, _perr.InvalidTimestampError):  # type: ignore[name-defined]
    """INVALID_TIMESTAMP (32)."""


class InvalidTopicError(LogError, _perr.InvalidTopicExceptionError):  # type: ignore[name-defined]
    """INVALID_TOPIC_EXCEPTION (17)."""


class InvalidConfigError(LogError, _perr.InvalidConfigError, ValueError):  # type: ignore[name-defined]
    """INVALID_CONFIG (40): a topic/log configuration value is invalid; ``key`` names the offending Kafka
    config key."""

    def __init__(self, message: str = "", *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class OutOfOrderSequenceError(LogError, _perr.OutOfOrderSequenceNumberError):  # type: ignore[name-defined]
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""


class InvalidProducerEpochError(LogError, _perr.InvalidProducerEpochError):  # type: ignore[name-defined]
    """INVALID_PRODUCER_EPOCH (47)."""


class StorageError(LogError, _perr.KafkaStorageErrorError):  # type: ignore[name-defined]
    """KAFKA_STORAGE_ERROR (56), retriable: an I/O error on the log directory."""


class UnexpectedAppendOffsetError(LogError, _perr.UnknownServerErrorError):  # type: ignore[name-defined]
    """A follower-style append (assign_offsets=False) whose offsets go backwards (Kafka's
    UnexpectedAppendOffsetException, reported as UNKNOWN_SERVER_ERROR)."""
