"""The groups a coordinator serves, by group id (Kafka's GroupMetadataManager.groups): classic groups and
KIP-848 consumer groups side by side, one id naming at most one group of either type."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .group import ClassicGroup, GroupBase


class GroupRegistry:
    def __init__(self, partition_for: Callable[[str], int]) -> None:
        self._groups: dict[str, GroupBase] = {}
        self._partition_for = partition_for

    # ------------------------------------------------------------------------------------ lookups
    def get(self, group_id: str) -> GroupBase | None:
        return self._groups.get(group_id)

    def __getitem__(self, group_id: str) -> GroupBase:
        return self._groups[group_id]

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def values(self) -> list[GroupBase]:
        return list(self._groups.values())

    def items(self) -> list[tuple[str, GroupBase]]:
        return list(self._groups.items())

    def classic(self, group_id: str) -> ClassicGroup | None:
        g = self._groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def of_partition(self, partition: int) -> list[GroupBase]:
        """The groups whose id hashes to ``partition`` of ``__consumer_offsets``."""
        return [g for gid, g in self._groups.items() if self._partition_for(gid) == partition]

    # ------------------------------------------------------------------------------------ changes
    def add(self, group: GroupBase) -> None:
        """``group`` is now the group of its id (replacing one of the other type on conversion)."""
        self._groups[group.group_id] = group

    def create_classic(self, group_id: str, now_ms: int) -> ClassicGroup:
        g = ClassicGroup(group_id, now_ms)
        self._groups[group_id] = g
        return g

    def discard(self, group: GroupBase) -> None:
        """Forget ``group`` if it is still the group of its id."""
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
