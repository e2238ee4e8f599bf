"""The share coordinator (KIP-932): the state of every share-partition, kept in ``__share_group_state``.

A shard on the coordinator runtime, as the group and transaction coordinators: it serves the keys
(group, topic id, partition) that hash to the partitions of ``__share_group_state`` this broker leads, replays
them when it becomes the leader, and writes Kafka's records (``moldau.protocol.share_state``): a write is a
ShareUpdate record, every ``share.coordinator.snapshot.update.records.per.snapshot`` updates of a key (and
the first write, and an initialization) a ShareSnapshot record with the merged state.

The share-state RPCs (Initialize/Read/Write/DeleteShareGroupState, ReadShareGroupStateSummary; keys 83-87)
and the share-partition leaders of this broker (through ``persister``) call the same operations.
"""

from __future__ import annotations

import logging
from typing import Protocol

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.share_state import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    ShareState,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    state_partition,
)

from ..coordinator import (
    CoordinatorLogDeps,
    CoordinatorResult,
    CoordinatorRuntime,
    ReplicaCoordinatorLog,
    TopicSpec,
)
from ..metadata import SHARE_STATE_TOPIC

log = logging.getLogger(__name__)


AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# the span of offsets one share-partition's state may name past its start offset (the in-flight window is
# group.share.partition.max.record.locks; this bounds what a WriteShareGroupState may ask the leader to load)
MAX_STATE_SPAN = 1_000_000


def check_batches(start_offset: int, batches: list[StateBatch]) -> None:
    """INVALID_REQUEST for state batches a share-partition could not have written."""
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            raise KafkaError.for_code(
                ErrorCode.INVALID_REQUEST, f"Invalid state batch {b.first_offset}-{b.last_offset}."
            )
        if b.delivery_state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) or b.delivery_count < 0:
            raise KafkaError.for_code(
                ErrorCode.INVALID_REQUEST,
                f"Invalid delivery state {b.delivery_state} / count {b.delivery_count}.",
            )
        if start_offset >= 0 and b.last_offset - start_offset > MAX_STATE_SPAN:
            raise KafkaError.for_code(
                ErrorCode.INVALID_REQUEST,
                f"State batch {b.first_offset}-{b.last_offset} is more than "
                f"{MAX_STATE_SPAN} offsets past the start offset {start_offset}.",
            )


