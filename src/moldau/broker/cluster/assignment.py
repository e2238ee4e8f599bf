"""Replica assignment on topic creation and CreatePartitions: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Without racks: round-robin from a random start broker; the followers are shifted by an amount that grows
each time the partitions wrap around the broker list, so leaders and followers spread evenly. With a rack on
every broker: the brokers are ordered rack by rack alternately, and each follower goes to the next broker
whose rack (and broker) the partition does not use yet, while racks remain.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from moldau.protocol.errors import ErrorCode, KafkaError


def assign_replicas(
    brokers: Sequence[tuple[int, str | None]],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    rng: random.Random | None = None,
    start_index: int = -1,
) -> dict[int, list[int]]:
    """{partition: replicas} for partitions ``start_partition .. start_partition+num_partitions-1``.
    ``brokers``: (broker id, rack or None). Raises INVALID_REPLICATION_FACTOR / INVALID_PARTITIONS."""
    if num_partitions <= 0:
        raise KafkaError.for_code(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError.for_code(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise KafkaError.for_code(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): "
            f"The target replication factor of "
            f"{replication_factor} cannot be reached because only {len(brokers)} broker(s) are registered.",
        )
    rng = rng or random.Random()
    racks = [r for _b, r in brokers]
    if all(r is not None for r in racks) and len(set(racks)) > 1:
        return _rack_aware(brokers, num_partitions, replication_factor, start_partition, rng, start_index)
    if any(r is not None for r in racks) and not all(r is not None for r in racks):
        raise KafkaError.for_code(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    ids = sorted(b for b, _r in brokers)
    return _rack_unaware(ids, num_partitions, replication_factor, start_partition, rng, start_index)


def _placements(n: int, num_partitions: int, start_partition: int, rng: random.Random,
                start_index: int) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its first replica, follower shift) for each new partition: a random start broker,
    and the shift grows by one each time the partitions wrap around the ``n`` brokers."""
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    current = max(start_partition, 0)
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        yield current, (current + start) % n, shift
        current += 1


def _shifted(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_unaware(
    ids: list[int], num_partitions: int, rf: int, start_partition: int, rng: random.Random, start_index: int
) -> dict[int, list[int]]:
    n = len(ids)
    out: dict[int, list[int]] = {}
    for current, first, shift in _placements(n, num_partitions, start_partition, rng, start_index):
        out[current] = [ids[first]] + [ids[_shifted(first, shift, j, n)] for j in range(rf - 1)]
    return out


def _rack_alternated(brokers: Sequence[tuple[int, str | None]]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(brokers):
        by_rack.setdefault(str(r), []).append(b)
    iters = [list(v) for _k, v in sorted(by_rack.items())]
    out: list[int] = []
    i = 0
    while any(iters):
        lst = iters[i % len(iters)]
        if lst:
            out.append(lst.pop(0))
        i += 1
    return out


def _rack_aware(
    brokers: Sequence[tuple[int, str | None]],
    num_partitions: int,
    rf: int,
    start_partition: int,
    rng: random.Random,
    start_index: int,
) -> dict[int, list[int]]:
    rack_of = {b: str(r) for b, r in brokers}
    arranged = _rack_alternated(brokers)
    n = len(arranged)
    num_racks = len(set(rack_of.values()))
    out: dict[int, list[int]] = {}
    for current, first, shift in _placements(n, num_partitions, start_partition, rng, start_index):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        k = 0
        for _j in range(rf - 1):
            while True:
                b = arranged[_shifted(first, shift, k, n)]
                k += 1
                rack = rack_of[b]
                if b in replicas:
                    continue
                if rack in racks_used and len(racks_used) < num_racks:
                    continue
                replicas.append(b)
                racks_used.add(rack)
                break
        out[current] = replicas
    return out
