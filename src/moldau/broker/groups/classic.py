"""Classic groups (Kafka's JoinGroup / LeaveGroup state machine of GroupMetadataManager): members join,
the group rebalances through PreparingRebalance and CompletingRebalance to a Stable generation, members leave
or are expired. SyncGroup, heartbeats and storing the group are ``classic_sync.ClassicSyncManager``'s.

Every state change happens synchronously inside one call on the event loop; requests that wait (JoinGroup
until the join phase completes) are callbacks the state machine calls.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable

from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode

from .classic_sync import ClassicSyncManager
from .group import ClassicGroup, ClassicGroupState, ClassicMember, JoinResult, SyncResult
from .model import UNKNOWN_MEMBER_ID, GroupContext, JoinRequest

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicGroupState


class ClassicGroupManager:
    def __init__(self, ctx: GroupContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.timer = ctx.timer
        self.groups = ctx.groups
        self.sync = ClassicSyncManager(ctx, self)

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
        if not self.ctx.owns(req.group_id):
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
                self.ctx.consumer.drop_group_for_conversion(existing)
                existing = self.groups.get(req.group_id)
            else:
                respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
                return
        group = existing if isinstance(existing, ClassicGroup) else None
        created = False
        if group is None:
            if not is_unknown:
                respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = self.groups.create_classic(req.group_id, self.ctx.now())
            created = True

        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self.remove_member_and_update_group(group, member, "group max size reached")
            respond(JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID))
        elif is_unknown:
            self._new_member_join(group, req, respond)
        else:
            self._current_member_join(group, req, respond)

        if group.is_in(S.PREPARING_REBALANCE):
            self.try_complete_join(group)
        if (
            created
            and group.is_empty
            and not group.members
            and not group.pending_members
            and not group.offsets
        ):
            # the join failed before anything was kept: do not leave an empty group behind
            self.groups.discard(group)

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
        self.sync.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        log.info("group %s: member %s (client %s) joins", group.group_id, member_id, req.client_id)
        self.maybe_prepare_rebalance(
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
        self.maybe_prepare_rebalance(group, reason)

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
        self.sync.schedule_heartbeat(group, member)
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
                self.ctx.spawn(
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
                self.maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoins with another protocol"
                )
        elif group.is_in(S.COMPLETING_REBALANCE):
            # the old incarnation may already have an assignment the new one does not know: rebalance
            self.prepare_rebalance(group, f"static member {instance_id} rejoins during CompletingRebalance")
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
        error = await self.sync.store_group(group, assignment)
        if group.members.get(new_id) is not member:
            return
        if error != E.NONE:
            # restore the old member id; the join is answered with the storage error
            cb = member.awaiting_join
            group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
            restored = group.replace_static_member(
                instance_id, new_id, old_id, JoinResult(error, member_id=UNKNOWN_MEMBER_ID), SyncResult(error)
            )
            self.sync.schedule_heartbeat(group, restored)
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

    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self.sync.reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self.sync.cancel_pending_sync(group)
        initial = group.is_empty
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.transition(S.PREPARING_REBALANCE, self.ctx.now())
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
        self.try_complete_join(group)

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

    def try_complete_join(self, group: ClassicGroup) -> None:
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
        group.init_next_generation(self.ctx.now())
        if group.is_empty:
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self.ctx.spawn(self.sync.store_group(group, {}))
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
            self.sync.schedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self.sync.schedule_pending_sync(group)

    def _on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id not in group.pending_members:
            return
        group.pending_members.pop(member_id, None)
        log.debug("group %s: pending member %s never joined, dropping it", group.group_id, member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicMember, reason: str
    ) -> None:
        # a member still waiting on JoinGroup/SyncGroup gets an answer that makes it rejoin if it is alive
        group.invoke_join_callback(member, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[int, list[int]]:
        """``members``: (member_id, group_instance_id, reason) -> (top-level error, per-member errors)."""
        if not group_id:
            return E.INVALID_GROUP_ID, [E.INVALID_GROUP_ID] * len(members)
        if not self.ctx.owns(group_id):
            return E.NOT_COORDINATOR, [E.NOT_COORDINATOR] * len(members)
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            return E.NONE, [self.ctx.consumer.classic_leave(group, mid, iid) for mid, iid, _ in members]
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
                    self.try_complete_join(group)
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
        self.remove_member_and_update_group(group, member, reason)

    def _new_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def load_group(self, group_id: str, value: fmt.GroupMetadataValue, now: int) -> None:
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
        self.groups.add(group)
        # members of a loaded group get a fresh session to reach the coordinator again
        for m in group.members.values():
            self.sync.schedule_heartbeat(group, m)
