"""An internal topic in memory: a ``CoordinatorLog`` and the leader of all its partitions, for running a
coordinator without a broker (unit tests; a "restart" is a new coordinator over the same log)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

from .log import EndTxnMarker, LoadedRecord, Record
from .runtime import LeadershipListener


class MemoryCoordinatorLog:
    """Records in lists per partition. Transactional records are kept aside (``transactional``): no markers
    are written here, so they never become part of what a load reads. ``fail_next``: the next append raises
    it."""

    def __init__(self, topic: str = "__memory") -> None:
        self._topic = topic
        self.partitions: dict[int, list[Record]] = {}
        self.transactional: dict[int, list[Record]] = {}
        self.fail_next: Exception | None = None
        self.created = False

    @property
    def topic(self) -> str:
        return self._topic

    def topic_exists(self) -> bool:
        return self.created

    def ensure_topic(self) -> None:
        self.created = True

    def append(self, partition: int, records: Sequence[Record], *, producer_id: int = -1,
               producer_epoch: int = -1, transactional: bool = False) -> asyncio.Future[None] | None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        self.created = True
        target = self.transactional if transactional else self.partitions
        target.setdefault(partition, []).extend(records)
        return None

    def read(self, partition: int) -> Iterator[LoadedRecord | EndTxnMarker]:
        for key, value in list(self.partitions.get(partition, [])):
            yield LoadedRecord(key, value)

    def records(self) -> list[tuple[int, bytes, bytes | None]]:
        """Every record as (partition, key, value), partitions in order."""
        return [(p, k, v) for p, recs in sorted(self.partitions.items()) for k, v in recs]

    def leads_new_partitions(self) -> bool:
        return True

    def subscribe_leadership(self, topic: str, listener: LeadershipListener) -> None:
        """This process leads every partition of the listener's (epoch 0)."""
        for p in range(listener.num_partitions):
            listener.on_election(p, 0)
