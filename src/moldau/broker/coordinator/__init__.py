"""The coordinator runtime: how the coordinators whose state is an internal topic (groups on
``__consumer_offsets``, transactions on ``__transaction_state``) load, write and follow leadership.

    from moldau.broker.coordinator import CoordinatorRuntime, CoordinatorShard, ReplicaCoordinatorLog

See ``runtime.py`` and docs/architecture.md ("The coordinator runtime"); CONTRIBUTING.md says how to add a
coordinator on it.
"""

from .log import (
    CoordinatorLog,
    CoordinatorLogDeps,
    EndTxnMarker,
    LoadedRecord,
    Record,
    ReplicaCoordinatorLog,
    TopicSpec,
)
from .runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorShard,
    LeadershipListener,
    LeadershipSource,
    PartitionContext,
    PartitionState,
)

__all__ = [
    "CoordinatorLog",
    "CoordinatorLogDeps",
    "CoordinatorResult",
    "CoordinatorRuntime",
    "CoordinatorShard",
    "EndTxnMarker",
    "LeadershipListener",
    "LeadershipSource",
    "LoadedRecord",
    "PartitionContext",
    "PartitionState",
    "Record",
    "ReplicaCoordinatorLog",
    "TopicSpec",
]
