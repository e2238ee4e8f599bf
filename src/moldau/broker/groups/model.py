"""The group coordinator's configuration, its request and answer types, and what its parts share
(``GroupContext``: the coordinator as its state machines see it)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..coordinator import Record
    from .consumer import ConsumerGroupManager
    from .group import GroupBase
    from .registry import GroupRegistry
    from .timer import Timer

INT_MAX = 2**31 - 1
UNKNOWN_MEMBER_ID = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs (KIP-394): a member that joined with a fresh member id and
# never completed the join is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(slots=True)
class GroupConfig:
    """The broker keys that shape the coordinator (Kafka's names in the comments)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka 3000; see docs/groups.md)
    max_size: int = INT_MAX  # group.max.size
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")  # group.coordinator.rebalance.protocols
    # KIP-848 consumer groups
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_max_size: int = INT_MAX  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors

    @classmethod
    def from_broker_config(cls, cfg: Any) -> "GroupConfig":
        """Read the keys from a BrokerConfig (keys it does not know keep moldau's defaults)."""
        out = cls()

        def get(key: str) -> Any:
            try:
                return cfg.get(key)
            except ValueError:  # ConfigError: a key this config does not know
                return None

        ints = {
            "group.min.session.timeout.ms": "min_session_timeout_ms",
            "group.max.session.timeout.ms": "max_session_timeout_ms",
            "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
            "group.max.size": "max_size",
            "offsets.topic.num.partitions": "offsets_topic_num_partitions",
            "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
            "offset.metadata.max.bytes": "offset_metadata_max_bytes",
            "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
            "group.consumer.min.session.timeout.ms": "consumer_min_session_timeout_ms",
            "group.consumer.max.session.timeout.ms": "consumer_max_session_timeout_ms",
            "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
            "group.consumer.min.heartbeat.interval.ms": "consumer_min_heartbeat_interval_ms",
            "group.consumer.max.heartbeat.interval.ms": "consumer_max_heartbeat_interval_ms",
            "group.consumer.max.size": "consumer_max_size",
        }
        for key, attr in ints.items():
            v = get(key)
            if v is not None:
                setattr(out, attr, int(v))
        minutes = get("offsets.retention.minutes")
        if minutes is not None:
            out.offsets_retention_ms = int(minutes) * 60_000
        protocols = get("group.coordinator.rebalance.protocols")
        if protocols:
            out.rebalance_protocols = tuple(str(p).strip().lower() for p in protocols if str(p).strip())
        assignors = get("group.consumer.assignors")
        if assignors:
            names = []
            for a in assignors:
                a = str(a).strip()
                short = a.rsplit(".", 1)[-1].lower()
                names.append(short.removesuffix("assignor") or short)
            out.consumer_assignors = tuple(names)
        return out


class TopicLookup(Protocol):
    """What the coordinator needs to know about topics (the broker's metadata store provides it)."""

    def partition_count(self, topic: str) -> int | None: ...


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+
    reason: str | None = None


@dataclass(slots=True)
class PartitionOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: int = 0


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: int = 0
    error_message: str | None = None
    state: str = "Dead"
    protocol_type: str = ""
    protocol: str = ""
    members: list[DescribedMember] = field(default_factory=list)


class GroupContext(Protocol):
    """What the classic-group machine, the consumer-group machine and the offset manager use of the
    ``coordinator.GroupCoordinator`` that creates them."""

    config: GroupConfig
    timer: Timer
    topics: Any
    groups: GroupRegistry

    @property
    def consumer(self) -> ConsumerGroupManager: ...

    def now(self) -> int: ...

    def owns(self, group_id: str) -> bool: ...

    def spawn(self, coro: Awaitable[Any]) -> None: ...

    async def append(self, group_id: str, records: Sequence[Record], **txn: Any) -> None: ...

    def remove_group(self, group: GroupBase) -> None: ...
