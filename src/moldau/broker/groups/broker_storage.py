"""The coordinator inside the broker: __consumer_offsets as real log partitions, timers on the event loop.

    create_group_coordinator(services) -> GroupCoordinator    # called by the broker's factory

The coordinator runs on the coordinator runtime (``moldau.broker.coordinator``) over a
``ReplicaCoordinatorLog``: records are v2 record batches appended through the replica manager (so the log, its
index, compaction and ``moldau log dump`` see ordinary batches) and replayed when this broker becomes the
leader of a partition. The topic is created on first use with Kafka's settings: compacted,
``offsets.topic.num.partitions`` partitions, ``offsets.topic.segment.bytes`` segments, internal.
"""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

from ..coordinator import CoordinatorLogDeps, ReplicaCoordinatorLog, TopicSpec
from ..metadata import OFFSETS_TOPIC
from .coordinator import GroupCoordinator
from .model import GroupConfig
from .timer import AsyncioTimer

log = logging.getLogger(__name__)


class GroupDeps(CoordinatorLogDeps, Protocol):
    """The broker services the group coordinator uses (``services.BrokerServices`` is one)."""


class MetadataTopics:
    """The coordinator's view of topics (partition counts and ids), from the broker's metadata store."""

    def __init__(self, services: GroupDeps) -> None:
        self.services = services

    def partition_count(self, topic: str) -> int | None:
        t = self.services.metadata.get(topic)
        return None if t is None else int(t.num_partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        t = self.services.metadata.get(topic)
        return None if t is None else t.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.services.metadata.get_by_id(topic_id)
        return None if t is None else t.name

    def topic_names(self) -> list[str]:
        return sorted(self.services.metadata.topics)


def create_group_coordinator(services: GroupDeps) -> GroupCoordinator:
    config = GroupConfig.from_broker_config(services.config)
    existing = services.metadata.get(OFFSETS_TOPIC)
    if existing is not None and int(existing.num_partitions) != config.offsets_topic_num_partitions:
        # Kafka hashes over the partitions the topic actually has, whatever the config says now
        log.warning(
            "%s has %d partitions, offsets.topic.num.partitions is %d: using %d",
            OFFSETS_TOPIC,
            existing.num_partitions,
            config.offsets_topic_num_partitions,
            existing.num_partitions,
        )
        config.offsets_topic_num_partitions = int(existing.num_partitions)
    cfg = services.config
    spec = TopicSpec(OFFSETS_TOPIC, config.offsets_topic_num_partitions,
                     int(cfg.get("offsets.topic.replication.factor")), {
                         "cleanup.policy": "compact",
                         "compression.type": "producer",
                         "segment.bytes": str(cfg.get("offsets.topic.segment.bytes")),
                     })
    timer = AsyncioTimer(now_ms=services.clock.time_ms)
    coordinator = GroupCoordinator(config, timer, ReplicaCoordinatorLog(services, spec),
                                   MetadataTopics(services))
    coordinator.follow(services.replica_manager)
    coordinator.start()
    return coordinator
