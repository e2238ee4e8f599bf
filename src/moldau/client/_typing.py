"""Type variables and aliases shared by the client's modules.

Typing only: the aliases are plain ``typing`` objects and nothing here runs on a send or poll path. The
record type variables have defaults (PEP 696) for type checkers: a consumer used without type arguments
sees keys and values as the bytes the broker stores and a producer takes bytes-like objects or str;
``AsyncConsumer[str, dict]`` declares what the configured deserializers return and ``AsyncProducer[str,
dict]`` what the serializers take (as ``KafkaConsumer<K, V>`` and ``KafkaProducer<K, V>`` do in Java).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypeAlias

# bytes-like record data as the codec takes it
Bytes: TypeAlias = bytes | bytearray | memoryview
# a key or value given to a producer without a serializer: bytes-like, a str (sent UTF-8 encoded) or None
RawKey: TypeAlias = Bytes | str | None

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    # a consumed record's key and value (what the deserializers return)
    K = TypeVar("K", default=bytes | None)
    V = TypeVar("V", default=bytes | None)
    # a produced record's key and value (what the serializers take)
    PK = TypeVar("PK", default=RawKey)
    PV = TypeVar("PV", default=RawKey)
else:  # typing.TypeVar of Python 3.11 has no default; type checkers read the branch above
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")
    PK = TypeVar("PK")
    PV = TypeVar("PV")

T = TypeVar("T")

__all__ = [
    "K", "V", "PK", "PV", "T", "Bytes", "RawKey", "HeaderValue", "Headers", "RecordHeaders", "Serializer",
    "Deserializer", "PartitionerFn",
]

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
