"""Partitioners: Kafka's default (murmur2 of the key bytes) and sticky partitioning for keyless records.

``murmur2`` is the 32-bit MurmurHash2 variant of Kafka's ``Utils.murmur2`` (seed 0x9747b28c), returning a
signed 32-bit int like Java. A keyed record goes to ``(murmur2(key) & 0x7fffffff) % num_partitions``, which
is where the Java client and librdkafka's ``murmur2_random`` put it.
"""

from __future__ import annotations

import random
import struct
from functools import lru_cache
from typing import Sequence

__all__ = ["murmur2", "key_partition", "positive_hash", "DefaultPartitioner"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C
_WORDS: dict[int, struct.Struct] = {}


def _murmur2_u32(data: bytes) -> int:
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        st = _WORDS.get(n4)
        if st is None:
            st = _WORDS.setdefault(n4, struct.Struct(f"<{n4}I"))
        m = _M
        for k in st.unpack_from(data, 0):
            k = (k * m) & _MASK
            k ^= k >> 24
            k = (k * m) & _MASK
            h = ((h * m) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's Utils.murmur2: a signed 32-bit int."""
    h = _murmur2_u32(bytes(data))
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def positive_hash(key: bytes) -> int:
    """toPositive(murmur2(key)) of a bytes key (cached: hot keys are hashed once)."""
    return _murmur2_u32(key) & 0x7FFFFFFF


_positive_hash = positive_hash


def key_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """Partition of a keyed record: toPositive(murmur2(key)) % num_partitions."""
    if type(key) is not bytes:
        key = bytes(key)
    return _positive_hash(key) % num_partitions


class DefaultPartitioner:
    """Kafka's built-in partitioning.

    Keyed records: murmur2 (unless ``ignore_keys``). Keyless records: one sticky partition per topic, chosen
    at random among partitions with a leader, switched once ``batch_size`` bytes went to it (KIP-794's
    uniform sticky rule) or when the accumulator starts a new batch for it.
    """

    __slots__ = ("batch_size", "ignore_keys", "_sticky", "_rand")

    def __init__(self, batch_size: int = 16384, ignore_keys: bool = False, rng: random.Random | None = None):
        self.batch_size = max(batch_size, 1)
        self.ignore_keys = ignore_keys
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes produced to it]
        self._rand = rng or random.Random()

    def partition(
        self,
        topic: str,
        key: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if key is not None and not self.ignore_keys:
            return key_partition(key, num_partitions)
        st = self._sticky.get(topic)
        if st is None or st[0] >= num_partitions:
            st = self._sticky[topic] = [self._pick(num_partitions, available, -1), 0]
        return st[0]

    def record_appended(self, topic: str, size: int) -> None:
        """Count bytes produced to the sticky partition; switch once it took a batch's worth."""
        st = self._sticky.get(topic)
        if st is not None:
            st[1] += size
            if st[1] >= self.batch_size:
                del self._sticky[topic]

    def on_new_batch(self, topic: str, partition: int, num_partitions: int,
                     available: Sequence[int] | None = None) -> None:
        """The accumulator began a new batch for (topic, partition): move keyless records elsewhere."""
        st = self._sticky.get(topic)
        if st is not None and st[0] == partition and num_partitions > 1:
            st[0] = self._pick(num_partitions, available, partition)
            st[1] = 0

    def _pick(self, num_partitions: int, available: Sequence[int] | None, avoid: int) -> int:
        choices: Sequence[int] = available if available else range(num_partitions)
        if len(choices) == 1:
            return choices[0]
        while True:
            p = choices[self._rand.randrange(len(choices))]
            if p != avoid:
                return p
