"""The controller (Kafka's ZooKeeper-mode KafkaController): elected through ``/controller``, it initialises
new partitions, elects leaders when brokers die or shut down, reassigns partitions, deletes topics, and tells
the brokers with LeaderAndIsr and UpdateMetadata.

This module holds the event handling (the election, the failover, the ZooKeeper watches, the requests the
brokers send it) and the reassignments; what it knows of the cluster is the ``controller_context``,
partition states and leader elections are ``partition_state.PartitionStateMachine``, the requests to the
brokers ``controller_requests.ControllerRequests``.

Every broker runs a Controller object; only the elected one is active. Events (ZooKeeper watches, controlled
shutdown requests) are handled one at a time, in order, by one task (Kafka's ControllerEventManager). State
changes are written to ZooKeeper with zkVersion checks before brokers hear of them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from moldau.protocol.errors import ErrorCode

from . import zkdata as zd
from .channel import ControllerChannel
from .controller_context import TP, ControllerContext
from .controller_requests import EPOCH_DURING_DELETE, NO_EPOCH, ControllerRequests
from .partition_state import PartitionStateMachine

log = logging.getLogger(__name__)

T = TypeVar("T")


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: Any,
        *,
        listener_name: str,
        unclean: Callable[[str], bool],
        timeout_ms: int = 30000,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.timeout_ms = timeout_ms
        self.active = False
        self.alter_partition_updates = 0  # ISR changes written for AlterPartition requests
        self.ctx = ControllerContext(broker_id, listener_name)
        self.requests = ControllerRequests(self.ctx)
        self.partitions = PartitionStateMachine(zk, self.ctx, self.requests, unclean)
        self._events: asyncio.Queue[Callable[[], Awaitable[Any]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._watches_set = False
        self._closed = False
        self._announcements: set[asyncio.Task[None]] = set()  # UpdateMetadata after new partitions settle
        self._waiting: set[asyncio.Future[Any]] = set()
        self._rebalance: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")
        self.zk.watch_data(zd.CONTROLLER, self._on_controller_znode)

    async def close(self) -> None:
        self._closed = True
        if self._rebalance is not None:
            self._rebalance.cancel()
        for task in list(self._announcements):
            task.cancel()
        for fut in list(self._waiting):  # controlled shutdowns of other brokers: NOT_CONTROLLER, they retry
            fut.cancel()
        await self._resign()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001, S110
                pass

    def _enqueue(self, fn: Callable[[], Awaitable[Any]]) -> None:
        self._events.put_nowait(fn)

    async def _queued(self, fn: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``fn`` as a controller event and wait for its result; None when this controller stops
        meanwhile (the callers answer NOT_CONTROLLER and the client retries)."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def work() -> None:
            try:
                if not fut.done():
                    fut.set_result(await fn())
            except Exception as e:  # noqa: BLE001 - handed to the caller
                if not fut.done():
                    fut.set_exception(e)

        self._waiting.add(fut)
        self._enqueue(work)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.cancelled():  # this controller stopped meanwhile
                return None
            raise
        finally:
            self._waiting.discard(fut)

    async def _run(self) -> None:
        while True:
            fn = await self._events.get()
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event failed")

    # ------------------------------------------------------------------------------------------ election
    def _on_controller_znode(self, data: bytes | None, _stat: Any) -> bool:
        if self._closed:
            return False
        if data is None:
            # no controller: also ours gone (this broker's session expired), so resign before competing again
            self._enqueue(self._resign)
            self._enqueue(self._elect)
        elif zd.decode_controller(data) != self.broker_id and self.active:
            self._enqueue(self._resign)
        return True

    async def _elect(self) -> None:
        from kazoo.exceptions import NodeExistsError

        if self._closed or self.active:
            return
        try:
            await self.zk.create(zd.CONTROLLER, zd.encode_controller(self.broker_id), ephemeral=True)
        except NodeExistsError:
            return
        except Exception as e:  # noqa: BLE001
            log.warning("controller election failed: %s", e)
            return
        try:
            await self._failover()
        except Exception:
            log.exception("controller failover failed; resigning")
            await self._resign()
            await self.zk.delete(zd.CONTROLLER)

    async def _bump_epoch(self) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError

        got = await self.zk.get(zd.CONTROLLER_EPOCH)
        if got is None:
            try:
                await self.zk.create(zd.CONTROLLER_EPOCH, b"1")
                self.ctx.epoch, self.ctx.epoch_zk_version = 1, 0
                return
            except NodeExistsError:
                got = await self.zk.get(zd.CONTROLLER_EPOCH)
        assert got is not None
        epoch = int(got[0].decode() or 0) + 1
        try:
            stat = await self.zk.set(zd.CONTROLLER_EPOCH, str(epoch).encode(), got[1].version)
        except BadVersionError:
            raise RuntimeError("another controller bumped the controller epoch") from None
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, stat.version

    async def _failover(self) -> None:
        await self._bump_epoch()
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.ctx.epoch)
        self.ctx.channel = ControllerChannel(client_id=f"controller-{self.broker_id}",
                                             timeout_ms=self.timeout_ms)
        self.ctx.live = {}
        self.ctx.shutting_down = set()
        for child in await self.zk.children(zd.BROKER_IDS):
            info = await self._read_broker(int(child))
            if info is not None:
                self.ctx.add_live(info)
        self.ctx.assignments = {}
        self.ctx.states = {}
        for topic in await self.zk.children(zd.BROKER_TOPICS):
            await self._load_topic(topic)
        # partitions without state (created while no controller ran) or with a dead leader
        await self.partitions.initialize_new(list(self.ctx.assignments))
        # brokers that died while no controller ran (a stopped controller and followers whose sessions expired
        # with it) leave the ISRs now, as the old controller would have taken them out on their death
        gone = {b for st in self.ctx.states.values() for b in st.isr if b not in self.ctx.live}
        await self.partitions.elect_offline(gone)
        self.requests.update_metadata(list(self.ctx.live), list(self.ctx.states))
        for tp in list(self.ctx.states):
            self.requests.leader_and_isr(tp)
        for tp in list(self.ctx.states):  # reassignments a former controller left ongoing
            await self.maybe_complete_reassignment(tp)
        if not self._watches_set:
            self._watches_set = True
            self.zk.watch_children(zd.BROKER_IDS, lambda c: self._active_event(self._on_brokers, c))
            self.zk.watch_children(zd.BROKER_TOPICS, lambda c: self._active_event(self._on_topics, c))
            self.zk.watch_children(zd.DELETE_TOPICS, lambda c: self._active_event(self._on_delete_topics, c))
            self.zk.watch_children(zd.ISR_CHANGES, lambda c: self._active_event(self._on_isr_changes, c))
        else:
            self._enqueue(self._resync_children)

    async def _resync_children(self) -> None:
        if not self.active:
            return
        await self._on_brokers(await self.zk.children(zd.BROKER_IDS))
        await self._on_topics(await self.zk.children(zd.BROKER_TOPICS))
        await self._on_delete_topics(await self.zk.children(zd.DELETE_TOPICS))
        await self._on_isr_changes(await self.zk.children(zd.ISR_CHANGES))

    def _active_event(self, fn: Callable[[list[str]], Awaitable[Any]], children: list[str]) -> None:
        if self.active and not self._closed:
            self._enqueue(lambda: fn(children) if self.active else _nothing())

    async def _resign(self) -> None:
        if not self.active:
            return
        self.active = False
        log.info("broker %d is no longer the controller", self.broker_id)
        if self.ctx.channel is not None:
            await self.ctx.channel.close()
            self.ctx.channel = None

    # ------------------------------------------------------------------------------------------ reads
    async def _read_broker(self, broker_id: int) -> zd.BrokerInfo | None:
        got = await self.zk.get(zd.broker_path(broker_id))
        if got is None:
            return None
        self.ctx.broker_epochs[broker_id] = got[1].czxid
        return zd.BrokerInfo.decode(broker_id, got[0])

    async def refresh_broker_epoch(self, broker_id: int) -> None:
        """Re-read a broker's epoch (its registration may be newer than the one this controller read)."""
        await self._read_broker(broker_id)

    async def _load_topic(self, topic: str) -> None:
        got = await self.zk.get(zd.topic_path(topic))
        if got is None:
            return
        a = zd.TopicAssignment.decode(got[0])
        self.ctx.assignments[topic] = a
        for p in a.partitions:
            st = await self.zk.get(zd.partition_state_path(topic, p))
            if st is not None:
                self.ctx.states[(topic, p)] = zd.LeaderAndIsr.decode(st[0], st[1].version)

    # ------------------------------------------------------------------------------------------ events
    async def _on_brokers(self, children: list[str]) -> None:
        ids = {int(c) for c in children}
        dead = set(self.ctx.live) - ids
        new = ids - set(self.ctx.live)
        for b in sorted(new):
            info = await self._read_broker(b)
            if info is not None:
                self.ctx.add_live(info)
                self.ctx.shutting_down.discard(b)
        for b in dead:
            del self.ctx.live[b]
            self.ctx.broker_epochs.pop(b, None)
            self.ctx.shutting_down.discard(b)
            if self.ctx.channel is not None:
                await self.ctx.channel.remove_broker(b)
        if not dead and not new:
            return
        log.info("controller: brokers %s (new %s, gone %s)", sorted(self.ctx.live), sorted(new), sorted(dead))
        changed = await self.partitions.elect_offline(dead)
        self.requests.update_metadata(list(self.ctx.live), list(self.ctx.states))
        for tp in changed:
            self.requests.leader_and_isr(tp)
        # a returning broker hears of every partition it hosts (it becomes follower or leader)
        for tp in list(self.ctx.states):
            if tp in changed:
                continue
            replicas = self.ctx.assignments.get(tp[0], zd.TopicAssignment(None, {})).partitions.get(tp[1], [])
            if any(b in replicas for b in new):
                self.requests.leader_and_isr(tp, only=[b for b in new if b in replicas])

    async def _on_topics(self, children: list[str]) -> None:
        names = set(children)
        added = [t for t in names if t not in self.ctx.assignments]
        for t in [t for t in self.ctx.assignments if t not in names]:
            del self.ctx.assignments[t]
            for tp in [tp for tp in self.ctx.states if tp[0] == t]:
                del self.ctx.states[tp]
        for t in added:
            await self._load_topic(t)
            self.zk.watch_data(zd.topic_path(t), self._topic_data_watch(t))
        created = await self.partitions.initialize_new(added)
        if created:
            await self._announce_new_partitions(created)

    async def _announce_new_partitions(self, created: list[TP]) -> None:
        """New partitions: LeaderAndIsr to their replicas first, UpdateMetadata to every broker once the
        replicas answered (at most the controller's request timeout). A broker then names a new partition's
        leader in its Metadata responses only when that leader hosts the partition: a client that produces
        right after CreateTopics answered gets no UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER, which
        a producer retrying with several requests in flight and no idempotence (kafka-python with an old
        ``api_version``) turns into records out of order.

        The wait runs beside the controller's event queue, not in it: a replica that does not answer (stopped,
        cut off) must not hold up broker deaths, AlterPartition and elections for the request timeout."""
        waits = [f for tp in created for f in self.requests.leader_and_isr(tp)]
        if not waits:
            self.requests.update_metadata(list(self.ctx.live), created)
            return
        epoch = self.ctx.epoch

        async def then_update_metadata() -> None:
            await asyncio.wait(waits, timeout=self.timeout_ms / 1000.0)
            if self.active and self.ctx.epoch == epoch and not self._closed:
                # the states as they are now (a later event may have moved a leader meanwhile)
                now = [tp for tp in created if tp in self.ctx.states]
                self.requests.update_metadata(list(self.ctx.live), now)

        task = asyncio.get_running_loop().create_task(then_update_metadata(), name="controller-announce")
        self._announcements.add(task)
        task.add_done_callback(self._announcements.discard)

    def _topic_data_watch(self, topic: str) -> Callable[[bytes | None, Any], bool]:
        def watch(data: bytes | None, _stat: Any) -> bool:
            if data is None:
                return False
            if self.active:
                self._enqueue(lambda: self._on_topic_changed(topic, data))
            return True

        return watch

    async def _on_topic_changed(self, topic: str, data: bytes) -> None:
        if not self.active or topic not in self.ctx.assignments:
            return
        a = zd.TopicAssignment.decode(data)
        self.ctx.assignments[topic] = a
        created = await self.partitions.initialize_new([topic])
        if created:
            await self._announce_new_partitions(created)

    async def _on_delete_topics(self, children: list[str]) -> None:
        for topic in children:
            parts = [tp for tp in self.ctx.states if tp[0] == topic]
            a = self.ctx.assignments.get(topic)
            if a is not None:
                by_broker: dict[int, list[int]] = {}
                for p, replicas in a.partitions.items():
                    for b in replicas:
                        by_broker.setdefault(b, []).append(p)
                for b, ps in by_broker.items():
                    self.requests.stop_replica(b, topic, sorted(ps), EPOCH_DURING_DELETE)
            for tp in parts:
                del self.ctx.states[tp]
            self.ctx.assignments.pop(topic, None)
            await self.zk.delete(zd.topic_path(topic), recursive=True)
            await self.zk.delete(zd.topic_config_path(topic))
            await self.zk.delete(zd.delete_topic_path(topic))
            log.info("controller: topic %s deleted", topic)

    async def _on_isr_changes(self, children: list[str]) -> None:
        tps: set[TP] = set()
        for c in children:
            path = f"{zd.ISR_CHANGES}/{c}"
            got = await self.zk.get(path)
            if got is not None:
                tps.update(zd.decode_isr_change(got[0]))
            await self.zk.delete(path)
        changed = []
        for tp in tps:
            got = await self.zk.get(zd.partition_state_path(*tp))
            if got is not None and tp[0] in self.ctx.assignments:
                self.ctx.states[tp] = zd.LeaderAndIsr.decode(got[0], got[1].version)
                changed.append(tp)
        if changed:
            self.requests.update_metadata(list(self.ctx.live), changed)
        for tp in changed:
            await self.maybe_complete_reassignment(tp)

    # ---------------------------------------------------------------------------------------- AlterPartition
    async def alter_partition(self, broker_id: int, broker_epoch: int, changes: list[Any]) -> tuple[int, Any]:
        """AlterPartition (56) from a leader (``alter_partition.process``): (top-level error, results)."""
        from . import alter_partition

        if not self.active or self._closed:
            return ErrorCode.NOT_CONTROLLER, {}
        out = await self._queued(lambda: alter_partition.process(self, broker_id, broker_epoch, changes))
        return (ErrorCode.NOT_CONTROLLER, {}) if out is None else out

    # ------------------------------------------------------------------------------------------ controlled
    # shutdown
    async def controlled_shutdown(self, broker_id: int) -> tuple[int, list[TP]]:
        """Move every leadership away from ``broker_id`` and drop it from the ISRs. (error, remaining)."""
        if not self.active or self._closed:
            return ErrorCode.NOT_CONTROLLER, []
        remaining = await self._queued(lambda: self._controlled_shutdown(broker_id))
        return (ErrorCode.NOT_CONTROLLER, []) if remaining is None else (ErrorCode.NONE, remaining)

    async def _controlled_shutdown(self, broker_id: int) -> list[TP]:
        if broker_id not in self.ctx.live:
            return []
        self.ctx.shutting_down.add(broker_id)
        changed, remaining = await self.partitions.move_off(broker_id)
        self.requests.update_metadata(list(self.ctx.live), changed)
        waits = [f for tp in changed for f in self.requests.leader_and_isr(tp)]
        if waits:
            await asyncio.wait(waits, timeout=self.timeout_ms / 1000.0)
        log.info(
            "controller: controlled shutdown of broker %d moved %d partitions, %d remain",
            broker_id,
            len(changed),
            len(remaining),
        )
        return remaining

    # ------------------------------------------------------------------------------------------ elections
    async def elect_leaders(self, unclean: bool, tps: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        """ElectLeaders (43): preferred (the first replica, when alive and in the ISR) or unclean (any live
        replica of a partition without a leader). ``tps`` None: every partition. (error, message) each."""
        if not self.active or self._closed:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in tps or []}
        results = await self._queued(lambda: self.partitions.elect_leaders(unclean, tps))
        return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in tps or []} if results is None else results

    # ------------------------------------------------------------------------------------------ reassignment
    async def reassign(self, req: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        """AlterPartitionReassignments (45): target replicas per partition (None: cancel). Kafka 2.4+: the
        topic znode holds every replica (target first) with ``adding_replicas`` / ``removing_replicas``; the
        reassignment completes when every target replica is in the ISR. (error, message) each."""
        if not self.active or self._closed:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in req}
        results = await self._queued(lambda: self._reassign(req))
        return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in req} if results is None else results

    def list_reassignments(self, tps: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments (46): {tp: (replicas, adding, removing)} of the ongoing ones."""
        out: dict[TP, tuple[list[int], list[int], list[int]]] = {}
        for topic, a in self.ctx.assignments.items():
            for p in sorted(set(a.adding) | set(a.removing)):
                if tps is None or (topic, p) in tps:
                    out[(topic, p)] = (list(a.partitions.get(p, [])), list(a.adding.get(p, [])),
                                       list(a.removing.get(p, [])))
        return out

    async def _write_assignment(self, topic: str) -> None:
        await self.zk.set(zd.topic_path(topic), self.ctx.assignments[topic].encode())

    async def _reassign(self, req: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        live = self.ctx.live
        results: dict[TP, tuple[int, str | None]] = {}
        for tp, target in req.items():
            a = self.ctx.assignments.get(tp[0])
            st = self.ctx.states.get(tp)
            if a is None or tp[1] not in a.partitions or st is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            current = list(a.partitions[tp[1]])
            ongoing = tp[1] in a.adding or tp[1] in a.removing
            original = [r for r in current if r not in a.adding.get(tp[1], [])]
            if target is None:
                if not ongoing:
                    results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                target = original
            elif not target or len(set(target)) != len(target):
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replica list {target}")
                continue
            elif any(r not in live for r in target):
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"replicas {[r for r in target if r not in live]} are not live brokers")
                continue
            if target == current and not ongoing:
                results[tp] = (ErrorCode.NONE, None)
                continue
            full = list(target) + [r for r in current if r not in target]
            adding = [r for r in target if r not in original]
            removing = [r for r in full if r not in target]
            a.partitions[tp[1]] = full
            for d, v in ((a.adding, adding), (a.removing, removing)):
                if v:
                    d[tp[1]] = v
                else:
                    d.pop(tp[1], None)
            await self._write_assignment(tp[0])
            # a new leader epoch: the leader and the added replicas take the new replica set
            new = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, list(st.isr), self.ctx.epoch, st.zk_version)
            if not await self.partitions.write_state(tp, new):
                results[tp] = (ErrorCode.NOT_CONTROLLER, "the partition state changed meanwhile; retry")
                continue
            log.info("controller: reassigning %s-%d from %s to %s", tp[0], tp[1], original, target)
            self.requests.update_metadata(list(self.ctx.live), [tp])
            self.requests.leader_and_isr(tp)
            results[tp] = (ErrorCode.NONE, None)
            await self.maybe_complete_reassignment(tp)
        return results

    async def maybe_complete_reassignment(self, tp: TP) -> None:
        """Every target replica in the ISR: the replica set becomes the target, the leader moves if it is
        being removed, the removed replicas get StopReplica (delete)."""
        a = self.ctx.assignments.get(tp[0])
        st = self.ctx.states.get(tp)
        if a is None or st is None or (tp[1] not in a.adding and tp[1] not in a.removing):
            return
        full = list(a.partitions[tp[1]])
        removing = a.removing.get(tp[1], [])
        target = [r for r in full if r not in removing]
        if not all(r in st.isr for r in target):
            return
        usable = [r for r in target if r in st.isr and r in self.ctx.live and r not in self.ctx.shutting_down]
        leader = st.leader if st.leader in usable else (usable[0] if usable else None)
        if leader is None:
            return
        new = zd.LeaderAndIsr(leader, st.leader_epoch + 1, [r for r in st.isr if r in target], self.ctx.epoch,
                              st.zk_version)
        if not await self.partitions.write_state(tp, new):
            return
        a.partitions[tp[1]] = target
        a.adding.pop(tp[1], None)
        a.removing.pop(tp[1], None)
        await self._write_assignment(tp[0])
        log.info("controller: reassignment of %s-%d done: replicas %s, leader %d", tp[0], tp[1], target,
                 leader)
        self.requests.update_metadata(list(self.ctx.live), [tp])
        self.requests.leader_and_isr(tp)
        for b in full:
            if b not in target:
                self.requests.stop_replica(b, tp[0], [tp[1]], NO_EPOCH)

    async def _rebalance_loop(self, interval_s: float, imbalance_pct: int) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, preferred elections
        for the brokers whose share of partitions led by someone else passes
        leader.imbalance.per.broker.percentage."""
        while True:
            await asyncio.sleep(interval_s)
            if not self.active:
                continue
            by_preferred: dict[int, list[TP]] = {}
            for tp, st in self.ctx.states.items():
                a = self.ctx.assignments.get(tp[0])
                replicas = a.partitions.get(tp[1]) if a is not None else None
                if replicas:
                    by_preferred.setdefault(replicas[0], []).append(tp)
            todo: list[TP] = []
            for broker_id, tps in by_preferred.items():
                if broker_id not in self.ctx.live:
                    continue
                elsewhere = [tp for tp in tps if self.ctx.states[tp].leader != broker_id]
                if len(elsewhere) * 100 > imbalance_pct * len(tps):
                    todo.extend(elsewhere)
            if todo:
                self._enqueue(functools.partial(self.partitions.elect_leaders, False, todo))

    def start_rebalance(self, interval_s: float, imbalance_pct: int) -> None:
        self._rebalance = asyncio.get_running_loop().create_task(
            self._rebalance_loop(interval_s, imbalance_pct), name="leader-rebalance")

async def _nothing() -> None:
    return None
