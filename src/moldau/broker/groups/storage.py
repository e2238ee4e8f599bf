"""Where the coordinator's records go: the partitions of ``__consumer_offsets``.

    class OffsetsStorage(Protocol):
        async def append(partition, records: list[(key, value | None)]) -> None   # durable on return
        def read(partition) -> Iterable[(key, value)]                                        # for loading

``MemoryOffsetsStorage`` keeps the records in lists (unit tests, and the "restart" of a coordinator over
the same storage). The broker's storage, ``LogOffsetsStorage`` (in ``coordinator.py``'s neighbour
``broker_storage.py``), writes record batches through the replica manager into the real log.
"""

from __future__ import annotations

from typing import Iterable, Protocol

Record = tuple[bytes, "bytes | None"]


class OffsetsStorage(Protocol):
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None: ...

    def read(self, partition: int) -> Iterable[tuple[bytes | None, bytes | None]]: ...


class MemoryOffsetsStorage:
    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.transactional: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_next: Exception | None = None  # tests: make the next append fail

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *,
                     producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if transactional:  # no markers here: kept aside, complete_transaction(persist=True) writes them
            self.transactional.setdefault(partition, []).extend(records)
            return
        self.partitions.setdefault(partition, []).extend(records)

    def read(self, partition: int) -> Iterable[tuple[bytes | None, bytes | None]]:
        return list(self.partitions.get(partition, []))
