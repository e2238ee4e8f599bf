"""KIP-848 consumer groups: ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69).

The broker computes the assignment (server-side assignors ``uniform`` / ``range``) and reconciles each member
towards its target through heartbeats, following Kafka's GroupMetadataManager/CurrentAssignmentBuilder:

* a heartbeat with member epoch 0 joins (v0: the coordinator makes the member id; v1+: the client does),
  -1 leaves, -2 leaves temporarily (static members keep their assignment for a restart);
* the group epoch grows when membership, subscriptions or the subscribed topics' partition counts change;
  the target assignment is recomputed for that epoch;
* a member gives up partitions first (state ``unrevoked_partitions``: its assignment shrinks, its epoch
  stays) and acknowledges by no longer listing them as owned; it then moves to the target epoch and receives
  the partitions nobody else still owns (``unreleased_partitions`` while some are still held elsewhere);
* the session timeout (group.consumer.session.timeout.ms) removes silent members, the rebalance timeout of
  the member bounds a revocation.

Committed offsets are shared with the classic machinery (``GroupBase.offsets``). Membership is kept in
memory only (moldau does not write Kafka's ConsumerGroup* records): after a broker restart the members are
answered UNKNOWN_MEMBER_ID and rejoin with epoch 0; their committed offsets are durable as usual.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from moldau.protocol.errors import ErrorCode as E

from . import assignors
from .group import GroupBase, TopicPartition
from .timer import TimerHandle

if TYPE_CHECKING:
    from .registry import GroupRegistry
    from .timer import Timer

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

STABLE = "stable"
UNREVOKED = "unrevoked_partitions"
UNRELEASED = "unreleased_partitions"

Assignment = dict[str, set[int]]


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_timer: TimerHandle | None = None
    revocation_timer: TimerHandle | None = None

    def cancel_timers(self) -> None:
        for h in (self.session_timer, self.revocation_timer):
            if h is not None:
                h.cancel()
        self.session_timer = None
        self.revocation_timer = None


class ConsumerGroup(GroupBase):
    group_type = "consumer"

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__(group_id, now_ms)
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, Assignment] = {}
        self.owner: dict[TopicPartition, str] = {}  # partitions assigned to or being revoked by a member
        self.partition_counts: dict[str, int] = {}
        self.assignor_name = "uniform"
        self.dead = False
        self.state_timestamp = now_ms

    @property
    def is_dead(self) -> bool:
        return self.dead

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self, resolve: Callable[[ConsumerMember], set[str]]) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= resolve(m)
        return out


@dataclass(slots=True)
class HeartbeatResult:
    error: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # topic name -> partitions; None = unchanged


class CoordinatorView(Protocol):
    """What the consumer-group manager uses of its ``coordinator.GroupCoordinator`` (which creates it, so it
    does not import the coordinator back): config (a ``GroupConfig``), timer, topic lookup, groups, clock."""

    config: Any
    timer: Timer
    topics: Any
    groups: GroupRegistry

    def now(self) -> int: ...


class ConsumerGroupManager:
    def __init__(self, coordinator: CoordinatorView) -> None:
        self.coordinator = coordinator
        self._regex_cache: dict[str, re.Pattern[str] | None] = {}

    @property
    def config(self) -> Any:
        return self.coordinator.config

    @property
    def timer(self) -> Any:
        return self.coordinator.timer

    # ================================================================================ topics
    def _topic_names(self) -> list[str]:
        topics = self.coordinator.topics
        names = getattr(topics, "topic_names", None)
        return list(names()) if names is not None else []

    def _partition_count(self, topic: str) -> int | None:
        topics = self.coordinator.topics
        return None if topics is None else topics.partition_count(topic)

    def topic_id(self, topic: str) -> Any:
        topics = self.coordinator.topics
        f = getattr(topics, "topic_id", None)
        return None if f is None else f(topic)

    def topic_name(self, topic_id: Any) -> str | None:
        topics = self.coordinator.topics
        f = getattr(topics, "topic_name", None)
        return None if f is None else f(topic_id)

    def _regex(self, pattern: str) -> re.Pattern[str] | None:
        if pattern not in self._regex_cache:
            try:
                self._regex_cache[pattern] = re.compile(pattern)
            except re.error:
                self._regex_cache[pattern] = None
        return self._regex_cache[pattern]

    def member_topics(self, m: ConsumerMember) -> set[str]:
        topics = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            rx = self._regex(m.subscribed_topic_regex)
            if rx is not None:
                topics |= {t for t in self._topic_names() if not t.startswith("__") and rx.fullmatch(t)}
        return topics

    def _refresh_partition_counts(self, group: ConsumerGroup) -> bool:
        counts: dict[str, int] = {}
        for t in group.subscribed_topics(self.member_topics):
            n = self._partition_count(t)
            if n is not None and n > 0:
                counts[t] = n
        if counts != group.partition_counts:
            group.partition_counts = counts
            return True
        return False

    # ============================================================================= heartbeat
    def heartbeat(
        self,
        *,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: list[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned: list[tuple[Any, list[int]]] | None = None,
        client_id: str = "",
        client_host: str = "",
        api_version: int = 0,
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat. ``owned``: (topic id, partitions) pairs or None (unchanged)."""
        interval = self.config.consumer_heartbeat_interval_ms
        if "consumer" not in self.config.rebalance_protocols:
            return HeartbeatResult(E.UNSUPPORTED_VERSION, "The consumer group protocol is disabled.")
        error = self._validate(
            group_id,
            member_id,
            member_epoch,
            instance_id,
            rebalance_timeout_ms,
            subscribed_topic_names,
            subscribed_topic_regex,
            server_assignor,
            owned,
            api_version,
        )
        if error is not None:
            return error
        owned_names = None if owned is None else self._owned_by_name(owned)
        group = self.coordinator.groups.get(group_id)
        if group is not None and not isinstance(group, ConsumerGroup):
            if member_epoch == 0 and self._classic_is_empty(group):
                group = self._convert_from_classic(group)
            else:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if group is None or group.is_dead:
            if member_epoch != 0:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Consumer group {group_id} not found.")
            group = ConsumerGroup(group_id, self.coordinator.now())
            self.coordinator.groups.add(group)

        if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group, member_id, instance_id, member_epoch)

        # ------------------------------------------------------------------ find or create the member
        member = group.members.get(member_id) if member_id else None
        epoch_bump = False
        replaced: ConsumerMember | None = None
        if member_epoch == 0:
            if instance_id is not None:
                existing_id = group.static_members.get(instance_id)
                if existing_id is not None and existing_id != member_id:
                    existing = group.members.get(existing_id)
                    if existing is not None and existing.member_epoch != LEAVE_STATIC_EPOCH:
                        return HeartbeatResult(
                            E.UNRELEASED_INSTANCE_ID,
                            f"Static member {instance_id} is still in use by {existing_id}.",
                        )
                    replaced = existing
            if not self._has_room(group, member_id, replaced):
                return HeartbeatResult(
                    E.GROUP_MAX_SIZE_REACHED, f"Group {group_id} reached its maximum size."
                )
            if not member_id:
                member_id = str(uuid.uuid4())
            if member is not None and replaced is None:
                # a member rejoining with epoch 0 starts from scratch (it abandoned its partitions)
                self._release_member(group, member)
                member.assigned, member.pending_revocation, member.state = {}, {}, STABLE
                member.member_epoch, member.previous_member_epoch = 0, -1
                epoch_bump = True
            elif member is None:
                member = ConsumerMember(member_id=member_id)
                group.members[member_id] = member
                if replaced is not None:
                    # a static member restarting: it takes over its predecessor's place and partitions
                    self._take_over(group, replaced, member)
                else:
                    epoch_bump = True
                log.info("consumer group %s: member %s (client %s) joins", group_id, member_id, client_id)
        else:
            if member is None:
                return HeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                )
            if member_epoch > member.member_epoch:
                return HeartbeatResult(
                    E.FENCED_MEMBER_EPOCH,
                    f"The member epoch {member_epoch} is newer than {member.member_epoch}.",
                )
            if member_epoch < member.member_epoch:
                # the answer with the bumped epoch may have been lost: accept the previous epoch if the member
                # owns no more than its assignment
                if member_epoch != member.previous_member_epoch or not _subset(owned_names, member.assigned):
                    return HeartbeatResult(
                        E.FENCED_MEMBER_EPOCH,
                        f"The member epoch {member_epoch} is older than {member.member_epoch}.",
                    )
            if instance_id is not None and member.instance_id not in (None, instance_id):
                return HeartbeatResult(E.FENCED_INSTANCE_ID, "The instance id does not match the member.")

        # ------------------------------------------------------------------------ update the member
        member.client_id = client_id or member.client_id
        member.client_host = client_host or member.client_host
        if instance_id is not None:
            member.instance_id = instance_id
            group.static_members[instance_id] = member.member_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(
            member.subscribed_topic_names
        ):
            member.subscribed_topic_names = list(subscribed_topic_names)
            epoch_bump = True
        if subscribed_topic_regex is not None:
            regex = subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                epoch_bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor = server_assignor
            epoch_bump = True
        if self._refresh_partition_counts(group):
            epoch_bump = True
        if epoch_bump:
            self._bump(group, f"member {member.member_id} joined or changed its subscription")
        self._maybe_compute_target(group)

        # --------------------------------------------------------------------------------- reconcile
        before = _copy(member.assigned)
        self._reconcile(group, member, owned_names)
        self._schedule_session(group, member)
        full = member_epoch == 0 or (
            rebalance_timeout_ms != -1
            and owned is not None
            and (subscribed_topic_names is not None or subscribed_topic_regex is not None)
        )
        return HeartbeatResult(
            E.NONE,
            None,
            member.member_id,
            member.member_epoch,
            interval,
            _copy(member.assigned) if full or member.assigned != before else None,
        )

    def _validate(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rebalance_timeout_ms: int,
        names: list[str] | None,
        regex: str | None,
        server_assignor: str | None,
        owned: Any,
        api_version: int,
    ) -> HeartbeatResult | None:
        def bad(msg: str) -> HeartbeatResult:
            return HeartbeatResult(E.INVALID_REQUEST, msg)

        if not group_id:
            return bad("GroupId can't be empty.")
        if instance_id is not None and not instance_id:
            return bad("InstanceId can't be empty.")
        if member_epoch == 0:
            if api_version >= 1 and not member_id:
                return bad("MemberId can't be empty.")
            if rebalance_timeout_ms == -1:
                return bad("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                return bad("TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif member_epoch == LEAVE_STATIC_EPOCH:
            if instance_id is None:
                return bad("InstanceId can't be null.")
            if not member_id:
                return bad("MemberId can't be empty.")
        elif member_epoch == LEAVE_EPOCH or member_epoch > 0:
            if not member_id:
                return bad("MemberId can't be empty.")
        else:
            return bad(f"MemberEpoch {member_epoch} is invalid.")
        if regex is not None and regex and self._regex(regex) is None:
            return HeartbeatResult(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {regex} is invalid.")
        if server_assignor is not None and server_assignor not in self.config.consumer_assignors:
            return HeartbeatResult(
                E.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.config.consumer_assignors)}.",
            )
        return None

    def _owned_by_name(self, owned: list[tuple[Any, list[int]]]) -> Assignment:
        out: Assignment = {}
        for topic_id, parts in owned:
            name = topic_id if isinstance(topic_id, str) else self.topic_name(topic_id)
            if name is not None and parts:
                out.setdefault(name, set()).update(parts)
        return out

    def _has_room(self, group: ConsumerGroup, member_id: str, replaced: ConsumerMember | None) -> bool:
        if member_id in group.members or replaced is not None:
            return True
        return len(group.members) < self.config.consumer_max_size

    def _classic_is_empty(self, group: GroupBase) -> bool:
        return (
            group.is_empty
            and not getattr(group, "members", None)
            and not getattr(group, "pending_members", None)
        )

    def _convert_from_classic(self, classic: GroupBase) -> ConsumerGroup:
        group = ConsumerGroup(classic.group_id, self.coordinator.now())
        group.offsets = classic.offsets
        group.pending_txn_offsets = classic.pending_txn_offsets
        cancel = getattr(classic, "cancel_timers", None)
        if cancel is not None:
            cancel()
        self.coordinator.groups.add(group)
        log.info("group %s: empty classic group converted to a consumer group", classic.group_id)
        return group

    def _take_over(self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> None:
        for attr in (
            "rebalance_timeout_ms",
            "subscribed_topic_names",
            "subscribed_topic_regex",
            "server_assignor",
            "rack_id",
            "state",
        ):
            setattr(new, attr, getattr(old, attr))
        new.assigned = _copy(old.assigned)
        new.pending_revocation = _copy(old.pending_revocation)
        new.member_epoch = group.assignment_epoch if old.state == STABLE else old.previous_member_epoch
        new.previous_member_epoch = old.previous_member_epoch
        old.cancel_timers()
        group.members.pop(old.member_id, None)
        if old.member_id in group.target:
            group.target[new.member_id] = group.target.pop(old.member_id)
        for tp, owner in list(group.owner.items()):
            if owner == old.member_id:
                group.owner[tp] = new.member_id
        log.info(
            "consumer group %s: static member %s now %s (was %s)",
            group.group_id,
            old.instance_id,
            new.member_id,
            old.member_id,
        )

    # =========================================================================== assignment
    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info("consumer group %s: epoch %d (%s)", group.group_id, group.group_epoch, reason)

    def _choose_assignor(self, group: ConsumerGroup) -> str:
        prefs = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if prefs:
            best = max(prefs.values())
            for name in self.config.consumer_assignors:
                if prefs.get(name) == best:
                    return name
        return self.config.consumer_assignors[0] if self.config.consumer_assignors else "uniform"

    def _maybe_compute_target(self, group: ConsumerGroup) -> None:
        if group.group_epoch <= group.assignment_epoch and group.target.keys() == group.members.keys():
            return
        name = self._choose_assignor(group)
        specs = {
            mid: assignors.MemberSpec(
                topics=self.member_topics(m) & set(group.partition_counts),
                current=_copy(group.target.get(mid) or m.assigned),
                rack=m.rack_id,
            )
            for mid, m in group.members.items()
        }
        group.target = assignors.assign(name, specs, group.partition_counts)
        group.assignor_name = name
        group.assignment_epoch = group.group_epoch
        log.info(
            "consumer group %s: target assignment for epoch %d with %s: %s",
            group.group_id,
            group.assignment_epoch,
            name,
            {mid: {t: sorted(ps) for t, ps in a.items()} for mid, a in group.target.items()},
        )

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        if member.state == UNREVOKED:
            if _owns_any(owned, member.pending_revocation):
                return
            # revocation acknowledged
            self._set_assignment(group, member, member.assigned, {})
            self._next(group, member, owned)
        elif member.state == STABLE and member.member_epoch == group.assignment_epoch:
            return
        else:
            self._next(group, member, owned)

    def _next(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        target = group.target.get(member.member_id, {})
        current = member.assigned
        keep: Assignment = {}
        revoke: Assignment = {}
        grant: Assignment = {}
        unreleased = False
        for t in set(target) | set(current):
            tgt = target.get(t, set())
            cur = current.get(t, set())
            k = cur & tgt
            r = cur - tgt
            pending = tgt - k
            free = {p for p in pending if group.owner.get((t, p)) in (None, member.member_id)}
            if pending - free:
                unreleased = True
            if k:
                keep[t] = k
            if r:
                revoke[t] = r
            if free:
                grant[t] = free
        if revoke and _owns_any(owned, revoke):
            # give up partitions first: keep the epoch, shrink the assignment, wait for the acknowledgement
            self._set_assignment(group, member, keep, revoke)
            member.state = UNREVOKED
            self._schedule_revocation(group, member)
            return
        new_assigned = _union(keep, grant)
        self._set_assignment(group, member, new_assigned, {})
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = UNRELEASED if unreleased else STABLE
        if member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None

    def _set_assignment(
        self, group: ConsumerGroup, member: ConsumerMember, assigned: Assignment, pending: Assignment
    ) -> None:
        mine = {(t, p) for a in (assigned, pending) for t, ps in a.items() for p in ps}
        for tp, owner in list(group.owner.items()):
            if owner == member.member_id and tp not in mine:
                del group.owner[tp]
        for tp in mine:
            group.owner[tp] = member.member_id
        member.assigned = {t: set(ps) for t, ps in assigned.items() if ps}
        member.pending_revocation = {t: set(ps) for t, ps in pending.items() if ps}

    def _release_member(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        for tp, owner in list(group.owner.items()):
            if owner == member.member_id:
                del group.owner[tp]

    # =============================================================================== leaving
    def _leave(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, epoch: int
    ) -> HeartbeatResult:
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            mid = group.static_members.get(instance_id)
            member = group.members.get(mid) if mid else None
        if member is None:
            return HeartbeatResult(
                E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
        if epoch == LEAVE_STATIC_EPOCH and member.instance_id is not None:
            # a static member going away for a restart keeps its partitions until its session times out
            member.member_epoch = LEAVE_STATIC_EPOCH
            self._schedule_session(group, member)
            log.info(
                "consumer group %s: static member %s left temporarily", group.group_id, member.instance_id
            )
            return HeartbeatResult(
                E.NONE, None, member.member_id, LEAVE_STATIC_EPOCH, self.config.consumer_heartbeat_interval_ms
            )
        self.remove_member(group, member, "left the group")
        return HeartbeatResult(
            E.NONE, None, member.member_id, LEAVE_EPOCH, self.config.consumer_heartbeat_interval_ms
        )

    def remove_member(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        if group.members.get(member.member_id) is not member:
            return
        member.cancel_timers()
        self._release_member(group, member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        log.info("consumer group %s: member %s %s", group.group_id, member.member_id, reason)
        self._refresh_partition_counts(group)
        self._bump(group, f"member {member.member_id} {reason}")
        if not group.members:
            group.state_timestamp = self.coordinator.now()
            group.target = {}
            group.assignment_epoch = group.group_epoch
        else:
            self._maybe_compute_target(group)

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = self.timer.call_later(
            self.config.consumer_session_timeout_ms, lambda: self._on_session_expired(group, member)
        )

    def _on_session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            self.remove_member(
                group, member, f"session timed out ({self.config.consumer_session_timeout_ms} ms)"
            )

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.revocation_timer is not None:
            return
        member.revocation_timer = self.timer.call_later(
            member.rebalance_timeout_ms, lambda: self._on_revocation_expired(group, member)
        )

    def _on_revocation_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.revocation_timer = None
        if group.members.get(member.member_id) is member and member.state == UNREVOKED:
            self.remove_member(group, member, "did not revoke its partitions within its rebalance timeout")

    # ============================================================================== describe
    def describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_dead:
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ConsumerGroup):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return E.NONE, None, group

    # ================================================================= hooks for the coordinator
    def drop_group_for_conversion(self, group: GroupBase) -> None:
        """An empty consumer group becomes a classic group (its offsets stay)."""
        from .group import ClassicGroup

        assert isinstance(group, ConsumerGroup)
        group.dead = True
        classic = ClassicGroup(group.group_id, self.coordinator.now())
        classic.offsets = group.offsets
        classic.pending_txn_offsets = group.pending_txn_offsets
        self.coordinator.groups.add(classic)

    def classic_leave(self, group: GroupBase, member_id: str, instance_id: str | None) -> int:
        if not isinstance(group, ConsumerGroup):
            return E.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id) if member_id else None
        if member is None and instance_id is not None:
            mid = group.static_members.get(instance_id)
            member = group.members.get(mid) if mid else None
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        self.remove_member(group, member, "removed by LeaveGroup")
        return E.NONE

    def validate_commit(
        self, group: GroupBase, member_id: str, epoch: int, api_version: int, transactional: bool
    ) -> int:
        assert isinstance(group, ConsumerGroup)
        if epoch < 0 and not group.members:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return E.UNSUPPORTED_VERSION
        if epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_fetch(self, group: GroupBase, member_id: str | None, member_epoch: int) -> int:
        if not isinstance(group, ConsumerGroup):
            return E.NONE
        if member_id is None and member_epoch < 0:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def is_subscribed_to_topic(self, group: GroupBase) -> Callable[[str], bool]:
        if not isinstance(group, ConsumerGroup):
            return lambda topic: False
        subscribed = group.subscribed_topics(self.member_topics)
        return lambda topic: topic in subscribed

    def tombstones_for(self, group: GroupBase) -> list[tuple[bytes, bytes | None]]:
        return []

    def mark_dead(self, group: GroupBase) -> None:
        if isinstance(group, ConsumerGroup):
            for m in group.members.values():
                m.cancel_timers()
            group.dead = True

    def expired_offsets(self, group: GroupBase, pick: Callable[..., list[Any]]) -> list[Any]:
        if not isinstance(group, ConsumerGroup):
            return []
        if not group.members:
            return pick(lambda co: group.state_timestamp)
        return pick(lambda co: co.commit_timestamp, group.subscribed_topics(self.member_topics))

    def group_of_record(self, key: Any) -> str | None:
        return None  # KIP-848 records are not written by moldau

    def load_group(self, group_id: str, records: list[Any]) -> None:
        pass

    def shutdown(self) -> None:
        for g in self.coordinator.groups.values():
            if isinstance(g, ConsumerGroup):
                for m in g.members.values():
                    m.cancel_timers()


def _copy(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def _union(a: Assignment, b: Assignment) -> Assignment:
    out = _copy(a)
    for t, ps in b.items():
        if ps:
            out.setdefault(t, set()).update(ps)
    return out


def _owns_any(owned: Assignment | None, parts: Assignment) -> bool:
    """Whether the member still reports any of ``parts`` as owned (None = it did not say: assume it does)."""
    if owned is None:
        return any(parts.values())
    return any(owned.get(t, set()) & ps for t, ps in parts.items())


def _subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items())
