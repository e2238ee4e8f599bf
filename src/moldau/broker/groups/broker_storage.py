"""The coordinator inside the broker: __consumer_offsets as real log partitions, timers on the event loop.

    create_group_coordinator(services) -> GroupCoordinator    # called by Broker.start (loads the groups)

Records are written as v2 record batches (``BatchBuilder``) through ``ReplicaManager.append`` (internal
append, so the log, its index, compaction and ``moldau log dump`` see ordinary batches) and read back at
startup with ``decode_batch``. The topic is created on first use with Kafka's settings: compacted,
``offsets.topic.num.partitions`` partitions, ``offsets.topic.segment.bytes`` segments, internal.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchBuilder, decode_batch

from ..metadata import OFFSETS_TOPIC
from ..replica_manager import read_batches
from .coordinator import GroupConfig, GroupCoordinator
from .timer import AsyncioTimer

if TYPE_CHECKING:
    from ..clock import Clock
    from ..config import BrokerConfig
    from ..metadata import MetadataStore
    from ..replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class GroupDeps(Protocol):
    """The broker services the group coordinator's storage uses (``services.BrokerServices`` is one)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metadata(self) -> MetadataStore: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...


class LogOffsetsStorage:
    def __init__(self, services: GroupDeps, num_partitions: int) -> None:
        self.services = services
        self.num_partitions = num_partitions
        self._pending: dict[int, dict[int, list[tuple[bytes | None, bytes | None]]]] = {}

    # ------------------------------------------------------------------------------------ topic
    def topic_exists(self) -> bool:
        return OFFSETS_TOPIC in self.services.metadata.topics

    def ensure_topic(self) -> None:
        """Create __consumer_offsets if it does not exist yet (Kafka creates it on first FindCoordinator)."""
        cfg = self.services.config
        self.services.metadata.ensure_topic(OFFSETS_TOPIC, self.num_partitions,
                                          int(cfg.get("offsets.topic.replication.factor")), {
                                              "cleanup.policy": "compact",
                                              "compression.type": "producer",
                                              "segment.bytes": str(cfg.get("offsets.topic.segment.bytes")),
                                          })

    def _partition(self, partition: int) -> Any:
        self.ensure_topic()
        p = self.services.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if p is None:
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      f"{OFFSETS_TOPIC}-{partition} is not available")
        return p

    # ----------------------------------------------------------------------------------- append
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *,
                     producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False) -> None:
        """``transactional``: a transactional batch of the producer (TxnOffsetCommit), decided by a marker."""
        p = self._partition(partition)
        now = self.services.clock.time_ms()
        builder = BatchBuilder(magic=2, producer_id=producer_id, producer_epoch=producer_epoch,
                               is_transactional=transactional)
        for key, value in records:
            builder.append(now, key, value)
        await self.services.replica_manager.append_internal(p, bytearray(builder.build(0)), now)

    # ------------------------------------------------------------------------------------- read
    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Records in log order; transactional records at their COMMIT marker (aborted ones never), those
        still undecided at the end kept for ``pending_transactional``."""
        pending: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self._pending[partition] = pending
        if not self.topic_exists():
            return
        p = self.services.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if p is None:
            return
        start = p.log.log_start_offset
        for data, pos, h in read_batches(p.log):
            if h.is_control:
                decided = pending.pop(h.producer_id, None)
                if decided and _is_commit(data, pos, h):
                    yield from decided
                continue
            recs = [(rec.key, rec.value) for rec in decode_batch(data, pos, header=h) if rec.offset >= start]
            if h.is_transactional:
                pending.setdefault(h.producer_id, []).extend(recs)
            else:
                yield from recs

    def pending_transactional(self, partition: int) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
        """After ``read(partition)``: producer id -> records of transactions without a marker yet."""
        return self._pending.get(partition, {})


def _is_commit(data: bytes, pos: int, h: Any) -> bool:
    from moldau.protocol.records import parse_control_record

    try:
        recs = decode_batch(data, pos, header=h)
        return bool(recs) and parse_control_record(recs[0].key)[1] == 1
    except Exception:  # a malformed marker decides nothing
        return False


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
    clock = services.clock
    timer = AsyncioTimer(now_ms=clock.time_ms if hasattr(clock, "time_ms") else None)
    storage = LogOffsetsStorage(services, config.offsets_topic_num_partitions)
    coordinator = GroupCoordinator(config, timer, storage, MetadataTopics(services))
    coordinator.load()
    coordinator.start()
    return coordinator
