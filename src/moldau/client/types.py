"""Plain data types of the client API."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Generic, Mapping, NamedTuple, Protocol, TypeAlias

from ._typing import K, RecordHeaders, V

__all__ = [
    "TopicPartition",
    "RecordMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "BrokerMetadata",
    "PartitionMetadata",
    "TopicMetadata",
    "NewTopic",
    "NewPartitions",
    "ConfigResource",
    "ConfigEntry",
    "AlterConfigOp",
    "GroupListing",
    "GroupDescription",
    "MemberDescription",
    "ClusterDescription",
    "TopicDescription",
    "ListOffsetsResult",
    "Offsets",
    "PartitionLike",
    "PartitionRef",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
]

TIMESTAMP_NOT_AVAILABLE = -1
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record landed. offset is -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple, Generic[K, V]):
    """A consumed record; key and value are what the consumer's deserializers return (the stored bytes, or
    None for a null key or value, without deserializers)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: K
    value: V
    headers: RecordHeaders
    leader_epoch: int = -1


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: dict[int, PartitionMetadata]
    error_code: int = 0


@dataclass(slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict[int, list[int]] | None = None
    config: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class NewPartitions:
    total_count: int
    new_assignments: list[list[int]] | None = None


# Resource types of DescribeConfigs / IncrementalAlterConfigs
@dataclass(slots=True, frozen=True)
class ConfigResource:
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32

    resource_type: int
    name: str

    @classmethod
    def topic(cls, name: str) -> "ConfigResource":
        return cls(cls.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str) -> "ConfigResource":
        return cls(cls.BROKER, str(node_id))


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int = -1
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
    config_type: int = 0
    documentation: str | None = None


@dataclass(slots=True, frozen=True)
class AlterConfigOp:
    """One IncrementalAlterConfigs operation: SET=0, DELETE=1, APPEND=2, SUBTRACT=3."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3

    name: str
    value: str | None
    op: int = 0


@dataclass(slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None = None
    group_type: str | None = None


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]
    member_epoch: int = -1  # consumer protocol groups (KIP-848)
    target_assignment: list[TopicPartition] | None = None  # consumer protocol: where the broker is taking it


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor (classic: the protocol the members agreed on; consumer: the broker's)
    members: list[MemberDescription]
    error_code: int = 0
    group_type: str = "classic"  # "consumer" for KIP-848 groups
    group_epoch: int = -1  # consumer groups


@dataclass(slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]


@dataclass(slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: list[PartitionMetadata]


class ListOffsetsResult(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


# offsets to commit: {TopicPartition: offset or OffsetAndMetadata}
Offsets: TypeAlias = Mapping[TopicPartition, int | OffsetAndMetadata]


class PartitionRef(Protocol):
    """Anything naming a partition by ``topic`` and ``partition`` attributes (another client's
    TopicPartition)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


# a partition as the consumer's methods take it: a TopicPartition, a (topic, partition) pair or a PartitionRef
PartitionLike: TypeAlias = TopicPartition | tuple[str, int] | PartitionRef
