"""Partition states and leader election (Kafka's ``ZkPartitionStateMachine`` with its
``PartitionLeaderElectionAlgorithms``): the state znode of a new partition, conditional writes of a
partition's leader and ISR (zkVersion), the offline election when brokers die, the moves of a controlled
shutdown, and preferred / unclean elections (ElectLeaders, the automatic leader rebalance). Runs inside the
controller's events, on the ``ControllerContext``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from moldau.protocol.errors import ErrorCode

from . import zkdata as zd
from .controller_context import TP, ControllerContext
from .controller_requests import ControllerRequests

log = logging.getLogger("moldau.broker.cluster.controller")  # the controller's log, as before the split


class PartitionStateMachine:
    def __init__(self, zk: Any, ctx: ControllerContext, requests: ControllerRequests,
                 unclean: Callable[[str], bool]) -> None:
        self.zk = zk
        self.ctx = ctx
        self.requests = requests
        self.unclean = unclean  # topic -> unclean.leader.election.enable

    async def initialize_new(self, topics: list[str]) -> list[TP]:
        """State znodes for partitions that have none: leader = first live replica, ISR = live replicas."""
        from kazoo.exceptions import NodeExistsError

        created: list[TP] = []
        for topic in topics:
            a = self.ctx.assignments.get(topic)
            if a is None:
                continue
            for p, replicas in sorted(a.partitions.items()):
                if (topic, p) in self.ctx.states:
                    continue
                live = [r for r in replicas if r in self.ctx.live]
                if not live:
                    log.warning("partition %s-%d: no replica is alive; it stays offline", topic, p)
                    continue
                st = zd.LeaderAndIsr(live[0], 0, live, self.ctx.epoch)
                try:
                    await self.zk.create(zd.partition_state_path(topic, p), st.encode(), makepath=True)
                    st.zk_version = 0
                except NodeExistsError:
                    got = await self.zk.get(zd.partition_state_path(topic, p))
                    assert got is not None
                    st = zd.LeaderAndIsr.decode(got[0], got[1].version)
                self.ctx.states[(topic, p)] = st
                created.append((topic, p))
        return created

    async def write_state(self, tp: TP, st: zd.LeaderAndIsr) -> bool:
        """Conditional write (zkVersion); on a conflict the state is re-read and False returned."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        path = zd.partition_state_path(*tp)
        try:
            stat = await self.zk.set(path, st.encode(), st.zk_version)
            st.zk_version = stat.version
            self.ctx.states[tp] = st
            return True
        except (BadVersionError, NoNodeError):
            got = await self.zk.get(path)
            if got is not None:
                self.ctx.states[tp] = zd.LeaderAndIsr.decode(got[0], got[1].version)
            return False

    def choose_leader(self, tp: TP, st: zd.LeaderAndIsr, excluded: set[int]) -> tuple[int, list[int]] | None:
        """(leader, isr) from the ISR in assignment order (unclean: any live replica), or None."""
        ctx = self.ctx
        replicas = ctx.assignments[tp[0]].partitions.get(tp[1], [])
        usable = [r for r in replicas if r in ctx.live and r not in excluded and r not in ctx.shutting_down]
        live_isr = [r for r in st.isr if r in ctx.live and r not in excluded and r not in ctx.shutting_down]
        for r in replicas:
            if r in usable and r in live_isr:
                return r, [b for b in live_isr]
        if usable and self.unclean(tp[0]):
            log.warning("partition %s-%d: unclean leader election of broker %d", tp[0], tp[1], usable[0])
            return usable[0], [usable[0]]
        return None

    async def elect_offline(self, dead: set[int]) -> list[TP]:
        """New leaders for partitions whose leader is gone (or in ``dead``); ``dead`` brokers leave the
        ISRs."""
        changed: list[TP] = []
        for tp, st in list(self.ctx.states.items()):
            if tp[0] not in self.ctx.assignments:
                continue
            leader_gone = st.leader == zd.NO_LEADER or st.leader not in self.ctx.live or st.leader in dead
            in_isr_dead = [b for b in st.isr if b in dead]
            if not leader_gone and not in_isr_dead:
                continue
            if leader_gone:
                choice = self.choose_leader(tp, st, dead)
                if choice is None:
                    if st.leader == zd.NO_LEADER:
                        continue
                    # keep the ISR (the last leader comes back first); no leader meanwhile
                    new = zd.LeaderAndIsr(
                        zd.NO_LEADER, st.leader_epoch + 1, st.isr, self.ctx.epoch, st.zk_version
                    )
                else:
                    new = zd.LeaderAndIsr(
                        choice[0], st.leader_epoch + 1, choice[1], self.ctx.epoch, st.zk_version
                    )
            else:
                isr = [b for b in st.isr if b not in dead] or st.isr
                new = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, isr, self.ctx.epoch, st.zk_version)
            if await self.write_state(tp, new):
                changed.append(tp)
                log.info(
                    "partition %s-%d: leader %d epoch %d isr %s",
                    tp[0],
                    tp[1],
                    new.leader,
                    new.leader_epoch,
                    new.isr,
                )
        return changed

    async def move_off(self, broker_id: int) -> tuple[list[TP], list[TP]]:
        """A controlled shutdown of ``broker_id`` (already in ``shutting_down``): its leaderships move to
        another ISR member (Kafka's ControlledShutdownPartitionLeaderElectionStrategy), it leaves the other
        ISRs it is in. (changed, remaining: partitions it still leads or whose state changed meanwhile)."""
        remaining: list[TP] = []
        changed: list[TP] = []
        for tp, st in list(self.ctx.states.items()):
            if tp[0] not in self.ctx.assignments or broker_id not in self.ctx.replicas(tp):
                continue
            if st.leader == broker_id:
                choice = self.choose_leader(tp, st, {broker_id})
                if choice is None:
                    remaining.append(tp)
                    continue
                new = zd.LeaderAndIsr(choice[0], st.leader_epoch + 1, choice[1], self.ctx.epoch,
                                      st.zk_version)
            elif broker_id in st.isr and len(st.isr) > 1:
                new = zd.LeaderAndIsr(
                    st.leader,
                    st.leader_epoch + 1,
                    [b for b in st.isr if b != broker_id],
                    self.ctx.epoch,
                    st.zk_version,
                )
            else:
                continue
            if await self.write_state(tp, new):
                changed.append(tp)
            else:
                remaining.append(tp)
        return changed, remaining

    async def elect_leaders(self, unclean: bool, tps: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        """Preferred (the first replica, when alive and in the ISR) or unclean (any live replica of a
        partition without a leader) election for ``tps`` (None: every partition); the moved partitions'
        replicas and every broker hear of it. (error, message) per partition."""
        ctx = self.ctx
        results: dict[TP, tuple[int, str | None]] = {}
        changed: list[TP] = []
        for tp in sorted(self.ctx.states) if tps is None else tps:
            st = self.ctx.states.get(tp)
            a = self.ctx.assignments.get(tp[0])
            replicas = a.partitions.get(tp[1]) if a is not None else None
            if st is None or not replicas:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            if unclean:
                if st.leader in self.ctx.live:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                    continue
                live = [r for r in replicas if r in self.ctx.live and r not in self.ctx.shutting_down]
                if not live:
                    results[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica")
                    continue
                new = zd.LeaderAndIsr(live[0], st.leader_epoch + 1, [live[0]], self.ctx.epoch, st.zk_version)
            else:
                preferred = replicas[0]
                if st.leader == preferred:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                    continue
                if preferred not in ctx.live or preferred not in st.isr or preferred in ctx.shutting_down:
                    results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                   f"preferred leader {preferred} is not alive or not in the ISR {st.isr}")
                    continue
                new = zd.LeaderAndIsr(preferred, st.leader_epoch + 1, list(st.isr), ctx.epoch, st.zk_version)
            if await self.write_state(tp, new):
                changed.append(tp)
                results[tp] = (ErrorCode.NONE, None)
            else:
                results[tp] = (ErrorCode.NOT_CONTROLLER, "the partition state changed meanwhile; retry")
        if changed:
            log.info("controller: %s election moved %d partitions", "unclean" if unclean else "preferred",
                     len(changed))
            self.requests.update_metadata(list(self.ctx.live), changed)
            for tp in changed:
                self.requests.leader_and_isr(tp)
        return results
