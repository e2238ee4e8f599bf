"""The group coordinator: classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), KIP-848 consumer
groups (ConsumerGroupHeartbeat, in ``consumer.py``), committed offsets and the group admin APIs.

It follows Kafka's coordinator semantics (the Scala GroupCoordinator and the Java GroupMetadataManager of
Kafka 3.x/4.x) on a single event loop: every state change happens synchronously inside one call, so no
locks are needed; the only awaits are appends of records to ``__consumer_offsets``.

Requests that have to wait (JoinGroup until the join phase completes, SyncGroup until the leader's
assignment is stored) are futures resolved by the state machine's callbacks. Timers (session expiry,
rebalance timeout, initial rebalance delay, pending sync, offset expiry) come from an injected ``Timer``.

Public API (used by the handlers in ``moldau.broker.handlers.k08..k69``)::

    GroupCoordinator(config: GroupConfig, timer: Timer, storage: OffsetsStorage | None,
                     topics: TopicLookup | None)
    .load()                                   # replay __consumer_offsets
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

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Protocol, Sequence

from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode

from ..coordinator import CoordinatorLog, CoordinatorRuntime, Record
from ..coordinator.memory import MemoryCoordinatorLog
from ..coordinator.runtime import LeadershipSource
from ..metadata import OFFSETS_TOPIC
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicGroupState,
    ClassicMember,
    CommittedOffset,
    GroupBase,
    JoinResult,
    SyncResult,
    TopicPartition,
)
from .timer import Timer

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicGroupState

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
        self.groups: dict[str, GroupBase] = {}
        self._cleanup_handle: Any = None
        self._stopped = False
        self._loading: dict[int, _Loading] = {}  # what a partition's replay collected, until on_loaded
        # KIP-848 consumer groups live in consumer.py; created lazily to keep the classic path independent.
        from .consumer import ConsumerGroupManager

        self.consumer = ConsumerGroupManager(self)

    # ------------------------------------------------------------------------------------- helpers
    def now(self) -> int:
        return self.timer.now_ms()

    def partition_for(self, group_id: str) -> int:
        return fmt.partition_for(group_id, self.config.offsets_topic_num_partitions)

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator serves ``group_id`` (else NOT_COORDINATOR: the client looks it up
        again): the runtime has its partition of ``__consumer_offsets`` loaded (this broker leads it)."""
        return self.runtime.is_active(self.partition_for(group_id))

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
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def _create_classic_group(self, group_id: str) -> ClassicGroup:
        g = ClassicGroup(group_id, self.now())
        self.groups[group_id] = g
        return g

    def _new_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # ================================================================================ JoinGroup
    async def join_group(self, req: JoinRequest) -> JoinResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[JoinResult] = loop.create_future()

        def respond(result: JoinResult) -> None:
            if not fut.done():
                fut.set_result(result)

        self.handle_join(req, respond)
        return await fut

    def handle_join(self, req: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """JoinGroup with a callback (the async ``join_group`` wraps it)."""
        if not req.group_id:
            respond(JoinResult(E.INVALID_GROUP_ID, member_id=req.member_id))
            return
        if not self.owns(req.group_id):
            respond(JoinResult(E.NOT_COORDINATOR, member_id=req.member_id))
            return
        if not (
            self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            respond(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id))
            return
        if "classic" not in self.config.rebalance_protocols:
            respond(JoinResult(E.UNSUPPORTED_VERSION, member_id=req.member_id))
            return
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        existing = self.groups.get(req.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            # a KIP-848 consumer group: a classic member may join only once it is empty (then it converts)
            if existing.is_empty:
                self.consumer.drop_group_for_conversion(existing)
                existing = self.groups.get(req.group_id)
            else:
                respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
                return
        group = existing
        created = False
        if group is None:
            if not is_unknown:
                respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = self._create_classic_group(req.group_id)
            created = True

        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, "group max size reached")
            respond(JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID))
        elif is_unknown:
            self._new_member_join(group, req, respond)
        else:
            self._current_member_join(group, req, respond)

        if group.is_in(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        if (
            created
            and group.is_empty
            and not group.members
            and not group.pending_members
            and not group.offsets
        ):
            # the join failed before anything was kept: do not leave an empty group behind
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        max_size = self.config.max_size
        if group.is_in(S.PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join is not None) or group.num_awaiting_join < max_size
        return member_id in group.members or group.size < max_size

    def _new_member_join(
        self, group: ClassicGroup, req: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        if group.is_dead:
            respond(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER_ID))
            return
        new_id = self._new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            self._static_member_join(group, new_id, req, respond)
        elif req.require_known_member_id:
            # KIP-394: hand out the id first, the member joins again with it
            handle = self.timer.call_later(
                req.session_timeout_ms, lambda: self._on_pending_member_expired(group, new_id)
            )
            group.add_pending_member(new_id, handle)
            log.debug("group %s: new member gets id %s (MEMBER_ID_REQUIRED)", group.group_id, new_id)
            respond(JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, respond)

    def _static_member_join(
        self, group: ClassicGroup, new_id: str, req: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        assert req.group_instance_id is not None
        old_id = group.static_member_id(req.group_instance_id)
        if old_id is None:
            self._add_member_and_rebalance(group, new_id, req, respond)
        else:
            self._update_static_member_and_rebalance(group, old_id, new_id, req, respond)

    def _current_member_join(
        self, group: ClassicGroup, req: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        mid = req.member_id
        if group.is_dead:
            respond(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=mid))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
            return
        if group.is_pending_member(mid):
            if req.group_instance_id is not None:
                # a pending member is never static (static members skip MEMBER_ID_REQUIRED)
                respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
                return
            self._add_member_and_rebalance(group, mid, req, respond)
            return
        instance_not_found = (
            req.group_instance_id is not None and req.group_instance_id not in group.static_members
        )
        if group.is_static_member_fenced(req.group_instance_id, mid):
            respond(JoinResult(E.FENCED_INSTANCE_ID, member_id=mid))
            return
        if mid not in group.members or instance_not_found:
            respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
            return
        member = group.get(mid)
        reason = f"member {mid} rejoins during {group.state.value}" + (
            f" ({req.reason})" if req.reason else ""
        )
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, respond, reason)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # it lost the JoinGroup response: answer again for the current generation
                respond(self._join_result_for(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, respond, reason)
        elif group.is_in(S.STABLE):
            if group.is_leader(mid) or not member.matches(req.protocols):
                # the leader's JoinGroup forces a rebalance (topic metadata changes); so does changed metadata
                self._update_member_and_rebalance(group, member, req, respond, reason)
            else:
                respond(
                    JoinResult(
                        E.NONE,
                        member_id=mid,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=group.leader_id or "",
                    )
                )
        else:  # Empty (or Dead): the member must reset and join again
            respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_result_for(self, group: ClassicGroup, member: ClassicMember) -> JoinResult:
        return JoinResult(
            E.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=group.current_member_metadata() if group.is_leader(member.member_id) else [],
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, req: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        # a new member that never completes its join is dropped after the new-member timeout (KIP-394)
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        log.info("group %s: member %s (client %s) joins", group.group_id, member_id, req.client_id)
        self._maybe_prepare_rebalance(
            group, f"adding new member {member_id}" + (f" ({req.reason})" if req.reason else "")
        )

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        req: JoinRequest,
        respond: Callable[[JoinResult], None],
        reason: str,
    ) -> None:
        if member.awaiting_join is not None:
            # a duplicate JoinGroup (the client gave up on the first one): the older request gets an answer
            # that makes it retry rather than hang
            group.invoke_join_callback(
                member, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id)
            )
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        req: JoinRequest,
        respond: Callable[[JoinResult], None],
    ) -> None:
        assert req.group_instance_id is not None
        instance_id = req.group_instance_id
        current_leader = group.leader_id or ""
        member = group.replace_static_member(
            instance_id,
            old_id,
            new_id,
            JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id),
            SyncResult(E.FENCED_INSTANCE_ID),
        )
        self._schedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        log.info(
            "group %s: static member %s rejoins as %s (was %s)", group.group_id, instance_id, new_id, old_id
        )
        if group.is_in(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # nothing changes for the group: keep the generation and the assignment, persist the new id
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                generation = group.generation_id
                self.spawn(
                    self._store_static_replacement(
                        group,
                        member,
                        generation,
                        assignment,
                        instance_id,
                        old_id,
                        new_id,
                        current_leader,
                        old_protocols,
                        old_rebalance_timeout,
                        old_session_timeout,
                        req.supports_skip_assignment,
                    )
                )
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoins with another protocol"
                )
        elif group.is_in(S.COMPLETING_REBALANCE):
            # the old incarnation may already have an assignment the new one does not know: rebalance
            self._prepare_rebalance(group, f"static member {instance_id} rejoins during CompletingRebalance")
        # PreparingRebalance: the member simply takes part in the join phase

    async def _store_static_replacement(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        generation: int,
        assignment: dict[str, bytes],
        instance_id: str,
        old_id: str,
        new_id: str,
        current_leader: str,
        old_protocols: list[tuple[str, bytes]],
        old_rebalance_timeout: int,
        old_session_timeout: int,
        supports_skip: bool,
    ) -> None:
        error = await self._store_group(group, assignment)
        if group.members.get(new_id) is not member:
            return
        if error != E.NONE:
            # restore the old member id; the join is answered with the storage error
            cb = member.awaiting_join
            group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
            restored = group.replace_static_member(
                instance_id, new_id, old_id, JoinResult(error, member_id=UNKNOWN_MEMBER_ID), SyncResult(error)
            )
            self._schedule_heartbeat(group, restored)
            if cb is not None:
                cb(
                    JoinResult(
                        error,
                        member_id=UNKNOWN_MEMBER_ID,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=current_leader,
                    )
                )
            return
        if supports_skip:
            # KIP-814: the leader learns it leads but must not run the assignor while the group is stable
            is_leader = group.is_leader(new_id)
            result = JoinResult(
                E.NONE,
                member_id=new_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_id or "",
                skip_assignment=is_leader,
                members=group.current_member_metadata() if is_leader else [],
            )
        else:
            # before JoinGroup v9: report the old leader id so that a replaced leader does not reassign
            result = JoinResult(
                E.NONE,
                member_id=new_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=current_leader,
            )
        group.invoke_join_callback(member, result)

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._cancel_pending_sync(group)
        initial = group.is_empty
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.transition(S.PREPARING_REBALANCE, self.now())
        delay = self.config.initial_rebalance_delay_ms
        if initial and delay > 0:
            group.join_timer_is_initial = True
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self.timer.call_later(delay, lambda: self._on_initial_delay_expired(group))
        else:
            group.join_timer_is_initial = False
            group.join_timer = self.timer.call_later(
                group.rebalance_timeout_ms(), lambda: self._on_join_timeout(group)
            )
        log.info(
            "group %s: preparing to rebalance, old generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        self._try_complete_join(group)

    def _on_initial_delay_expired(self, group: ClassicGroup) -> None:
        group.join_timer = None
        if not group.is_in(S.PREPARING_REBALANCE) or not group.join_timer_is_initial:
            return
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining != 0:
            # more members arrived during the delay: wait once more (bounded by the rebalance timeout)
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            group.join_timer = self.timer.call_later(delay, lambda: self._on_initial_delay_expired(group))
            return
        group.join_timer_is_initial = False
        self._complete_join(group)

    def _on_join_timeout(self, group: ClassicGroup) -> None:
        group.join_timer = None
        if group.is_in(S.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(S.PREPARING_REBALANCE)
            and not group.join_timer_is_initial
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_timer_is_initial = False
        # dynamic members that did not rejoin in time are out; static ones keep their place
        for m in group.not_yet_rejoined_members():
            if not m.is_static:
                log.info(
                    "group %s: member %s did not rejoin in time, removing it", group.group_id, m.member_id
                )
                group.invoke_sync_callback(m, SyncResult(E.UNKNOWN_MEMBER_ID))
                group.remove(m.member_id)
        if group.is_dead:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait for the session timeouts to remove the silent (static) members
            log.warning("group %s: no member rejoined, waiting another rebalance timeout", group.group_id)
            group.join_timer = self.timer.call_later(
                max(group.rebalance_timeout_ms(), 1), lambda: self._on_join_timeout(group)
            )
            return
        group.init_next_generation(self.now())
        if group.is_empty:
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self.spawn(self._store_group(group, {}))
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            group.size,
            group.protocol_name,
            group.leader_id,
        )
        for m in list(group.members.values()):
            group.invoke_join_callback(m, self._join_result_for(group, m))
            self._schedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self._schedule_pending_sync(group)

    # ================================================================================ SyncGroup
    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: dict[str, bytes] | None = None,
    ) -> SyncResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[SyncResult] = loop.create_future()

        def respond(result: SyncResult) -> None:
            if not fut.done():
                fut.set_result(result)

        self.handle_sync(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments or {},
            respond,
        )
        return await fut

    def handle_sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        respond: Callable[[SyncResult], None],
    ) -> None:
        if not group_id:
            respond(SyncResult(E.INVALID_GROUP_ID))
            return
        if not self.owns(group_id):
            respond(SyncResult(E.NOT_COORDINATOR))
            return
        group = self.classic_group(group_id)
        if group is None:
            respond(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.is_dead:
            respond(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            respond(SyncResult(E.FENCED_INSTANCE_ID))
            return
        if member_id not in group.members:
            respond(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if generation_id != group.generation_id:
            respond(SyncResult(E.ILLEGAL_GENERATION))
            return
        if protocol_type is not None and group.protocol_type != protocol_type:
            respond(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if protocol_name is not None and group.protocol_name != protocol_name:
            respond(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        member = group.get(member_id)
        if group.is_empty:
            respond(SyncResult(E.UNKNOWN_MEMBER_ID))
        elif group.is_in(S.PREPARING_REBALANCE):
            respond(SyncResult(E.REBALANCE_IN_PROGRESS))
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.awaiting_sync is not None:
                group.invoke_sync_callback(member, SyncResult(E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            group.pending_sync_members.discard(member_id)
            if group.is_leader(member_id):
                assignment = {mid: bytes(assignments.get(mid, b"") or b"") for mid in group.members}
                missing = [mid for mid in group.members if mid not in assignments]
                if missing:
                    log.warning("group %s: leader %s gave no assignment for %s", group_id, member_id, missing)
                log.info(
                    "group %s: assignment received from leader %s for generation %d",
                    group_id,
                    member_id,
                    group.generation_id,
                )
                self.spawn(self._store_and_propagate(group, group.generation_id, assignment, member_id))
        else:  # Stable: hand out the current assignment
            group.pending_sync_members.discard(member_id)
            respond(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._schedule_heartbeat(group, member)

    async def _store_and_propagate(
        self, group: ClassicGroup, generation: int, assignment: dict[str, bytes], leader_id: str
    ) -> None:
        error = await self._store_group(group, assignment)
        # another member may have joined meanwhile: only act if the generation is still completing
        if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error != E.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error storing the assignment of leader {leader_id}")
            return
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        group.transition(S.STABLE, self.now())
        self._propagate_assignment(group, E.NONE)
        log.info("group %s: generation %d is stable", group.group_id, generation)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for m in list(group.members.values()):
            result = SyncResult(
                error, m.assignment if error == E.NONE else b"", group.protocol_type, group.protocol_name
            )
            if group.invoke_sync_callback(m, result):
                # restart the session clock: expiries that fell while the member waited were ignored
                self._schedule_heartbeat(group, m)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        self._cancel_pending_sync(group)
        generation = group.generation_id
        group.sync_timer = self.timer.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_pending_sync_expired(group, generation)
        )

    def _cancel_pending_sync(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_pending_sync_expired(self, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        log.info("group %s: members %s sent no SyncGroup in time, removing them", group.group_id, missing)
        for mid in missing:
            m = group.members.get(mid)
            if m is not None:
                group.invoke_sync_callback(m, SyncResult(E.UNKNOWN_MEMBER_ID))
            group.remove(mid)
        self._prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    # ================================================================================ Heartbeat
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        if not self.owns(group_id):
            return E.NOT_COORDINATOR
        group = self.classic_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_dead:
            return E.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None:
            existing = group.static_member_id(group_instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        member = group.get(member_id)
        if group.is_empty:
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member)
        if group.is_in(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        # CompletingRebalance: clients may heartbeat between the JoinGroup and the SyncGroup answers
        return E.NONE

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: ClassicMember, timeout_ms: int | None = None
    ) -> None:
        member.cancel_expiry()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.expiry = self.timer.call_later(timeout, lambda: self._on_heartbeat_expired(group, member))

    def _on_heartbeat_expired(self, group: ClassicGroup, member: ClassicMember) -> None:
        member.expiry = None
        if group.is_dead or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            # waiting on the coordinator counts as alive; the clock restarts when the wait ends
            return
        log.info(
            "group %s: member %s failed its session timeout (%d ms), removing it",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member, f"member {member.member_id} session expired")

    def _on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id not in group.pending_members:
            return
        group.pending_members.pop(member_id, None)
        log.debug("group %s: pending member %s never joined, dropping it", group.group_id, member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicMember, reason: str
    ) -> None:
        # a member still waiting on JoinGroup/SyncGroup gets an answer that makes it rejoin if it is alive
        group.invoke_join_callback(member, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================================ LeaveGroup
    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[int, list[int]]:
        """``members``: (member_id, group_instance_id, reason) -> (top-level error, per-member errors)."""
        if not group_id:
            return E.INVALID_GROUP_ID, [E.INVALID_GROUP_ID] * len(members)
        if not self.owns(group_id):
            return E.NOT_COORDINATOR, [E.NOT_COORDINATOR] * len(members)
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            return E.NONE, [self.consumer.classic_leave(group, mid, iid) for mid, iid, _ in members]
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_dead:
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(members)
        errors: list[int] = []
        for member_id, instance_id, reason in members:
            why = f"member {member_id or instance_id} left" + (f" ({reason})" if reason else "")
            if member_id == UNKNOWN_MEMBER_ID:
                # administrative removal by group.instance.id
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_current_member(group, current, why)
                    errors.append(E.NONE)
            elif group.is_pending_member(member_id):
                group.remove_pending_member(member_id)
                if group.is_in(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(E.NONE)
            elif group.is_static_member_fenced(instance_id, member_id):
                errors.append(E.FENCED_INSTANCE_ID)
            elif member_id in group.members:
                self._remove_current_member(group, member_id, why)
                errors.append(E.NONE)
            else:
                errors.append(E.UNKNOWN_MEMBER_ID)
        return E.NONE, errors

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        member.is_leaving = True
        log.info("group %s: %s", group.group_id, reason)
        self._remove_member_and_update_group(group, member, reason)

    # ============================================================================ group persistence
    def group_metadata_value(
        self, group: ClassicGroup, assignment: dict[str, bytes]
    ) -> fmt.GroupMetadataValue:
        protocol = group.protocol_name
        return fmt.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                fmt.MemberMetadataRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(protocol),
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ],
        )

    async def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> int:
        value = fmt.encode_group_metadata_value(self.group_metadata_value(group, assignment))
        try:
            await self.append(group.group_id, [(fmt.encode_group_metadata_key(group.group_id), value)])
        except Exception as exc:
            log.warning("group %s: storing group metadata failed: %s", group.group_id, exc)
            return _storage_error(exc)
        return E.NONE

    # =============================================================================== OffsetCommit
    def validate_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        api_version: int,
        *,
        transactional: bool = False,
    ) -> tuple[int, GroupBase | None]:
        """Kafka's offset commit validation; creates a "simple" group for generation -1 commits."""
        if group_id and not self.owns(group_id):
            return E.NOT_COORDINATOR, None
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            if generation_id < 0:
                return E.NONE, self._create_classic_group(group_id)
            if api_version >= 9:
                return E.GROUP_ID_NOT_FOUND, None
            return E.ILLEGAL_GENERATION, None
        if not isinstance(group, ClassicGroup):
            return self.consumer.validate_commit(
                group, member_id, generation_id, api_version, transactional
            ), group
        if generation_id < 0 and group.is_empty:
            return E.NONE, group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                existing = group.static_member_id(group_instance_id)
                if existing is None:
                    return E.UNKNOWN_MEMBER_ID, group
                if existing != member_id:
                    return E.FENCED_INSTANCE_ID, group
            if member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID, group
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION, group
        elif not transactional and not group.is_empty:
            # no member id and no generation (v0): only an empty group takes such commits
            return E.UNKNOWN_MEMBER_ID, group
        if not transactional and group.is_in(S.COMPLETING_REBALANCE):
            # the member saw the JoinGroup answer but not the SyncGroup one yet
            return E.REBALANCE_IN_PROGRESS, group
        return E.NONE, group

    def metadata_too_large(self, metadata: str | None) -> bool:
        if not metadata:
            return False
        # Kafka compares String.length() (UTF-16 code units)
        return len(metadata.encode("utf-16-le")) // 2 > self.config.offset_metadata_max_bytes

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        api_version: int = 9,
    ) -> dict[TopicPartition, int]:
        error, group = self.validate_commit(
            group_id, member_id, generation_id, group_instance_id, api_version
        )
        if error != E.NONE or group is None:
            return {tp: error for tp in offsets}
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, co in offsets.items():
            if self.metadata_too_large(co.metadata):
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = co
        if accepted:
            records = [
                (fmt.encode_offset_commit_key(group_id, t, p), fmt.encode_offset_commit_value(_to_value(co)))
                for (t, p), co in accepted.items()
            ]
            try:
                await self.append(group_id, records)
            except Exception as exc:
                log.warning("group %s: storing offsets failed: %s", group_id, exc)
                err = _storage_error(exc)
                results.update({tp: err for tp in accepted})
                return results
            current = self.groups.get(group_id)
            if current is group and not group.is_dead:
                group.offsets.update(accepted)
            elif current is not None and not current.is_dead:
                current.offsets.update(accepted)
            results.update({tp: E.NONE for tp in accepted})
        return {tp: results[tp] for tp in offsets}

    # ----------------------------------------------------------------- transactional offsets (hooks)
    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        api_version: int = 3,
        producer_epoch: int | None = None,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets kept pending until the transaction ends (``complete_transaction``).

        With ``producer_epoch`` (the broker's TxnOffsetCommit handler) the records are written at once as a
        transactional batch of the producer, as Kafka does: the transaction coordinator's COMMIT/ABORT marker
        on the partition then decides them, also after a restart (``load``)."""
        if not self.owns(group_id):
            return {tp: E.NOT_COORDINATOR for tp in offsets}
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            group = self._create_classic_group(group_id)
            error = E.NONE
        else:
            error, _ = self.validate_commit(
                group_id, member_id, generation_id, group_instance_id, api_version, transactional=True
            )
        if error != E.NONE:
            return {tp: error for tp in offsets}
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, co in offsets.items():
            if self.metadata_too_large(co.metadata):
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = co
                results[tp] = E.NONE
        if accepted and producer_epoch is not None:
            records = [
                (fmt.encode_offset_commit_key(group_id, t, p), fmt.encode_offset_commit_value(_to_value(co)))
                for (t, p), co in accepted.items()
            ]
            try:
                await self.append(group_id, records, producer_id=producer_id, producer_epoch=producer_epoch,
                                  transactional=True)
            except Exception as exc:
                log.warning("group %s: storing transactional offsets failed: %s", group_id, exc)
                err = _storage_error(exc)
                results.update({tp: err for tp in accepted})
                return results
        if accepted:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
        return results

    async def complete_transaction(
        self,
        producer_id: int,
        committed: bool,
        group_ids: Iterable[str] | None = None,
        persist: bool = True,
    ) -> None:
        """End of a transaction: its pending offsets become committed (and durable) or are dropped.
        ``persist=False``: the records are already in the log, decided by the marker just written (the
        transaction coordinator's call), so nothing is appended."""
        for gid in list(group_ids) if group_ids is not None else list(self.groups):
            group = self.groups.get(gid)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not committed:
                continue
            if persist:
                records = [
                    (fmt.encode_offset_commit_key(gid, t, p), fmt.encode_offset_commit_value(_to_value(co)))
                    for (t, p), co in pending.items()
                ]
                await self.append(gid, records)
            if not group.is_dead:
                group.offsets.update(pending)

    # ================================================================================ OffsetFetch
    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, list[PartitionOffset]]:
        """Committed offsets; ``partitions`` None = all of the group's. Unknown ones answer offset -1."""
        if not self.owns(group_id):
            return E.NOT_COORDINATOR, []
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            if partitions is None:
                return E.NONE, []
            return E.NONE, [PartitionOffset(t, p) for t, p in partitions]
        if member_id is not None or member_epoch >= 0:
            error = self.consumer.validate_fetch(group, member_id, member_epoch)
            if error != E.NONE:
                return error, []
        if partitions is None:
            wanted = sorted(
                set(group.offsets) | {tp for offs in group.pending_txn_offsets.values() for tp in offs}
                if require_stable
                else group.offsets
            )
        else:
            wanted = list(partitions)
        out: list[PartitionOffset] = []
        for t, p in wanted:
            if require_stable and group.has_pending_txn_offset((t, p)):
                out.append(PartitionOffset(t, p, error=E.UNSTABLE_OFFSET_COMMIT))
                continue
            co = group.offsets.get((t, p))
            if co is None:
                out.append(PartitionOffset(t, p))
            else:
                out.append(PartitionOffset(t, p, co.offset, co.leader_epoch, co.metadata))
        return E.NONE, out

    # =============================================================================== OffsetDelete
    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        if not group_id:
            return E.INVALID_GROUP_ID, {}
        if not self.owns(group_id):
            return E.NOT_COORDINATOR, {}
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            return E.GROUP_ID_NOT_FOUND, {}
        if isinstance(group, ClassicGroup):
            if (
                group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
                and group.protocol_type != CONSUMER_PROTOCOL_TYPE
            ):
                return E.NON_EMPTY_GROUP, {}
            subscribed = group.is_subscribed_to_topic
        else:
            subscribed = self.consumer.is_subscribed_to_topic(group)
        results: dict[TopicPartition, int] = {}
        deleted: list[TopicPartition] = []
        for tp in partitions:
            if subscribed(tp[0]):
                results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = E.NONE
                if tp in group.offsets:
                    deleted.append(tp)
        if deleted:
            for tp in deleted:
                group.offsets.pop(tp, None)
            try:
                await self.append(
                    group_id, [(fmt.encode_offset_commit_key(group_id, t, p), None) for t, p in deleted]
                )
            except Exception as exc:
                log.warning("group %s: writing offset tombstones failed: %s", group_id, exc)
                return _storage_error(exc), {}
        return E.NONE, results

    # =============================================================================== DeleteGroups
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
            self._remove_group(group)
            results[gid] = E.NONE
            log.info("group %s deleted", gid)
        for gid, records in by_partition.items():
            try:
                await self.append(gid, records)
            except Exception as exc:
                log.warning("group %s: writing tombstones failed: %s", gid, exc)
                results[gid] = _storage_error(exc)
        return results

    def _tombstones_for_group(self, group: GroupBase) -> list[tuple[bytes, bytes | None]]:
        records: list[tuple[bytes, bytes | None]] = [
            (fmt.encode_offset_commit_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((fmt.encode_group_metadata_key(group.group_id), None))
        records.extend(self.consumer.tombstones_for(group))
        return records

    def _remove_group(self, group: GroupBase) -> None:
        if isinstance(group, ClassicGroup):
            group.cancel_timers()
            group.transition(S.DEAD, self.now())
        else:
            self.consumer.mark_dead(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ============================================================================ List / Describe
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

    # ================================================================================ expiration
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
        self.spawn(self.cleanup_expired_offsets())
        self._schedule_cleanup()

    async def cleanup_expired_offsets(self) -> int:
        """Drop expired offsets (Kafka's rules) and groups left empty without offsets. Returns how many
        offsets expired."""
        now = self.now()
        retention = self.config.offsets_retention_ms
        total = 0
        for group in list(self.groups.values()):
            if group.is_dead:
                continue
            expired = self._expired_offsets(group, now, retention)
            records: list[tuple[bytes, bytes | None]] = []
            for tp in expired:
                group.offsets.pop(tp, None)
                records.append((fmt.encode_offset_commit_key(group.group_id, *tp), None))
            total += len(expired)
            if expired:
                log.info("group %s: %d offsets expired", group.group_id, len(expired))
            if self._can_delete_when_empty(group):
                records.append((fmt.encode_group_metadata_key(group.group_id), None))
                records.extend(self.consumer.tombstones_for(group))
                self._remove_group(group)
                log.info("group %s: empty without offsets, removed", group.group_id)
            if records:
                try:
                    await self.append(group.group_id, records)
                except Exception as exc:
                    log.warning("group %s: writing expiry tombstones failed: %s", group.group_id, exc)
        return total

    def _can_delete_when_empty(self, group: GroupBase) -> bool:
        if not group.is_empty or group.offsets or group.pending_txn_offsets:
            return False
        if isinstance(group, ClassicGroup):
            return not group.pending_members and not group.members
        return True

    def _expired_offsets(self, group: GroupBase, now: int, retention: int) -> list[TopicPartition]:
        def expired(co: CommittedOffset, base: int) -> bool:
            if co.expire_timestamp >= 0:  # the old per-commit expire timestamp (OffsetCommit v1-v4)
                return now >= co.expire_timestamp
            return now - base >= retention

        def pick(
            base_of: Callable[[CommittedOffset], int], subscribed: set[str] | None = None
        ) -> list[TopicPartition]:
            return [
                tp
                for tp, co in group.offsets.items()
                if (subscribed is None or tp[0] not in subscribed)
                and not group.has_pending_txn_offset(tp)
                and expired(co, base_of(co))
            ]

        if isinstance(group, ClassicGroup):
            if group.protocol_type is not None and group.is_empty:
                # nobody in the group: retention counts from when it became empty
                return pick(
                    lambda co: group.state_timestamp if group.state_timestamp >= 0 else co.commit_timestamp
                )
            if (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_in(S.STABLE)
            ):
                # active consumers: offsets of topics nobody subscribes to expire from their last commit
                return pick(lambda co: co.commit_timestamp, group.subscribed_topics)
            if group.protocol_type is None:
                # simple consumer group (offsets only): from the last commit
                return pick(lambda co: co.commit_timestamp)
            return []
        return self.consumer.expired_offsets(group, pick)

    # ================================================================================== loading
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
                group_offsets[(k.topic, k.partition)] = _committed(fmt.decode_offset_commit_value(value))
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
                self._load_classic_group(gid, value, now)
        for gid, records in st.other.items():
            self.consumer.load_group(gid, records)
        for gid, offs in st.offsets.items():
            if not offs:
                continue
            group = self.groups.get(gid)
            if group is None:
                group = self._create_classic_group(gid)  # offsets only: a simple group
            group.offsets.update(offs)
        # transactional offset commits without a marker yet: pending again, for the transaction coordinator
        # to complete
        for producer_id, pending in st.pending.items():
            for k, raw in pending:
                if not isinstance(k, fmt.OffsetCommitKey) or raw is None:
                    continue
                try:
                    co = _committed(fmt.decode_offset_commit_value(raw))
                except fmt.RecordFormatError as exc:
                    log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc)
                    continue
                group = self.groups.get(k.group) or self._create_classic_group(k.group)
                group.pending_txn_offsets.setdefault(producer_id, {})[(k.topic, k.partition)] = co
        if st.count:
            loaded = sum(1 for gid in self.groups if self.partition_for(gid) == partition)
            log.info("loaded %d groups (%d records) from %s-%d", loaded, st.count, OFFSETS_TOPIC, partition)

    def on_unloaded(self, partition: int) -> None:
        """Leadership of ``__consumer_offsets-<partition>`` moved away: its groups go (NOT_COORDINATOR)."""
        self._loading.pop(partition, None)
        dropped = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in dropped:
            if isinstance(group, ClassicGroup):
                # members parked in JoinGroup / SyncGroup hear NOT_COORDINATOR now (Kafka's
                # onGroupUnloaded), instead of waiting for their request to time out
                for m in list(group.members.values()):
                    group.invoke_join_callback(m, JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                    group.invoke_sync_callback(m, SyncResult(E.NOT_COORDINATOR))
            self._remove_group(group)
        if dropped:
            log.info("unloaded %d groups of %s-%d", len(dropped), OFFSETS_TOPIC, partition)

    def _load_classic_group(self, group_id: str, value: fmt.GroupMetadataValue, now: int) -> None:
        state = S.STABLE if value.members else S.EMPTY
        group = ClassicGroup(group_id, now, state)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else now
        for rec in value.members:
            member = ClassicMember(
                member_id=rec.member_id,
                group_instance_id=rec.group_instance_id,
                client_id=rec.client_id,
                client_host=rec.client_host,
                rebalance_timeout_ms=rec.rebalance_timeout
                if rec.rebalance_timeout >= 0
                else rec.session_timeout,
                session_timeout_ms=rec.session_timeout,
                protocol_type=group.protocol_type or "",
                protocols=[(value.protocol or "", rec.subscription)],
                assignment=rec.assignment,
            )
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group
        # members of a loaded group get a fresh session to reach the coordinator again
        for m in group.members.values():
            self._schedule_heartbeat(group, m)

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


def _committed(v: fmt.OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def _to_value(co: CommittedOffset) -> fmt.OffsetCommitValue:
    return fmt.OffsetCommitValue(
        offset=co.offset,
        metadata=co.metadata or "",
        commit_timestamp=co.commit_timestamp,
        leader_epoch=co.leader_epoch,
        expire_timestamp=co.expire_timestamp,
    )


def _storage_error(exc: BaseException) -> int:
    """Kafka's mapping of a failed __consumer_offsets append to what the client sees."""
    code = getattr(exc, "code", None)
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    if code == E.INVALID_PRODUCER_EPOCH:  # transactional offsets of a fenced producer (the log's epoch check)
        return E.INVALID_PRODUCER_EPOCH
    return E.COORDINATOR_NOT_AVAILABLE
