"""Group state: the classic group state machine's data (members, generation, protocol selection) and the
committed offsets every group kind holds.

Classic group states (Kafka's names, as DescribeGroups/ListGroups report them)::

    Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance ──leader sync──► Stable
      ▲                 ▲   │  (no members left)                      │                              │
      └─────────────────┼───┘                                         │                              │
                        └──── join / leave / expiry / metadata change ┴──────────────────────────────┘
    any ──► Dead (deleted, or emptied and all offsets expired)

The transitions and their triggers live in ``coordinator.py``; this module keeps the invariants (member
counters, supported-protocol counts, static member index) in one place.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from .timer import TimerHandle

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only from OffsetCommit v1-v4 with an explicit retention/timestamp


TopicPartition = tuple[str, int]


class GroupBase:
    """What every group has: an id and committed offsets (plus transactional offsets not yet committed)."""

    group_type = "classic"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        # producer id -> offsets written in an open transaction (TxnOffsetCommit), visible after commit
        self.pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = {}
        self.created_ms = now_ms

    # overridden
    @property
    def state_name(self) -> str:
        raise NotImplementedError

    @property
    def is_dead(self) -> bool:
        raise NotImplementedError

    @property
    def is_empty(self) -> bool:
        raise NotImplementedError

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in offs for offs in self.pending_txn_offsets.values())


# ----------------------------------------------------------------------------------------- classic


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) - filled for the leader only
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(slots=True, eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    is_leaving: bool = False
    expiry: TimerHandle | None = None  # session (or new-member join) expiry

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        if len(protocols) != len(self.protocols):
            return False
        return all(a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(self.protocols, protocols))

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class ClassicGroup(GroupBase):
    """A group managed with JoinGroup/SyncGroup/Heartbeat/LeaveGroup (or a "simple" group that only commits
    offsets: protocol_type None, never leaves Empty)."""

    group_type = "classic"

    def __init__(
        self, group_id: str, now_ms: int, state: ClassicGroupState = ClassicGroupState.EMPTY
    ) -> None:
        super().__init__(group_id, now_ms)
        self.state = state
        self.state_timestamp: int = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, TimerHandle | None] = {}  # handed out with MEMBER_ID_REQUIRED
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.supported_protocols: Counter[str] = Counter()
        self.subscribed_topics: set[str] | None = None
        # timers of the join phase and of the pending-sync phase
        self.join_timer: TimerHandle | None = None
        self.join_timer_is_initial = False
        self.initial_delay_remaining_ms = 0
        self.sync_timer: TimerHandle | None = None

    # --- state
    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_dead(self) -> bool:
        return self.state is ClassicGroupState.DEAD

    @property
    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def transition(self, new: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[new]:
            raise AssertionError(
                f"group {self.group_id}: invalid transition {self.state.value} -> {new.value}"
            )
        self.state = new
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
        )

    # --- members
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> ClassicMember:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str, expiry: TimerHandle | None) -> None:
        self.pending_members[member_id] = expiry

    def remove_pending_member(self, member_id: str) -> bool:
        if member_id in self.pending_members:
            handle = self.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            return True
        return False

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        existing = self.static_member_id(group_instance_id)
        return existing is not None and existing != member_id

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in protocol_names
        )

    def add(self, member: ClassicMember, callback: JoinCallback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(set(member.protocol_names()))
        member.awaiting_join = callback
        if callback is not None:
            self.num_awaiting_join += 1
        self.remove_pending_member(member.member_id)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(set(member.protocol_names()))
            self.supported_protocols += Counter()  # drop zero counts
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if (
                member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id
            ):
                del self.static_members[member.group_instance_id]
            member.cancel_expiry()
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.remove_pending_member(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: ClassicMember,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self.supported_protocols.subtract(set(member.protocol_names()))
        member.protocols = list(protocols)
        self.supported_protocols.update(set(member.protocol_names()))
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif callback is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback

    def replace_static_member(
        self,
        group_instance_id: str,
        old_member_id: str,
        new_member_id: str,
        fence_join: JoinResult,
        fence_sync: SyncResult,
    ) -> ClassicMember:
        member = self.members.pop(old_member_id)
        # fence a request the old incarnation may still be waiting on
        self.invoke_join_callback(member, fence_join)
        self.invoke_sync_callback(member, fence_sync)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def invoke_join_callback(self, member: ClassicMember, result: JoinResult) -> bool:
        cb = member.awaiting_join
        if cb is None:
            return False
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        cb(result)
        return True

    def invoke_sync_callback(self, member: ClassicMember, result: SyncResult) -> bool:
        cb = member.awaiting_sync
        if cb is None:
            return False
        member.awaiting_sync = None
        cb(result)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for mid, m in self.members.items():
            if m.awaiting_join is not None:
                self.leader_id = mid
                return True
        return False

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by all members")
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        # most votes wins; ties go to the protocol the leader (else the first member) prefers
        best = max(votes.values())
        tied = {name for name, n in votes.items() if n == best}
        order = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        for name in order.protocol_names():
            if name in tied:
                return name
        return sorted(tied)[0]

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            # unknown subscriptions: assume subscribed only for consumer-protocol groups (Kafka's rule)
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicGroupState.EMPTY, now_ms)

    def cancel_timers(self) -> None:
        for handle in (self.join_timer, self.sync_timer):
            if handle is not None:
                handle.cancel()
        self.join_timer = None
        self.sync_timer = None
        for m in self.members.values():
            m.cancel_expiry()
        for handle in self.pending_members.values():
            if handle is not None:
                handle.cancel()


# ------------------------------------------------------------------------ consumer protocol parsing


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version 0-3), or None if it cannot be parsed."""
    try:
        buf = bytes(metadata)
        (version,) = _I16.unpack_from(buf, 0)
        if version < 0:
            return None
        (count,) = _I32.unpack_from(buf, 2)
        pos = 6
        topics: list[str] = []
        for _ in range(max(count, 0)):
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n < 0 or pos + n > len(buf):
                return None
            topics.append(buf[pos : pos + n].decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription v0 (used by tests and by the KIP-848 classic-member bridge)."""
    parts = [_I16.pack(version), _I32.pack(len(topics))]
    for t in topics:
        b = t.encode()
        parts += [_I16.pack(len(b)), b]
    parts.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(parts)


def encode_assignment(
    partitions: dict[str, list[int]], user_data: bytes | None = None, version: int = 0
) -> bytes:
    parts = [_I16.pack(version), _I32.pack(len(partitions))]
    for t, ps in partitions.items():
        b = t.encode()
        parts += [_I16.pack(len(b)), b, _I32.pack(len(ps))]
        parts += [_I32.pack(p) for p in ps]
    parts.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(parts)
