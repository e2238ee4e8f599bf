"""Client-side exceptions.

Broker error codes are raised as ``KafkaError`` (from ``moldau.protocol.errors``: carries ``code``,
``retriable`` and the code's name). Conditions the client detects itself (connection failures, timeouts,
versions the broker does not offer, a full buffer) have their own classes here; all of them derive from
``ClientError``.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import errors as _perr

__all__ = [
    "ClientError",
    "KafkaConnectionError",
    "BootstrapError",
    "KafkaTimeoutError",
    "RequestTimedOutError",
    "UnsupportedVersionError",
    "BufferExhaustedError",
    "ProducerClosedError",
    "ConsumerClosedError",
    "IllegalStateError",
    "NoOffsetForPartitionError",
    "CommitFailedError",
    "RebalanceInProgressError",
    "broker_error",
    "error_name",
    "is_retriable",
    "Codes",
]


class ClientError(Exception):
    """Base class of errors detected by the client itself."""

    retriable = False


class KafkaConnectionError(ClientError):
    """A TCP connection to a broker failed or was lost."""

    retriable = True


class BootstrapError(KafkaConnectionError):
    """None of the bootstrap servers could be reached."""

    retriable = False


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete in its time bound (max.block.ms, delivery.timeout.ms, a call's timeout)."""

    retriable = True


class RequestTimedOutError(KafkaTimeoutError):
    """No response within request.timeout.ms; the connection is closed (responses come back in order)."""


class UnsupportedVersionError(ClientError):
    """The broker offers no version of an API this client can speak."""


class BufferExhaustedError(KafkaTimeoutError):
    """buffer.memory stayed full for max.block.ms."""


class ProducerClosedError(ClientError):
    pass


class ConsumerClosedError(ClientError):
    pass


class IllegalStateError(ClientError):
    pass


class NoOffsetForPartitionError(ClientError):
    """auto.offset.reset=none and the partition has no committed offset."""


class CommitFailedError(ClientError):
    """The group rebalanced before the commit could complete; the partitions may now belong to another member."""


class RebalanceInProgressError(ClientError):
    retriable = True


class Codes:
    """Kafka error codes the client acts on."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_PRODUCER_ID_MAPPING = 49
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    INCONSISTENT_TOPIC_ID = 103
    UNKNOWN_TOPIC_ID = 100
    FENCED_MEMBER_EPOCH = 110


# Retriable codes (Kafka's RetriableException subclasses), used when the protocol table is not available.
_RETRIABLE = {
    2, 3, 5, 6, 7, 8, 9, 13, 14, 15, 16, 19, 20, 46, 56, 74, 75, 78, 80, 88, 89, 100, 103,
}


def _protocol_table() -> Any:
    return getattr(_perr, "ErrorCode", None)


def error_name(code: int) -> str:
    table = _protocol_table()
    if table is not None:
        try:
            return table(code).name  # type: ignore[operator]
        except Exception:  # noqa: BLE001 - unknown code
            pass
        for attr in ("by_code", "from_code", "for_code"):
            fn = getattr(table, attr, None)
            if callable(fn):
                try:
                    return fn(code).name
                except Exception:  # noqa: BLE001
                    pass
    for name, value in vars(Codes).items():
        if value == code and name.isupper():
            return name
    return f"ERROR_{code}"


def is_retriable(code: int) -> bool:
    return code in _RETRIABLE


def broker_error(code: int, message: str | None = None) -> Exception:
    """The exception for a broker error code (moldau.protocol.errors.KafkaError when available)."""
    text = f"{error_name(code)} ({code})" + (f": {message}" if message else "")
    cls = getattr(_perr, "KafkaError", None)
    if cls is not None:
        for factory in (getattr(cls, "for_code", None), getattr(_perr, "error_for_code", None)):
            if callable(factory):
                try:
                    return factory(code, message)
                except Exception:  # noqa: BLE001
                    pass
        try:
            return cls(code, message)
        except Exception:  # noqa: BLE001
            pass
    return BrokerError(code, text)


class BrokerError(ClientError):
    """Fallback broker error (used until moldau.protocol.errors.KafkaError is available)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = code in _RETRIABLE
