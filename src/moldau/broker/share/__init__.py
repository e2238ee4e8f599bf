"""Share groups (KIP-932) in the broker: membership and assignment (``groups``), group configs (``config``),
the share-partitions on their leader (``partition``), share sessions and the ShareFetch / ShareAcknowledge
logic (``ShareService`` below), and the share coordinator that keeps the share-partitions' state in
``__share_group_state`` on the coordinator runtime (``state``). See docs/share-groups.md.

    create_share_service(services) -> ShareService      # Broker.start, after the group coordinator
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from moldau._aio import wait_for
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.share_state import ShareKey

from ..coordinator import CoordinatorLogDeps
from .config import GroupConfigStore, ShareGroupSettings, parse_duration_ms
from .groups import ShareGroups
from .partition import Acquired, SharePartition
from .persister import SharePersister
from .state import ShareCoordinator, create_share_coordinator

log = logging.getLogger(__name__)

__all__ = ["ShareService", "create_share_service"]

# a share-partition's state read or initialization that takes longer fails (retriable for the client) and
# frees the share-partition for the next request
PERSISTER_TIMEOUT_S = 15.0


class ShareDeps(CoordinatorLogDeps, Protocol):
    @property
    def data_dir(self) -> str: ...


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    #: the client connection that opened the session: closing it closes the session (as Kafka's
    #: ConnectionDisconnectListener), so the member's acquired records go back at once
    connection: Any = None


class ShareSessionCache:
    """Share sessions by (group, member), at most ``max_sessions`` (SHARE_SESSION_LIMIT_REACHED beyond)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def open(self, group_id: str, member_id: str) -> ShareSession:
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            raise KafkaError.for_code(
                ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                f"The limit of {self.max_sessions} share sessions has been reached.",
            )
        s = self.sessions[key] = ShareSession(group_id, member_id, 0)  # the request bumps it to 1
        return s

    def get(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        s = self.sessions.get((group_id, member_id))
        if s is None:
            raise KafkaError.for_code(ErrorCode.SHARE_SESSION_NOT_FOUND, "The share session was not found.")
        if epoch != -1 and epoch != s.epoch:
            log.warning("share session %s/%s: epoch %d, expected %d", group_id, member_id, epoch, s.epoch)
            raise KafkaError.for_code(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"The share session epoch {epoch} is not {s.epoch}."
            )
        return s

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_connection(self, connection: Any) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection is connection]


