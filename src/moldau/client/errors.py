"""Client-side exceptions.

Broker error codes are raised as ``KafkaError`` (from ``moldau.protocol.errors``: carries ``code``,
``retriable`` and the code's name). Conditions the client detects itself (connection failures, timeouts,
versions the broker does not offer, a full buffer) have their own classes here; all of them derive from
``ClientError``.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.errors import SaslAuthenticationFailedError as _SaslAuthenticationFailed
from moldau.protocol.errors import UnsupportedSaslMechanismError as _UnsupportedSaslMechanism

__all__ = [
    "ClientError",
    "KafkaConnectionError",
    "BootstrapError",
    "KafkaTimeoutError",
    "AuthenticationError",
    "SaslAuthenticationError",
    "SaslMechanismError",
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
    "KafkaError",
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


class AuthenticationError(ClientError):
    """Authentication with a broker failed: wrong SASL credentials, a mechanism the broker does not enable, a
    broker certificate that does not verify. Fatal: the client does not retry it."""

    retriable = False


class SaslAuthenticationError(AuthenticationError, _SaslAuthenticationFailed):
    """The broker refused the SASL credentials (SASL_AUTHENTICATION_FAILED, 58); carries its message."""

    retriable = False


class SaslMechanismError(AuthenticationError, _UnsupportedSaslMechanism):
    """The broker does not enable the configured sasl.mechanism (UNSUPPORTED_SASL_MECHANISM, 33)."""

    retriable = False


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete in its time bound (max.block.ms, delivery.timeout.ms, a call's
    timeout)."""

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
    """The group rebalanced before the commit could complete; the partitions may now belong to another
    member."""


class RebalanceInProgressError(ClientError):
    retriable = True


# Kafka's error codes (an IntEnum: ``Codes.NOT_LEADER_OR_FOLLOWER == 6``), from moldau.protocol.errors
Codes = ErrorCode


def error_name(code: int) -> str:
    return ErrorCode.of(code).name if code in _KNOWN else f"ERROR_{code}"


def is_retriable(code: int) -> bool:
    return ErrorCode.of(code).retriable if code in _KNOWN else False


def broker_error(code: int, message: str | None = None) -> KafkaError:
    """The moldau.protocol.errors exception for a broker error code (carries .code and .retriable)."""
    return KafkaError.for_code(code, message)


_KNOWN = frozenset(int(c) for c in ErrorCode)
