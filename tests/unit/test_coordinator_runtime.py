"""The coordinator runtime over an in-memory log: loading by replay on election, unloading on resignation,
stale epochs, a failed load, writes refused for partitions not led here, transactional records decided by
their marker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from moldau.broker.coordinator import CoordinatorResult, CoordinatorRuntime, EndTxnMarker, LoadedRecord
from moldau.broker.coordinator.memory import MemoryCoordinatorLog
from moldau.broker.coordinator.runtime import PartitionState
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError


class Shard:
    """A key-value coordinator: the last value of each key wins, per partition."""

    def __init__(self) -> None:
        self.state: dict[int, dict[bytes, bytes | None]] = {}
        self.loading: dict[int, dict[bytes, bytes | None]] = {}
        self.pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.events: list[tuple[str, int]] = []

    def replay(self, partition: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        if producer_id >= 0:
            self.pending.setdefault(producer_id, []).append((key, value))
        else:
            self.loading.setdefault(partition, {})[key] = value

    def replay_end_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        records = self.pending.pop(producer_id, [])
        if committed:
            self.loading.setdefault(partition, {}).update(records)

    def on_loaded(self, partition: int) -> None:
        self.state[partition] = self.loading.pop(partition, {})
        self.events.append(("loaded", partition))

    def on_unloaded(self, partition: int) -> None:
        self.state.pop(partition, None)
        self.events.append(("unloaded", partition))


class MarkerLog(MemoryCoordinatorLog):
    """An in-memory log that also returns markers and transactional records on read."""

    def __init__(self) -> None:
        super().__init__("__kv")
        self.entries: dict[int, list[LoadedRecord | EndTxnMarker]] = {}
        self.fail_read = False

    def read(self, partition: int) -> Iterator[LoadedRecord | EndTxnMarker]:
        if self.fail_read:
            raise OSError("unreadable segment")
        yield from super().read(partition)
        yield from self.entries.get(partition, [])


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_election_loads_by_replay_and_resignation_unloads() -> None:
    log = MemoryCoordinatorLog("__kv")
    log.partitions[1] = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"b", None)]
    log.created = True
    shard = Shard()
    rt = CoordinatorRuntime("kv", log, shard, 4)
    assert not rt.is_active(1)
    rt.on_election(1, 5)
    assert rt.is_active(1) and rt.epoch(1) == 5 and rt.active_partitions() == [1]
    assert shard.state[1] == {b"a": b"3", b"b": None}
    rt.on_election(1, 6)  # a new epoch of the same leadership: no reload
    assert shard.events == [("loaded", 1)] and rt.epoch(1) == 6
    rt.on_resignation(1, 4)  # stale
    assert rt.is_active(1)
    rt.on_resignation(1, 7)
    assert not rt.is_active(1) and 1 not in shard.state and shard.events[-1] == ("unloaded", 1)
    rt.on_election(9, 0)  # outside the partitions the coordinator hashes over
    assert rt.active_partitions() == []


def test_transactional_records_wait_for_their_marker() -> None:
    log = MarkerLog()
    log.created = True
    log.entries[0] = [LoadedRecord(b"x", b"committed", 7), LoadedRecord(b"y", b"aborted", 8),
                      EndTxnMarker(8, False), EndTxnMarker(7, True), LoadedRecord(b"z", b"open", 9)]
    shard = Shard()
    CoordinatorRuntime("kv", log, shard, 1).on_election(0, 0)
    assert shard.state[0] == {b"x": b"committed"}
    assert shard.pending == {9: [(b"z", b"open")]}  # no marker yet: the shard keeps it pending


def test_failed_load_is_failed_until_the_next_election() -> None:
    log = MarkerLog()
    log.created = True
    shard = Shard()
    rt = CoordinatorRuntime("kv", log, shard, 2)
    log.fail_read = True
    rt.on_election(0, 1)
    assert not rt.is_active(0) and rt.contexts[0].state is PartitionState.FAILED
    with pytest.raises(KafkaError) as exc:
        run(rt.append(0, [(b"k", b"v")]))
    assert exc.value.code == E.COORDINATOR_NOT_AVAILABLE
    log.fail_read = False
    rt.on_election(0, 2)
    assert rt.is_active(0)


def test_writes_only_for_active_partitions_and_in_order() -> None:
    log = MemoryCoordinatorLog("__kv")
    shard = Shard()
    rt = CoordinatorRuntime("kv", log, shard, 2)
    rt.follow(log)  # the in-memory log leads every partition
    assert rt.active_partitions() == [0, 1]

    def op(i: int) -> CoordinatorResult[str]:
        return CoordinatorResult([(b"k", str(i).encode())], f"done {i}")

    async def writes() -> list[str]:
        ops = [rt.schedule_write_operation(f"w{i}", 0, lambda i=i: op(i)) for i in range(3)]
        return list(await asyncio.gather(*ops))

    assert run(writes()) == ["done 0", "done 1", "done 2"]
    assert log.partitions[0] == [(b"k", b"0"), (b"k", b"1"), (b"k", b"2")]
    rt.on_resignation(0)
    with pytest.raises(KafkaError) as exc:
        run(rt.append(0, [(b"k", b"late")]))
    assert exc.value.code == E.NOT_COORDINATOR
    assert log.partitions[0][-1] == (b"k", b"2")  # nothing written by a coordinator that lost the partition
    log.fail_next = KafkaError.for_code(E.NOT_ENOUGH_REPLICAS)
    with pytest.raises(KafkaError) as exc:
        run(rt.append(1, [(b"k", b"v")]))
    assert exc.value.code == E.NOT_ENOUGH_REPLICAS