def merge_batches(old: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """``new`` laid over ``old`` (offset by offset), everything below ``start_offset`` dropped, sorted."""
    out: list[StateBatch] = []
    for b in old:
        pieces = [(b.first_offset, b.last_offset)]
        for n in new:
            nxt = []
            for lo, hi in pieces:
                if n.last_offset < lo or n.first_offset > hi:
                    nxt.append((lo, hi))
                    continue
                if lo < n.first_offset:
                    nxt.append((lo, n.first_offset - 1))
                if hi > n.last_offset:
                    nxt.append((n.last_offset + 1, hi))
            pieces = nxt
        out.extend(StateBatch(lo, hi, b.delivery_state, b.delivery_count) for lo, hi in pieces)
    out.extend(StateBatch(n.first_offset, n.last_offset, n.delivery_state, n.delivery_count) for n in new)
    trimmed = []
    for b in sorted(out, key=lambda x: x.first_offset):
        if b.last_offset < start_offset:
            continue
        trimmed.append(
            StateBatch(max(b.first_offset, start_offset), b.last_offset, b.delivery_state, b.delivery_count)
        )
    return trimmed


class ShareCoordinator:
    """The shard: ``states`` by key for the partitions loaded here."""

    def __init__(
        self,
        coordinator_log: ReplicaCoordinatorLog,
        num_partitions: int,
        snapshot_every: int,
        now_ms: "NowMs",
    ) -> None:
        self.states: dict[ShareKey, ShareState] = {}
        self.updates: dict[ShareKey, int] = {}  # updates written since the key's last snapshot
        self.snapshot_every = max(1, snapshot_every)
        self.now_ms = now_ms
        self.runtime = CoordinatorRuntime("share", coordinator_log, self, num_partitions)

    # ------------------------------------------------------------------------------- CoordinatorShard
    def replay(self, partition: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        try:
            rtype, k = decode_key(key)
        except ValueError:
            log.warning("share coordinator: skipping an unknown record in partition %d", partition)
            return
        if value is None:
            self.states.pop(k, None)
            self.updates.pop(k, None)
            return
        st = decode_value(rtype, value)
        if rtype == SHARE_SNAPSHOT:
            self.states[k] = st
            self.updates[k] = 0
            return
        cur = self.states.get(k)
        if cur is None:
            return  # an update without its snapshot (deleted meanwhile)
        self._apply_update(cur, st)
        self.updates[k] = self.updates.get(k, 0) + 1

    def replay_end_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        return None

    def on_loaded(self, partition: int) -> None:
        log.debug("share coordinator: %s-%d loaded", SHARE_STATE_TOPIC, partition)

    def on_unloaded(self, partition: int) -> None:
        n = self.runtime.num_partitions
        for k in [k for k in self.states if state_partition(k, n) == partition]:
            del self.states[k]
            self.updates.pop(k, None)

    # ------------------------------------------------------------------------------- operations
    @staticmethod
    def _apply_update(cur: ShareState, upd: ShareState) -> None:
        if upd.start_offset >= 0:
            cur.start_offset = upd.start_offset
        cur.leader_epoch = upd.leader_epoch
        if upd.delivery_complete_count >= 0:
            cur.delivery_complete_count = upd.delivery_complete_count
        cur.batches = merge_batches(cur.batches, upd.batches, cur.start_offset)

    def partition_of(self, key: ShareKey) -> int:
        return state_partition(key, self.runtime.num_partitions)

    def _check(self, key: ShareKey) -> None:
        p = self.partition_of(key)
        if not self.runtime.serves(p):
            raise KafkaError.for_code(
                ErrorCode.NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{p} is not led by this broker"
            )

    def read(self, key: ShareKey) -> ShareState | None:
        """The state of ``key`` (None: never initialized)."""
        self._check(key)
        if not self.runtime.is_active(self.partition_of(key)) and not self.runtime.log.topic_exists():
            return None
        cur = self.states.get(key)
        if cur is None:
            return None
        return ShareState(
            cur.snapshot_epoch,
            cur.state_epoch,
            cur.leader_epoch,
            cur.start_offset,
            cur.delivery_complete_count,
            cur.create_timestamp,
            cur.write_timestamp,
            list(cur.batches),
        )

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> None:
        if start_offset < 0:
            raise KafkaError.for_code(ErrorCode.INVALID_REQUEST, f"Invalid start offset {start_offset}.")

        def op() -> CoordinatorResult[None]:
            cur = self.states.get(key)
            if cur is not None and state_epoch < cur.state_epoch:
                raise KafkaError.for_code(ErrorCode.FENCED_STATE_EPOCH, "state epoch is older")
            now = self.now_ms()
            st = ShareState(
                (cur.snapshot_epoch + 1) if cur else 0, state_epoch, -1, start_offset, -1, now, now, []
            )
            self.states[key] = st
            self.updates[key] = 0
            return CoordinatorResult(
                [(encode_key(SHARE_SNAPSHOT, key), encode_value(SHARE_SNAPSHOT, st))], None
            )

        await self.runtime.schedule_write_operation("initialize-share-state", self.partition_of(key), op)

    async def write(
        self,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        if start_offset < -1:
            raise KafkaError.for_code(ErrorCode.INVALID_REQUEST, f"Invalid start offset {start_offset}.")
        cur0 = self.states.get(key)
        check_batches(start_offset if start_offset >= 0 else (cur0.start_offset if cur0 else 0), batches)

        def op() -> CoordinatorResult[None]:
            cur = self.states.get(key)
            now = self.now_ms()
            if cur is not None and state_epoch < cur.state_epoch:
                raise KafkaError.for_code(ErrorCode.FENCED_STATE_EPOCH, "state epoch is older")
            if cur is not None and leader_epoch >= 0 and leader_epoch < cur.leader_epoch:
                raise KafkaError.for_code(ErrorCode.FENCED_LEADER_EPOCH, "leader epoch is older")
            upd = ShareState(
                cur.snapshot_epoch if cur else 0,
                state_epoch,
                leader_epoch,
                start_offset,
                delivery_complete_count,
                -1,
                -1,
                list(batches),
            )
            if cur is None or self.updates.get(key, 0) + 1 >= self.snapshot_every:
                if cur is None:
                    cur = ShareState(0, state_epoch, leader_epoch, max(start_offset, 0), -1, now, now, [])
                else:
                    cur.snapshot_epoch += 1
                self._apply_update(cur, upd)
                cur.state_epoch = state_epoch
                cur.write_timestamp = now
                self.states[key] = cur
                self.updates[key] = 0
                rec = (encode_key(SHARE_SNAPSHOT, key), encode_value(SHARE_SNAPSHOT, cur))
            else:
                self._apply_update(cur, upd)
                self.updates[key] = self.updates.get(key, 0) + 1
                rec = (encode_key(SHARE_UPDATE, key), encode_value(SHARE_UPDATE, upd))
            return CoordinatorResult([rec], None)

        await self.runtime.schedule_write_operation("write-share-state", self.partition_of(key), op)

    async def delete(self, key: ShareKey) -> None:
        def op() -> CoordinatorResult[None]:
            if self.states.pop(key, None) is None:
                return CoordinatorResult([], None)
            self.updates.pop(key, None)
            return CoordinatorResult([(encode_key(SHARE_SNAPSHOT, key), None)], None)

        await self.runtime.schedule_write_operation("delete-share-state", self.partition_of(key), op)

    def keys_of_group(self, group_id: str) -> list[ShareKey]:
        return [k for k in self.states if k.group_id == group_id]


class NowMs(Protocol):
    def __call__(self) -> int: ...


def create_share_coordinator(services: CoordinatorLogDeps) -> ShareCoordinator:
    cfg = services.config
    n = int(cfg.get("share.coordinator.state.topic.num.partitions"))
    existing = services.metadata.get(SHARE_STATE_TOPIC)
    if existing is not None:
        n = int(existing.num_partitions)
    spec = TopicSpec(
        SHARE_STATE_TOPIC,
        n,
        int(cfg.get("share.coordinator.state.topic.replication.factor")),
        {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(cfg.get("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(cfg.get("share.coordinator.state.topic.min.isr")),
        },
    )
    sc = ShareCoordinator(
        ReplicaCoordinatorLog(services, spec),
        n,
        int(cfg.get("share.coordinator.snapshot.update.records.per.snapshot")),
        services.clock.time_ms,
    )
    sc.runtime.follow(services.replica_manager)
    return sc
