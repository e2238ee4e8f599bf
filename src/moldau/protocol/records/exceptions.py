"""Exceptions raised by the record-format code.

Each carries the Kafka error ``code`` a broker answers with (CORRUPT_MESSAGE = 2, INVALID_RECORD = 87,
UNSUPPORTED_COMPRESSION_TYPE = 76), so a handler can map any of them straight to a partition error.
They derive from ``ValueError`` so callers that only know "bad input" still catch them.
"""

from __future__ import annotations

__all__ = [
    "RecordError",
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedCompressionError",
]


class RecordError(ValueError):
    """Base class: malformed or unacceptable record data."""

    code: int = -1  # UNKNOWN_SERVER_ERROR
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False


class CorruptRecordError(RecordError):
    """CORRUPT_MESSAGE (2): the bytes do not frame / checksum correctly."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True  # Kafka marks CorruptRecordException retriable


class InvalidRecordError(RecordError):
    """INVALID_RECORD (87): well-framed, but the contents break the format's rules."""

    code = 87
    name = "INVALID_RECORD"


class UnsupportedCompressionError(RecordError):
    """UNSUPPORTED_COMPRESSION_TYPE (76): unknown codec id in the attributes."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
