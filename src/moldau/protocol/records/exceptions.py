"""Exceptions raised by the record-format code.

Each is a ``moldau.protocol.errors.KafkaError`` carrying the Kafka error ``code`` a broker answers with
(CORRUPT_MESSAGE = 2, INVALID_RECORD = 87, UNSUPPORTED_COMPRESSION_TYPE = 76) and also a subclass of the
generated per-code class (``errors.CorruptMessageError`` ...), so ``except`` on either works. They derive from
``ValueError`` too, so callers that only know "bad input" still catch them.
"""

from __future__ import annotations

from moldau.protocol import errors as _errors
from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "RecordError",
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedCompressionError",
]


class RecordError(KafkaError, ValueError):
    """Base class: malformed or unacceptable record data."""

    code = ErrorCode.CORRUPT_MESSAGE


class CorruptRecordError(RecordError, _errors.CorruptMessageError):  # type: ignore[name-defined]
    """CORRUPT_MESSAGE (2): the bytes do not frame / checksum / decompress correctly. Retriable."""

    code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordError, _errors.InvalidRecordError):  # type: ignore[name-defined]
    """INVALID_RECORD (87): well-framed, but the contents break the format's rules."""

    code = ErrorCode.INVALID_RECORD


class UnsupportedCompressionError(RecordError, _errors.UnsupportedCompressionTypeError):  # type: ignore[name-defined]
    """UNSUPPORTED_COMPRESSION_TYPE (76): unknown codec id, or a codec the message format cannot carry."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