class ShareService:
    """What the share-group handlers (k76-k79, k83-k87) call."""

    def __init__(self, services: ShareDeps, coordinator: ShareCoordinator) -> None:
        self.services = services
        self.coordinator = coordinator
        self.persister = SharePersister(services, coordinator)
        cfg = services.config
        self.configs = GroupConfigStore(services.data_dir, cfg)
        self.groups = ShareGroups(
            services.clock.time_ms, self._partition_count, lambda: int(cfg.get("group.share.max.size"))
        )
        self.groups.on_member_removed = self._member_removed
        self.sessions = ShareSessionCache(int(cfg.get("group.share.max.share.sessions")))
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self._epochs: dict[tuple[str, str, int], int] = {}  # the leader epoch a share-partition was loaded at
        self._init_locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        self.changed = asyncio.Event()  # set when records became available again (long polls wake)
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        cfg = self.services.config
        return (
            "share" in cfg.get("group.coordinator.rebalance.protocols")
            and int(cfg.get("share.version")) >= 1
            and bool(cfg.get("group.share.enable"))
        )

    def start(self) -> None:
        self._task = asyncio.get_event_loop().create_task(self._timers())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.flush_all()
        self.persister.close()
        self.coordinator.runtime.close()

    def _partition_count(self, topic: str) -> int | None:
        t = self.services.metadata.get(topic)
        return None if t is None else int(t.num_partitions)

    def settings(self, group_id: str) -> ShareGroupSettings:
        return self.configs.settings(group_id)

    # ------------------------------------------------------------------------------------ timers
    async def _timers(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            try:
                self.groups.expire()
                now = self.services.clock.time_ms()
                woke = False
                for sp in list(self.partitions.values()):
                    if sp.initialized and sp.expire_locks(
                        now, self.settings(sp.group_id).delivery_count_limit
                    ):
                        woke = True
                if woke:
                    self._wake()
                await self.flush_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("share groups: timer pass failed")

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def _member_removed(self, group_id: str, member_id: str) -> None:
        """A member left (or its session timed out): its acquired records go back."""
        limit = self.settings(group_id).delivery_count_limit
        woke = False
        for (g, _t, _p), sp in self.partitions.items():
            if g == group_id and sp.release_member(member_id, limit):
                woke = True
        if woke:
            self._wake()

    def close_session(self, group_id: str, member_id: str) -> None:
        """A share session closed (epoch -1): the member's records still acquired go back. When it was the
        group's last share session on this broker, the group's share-partitions here are written and dropped
        (as Kafka's ShareGroupListener.onGroupEmpty): the next fetch reads their state afresh from the share
        coordinator, which an AlterShareGroupOffsets / DeleteShareGroupOffsets / DeleteGroups of the empty
        group (answered by the group coordinator, in a cluster maybe another broker) may have changed."""
        self.sessions.close(group_id, member_id)
        self._member_removed(group_id, member_id)
        if not self._has_sessions(group_id) and any(k[0] == group_id for k in self.partitions):
            asyncio.get_event_loop().create_task(self._forget_group(group_id))

    def _has_sessions(self, group_id: str) -> bool:
        return any(g == group_id for (g, _m) in self.sessions.sessions)

    async def _forget_group(self, group_id: str) -> None:
        for k, sp in list(self.partitions.items()):
            if k[0] != group_id:
                continue
            if sp.dirty:
                await self.persist(sp)
            if self._has_sessions(group_id):
                return  # a member is back: keep the rest
            if not sp.dirty and self.partitions.get(k) is sp:
                del self.partitions[k]

    def connection_closed(self, connection: Any) -> None:
        """A client connection closed: the share sessions it opened close, their acquired records go back."""
        for s in self.sessions.of_connection(connection):
            self.close_session(s.group_id, s.member_id)

    # ------------------------------------------------------------------------------------ persistence
    async def flush_all(self) -> None:
        rm = self.services.replica_manager
        for k, sp in list(self.partitions.items()):
            p = rm.get_partition(sp.topic, sp.partition)
            if p is None or not rm.is_leader(p):  # led elsewhere now: the new leader owns the state
                self.partitions.pop(k, None)
                continue
            if sp.dirty:
                await self.persist(sp)

    async def persist(self, sp: SharePartition) -> None:
        sp.dirty = False
        key = ShareKey(sp.group_id, sp.topic_id, sp.partition)
        try:
            await self.persister.write(key, sp.state_epoch, 0, sp.spso, sp.state_batches())
        except Exception as e:
            sp.dirty = True
            log.warning(
                "share group %s: writing the state of %s-%d failed: %s",
                sp.group_id,
                sp.topic,
                sp.partition,
                e,
            )

    async def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        """The share-partition, initialized from the share coordinator's state or share.auto.offset.reset."""
        k = (group_id, topic, partition)
        rm = self.services.replica_manager
        lp = rm.get_partition(topic, partition)
        if lp is None or not rm.is_leader(lp):
            self.partitions.pop(k, None)  # led elsewhere now: the state is read again when it comes back
            raise KafkaError.for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} not led here")
        sp = self.partitions.get(k)
        if sp is not None and sp.initialized:
            info = self.services.metadata.get(topic)
            if (info is not None and info.topic_id == sp.topic_id
                    and self._epochs.get(k) == int(getattr(lp, "leader_epoch", 0))):
                return sp
            # the topic was deleted (and maybe made again under a new id), or leadership left and came back
            del self.partitions[k]
        lock = self._init_locks.setdefault(k, asyncio.Lock())
        async with lock:
            sp = self.partitions.get(k)
            if sp is not None and sp.initialized:
                return sp
            info = self.services.metadata.get(topic)
            if info is None:
                raise KafkaError.for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} does not exist")
            sp = SharePartition(group_id, topic, partition, info.topic_id)
            key = ShareKey(group_id, info.topic_id, partition)
            await self.coordinator_ready(key)
            state = await _bounded(self.persister.read(key))
            p = self.services.replica_manager.get_partition(topic, partition)
            if p is None:
                raise KafkaError.for_code(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} not led here"
                )
            if state is not None and state.start_offset >= 0:
                start = max(state.start_offset, p.log.log_start_offset)
                sp.load(start, state.batches, state.state_epoch)
            else:
                start = self._reset_offset(group_id, p)
                sp.load(start, [], 0)
                await _bounded(self.persister.initialize(key, 0, start))
            self._epochs[k] = int(getattr(p, "leader_epoch", 0))
            self.partitions[k] = sp
            return sp

    async def coordinator_ready(self, key: ShareKey, timeout: float = 10.0) -> None:
        """Wait until the share coordinator serves ``key`` (``__share_group_state`` is made on first use, its
        partitions loaded as they are created) or another broker is known to lead its partition (a cluster);
        NOT_LEADER_OR_FOLLOWER (retriable) after ``timeout``."""
        rt = self.coordinator.runtime
        p = self.coordinator.partition_of(key)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not rt.is_active(p):
            if not rt.log.topic_exists():
                rt.log.ensure_topic()  # made now; in a cluster the metadata of it arrives a little later
            elif not self.persister.is_local(key):
                return  # another broker leads it (a cluster): the persister asks that one
            if loop.time() >= end:
                raise KafkaError.for_code(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, "The share coordinator is not available yet."
                )
            await asyncio.sleep(0.05)

    def _reset_offset(self, group_id: str, p: Any) -> int:
        reset = self.settings(group_id).auto_offset_reset
        plog = p.log
        if reset == "earliest":
            return int(plog.log_start_offset)
        if reset.startswith("by_duration:"):
            ts = self.services.clock.time_ms() - parse_duration_ms(reset[len("by_duration:") :])
            found = self.services.replica_manager.offset_for_timestamp(p, ts)
            return int(found[0]) if found is not None else int(plog.high_watermark)
        return int(plog.high_watermark)

    # ------------------------------------------------------------------------------------ fetch / ack
    def _reader(self, p: Any, isolation: int, max_bytes: int) -> Any:
        rm = self.services.replica_manager

        def read(offset: int) -> tuple[list[Any], Any]:
            info = rm.read(p, offset, max_bytes, min_one=True, isolation_level=isolation)
            if info.error:
                return [], None
            return list(info.records or []), info.aborted_transactions

        return read

    async def acquire(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        max_records: int,
        max_bytes: int,
        whole_batches: bool = False,
    ) -> Acquired:
        sp = await self.share_partition(group_id, topic, partition)
        st = self.settings(group_id)
        p = self.services.replica_manager.get_partition(topic, partition)
        if p is None:
            raise KafkaError.for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} not led here")
        now = self.services.clock.time_ms()
        sp.expire_locks(now, st.delivery_count_limit)
        max_locks = int(self.services.config.get("group.share.partition.max.record.locks"))
        return sp.acquire(
            member_id,
            max_records,
            now,
            st.record_lock_duration_ms,
            max_locks,
            self._reader(p, st.isolation_level, max_bytes),
            st.isolation_level,
            whole_batches,
            log_start_offset=int(p.log.log_start_offset),
        )

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: list[tuple[int, int, list[int]]],
    ) -> int:
        try:
            sp = await self.share_partition(group_id, topic, partition)
        except KafkaError as e:
            return e.code
        st = self.settings(group_id)
        now = self.services.clock.time_ms()
        sp.expire_locks(now, st.delivery_count_limit)
        err: int = ErrorCode.NONE
        for first, last, types in batches:
            code = sp.acknowledge(
                member_id, first, last, types, now, st.record_lock_duration_ms, st.delivery_count_limit
            )
            if code:
                err = code
        if sp.dirty:
            if sp.has_available():
                self._wake()
            await self.persist(sp)
        return err

    def lock_duration_ms(self, group_id: str) -> int:
        return self.settings(group_id).record_lock_duration_ms

    # ------------------------------------------------------------------------------------ admin
    async def describe_offsets(self, group_id: str, topic: str, partition: int) -> tuple[int, int] | None:
        """(start offset, lag) of one share-partition, None if it has no state: from the share-partition when
        this broker leads it, else from the share coordinator of its key (this broker's or, in a cluster,
        another one's, asked with ReadShareGroupState through the persister); the lag against this broker's
        replica of the partition (-1 without one)."""
        info = self.services.metadata.get(topic)
        if info is None:
            return None
        sp = self.partitions.get((group_id, topic, partition))
        p = self.services.replica_manager.get_partition(topic, partition)
        hw = int(p.log.high_watermark) if p is not None else -1
        rm = self.services.replica_manager
        if sp is not None and sp.initialized and p is not None and rm.is_leader(p):
            acked = sum(1 for r in sp.records.values() if r.state in (2, 4))
            return sp.spso, max(0, hw - sp.spso - acked) if hw >= 0 else -1
        st = await self.persister.read(ShareKey(group_id, info.topic_id, partition))
        if st is None or st.start_offset < 0:
            return None
        done = sum(b.last_offset - b.first_offset + 1 for b in st.batches if b.delivery_state in (2, 4))
        return st.start_offset, max(0, hw - st.start_offset - done) if hw >= 0 else -1

    def group_topics(self, group_id: str) -> set[str]:
        """The topics the group has or may have state for: its share-partitions here, the keys of this
        broker's share coordinator, and the topics its members subscribed to (in a cluster the state may be
        kept by another broker's share coordinator)."""
        topics = {t for (g, t, _p) in self.partitions if g == group_id}
        for k in self.coordinator.keys_of_group(group_id):
            info = self.services.metadata.get_by_id(k.topic_id)
            if info is not None:
                topics.add(info.name)
        g = self.groups.groups.get(group_id)
        if g is not None:
            topics.update(t for t in g.topics_seen | g.subscribed_topics()
                          if self.services.metadata.get(t) is not None)
        return topics

    def known_group(self, group_id: str) -> bool:
        return group_id in self.groups.groups or bool(self.coordinator.keys_of_group(group_id))

    def group_ids(self) -> set[str]:
        ids = set(self.groups.groups)
        ids.update(k.group_id for k in self.coordinator.states)
        return ids

    async def delete_group(self, group_id: str) -> int:
        g = self.groups.groups.get(group_id)
        if g is not None and g.members:
            return ErrorCode.NON_EMPTY_GROUP
        if g is None and not self.known_group(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        topics = self.group_topics(group_id)
        self.groups.groups.pop(group_id, None)
        for name in topics:
            await self._delete_state(group_id, name)
        for key in self.coordinator.keys_of_group(group_id):
            await self.coordinator.delete(key)
        self.configs.forget(group_id)
        return ErrorCode.NONE

    async def _delete_state(self, group_id: str, topic: str) -> None:
        """The group's state of every partition of ``topic`` goes, at the share coordinator of each key
        (this broker's or, in a cluster, another one's through the persister)."""
        info = self.services.metadata.get(topic)
        if info is None:
            raise KafkaError.for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} does not exist")
        for k in [k for k in self.partitions if k[0] == group_id and k[1] == topic]:
            del self.partitions[k]
        for p in range(int(info.num_partitions)):
            await self.persister.delete(ShareKey(group_id, info.topic_id, p))

    async def delete_topic_state(self, group_id: str, topic: str) -> None:
        """DeleteShareGroupOffsets: the group's state for every partition of ``topic`` goes."""
        await self._delete_state(group_id, topic)

    async def reset_offsets(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """AlterShareGroupOffsets (the group is empty): the share-partition restarts at ``start_offset``, its
        state initialized again at the share coordinator of its key with the next state epoch."""
        info = self.services.metadata.get(topic)
        if info is None:
            raise KafkaError.for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} does not exist")
        self.partitions.pop((group_id, topic, partition), None)
        key = ShareKey(group_id, info.topic_id, partition)
        cur = await self.persister.read(key)
        await self.persister.initialize(key, (cur.state_epoch + 1) if cur else 0, start_offset)


_COORDINATOR_ERRORS = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


async def _bounded(op: Any) -> Any:
    """``op`` within PERSISTER_TIMEOUT_S. Past it, or when the share coordinator cannot be reached, the
    share-partition's error is NOT_LEADER_OR_FOLLOWER: a ShareFetch partition error the clients retry (a
    coordinator error there makes librdkafka's share consumer stop fetching the partition)."""
    try:
        return await wait_for(op, PERSISTER_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise KafkaError.for_code(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, "The share coordinator did not answer in time."
        ) from None
    except KafkaError as e:
        if e.code in _COORDINATOR_ERRORS:
            raise KafkaError.for_code(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"The share coordinator is not available: {e}"
            ) from None
        raise


def create_share_service(services: ShareDeps) -> ShareService:
    svc = ShareService(services, create_share_coordinator(services))
    cl = getattr(services, "cluster", None)
    if cl is not None and getattr(cl, "config_changes", None) is not None:  # group configs in ZooKeeper
        from ..cluster.zkconfig import ZkGroupConfigs

        ZkGroupConfigs(cl.zk, cl.config_changes, svc.configs)
    svc.start()
    return svc
