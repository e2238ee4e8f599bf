"""The group coordinator: consumer groups (classic and KIP-848) and committed offsets.

    from moldau.broker.groups import GroupCoordinator, GroupConfig
"""

from .coordinator import GroupConfig, GroupCoordinator, JoinRequest
from .group import ClassicGroupState, CommittedOffset, JoinResult, SyncResult
from .timer import AsyncioTimer, ManualTimer

__all__ = [
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
