"""KIP-848 consumer groups (ConsumerGroupHeartbeat / ConsumerGroupDescribe): placeholder until the classic
protocol is solid. The coordinator calls these hooks; with no consumer groups they are no-ops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from moldau.protocol.errors import ErrorCode as E

from .group import GroupBase

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator


class ConsumerGroupManager:
    def __init__(self, coordinator: "GroupCoordinator") -> None:
        self.coordinator = coordinator

    def drop_group_for_conversion(self, group: GroupBase) -> None:
        self.coordinator.groups.pop(group.group_id, None)

    def classic_leave(self, group: GroupBase, member_id: str, instance_id: str | None) -> int:
        return E.UNKNOWN_MEMBER_ID

    def validate_commit(self, group: GroupBase, member_id: str, epoch: int, api_version: int,
                        transactional: bool) -> int:
        return E.UNKNOWN_MEMBER_ID

    def validate_fetch(self, group: GroupBase, member_id: str | None, member_epoch: int) -> int:
        return E.NONE

    def is_subscribed_to_topic(self, group: GroupBase) -> Callable[[str], bool]:
        return lambda topic: False

    def tombstones_for(self, group: GroupBase) -> list[tuple[bytes, bytes | None]]:
        return []

    def mark_dead(self, group: GroupBase) -> None:
        pass

    def expired_offsets(self, group: GroupBase, pick: Callable[..., list[Any]]) -> list[Any]:
        return []

    def group_of_record(self, key: Any) -> str | None:
        return None

    def load_group(self, group_id: str, records: list[Any]) -> None:
        pass

    def shutdown(self) -> None:
        pass
