"""The group coordinator (Kafka's GroupCoordinatorService and GroupCoordinatorShard): classic groups,
KIP-848 consumer groups, committed offsets and the group admin APIs, on the coordinator runtime over
``__consumer_offsets``.

Its parts (Kafka's split of GroupMetadataManager and OffsetMetadataManager):

* ``classic.ClassicGroupManager``: JoinGroup, rebalances, LeaveGroup; ``classic_sync.ClassicSyncManager``:
  SyncGroup, heartbeats and sessions, the group's record;
* ``consumer.ConsumerGroupManager``: ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848);
* ``offsets.OffsetManager``: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, offset expiry;
* ``registry.GroupRegistry``: the groups by id;
* this class: the facade the handlers call, the admin APIs (DeleteGroups, ListGroups, DescribeGroups) and the
  runtime's ``CoordinatorShard`` (``replay`` / ``on_loaded`` / ``on_unloaded``: a partition's groups are
  rebuilt from its records when this broker becomes its leader, dropped when it stops).

Everything runs on one event loop: every state change happens synchronously inside one call, so no locks are
needed; the only awaits are appends of records through the runtime. Requests that have to wait (JoinGroup
until the join phase completes, SyncGroup until the leader's assignment is stored) are futures resolved by
the state machines' callbacks. Timers (session expiry, rebalance timeout, initial rebalance delay, pending
sync, offset expiry) come from an injected ``Timer``.

Public API (used by the handlers in ``moldau.broker.handlers.k08..k69``)::

    GroupCoordinator(config: GroupConfig, timer: Timer, storage: CoordinatorLog | None,
                     topics: TopicLookup | None)
    .follow(replica_manager)                  # load the partitions led here, follow leadership changes
    .start() / .shutdown()                    # periodic offset expiry
    .partition_for(group_id) -> int
    await .join_group(JoinRequest) -> JoinResult
    await .sync_group(...) -> SyncResult
    .heartbeat(...) -> error code
    await .leave_group(group_id, members) -> (error, [member errors])
    await .commit_offsets(...) -> {(topic, partition): error}
    .fetch_offsets(group_id, partitions | None, require_stable) -> (error, [PartitionOffset])
    await .delete_offsets(group_id, partitions) -> (error, {(topic, partition): error})
    await .delete_groups([group_id]) -> {group_id: error}
    .list_groups(states, types) -> [ListedGroup]
    .describe_group(group_id) -> DescribedGroup
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Sequence

from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode

from ..coordinator import CoordinatorLog, CoordinatorRuntime, Record
from ..coordinator.memory import MemoryCoordinatorLog
from ..coordinator.runtime import LeadershipSource
from ..metadata import OFFSETS_TOPIC
from .classic import ClassicGroupManager
from .consumer import ConsumerGroupManager
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicGroupState,
    CommittedOffset,
    GroupBase,
    JoinResult,
    SyncResult,
    TopicPartition,
)
from .model import (
    DescribedGroup,
    DescribedMember,
    GroupConfig,
    ListedGroup,
    TopicLookup,
)
from .offsets import OffsetManager, committed_offset, storage_error
from .registry import GroupRegistry
from .timer import Timer

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicGroupState


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig | None = None,
        timer: Timer | None = None,
        storage: CoordinatorLog | None = None,
        topics: TopicLookup | None = None,
    ) -> None:
        from .timer import AsyncioTimer

        self.config = config or GroupConfig()
        self.timer: Timer = timer or AsyncioTimer()
        self.runtime = CoordinatorRuntime("group", storage if storage is not None else MemoryCoordinatorLog(
            OFFSETS_TOPIC), self, self.config.offsets_topic_num_partitions)
        self.topics = topics
        self.groups = GroupRegistry(self.partition_for)
        self._cleanup_handle: Any = None
        self._stopped = False
        self._loading: dict[int, _Loading] = {}  # what a partition's replay collected, until on_loaded
        self.consumer = ConsumerGroupManager(self)
        self.classic = ClassicGroupManager(self)
        self.offsets = OffsetManager(self)

    def now(self) -> int:
        return self.timer.now_ms()

    def partition_for(self, group_id: str) -> int:
        return fmt.partition_for(group_id, self.config.offsets_topic_num_partitions)

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator serves ``group_id`` (else NOT_COORDINATOR: the client looks it up
        again): the runtime serves its partition of ``__consumer_offsets`` (``CoordinatorRuntime.serves``)."""
        return self.runtime.serves(self.partition_for(group_id))

    def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` when missing (Kafka creates it on the first FindCoordinator)."""
        self.runtime.log.ensure_topic()

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run ``coro`` in the background (persisting state after a transition)."""
        self.runtime.spawn(coro)

    async def append(self, group_id: str, records: Sequence[Record], **txn: Any) -> None:
        """``txn``: producer_id, producer_epoch, transactional=True for TxnOffsetCommit records."""
        if records:
            await self.runtime.append(self.partition_for(group_id), records, **txn)

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.classic(group_id)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        by_partition: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for gid in group_ids:
            if not gid:
                results[gid] = E.INVALID_GROUP_ID
                continue
            group = self.groups.get(gid)
            if group is None or group.is_dead:
                results[gid] = E.GROUP_ID_NOT_FOUND
                continue
            if not group.is_empty:
                results[gid] = E.NON_EMPTY_GROUP
                continue
            by_partition[gid] = self._tombstones_for_group(group)
            self.remove_group(group)
            results[gid] = E.NONE
            log.info("group %s deleted", gid)
        for gid, records in by_partition.items():
            try:
                await self.append(gid, records)
            except Exception as exc:
                log.warning("group %s: writing tombstones failed: %s", gid, exc)
                results[gid] = storage_error(exc)
        return results

    def _tombstones_for_group(self, group: GroupBase) -> list[tuple[bytes, bytes | None]]:
        records: list[tuple[bytes, bytes | None]] = [
            (fmt.encode_offset_commit_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((fmt.encode_group_metadata_key(group.group_id), None))
        records.extend(self.consumer.tombstones_for(group))
        return records

    def remove_group(self, group: GroupBase) -> None:
        if isinstance(group, ClassicGroup):
            group.cancel_timers()
            group.transition(S.DEAD, self.now())
        else:
            self.consumer.mark_dead(group)
        self.groups.discard(group)

    def list_groups(
        self, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> list[ListedGroup]:
        states = {s.lower() for s in states_filter or []}
        types = {t.lower() for t in types_filter or []}
        out: list[ListedGroup] = []
        for g in self.groups.values():
            if g.is_dead:
                continue
            if states and g.state_name.lower() not in states:
                continue
            if types and g.group_type not in types:
                continue
            protocol_type = (g.protocol_type or "") if isinstance(g, ClassicGroup) else CONSUMER_PROTOCOL_TYPE
            out.append(ListedGroup(g.group_id, protocol_type, g.state_name, g.group_type))
        return out

    def describe_group(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            return DescribedGroup(
                group_id, error=E.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found."
            )
        if not isinstance(group, ClassicGroup):
            return DescribedGroup(
                group_id,
                error=E.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} is not a classic group.",
            )
        if group.is_in(S.STABLE):
            protocol = group.protocol_name or ""
            members = [
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ]
        else:
            protocol = ""
            members = [
                DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                for m in group.members.values()
            ]
        return DescribedGroup(
            group_id,
            state=group.state_name,
            protocol_type=group.protocol_type or "",
            protocol=protocol,
            members=members,
        )

    def start(self) -> None:
        """Start the periodic offset expiration (offsets.retention.check.interval.ms)."""
        self._stopped = False
        self._schedule_cleanup()

    def _schedule_cleanup(self) -> None:
        if self._stopped:
            return
        self._cleanup_handle = self.timer.call_later(
            self.config.offsets_retention_check_interval_ms, self._on_cleanup_timer
        )

    def _on_cleanup_timer(self) -> None:
        self.spawn(self.offsets.cleanup_expired_offsets())
        self._schedule_cleanup()

    def follow(self, source: LeadershipSource) -> None:
        """Serve the partitions of ``__consumer_offsets`` that ``source`` (the replica manager) says this
        broker leads, loading each when it is elected."""
        self.runtime.follow(source)

    def replay(self, partition: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        """One record of ``__consumer_offsets-<partition>`` (the runtime's load): collected, applied at
        ``on_loaded``; a transactional one waits for its marker."""
        st = self._loading.setdefault(partition, _Loading())
        st.count += 1
        try:
            k = fmt.decode_key(key)
            if producer_id >= 0:
                st.pending.setdefault(producer_id, []).append((k, value))
            else:
                self._replay_record(st, k, value)
        except fmt.RecordFormatError as exc:
            log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc)

    def _replay_record(self, st: _Loading, k: Any, value: bytes | None) -> None:
        if isinstance(k, fmt.OffsetCommitKey):
            group_offsets = st.offsets.setdefault(k.group, {})
            if value is None:
                group_offsets.pop((k.topic, k.partition), None)
            else:
                v = fmt.decode_offset_commit_value(value)
                group_offsets[(k.topic, k.partition)] = committed_offset(v)
        elif isinstance(k, fmt.GroupMetadataKey):
            st.groups[k.group] = None if value is None else fmt.decode_group_metadata_value(value)
        else:
            group_id = self.consumer.group_of_record(k)
            if group_id is not None:
                st.other.setdefault(group_id, []).append((k, value))

    def replay_end_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT applies the producer's transactional offsets at the marker's place; an ABORT drops
        them."""
        st = self._loading.setdefault(partition, _Loading())
        records = st.pending.pop(producer_id, None)
        if not committed or not records:
            return
        for k, value in records:
            try:
                self._replay_record(st, k, value)
            except fmt.RecordFormatError as exc:
                log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc)

    def on_loaded(self, partition: int) -> None:
        """The partition is replayed: its groups are built and served."""
        st = self._loading.pop(partition, None) or _Loading()
        now = self.now()
        for gid, value in st.groups.items():
            if value is not None:
                self.classic.load_group(gid, value, now)
        for gid, records in st.other.items():
            self.consumer.load_group(gid, records)
        for gid, offs in st.offsets.items():
            if not offs:
                continue
            group = self.groups.get(gid)
            if group is None:
                group = self.groups.create_classic(gid, self.now())  # offsets only: a simple group
            group.offsets.update(offs)
        # transactional offset commits without a marker yet: pending again, for the transaction coordinator
        # to complete
        for producer_id, pending in st.pending.items():
            for k, raw in pending:
                if not isinstance(k, fmt.OffsetCommitKey) or raw is None:
                    continue
                try:
                    co = committed_offset(fmt.decode_offset_commit_value(raw))
                except fmt.RecordFormatError as exc:
                    log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc)
                    continue
                group = self.groups.get(k.group) or self.groups.create_classic(k.group, self.now())
                group.pending_txn_offsets.setdefault(producer_id, {})[(k.topic, k.partition)] = co
        if st.count:
            loaded = sum(1 for gid in self.groups if self.partition_for(gid) == partition)
            log.info("loaded %d groups (%d records) from %s-%d", loaded, st.count, OFFSETS_TOPIC, partition)

    def on_unloaded(self, partition: int) -> None:
        """Leadership of ``__consumer_offsets-<partition>`` moved away: its groups go (NOT_COORDINATOR)."""
        self._loading.pop(partition, None)
        dropped = self.groups.of_partition(partition)
        for group in dropped:
            if isinstance(group, ClassicGroup):
                # members parked in JoinGroup / SyncGroup hear NOT_COORDINATOR now (Kafka's
                # onGroupUnloaded), instead of waiting for their request to time out
                for m in list(group.members.values()):
                    group.invoke_join_callback(m, JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                    group.invoke_sync_callback(m, SyncResult(E.NOT_COORDINATOR))
            self.remove_group(group)
        if dropped:
            log.info("unloaded %d groups of %s-%d", len(dropped), OFFSETS_TOPIC, partition)

    def stop(self) -> None:
        """Broker shutdown hook."""
        self.shutdown()

    def shutdown(self) -> None:
        self._stopped = True
        if self._cleanup_handle is not None:
            self._cleanup_handle.cancel()
            self._cleanup_handle = None
        for g in self.groups.values():
            if isinstance(g, ClassicGroup):
                g.cancel_timers()
        self.consumer.shutdown()
        self.runtime.cancel_tasks()


@dataclass(slots=True)
class _Loading:
    """What the replay of one partition collected (group id -> ...), until the partition is loaded."""

    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, fmt.GroupMetadataValue | None] = field(default_factory=dict)
    other: dict[str, list[tuple[Any, bytes | None]]] = field(default_factory=dict)
    pending: dict[int, list[tuple[Any, bytes | None]]] = field(default_factory=dict)  # producer id -> records
    count: int = 0
