"""A coordinator's internal topic (Kafka's ``PartitionWriter`` and ``CoordinatorLoader`` in one interface).

    class CoordinatorLog(Protocol):
        topic: str
        topic_exists() / ensure_topic()    # created on first use, with the coordinator's settings
        append(partition, records, ...) -> Future | None   # written now; the future completes once committed
        read(partition) -> Iterator[LoadedRecord | EndTxnMarker]   # the partition's log, for loading

``ReplicaCoordinatorLog`` is the broker's: record batches v2 appended through the replica manager as an
internal append with acks=all (so the topic's ``min.insync.replicas`` applies and, in a cluster, the future
completes once the high watermark passed the batch), read back with the log's batches from the log start
offset. ``memory.MemoryCoordinatorLog`` keeps records in lists (unit tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchBuilder, decode_batch, parse_control_record

from ..replica_manager import read_batches

if TYPE_CHECKING:
    from ..clock import Clock
    from ..config import BrokerConfig
    from ..metadata import MetadataService
    from ..replica_manager import ReplicaManager

log = logging.getLogger(__name__)

Record = tuple[bytes, "bytes | None"]

__all__ = ["CoordinatorLog", "CoordinatorLogDeps", "EndTxnMarker", "LoadedRecord", "Record",
           "ReplicaCoordinatorLog", "TopicSpec"]


@dataclass(slots=True, frozen=True)
class LoadedRecord:
    key: bytes
    value: bytes | None
    producer_id: int = -1  # >= 0: a record of a transactional batch, decided by its marker


@dataclass(slots=True, frozen=True)
class EndTxnMarker:
    producer_id: int
    committed: bool


class CoordinatorLog(Protocol):
    @property
    def topic(self) -> str: ...

    def topic_exists(self) -> bool: ...

    def ensure_topic(self) -> None: ...

    def append(self, partition: int, records: Sequence[Record], *, producer_id: int = -1,
               producer_epoch: int = -1, transactional: bool = False) -> asyncio.Future[None] | None: ...

    def read(self, partition: int) -> Iterator[LoadedRecord | EndTxnMarker]: ...


@dataclass(slots=True)
class TopicSpec:
    """How a coordinator's topic is created on first use (Kafka's settings for it)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str | None] = field(default_factory=dict)


class CoordinatorLogDeps(Protocol):
    """The broker services the internal topics are written through (``services.BrokerServices`` is one)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metadata(self) -> MetadataService: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...


class ReplicaCoordinatorLog:
    """The internal topic as real log partitions of this broker (leader) and its followers."""

    def __init__(self, services: CoordinatorLogDeps, spec: TopicSpec) -> None:
        self.services = services
        self.spec = spec

    @property
    def topic(self) -> str:
        return self.spec.name

    def topic_exists(self) -> bool:
        return self.spec.name in self.services.metadata.topics

    def ensure_topic(self) -> None:
        s = self.spec
        self.services.metadata.ensure_topic(s.name, s.num_partitions, s.replication_factor, s.configs)

    def append(self, partition: int, records: Sequence[Record], *, producer_id: int = -1,
               producer_epoch: int = -1, transactional: bool = False) -> asyncio.Future[None] | None:
        """One batch appended as an internal write with acks=all; raises the KafkaError of a refused append.
        The future (None: nothing to wait for) completes once the batch is committed and flushed as the
        flush policy asks."""
        self.ensure_topic()
        rm = self.services.replica_manager
        p = rm.get_partition(self.spec.name, partition)
        if p is None:
            raise KafkaError.for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      f"{self.spec.name}-{partition} is not available")
        now = self.services.clock.time_ms()
        builder = BatchBuilder(magic=2, producer_id=producer_id, producer_epoch=producer_epoch,
                               is_transactional=transactional)
        for key, value in records:
            builder.append(now, key, value)
        res = rm.append(p, bytearray(builder.build(0)), internal=True, now_ms=now, required_acks=-1)
        if res.error:
            raise KafkaError.for_code(res.error, res.error_message)
        return res.flush

    def read(self, partition: int) -> Iterator[LoadedRecord | EndTxnMarker]:
        """The partition from its log start offset to its end: records (of transactional batches with their
        producer id) and the COMMIT/ABORT markers (an unreadable marker decides nothing: read as an abort)."""
        if not self.topic_exists():
            return
        p = self.services.replica_manager.get_partition(self.spec.name, partition)
        if p is None:
            return
        start = p.log.log_start_offset
        for data, pos, h in read_batches(p.log):
            if h.is_control:
                yield EndTxnMarker(h.producer_id, _is_commit(data, pos, h))
                continue
            pid = h.producer_id if h.is_transactional else -1
            for rec in decode_batch(data, pos, header=h):
                if rec.offset >= start and rec.key is not None:
                    yield LoadedRecord(rec.key, rec.value, pid)


def _is_commit(data: bytes, pos: int, h: Any) -> bool:
    try:
        recs = decode_batch(data, pos, header=h)
        return bool(recs) and parse_control_record(recs[0].key)[1] == 1
    except Exception:  # a malformed marker decides nothing
        log.warning("an unreadable control batch at offset %d is read as an abort", h.base_offset)
        return False
