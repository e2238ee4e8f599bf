"""Share-group membership (ShareGroupHeartbeat, key 76) and the server-side assignor of KIP-932.

* A member joins with epoch 0 and its own member id (ShareGroupHeartbeat v1: a UUID the client makes),
  leaves with -1; any other epoch must be the one the coordinator gave it last (FENCED_MEMBER_EPOCH), an
  unknown member id answers UNKNOWN_MEMBER_ID. A member that does not heartbeat within
  ``share.session.timeout.ms`` is removed.
* Each change of membership or subscription bumps the group epoch and re-assigns at once: share groups do
  not revoke (several members may read one partition), so a member's epoch is the group's epoch and its
  assignment is sent whenever it changed since the member last received it.
* The assignor (Kafka's ``SimpleAssignor`` in spirit): per subscribed topic with P partitions and M members
  subscribed to it, sorted by member id: M <= P, partition i goes to member i % M; M > P, member j gets
  partition j % P, so every partition has a member and every member a partition (several per partition).
* The membership is kept in memory (members rejoin after a restart); the share-partitions' state is in
  ``__share_group_state`` (``state``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from moldau.protocol.errors import ErrorCode


@dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    topics: list[str]
    deadline_ms: int
    assignment: dict[str, list[int]] = field(default_factory=dict)
    sent: dict[str, list[int]] | None = None  # the assignment last sent to the member


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    #: every topic a member subscribed to while the group was in memory (the topics it may have state for:
    #: DescribeShareGroupOffsets for all topics asks the share coordinators about these)
    topics_seen: set[str] = field(default_factory=set)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for mem in self.members.values() for t in mem.topics}


@dataclass(slots=True)
class HeartbeatResult:
    error: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[str, list[int]] | None = None


def assign(
    members: list[ShareMember], partitions_of: Callable[[str], int | None]
) -> dict[str, dict[str, list[int]]]:
    """member id -> topic -> partitions (the assignor described above)."""
    out: dict[str, dict[str, list[int]]] = {mem.member_id: {} for mem in members}
    topics = sorted({t for mem in members for t in mem.topics})
    for topic in topics:
        n = partitions_of(topic)
        if not n:
            continue
        subs = sorted(mem.member_id for mem in members if topic in mem.topics)
        if len(subs) <= n:
            for i in range(n):
                out[subs[i % len(subs)]].setdefault(topic, []).append(i)
        else:
            for j, mid in enumerate(subs):
                out[mid].setdefault(topic, []).append(j % n)
    return out


class ShareGroups:
    """The share groups this broker coordinates (a group's coordinator is the leader of its
    ``__consumer_offsets`` partition, as for every group)."""

    def __init__(
        self,
        now_ms: Callable[[], int],
        partitions_of: Callable[[str], int | None],
        max_size: Callable[[], int],
    ) -> None:
        self.now_ms = now_ms
        self.partitions_of = partitions_of
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}
        self._counts: dict[str, dict[str, int | None]] = {}  # partition counts the assignment was made for
        self.on_member_removed: Callable[[str, str], None] = lambda g, m: None

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
    ) -> HeartbeatResult:
        now = self.now_ms()
        if not group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < -1:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, f"MemberEpoch {member_epoch} is invalid.")
        if member_epoch == 0 and not topics:
            return HeartbeatResult(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            )
        group = self.groups.get(group_id)
        if member_epoch == -1:
            if group is not None and group.members.pop(member_id, None) is not None:
                self._changed(group)
                self.on_member_removed(group_id, member_id)
            return HeartbeatResult(ErrorCode.NONE, None, member_id, -1, heartbeat_interval_ms)
        mem = group.members.get(member_id) if group is not None else None
        if member_epoch == 0:
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if mem is None:
                if len(group.members) >= self.max_size():
                    return HeartbeatResult(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The share group has reached its maximum size {self.max_size()}.",
                    )
                mem = ShareMember(
                    member_id,
                    0,
                    rack_id,
                    client_id,
                    client_host,
                    sorted(set(topics or [])),
                    now + session_timeout_ms,
                )
                group.members[member_id] = mem
                self._changed(group)
            else:
                mem.sent = None  # a rejoin: the whole assignment again
        elif mem is None:
            return HeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of share group {group_id}."
            )
        elif member_epoch != mem.epoch:
            return HeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The member epoch {member_epoch} is not the current one ({mem.epoch}).",
            )
        assert group is not None
        mem.deadline_ms = now + session_timeout_ms
        if rack_id is not None:
            mem.rack_id = rack_id
        if topics is not None and sorted(set(topics)) != mem.topics:
            mem.topics = sorted(set(topics))
            self._changed(group)
        elif self._partition_counts_changed(group):
            self._changed(group)
        mem.epoch = group.epoch
        send = None
        if mem.sent != mem.assignment:
            send = {t: list(ps) for t, ps in mem.assignment.items()}
            mem.sent = send
        return HeartbeatResult(ErrorCode.NONE, None, member_id, mem.epoch, heartbeat_interval_ms, send)

    def _partition_counts_changed(self, group: ShareGroup) -> bool:
        now = {t: self.partitions_of(t) for t in group.subscribed_topics()}
        return self._counts.get(group.group_id) != now

    def _changed(self, group: ShareGroup) -> None:
        group.epoch += 1
        group.assignment_epoch = group.epoch
        members = list(group.members.values())
        plan = assign(members, self.partitions_of)
        for mem in members:
            mem.assignment = plan.get(mem.member_id, {})
        self._counts[group.group_id] = {t: self.partitions_of(t) for t in group.subscribed_topics()}
        group.topics_seen.update(group.subscribed_topics())

    def expire(self) -> list[tuple[str, str]]:
        """Remove members past their session timeout; the (group, member) pairs removed."""
        now = self.now_ms()
        gone = []
        for group in self.groups.values():
            dead = [mid for mid, mem in group.members.items() if mem.deadline_ms <= now]
            for mid in dead:
                del group.members[mid]
                gone.append((group.group_id, mid))
            if dead:
                self._changed(group)
        for g, mid in gone:
            self.on_member_removed(g, mid)
        return gone

    def is_member(self, group_id: str, member_id: str) -> bool:
        g = self.groups.get(group_id)
        return g is not None and member_id in g.members

    def delete(self, group_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if g.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._counts.pop(group_id, None)
        return ErrorCode.NONE

    @staticmethod
    def new_member_id() -> str:
        return str(uuid.uuid4())
