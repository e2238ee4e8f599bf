"""Type variables and aliases shared by the client's modules.

Typing only: the aliases are plain ``typing`` objects and nothing here runs on a send or poll path. The
record type variables have defaults (PEP 696) for type checkers: a consumer or producer used without type
arguments sees keys and values as the bytes the broker stores, ``AIOConsumer[str, dict]`` declares what the
configured deserializers return (as ``KafkaConsumer<K, V>`` does in Java).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, TypeAlias

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    K = TypeVar("K", default=bytes | None)
    V = TypeVar("V", default=bytes | None)
else:  # typing.TypeVar of Python 3.11 has no default; type checkers read the branch above
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "K", "V", "T", "Bytes", "RawKey", "HeaderValue", "Headers", "RecordHeaders", "Serializer", "Deserializer",
    "PartitionerFn", "Offsets", "GroupMember", "GroupRef", "PartitionRef", "PartitionLike",
]

# bytes-like record data as the codec takes it
Bytes: TypeAlias = bytes | bytearray | memoryview
# a key or value given to a producer without a serializer: bytes-like, a str (sent UTF-8 encoded) or None
RawKey: TypeAlias = Bytes | str | None
# a header value given to a producer (a str is sent UTF-8 encoded)
HeaderValue: TypeAlias = Bytes | str | None
# the headers given to a producer: a mapping or (name, value) pairs; a bytes name is decoded as UTF-8
Headers: TypeAlias = (
    Mapping[str, HeaderValue] | Mapping[bytes, HeaderValue] | Iterable[tuple[str | bytes, HeaderValue]]
)
# the headers of a consumed record
RecordHeaders: TypeAlias = list[tuple[str, bytes | None]]

# ``key.serializer`` / ``value.serializer``: the application's object -> the bytes sent
Serializer: TypeAlias = Callable[[T], Bytes | None]
# ``key.deserializer`` / ``value.deserializer``: the bytes received (None for a null key or value) -> object
Deserializer: TypeAlias = Callable[[bytes | None], T]
# ``partitioner``: (serialized key, all partitions, available partitions) -> partition
PartitionerFn: TypeAlias = Callable[[Bytes | None, list[int], list[int]], int]

if TYPE_CHECKING:
    from .transactions import ConsumerGroupMetadata
    from .types import OffsetAndMetadata, TopicPartition

# offsets to commit: {TopicPartition: offset or OffsetAndMetadata}
Offsets: TypeAlias = "Mapping[TopicPartition, int | OffsetAndMetadata]"


class GroupMember(Protocol):
    """A consumer that is a member of a group (async or sync moldau consumer), as
    ``send_offsets_to_transaction`` takes it."""

    @property
    def config(self) -> Mapping[str, object]: ...

    def consumer_group_metadata(self) -> ConsumerGroupMetadata: ...


# the group of send_offsets_to_transaction: its id, its member's metadata, or the consumer
GroupRef: TypeAlias = "str | ConsumerGroupMetadata | GroupMember"


class PartitionRef(Protocol):
    """Anything naming a partition by ``topic`` and ``partition`` attributes (another client's
    TopicPartition)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


# a partition as the consumer's methods take it: a TopicPartition, a (topic, partition) pair or a PartitionRef
PartitionLike: TypeAlias = "TopicPartition | tuple[str, int] | PartitionRef"
