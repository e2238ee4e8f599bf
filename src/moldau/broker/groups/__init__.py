"""The group coordinator: consumer groups (classic and KIP-848) and committed offsets.

from moldau.broker.groups import GroupCoordinator, GroupConfig
"""

from typing import TYPE_CHECKING

from .coordinator import GroupCoordinator
from .group import ClassicGroupState, CommittedOffset, JoinResult, SyncResult
from .model import GroupConfig, JoinRequest
from .timer import AsyncioTimer, ManualTimer

if TYPE_CHECKING:
    from .broker_storage import GroupDeps


def create_group_coordinator(services: "GroupDeps") -> GroupCoordinator:
    """The broker's hook (Broker._start_optional_components): a loaded, started coordinator."""
    from .broker_storage import create_group_coordinator as create

    return create(services)


__all__ = [
    "create_group_coordinator",
    "AsyncioTimer",
    "ClassicGroupState",
    "CommittedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "JoinRequest",
    "JoinResult",
    "ManualTimer",
    "SyncResult",
]
