"""Classic groups after the join phase: SyncGroup (the leader's assignment stored, then handed out),
heartbeats and session expiry, the pending-sync timeout, and the group's record in ``__consumer_offsets``."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Protocol

from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode

from .group import ClassicGroup, ClassicGroupState, ClassicMember, SyncResult
from .model import GroupContext
from .offsets import storage_error

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicGroupState


class Rebalance(Protocol):
    """What the sync phase asks of the join phase (``classic.ClassicGroupManager``)."""

    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None: ...

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None: ...

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember,
                                       reason: str) -> None: ...

    def try_complete_join(self, group: ClassicGroup) -> None: ...


class ClassicSyncManager:
    def __init__(self, ctx: GroupContext, rebalance: Rebalance) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.timer = ctx.timer
        self.groups = ctx.groups
        self.rebalance = rebalance

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
        if not self.ctx.owns(group_id):
            respond(SyncResult(E.NOT_COORDINATOR))
            return
        group = self.groups.classic(group_id)
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
                self.ctx.spawn(self._store_and_propagate(group, group.generation_id, assignment, member_id))
        else:  # Stable: hand out the current assignment
            group.pending_sync_members.discard(member_id)
            respond(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self.schedule_heartbeat(group, member)

    async def _store_and_propagate(
        self, group: ClassicGroup, generation: int, assignment: dict[str, bytes], leader_id: str
    ) -> None:
        error = await self.store_group(group, assignment)
        # another member may have joined meanwhile: only act if the generation is still completing
        if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error != E.NONE:
            self.reset_and_propagate_assignment_error(group, error)
            self.rebalance.maybe_prepare_rebalance(group,
                                                   f"error storing the assignment of leader {leader_id}")
            return
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        group.transition(S.STABLE, self.ctx.now())
        self.propagate_assignment(group, E.NONE)
        log.info("group %s: generation %d is stable", group.group_id, generation)

    def reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for m in list(group.members.values()):
            result = SyncResult(
                error, m.assignment if error == E.NONE else b"", group.protocol_type, group.protocol_name
            )
            if group.invoke_sync_callback(m, result):
                # restart the session clock: expiries that fell while the member waited were ignored
                self.schedule_heartbeat(group, m)

    def schedule_pending_sync(self, group: ClassicGroup) -> None:
        self.cancel_pending_sync(group)
        generation = group.generation_id
        group.sync_timer = self.timer.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_pending_sync_expired(group, generation)
        )

    def cancel_pending_sync(self, group: ClassicGroup) -> None:
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
        self.rebalance.prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        if not self.ctx.owns(group_id):
            return E.NOT_COORDINATOR
        group = self.groups.classic(group_id)
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
        self.schedule_heartbeat(group, member)
        if group.is_in(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        # CompletingRebalance: clients may heartbeat between the JoinGroup and the SyncGroup answers
        return E.NONE

    def schedule_heartbeat(
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
        self.rebalance.remove_member_and_update_group(group, member,
                                                      f"member {member.member_id} session expired")

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

    async def store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> int:
        value = fmt.encode_group_metadata_value(self.group_metadata_value(group, assignment))
        try:
            await self.ctx.append(group.group_id, [(fmt.encode_group_metadata_key(group.group_id), value)])
        except Exception as exc:
            log.warning("group %s: storing group metadata failed: %s", group.group_id, exc)
            return storage_error(exc)
        return E.NONE
