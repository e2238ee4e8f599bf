"""The controller (Kafka's ZooKeeper-mode KafkaController): elected through ``/controller``, it initialises
new partitions, elects leaders when brokers die or shut down, and tells the brokers with LeaderAndIsr and
UpdateMetadata.

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

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from . import zkdata as zd
from .channel import ControllerChannel

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
NO_EPOCH = -1  # StopReplica v3: stop whatever leader epoch the replica has (a replica reassigned away)
EPOCH_DURING_DELETE = -2  # StopReplica v3: the topic is being deleted


def stop_replica_request(
    controller_id: int, controller_epoch: int, topic: str, partitions: list[int], leader_epoch: int
) -> m.StopReplicaRequest:
    """StopReplica v3 with delete for some partitions of one topic (per-partition delete flags, KIP-570)."""
    return m.StopReplicaRequest.new(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
        topic_states=[m.StopReplicaRequest.StopReplicaTopicState(
            topic_name=topic,
            partition_states=[m.StopReplicaRequest.StopReplicaPartitionState(
                partition_index=p, leader_epoch=leader_epoch, delete_partition=True) for p in partitions],
        )],
    )


SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

TP = tuple[str, int]
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
        self.listener_name = listener_name  # the inter-broker listener
        self.unclean = unclean  # topic -> unclean.leader.election.enable
        self.timeout_ms = timeout_ms
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live: dict[int, zd.BrokerInfo] = {}
        self.broker_epochs: dict[int, int] = {}  # czxid of each live broker's registration znode
        self.alter_partition_updates = 0  # ISR changes written for AlterPartition requests
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, zd.TopicAssignment] = {}
        self.states: dict[TP, zd.LeaderAndIsr] = {}
        self.channel: ControllerChannel | None = None
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
                self.epoch, self.epoch_zk_version = 1, 0
                return
            except NodeExistsError:
                got = await self.zk.get(zd.CONTROLLER_EPOCH)
        assert got is not None
        epoch = int(got[0].decode() or 0) + 1
        try:
            stat = await self.zk.set(zd.CONTROLLER_EPOCH, str(epoch).encode(), got[1].version)
        except BadVersionError:
            raise RuntimeError("another controller bumped the controller epoch") from None
        self.epoch, self.epoch_zk_version = epoch, stat.version

    async def _failover(self) -> None:
        await self._bump_epoch()
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        self.channel = ControllerChannel(client_id=f"controller-{self.broker_id}", timeout_ms=self.timeout_ms)
        self.live = {}
        self.shutting_down = set()
        for child in await self.zk.children(zd.BROKER_IDS):
            info = await self._read_broker(int(child))
            if info is not None:
                self._add_live(info)
        self.assignments = {}
        self.states = {}
        for topic in await self.zk.children(zd.BROKER_TOPICS):
            await self._load_topic(topic)
        # partitions without state (created while no controller ran) or with a dead leader
        await self._initialize_new_partitions(list(self.assignments))
        # brokers that died while no controller ran (a stopped controller and followers whose sessions expired
        # with it) leave the ISRs now, as the old controller would have taken them out on their death
        gone = {b for st in self.states.values() for b in st.isr if b not in self.live}
        await self._elect_offline(gone)
        self._send_update_metadata(list(self.live), list(self.states))
        for tp in list(self.states):
            self._send_leader_and_isr(tp)
        for tp in list(self.states):  # reassignments a former controller left ongoing
            await self._maybe_complete_reassignment(tp)
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
        if self.channel is not None:
            await self.channel.close()
            self.channel = None

    # ------------------------------------------------------------------------------------------ reads
    async def _read_broker(self, broker_id: int) -> zd.BrokerInfo | None:
        got = await self.zk.get(zd.broker_path(broker_id))
        if got is None:
            return None
        self.broker_epochs[broker_id] = got[1].czxid
        return zd.BrokerInfo.decode(broker_id, got[0])

    async def refresh_broker_epoch(self, broker_id: int) -> None:
        """Re-read a broker's epoch (its registration may be newer than the one this controller read)."""
        await self._read_broker(broker_id)

    def _add_live(self, info: zd.BrokerInfo) -> None:
        self.live[info.broker_id] = info
        ep = info.endpoint(self.listener_name) or (info.endpoints[0] if info.endpoints else None)
        if ep is not None and self.channel is not None:
            self.channel.add_broker(info.broker_id, ep.host, ep.port)

    async def _load_topic(self, topic: str) -> None:
        got = await self.zk.get(zd.topic_path(topic))
        if got is None:
            return
        a = zd.TopicAssignment.decode(got[0])
        self.assignments[topic] = a
        for p in a.partitions:
            st = await self.zk.get(zd.partition_state_path(topic, p))
            if st is not None:
                self.states[(topic, p)] = zd.LeaderAndIsr.decode(st[0], st[1].version)

    # ------------------------------------------------------------------------------------------ partitions
    async def _initialize_new_partitions(self, topics: list[str]) -> list[TP]:
        """State znodes for partitions that have none: leader = first live replica, ISR = live replicas."""
        from kazoo.exceptions import NodeExistsError

        created: list[TP] = []
        for topic in topics:
            a = self.assignments.get(topic)
            if a is None:
                continue
            for p, replicas in sorted(a.partitions.items()):
                if (topic, p) in self.states:
                    continue
                live = [r for r in replicas if r in self.live]
                if not live:
                    log.warning("partition %s-%d: no replica is alive; it stays offline", topic, p)
                    continue
                st = zd.LeaderAndIsr(live[0], 0, live, self.epoch)
                try:
                    await self.zk.create(zd.partition_state_path(topic, p), st.encode(), makepath=True)
                    st.zk_version = 0
                except NodeExistsError:
                    got = await self.zk.get(zd.partition_state_path(topic, p))
                    assert got is not None
                    st = zd.LeaderAndIsr.decode(got[0], got[1].version)
                self.states[(topic, p)] = st
                created.append((topic, p))
        return created

    async def _write_state(self, tp: TP, st: zd.LeaderAndIsr) -> bool:
        """Conditional write (zkVersion); on a conflict the state is re-read and False returned."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        path = zd.partition_state_path(*tp)
        try:
            stat = await self.zk.set(path, st.encode(), st.zk_version)
            st.zk_version = stat.version
            self.states[tp] = st
            return True
        except (BadVersionError, NoNodeError):
            got = await self.zk.get(path)
            if got is not None:
                self.states[tp] = zd.LeaderAndIsr.decode(got[0], got[1].version)
            return False

    def _choose_leader(self, tp: TP, st: zd.LeaderAndIsr, excluded: set[int]) -> tuple[int, list[int]] | None:
        """(leader, isr) from the ISR in assignment order (unclean: any live replica), or None."""
        replicas = self.assignments[tp[0]].partitions.get(tp[1], [])
        usable = [r for r in replicas if r in self.live and r not in excluded and r not in self.shutting_down]
        live_isr = [r for r in st.isr if r in self.live and r not in excluded and r not in self.shutting_down]
        for r in replicas:
            if r in usable and r in live_isr:
                return r, [b for b in live_isr]
        if usable and self.unclean(tp[0]):
            log.warning("partition %s-%d: unclean leader election of broker %d", tp[0], tp[1], usable[0])
            return usable[0], [usable[0]]
        return None

    async def _elect_offline(self, dead: set[int]) -> list[TP]:
        """New leaders for partitions whose leader is gone (or in ``dead``); ``dead`` brokers leave the
        ISRs."""
        changed: list[TP] = []
        for tp, st in list(self.states.items()):
            if tp[0] not in self.assignments:
                continue
            leader_gone = st.leader == zd.NO_LEADER or st.leader not in self.live or st.leader in dead
            in_isr_dead = [b for b in st.isr if b in dead]
            if not leader_gone and not in_isr_dead:
                continue
            if leader_gone:
                choice = self._choose_leader(tp, st, dead)
                if choice is None:
                    if st.leader == zd.NO_LEADER:
                        continue
                    # keep the ISR (the last leader comes back first); no leader meanwhile
                    new = zd.LeaderAndIsr(
                        zd.NO_LEADER, st.leader_epoch + 1, st.isr, self.epoch, st.zk_version
                    )
                else:
                    new = zd.LeaderAndIsr(
                        choice[0], st.leader_epoch + 1, choice[1], self.epoch, st.zk_version
                    )
            else:
                isr = [b for b in st.isr if b not in dead] or st.isr
                new = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, isr, self.epoch, st.zk_version)
            if await self._write_state(tp, new):
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

    # ------------------------------------------------------------------------------------------ events
    async def _on_brokers(self, children: list[str]) -> None:
        ids = {int(c) for c in children}
        dead = set(self.live) - ids
        new = ids - set(self.live)
        for b in sorted(new):
            info = await self._read_broker(b)
            if info is not None:
                self._add_live(info)
                self.shutting_down.discard(b)
        for b in dead:
            del self.live[b]
            self.broker_epochs.pop(b, None)
            self.shutting_down.discard(b)
            if self.channel is not None:
                await self.channel.remove_broker(b)
        if not dead and not new:
            return
        log.info("controller: brokers %s (new %s, gone %s)", sorted(self.live), sorted(new), sorted(dead))
        changed = await self._elect_offline(dead)
        self._send_update_metadata(list(self.live), list(self.states))
        for tp in changed:
            self._send_leader_and_isr(tp)
        # a returning broker hears of every partition it hosts (it becomes follower or leader)
        for tp in list(self.states):
            if tp in changed:
                continue
            replicas = self.assignments.get(tp[0], zd.TopicAssignment(None, {})).partitions.get(tp[1], [])
            if any(b in replicas for b in new):
                self._send_leader_and_isr(tp, only=[b for b in new if b in replicas])

    async def _on_topics(self, children: list[str]) -> None:
        names = set(children)
        added = [t for t in names if t not in self.assignments]
        for t in [t for t in self.assignments if t not in names]:
            del self.assignments[t]
            for tp in [tp for tp in self.states if tp[0] == t]:
                del self.states[tp]
        for t in added:
            await self._load_topic(t)
            self.zk.watch_data(zd.topic_path(t), self._topic_data_watch(t))
        created = await self._initialize_new_partitions(added)
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
        waits = [f for tp in created for f in self._send_leader_and_isr(tp)]
        if not waits:
            self._send_update_metadata(list(self.live), created)
            return
        epoch = self.epoch

        async def then_update_metadata() -> None:
            await asyncio.wait(waits, timeout=self.timeout_ms / 1000.0)
            if self.active and self.epoch == epoch and not self._closed:
                # the states as they are now (a later event may have moved a leader meanwhile)
                self._send_update_metadata(list(self.live), [tp for tp in created if tp in self.states])

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
        if not self.active or topic not in self.assignments:
            return
        a = zd.TopicAssignment.decode(data)
        self.assignments[topic] = a
        created = await self._initialize_new_partitions([topic])
        if created:
            await self._announce_new_partitions(created)

    async def _on_delete_topics(self, children: list[str]) -> None:
        for topic in children:
            parts = [tp for tp in self.states if tp[0] == topic]
            a = self.assignments.get(topic)
            if a is not None:
                by_broker: dict[int, list[int]] = {}
                for p, replicas in a.partitions.items():
                    for b in replicas:
                        by_broker.setdefault(b, []).append(p)
                for b, ps in by_broker.items():
                    self._send(
                        b,
                        5,
                        STOP_REPLICA_VERSION,
                        stop_replica_request(
                            self.broker_id, self.epoch, topic, sorted(ps), EPOCH_DURING_DELETE
                        ),
                    )
            for tp in parts:
                del self.states[tp]
            self.assignments.pop(topic, None)
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
            if got is not None and tp[0] in self.assignments:
                self.states[tp] = zd.LeaderAndIsr.decode(got[0], got[1].version)
                changed.append(tp)
        if changed:
            self._send_update_metadata(list(self.live), changed)
        for tp in changed:
            await self._maybe_complete_reassignment(tp)

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
        if broker_id not in self.live:
            return []
        self.shutting_down.add(broker_id)
        remaining: list[TP] = []
        changed: list[TP] = []
        for tp, st in list(self.states.items()):
            if tp[0] not in self.assignments or broker_id not in self.assignments[tp[0]].partitions.get(
                tp[1], []
            ):
                continue
            if st.leader == broker_id:
                choice = self._choose_leader(tp, st, {broker_id})
                if choice is None:
                    remaining.append(tp)
                    continue
                new = zd.LeaderAndIsr(choice[0], st.leader_epoch + 1, choice[1], self.epoch, st.zk_version)
            elif broker_id in st.isr and len(st.isr) > 1:
                new = zd.LeaderAndIsr(
                    st.leader,
                    st.leader_epoch + 1,
                    [b for b in st.isr if b != broker_id],
                    self.epoch,
                    st.zk_version,
                )
            else:
                continue
            if await self._write_state(tp, new):
                changed.append(tp)
            else:
                remaining.append(tp)
        self._send_update_metadata(list(self.live), changed)
        waits = [f for tp in changed for f in self._send_leader_and_isr(tp)]
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
        results = await self._queued(lambda: self._elect_leaders(unclean, tps))
        return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in tps or []} if results is None else results

    async def _elect_leaders(self, unclean: bool, tps: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        results: dict[TP, tuple[int, str | None]] = {}
        changed: list[TP] = []
        for tp in sorted(self.states) if tps is None else tps:
            st = self.states.get(tp)
            a = self.assignments.get(tp[0])
            replicas = a.partitions.get(tp[1]) if a is not None else None
            if st is None or not replicas:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            if unclean:
                if st.leader in self.live:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                    continue
                live = [r for r in replicas if r in self.live and r not in self.shutting_down]
                if not live:
                    results[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica")
                    continue
                new = zd.LeaderAndIsr(live[0], st.leader_epoch + 1, [live[0]], self.epoch, st.zk_version)
            else:
                preferred = replicas[0]
                if st.leader == preferred:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                    continue
                if preferred not in self.live or preferred not in st.isr or preferred in self.shutting_down:
                    results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                   f"preferred leader {preferred} is not alive or not in the ISR {st.isr}")
                    continue
                new = zd.LeaderAndIsr(preferred, st.leader_epoch + 1, list(st.isr), self.epoch, st.zk_version)
            if await self._write_state(tp, new):
                changed.append(tp)
                results[tp] = (ErrorCode.NONE, None)
            else:
                results[tp] = (ErrorCode.NOT_CONTROLLER, "the partition state changed meanwhile; retry")
        if changed:
            log.info("controller: %s election moved %d partitions", "unclean" if unclean else "preferred",
                     len(changed))
            self._send_update_metadata(list(self.live), changed)
            for tp in changed:
                self._send_leader_and_isr(tp)
        return results

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
        for topic, a in self.assignments.items():
            for p in sorted(set(a.adding) | set(a.removing)):
                if tps is None or (topic, p) in tps:
                    out[(topic, p)] = (list(a.partitions.get(p, [])), list(a.adding.get(p, [])),
                                       list(a.removing.get(p, [])))
        return out

    async def _write_assignment(self, topic: str) -> None:
        await self.zk.set(zd.topic_path(topic), self.assignments[topic].encode())

    async def _reassign(self, req: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        results: dict[TP, tuple[int, str | None]] = {}
        for tp, target in req.items():
            a = self.assignments.get(tp[0])
            st = self.states.get(tp)
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
            elif any(r not in self.live for r in target):
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"replicas {[r for r in target if r not in self.live]} are not live brokers")
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
            new = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, list(st.isr), self.epoch, st.zk_version)
            if not await self._write_state(tp, new):
                results[tp] = (ErrorCode.NOT_CONTROLLER, "the partition state changed meanwhile; retry")
                continue
            log.info("controller: reassigning %s-%d from %s to %s", tp[0], tp[1], original, target)
            self._send_update_metadata(list(self.live), [tp])
            self._send_leader_and_isr(tp)
            results[tp] = (ErrorCode.NONE, None)
            await self._maybe_complete_reassignment(tp)
        return results

    async def _maybe_complete_reassignment(self, tp: TP) -> None:
        """Every target replica in the ISR: the replica set becomes the target, the leader moves if it is
        being removed, the removed replicas get StopReplica (delete)."""
        a = self.assignments.get(tp[0])
        st = self.states.get(tp)
        if a is None or st is None or (tp[1] not in a.adding and tp[1] not in a.removing):
            return
        full = list(a.partitions[tp[1]])
        removing = a.removing.get(tp[1], [])
        target = [r for r in full if r not in removing]
        if not all(r in st.isr for r in target):
            return
        usable = [r for r in target if r in st.isr and r in self.live and r not in self.shutting_down]
        leader = st.leader if st.leader in usable else (usable[0] if usable else None)
        if leader is None:
            return
        new = zd.LeaderAndIsr(leader, st.leader_epoch + 1, [r for r in st.isr if r in target], self.epoch,
                              st.zk_version)
        if not await self._write_state(tp, new):
            return
        a.partitions[tp[1]] = target
        a.adding.pop(tp[1], None)
        a.removing.pop(tp[1], None)
        await self._write_assignment(tp[0])
        log.info("controller: reassignment of %s-%d done: replicas %s, leader %d", tp[0], tp[1], target,
                 leader)
        self._send_update_metadata(list(self.live), [tp])
        self._send_leader_and_isr(tp)
        for b in full:
            if b not in target:
                self._send(b, 5, STOP_REPLICA_VERSION,
                           stop_replica_request(self.broker_id, self.epoch, tp[0], [tp[1]], NO_EPOCH))

    async def _rebalance_loop(self, interval_s: float, imbalance_pct: int) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, preferred elections
        for the brokers whose share of partitions led by someone else passes
        leader.imbalance.per.broker.percentage."""
        while True:
            await asyncio.sleep(interval_s)
            if not self.active:
                continue
            by_preferred: dict[int, list[TP]] = {}
            for tp, st in self.states.items():
                a = self.assignments.get(tp[0])
                replicas = a.partitions.get(tp[1]) if a is not None else None
                if replicas:
                    by_preferred.setdefault(replicas[0], []).append(tp)
            todo: list[TP] = []
            for broker_id, tps in by_preferred.items():
                if broker_id not in self.live:
                    continue
                elsewhere = [tp for tp in tps if self.states[tp].leader != broker_id]
                if len(elsewhere) * 100 > imbalance_pct * len(tps):
                    todo.extend(elsewhere)
            if todo:
                self._enqueue(functools.partial(self._elect_leaders, False, todo))

    def start_rebalance(self, interval_s: float, imbalance_pct: int) -> None:
        self._rebalance = asyncio.get_running_loop().create_task(
            self._rebalance_loop(interval_s, imbalance_pct), name="leader-rebalance")

    # ------------------------------------------------------------------------------------------ requests
    def _send(self, broker_id: int, api_key: int, version: int, req: Any) -> asyncio.Future[Any] | None:
        if self.channel is None:
            return None
        return self.channel.send(broker_id, api_key, version, req)

    def _request_header(self) -> dict[str, Any]:
        """The fields LeaderAndIsr and UpdateMetadata (v5+) start with: this controller and its epoch."""
        return {"controller_id": self.broker_id, "controller_epoch": self.epoch, "broker_epoch": -1,
                "max_broker_epoch": -1, "ungrouped_partition_states": []}

    def _partition_fields(self, tp: TP) -> dict[str, Any] | None:
        """The fields LeaderAndIsr's and UpdateMetadata's partition states share (None: unknown partition)."""
        st = self.states.get(tp)
        a = self.assignments.get(tp[0])
        if st is None or a is None:
            return None
        return {"partition_index": tp[1], "controller_epoch": st.controller_epoch, "leader": st.leader,
                "leader_epoch": st.leader_epoch, "isr": list(st.isr), "zk_version": st.zk_version,
                "replicas": list(a.partitions.get(tp[1], []))}

    def _send_leader_and_isr(self, tp: TP, only: list[int] | None = None) -> list[asyncio.Future[Any]]:
        fields = self._partition_fields(tp)
        if fields is None:
            return []
        st = self.states[tp]
        replicas = fields["replicas"]
        Req = m.LeaderAndIsrRequest
        ps = Req.LeaderAndIsrPartitionState(**fields, adding_replicas=[], removing_replicas=[], is_new=False)
        leaders = []
        if st.leader in self.live:
            ep = self.live[st.leader].endpoint(self.listener_name) or self.live[st.leader].endpoints[0]
            leaders.append(Req.LeaderAndIsrLiveLeader(broker_id=st.leader, host_name=ep.host, port=ep.port))
        req = Req.new(
            **self._request_header(),
            topic_states=[Req.LeaderAndIsrTopicState(topic_name=tp[0], partition_states=[ps])],
            live_leaders=leaders,
        )
        futs = []
        for b in only if only is not None else replicas:
            if b in self.live:
                f = self._send(b, 4, LEADER_AND_ISR_VERSION, req)
                if f is not None:
                    futs.append(f)
        return futs

    def _send_update_metadata(self, brokers: list[int], tps: list[TP]) -> None:
        Req = m.UpdateMetadataRequest
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            fields = self._partition_fields(tp)
            if fields is None:
                continue
            offline = [r for r in fields["replicas"] if r not in self.live]
            by_topic.setdefault(tp[0], []).append(
                Req.UpdateMetadataPartitionState(**fields, offline_replicas=offline))
        live = []
        for info in sorted(self.live.values(), key=lambda i: i.broker_id):
            live.append(
                Req.UpdateMetadataBroker(
                    id=info.broker_id,
                    v0_host="",
                    v0_port=0,
                    rack=info.rack,
                    endpoints=[
                        Req.UpdateMetadataEndpoint(
                            port=ep.port,
                            host=ep.host,
                            listener=ep.listener,
                            security_protocol=SECURITY_PROTOCOLS.get(ep.security_protocol, 0),
                        )
                        for ep in info.endpoints
                    ],
                )
            )
        req = Req.new(
            **self._request_header(),
            topic_states=[
                Req.UpdateMetadataTopicState(topic_name=t, partition_states=ps)
                for t, ps in sorted(by_topic.items())
            ],
            live_brokers=live,
        )
        for b in brokers:
            self._send(b, 6, UPDATE_METADATA_VERSION, req)


async def _nothing() -> None:
    return None
