"""Replication (Kafka's Partition, ReplicaManager, ReplicaFetcherThread and DelayedProduce, ZooKeeper mode).

* ``ClusterPartition``: a partition replica of this broker, leader or follower, as the last LeaderAndIsr said;
  as leader it tracks each follower's log end offset and when it last caught up, keeps the ISR and the high
  watermark (smallest log end offset in the ISR), and completes waiting acks=all produces.
* ``ClusterReplicaManager``: the single-node ``ReplicaManager`` plus LeaderAndIsr / StopReplica, leader checks
  (NOT_LEADER_OR_FOLLOWER), follower reads up to the log end offset, ISR shrink / expand proposed to the
  controller with AlterPartition (``alter_partition``), and one ``ReplicaFetcher`` per leader broker.
* ``ReplicaFetcher``: truncates with OffsetForLeaderEpoch when a partition starts following, then fetches with
  Fetch (replica id = this broker) and appends the leader's batches with their offsets.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import check_crc, split_batches

from ..replica_manager import AppendResult, Partition, ReadInfo, ReplicaManager
from .alter_partition import AlterPartitionManager, PendingIsr, propose
from .channel import stop_task_and_connection

if TYPE_CHECKING:
    from ..metadata import TopicInfo
    from . import ClusterServices
    from .store import ZkMetadataStore

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # replica_id field, topics by name
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
NO_LEADER = -1
DEBUGGING_REPLICA_ID = -2  # ListOffsets / Fetch from any replica (Kafka's debugging id)


class ClusterPartition(Partition):
    __slots__ = (
        "caught_up_ms",
        "controller_epoch",
        "follower_leo",
        "min_isr",
        "pending_isr",
        "produce_waiters",
        "zk_version",
    )

    def __init__(self, topic: str, index: int, topic_id: Any, plog: Any, node_id: int, config: Any) -> None:
        hw = plog.high_watermark
        super().__init__(topic, index, topic_id, plog, node_id, config)
        plog.high_watermark = min(hw, plog.log_end_offset)  # a replica's HW comes from the leader
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replicas = []
        self.isr = []
        self.follower_leo: dict[int, int] = {}
        self.caught_up_ms: dict[int, int] = {}
        self.zk_version = 0
        self.controller_epoch = -1
        self.produce_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.pending_isr: PendingIsr | None = None  # an ISR change sent to the controller, not answered yet

    def maximal_isr(self) -> list[int]:
        """The committed ISR plus the members of a pending expansion (a pending shrink counts once committed):
        what the high watermark is computed over (Kafka's maximalIsr)."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + [r for r in pending.isr if r not in self.isr]

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id == node_id

    def fail_waiters(self, code: int) -> None:
        waiters, self.produce_waiters = self.produce_waiters, []
        for _off, fut in waiters:
            if not fut.done():
                fut.set_exception(KafkaError.for_code(code, f"{self.topic}-{self.index}: leadership moved"))


class ClusterReplicaManager(ReplicaManager):
    def __init__(self, services: Any, cluster: ClusterServices) -> None:
        """``services``: the broker's services (``services.BrokerServices``): what ``ReplicaDeps`` lists;
        ``cluster``: its ZooKeeper session, ZooKeeper metadata store (``services.metadata``) and inter-broker
        listener."""
        super().__init__(services)
        assert cluster.store is not None, "the metadata store is built before the replica manager"
        self.cluster = cluster
        self.zk = cluster.zk
        self.store: ZkMetadataStore = cluster.store
        replication = services.config.replication
        self.lag_max_ms = replication.lag_time_max_ms
        self.fetch_wait_ms = replication.fetch_wait_max_ms
        self.fetch_min_bytes = replication.fetch_min_bytes
        self.fetch_max_bytes = replication.fetch_max_bytes
        self.fetch_response_max_bytes = replication.fetch_response_max_bytes
        self.fetch_backoff_ms = replication.fetch_backoff_ms
        self.replica_selector = replication.selector_class  # KIP-392: RackAwareReplicaSelector or None
        self.rack = replication.rack
        # a leader keeps its unreplicated tail in memory for the followers' fetches, up to this many bytes per
        # partition (PartitionLog's tail cache)
        self.tail_cache_bytes = 4 * self.fetch_max_bytes
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.controller_epoch = -1
        self._isr_task: asyncio.Task[None] | None = None
        self.alter_partition = AlterPartitionManager(self)
        self._isr_proposals: set[asyncio.Task[None]] = set()
        self._deletions: set[asyncio.TimerHandle] = set()  # replica directories to remove (-delete)
        self._pending_leaders: dict[int, tuple[str, int]] = {}

    # ------------------------------------------------------------------------------------------ setup
    def load(self) -> None:
        """Partitions come from the controller's LeaderAndIsr; logs of topics ZooKeeper no longer knows are
        deleted (the topic was deleted while this broker was down)."""
        lm = self.services.log_manager
        store = self.services.metadata
        for tname in sorted({t for t, _i in lm.partitions()}):
            if tname not in store.topics:
                log.warning("deleting the log of topic %s: not in ZooKeeper any more", tname)
                lm.delete_topic(tname)

    def start(self) -> None:
        super().start()
        self.alter_partition.start()
        self._isr_task = asyncio.get_running_loop().create_task(
            self._isr_maintenance(), name="isr-expiration"
        )
        self._tasks.append(self._isr_task)

    async def stop(self) -> None:
        for f in list(self.fetchers.values()):
            await f.close()
        self.fetchers.clear()
        await self.alter_partition.close()
        for h in self._deletions:  # the -delete directories go at the next start
            h.cancel()
        self._deletions.clear()
        for p in self.partitions.values():
            if isinstance(p, ClusterPartition):
                p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        await super().stop()

    def on_topic_created(self, topic: TopicInfo) -> None:
        """Nothing: replicas are created by LeaderAndIsr."""

    def on_partitions_created(self, topic: TopicInfo, old_count: int) -> None:
        """Nothing: replicas are created by LeaderAndIsr."""

    def on_topic_deleted(self, topic: TopicInfo) -> None:
        for key in [k for k in self.partitions if k[0] == topic.name]:
            self._remove_follower(key)
            p = self.partitions.get(key)
            if isinstance(p, ClusterPartition):
                p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        super().on_topic_deleted(topic)

    def _get_or_create(self, topic: TopicInfo, index: int) -> ClusterPartition:
        p = self.partitions.get((topic.name, index))
        if isinstance(p, ClusterPartition):
            return p
        cfg = self._log_config(topic)
        plog = self._open_log(topic, index, cfg)
        p = ClusterPartition(topic.name, index, topic.topic_id, plog, self.node_id, cfg)
        self.partitions[(topic.name, index)] = p
        return p

    # ------------------------------------------------------------------------------------------ LeaderAndIsr
    def leader_and_isr(self, controller_id: int, controller_epoch: int, topic: str, ps: Any) -> int:
        """Apply one partition state of a LeaderAndIsr request; its error code."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        # the handler (k04) read a topic this broker's watch had not reported yet from ZooKeeper first
        t = self.services.metadata.get(topic)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.node_id not in ps.replicas:
            return ErrorCode.NONE
        p = self._get_or_create(t, ps.partition_index)
        if ps.leader_epoch < p.leader_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if ps.leader_epoch == p.leader_epoch and ps.leader == p.leader_id:
            # same epoch (a resend, or ISR news): keep what we have but take replicas / zkVersion
            p.replicas = list(ps.replicas)
            if ps.zk_version > p.zk_version:
                # the controller's state is newer: it is the committed ISR (a pending change is dropped)
                p.zk_version = ps.zk_version
                p.isr = list(ps.isr)
                p.pending_isr = None
                if p.is_leader(self.node_id):
                    self.isr_committed(p)
            return ErrorCode.NONE
        p.replicas = list(ps.replicas)
        p.zk_version = ps.zk_version
        p.controller_epoch = ps.controller_epoch
        if ps.leader == self.node_id:
            self._become_leader(p, ps)
        else:
            self._become_follower(p, ps)
        return ErrorCode.NONE

    def _become_leader(self, p: ClusterPartition, ps: Any) -> None:
        # a new epoch with the same leader (the controller took a dead follower out of the ISR) is no
        # leadership change: the coordinators keep what they serve (Kafka's makeLeaders skips partitions
        # already led; reloading would swap their state under requests in flight)
        newly_leader = not p.is_leader(self.node_id)
        self._remove_follower((p.topic, p.index))
        now = self.services.clock.time_ms()
        p.leader_id = self.node_id
        p.leader_epoch = ps.leader_epoch
        p.isr = list(ps.isr)
        p.pending_isr = None
        p.follower_leo = {r: -1 for r in ps.replicas if r != self.node_id}
        p.caught_up_ms = {r: now for r in ps.replicas if r != self.node_id}
        p.log.assign_leader_epoch(ps.leader_epoch)
        p.log.tail_cache.configure(self.tail_cache_bytes if len(p.replicas) > 1 else 0,
                                   keep_large=not self._followers_sendfile())
        log.info(
            "%s-%d: leader (epoch %d, isr %s, hw %d, leo %d)",
            p.topic,
            p.index,
            p.leader_epoch,
            p.isr,
            p.high_watermark,
            p.log_end_offset,
        )
        self._maybe_advance_hw(p)
        p.wake()
        if newly_leader:
            self.leadership_changed(p.topic, p.index, True, p.leader_epoch)

    def is_leader(self, p: Partition) -> bool:
        return isinstance(p, ClusterPartition) and p.is_leader(self.node_id)

    def _followers_sendfile(self) -> bool:
        """The followers' fetches come on the inter-broker listener: plaintext (PLAINTEXT, SASL_PLAINTEXT)
        answers them with sendfile, so the tail cache needs no bytes of large appends (``log.tail_cache``)."""
        from ..connection import SENDFILE

        name = self.cluster.listener_name
        for lst in self.services.config.listeners:
            if lst.name == name:
                return SENDFILE and lst.security_protocol in ("PLAINTEXT", "SASL_PLAINTEXT")
        return False

    def leads_new_partitions(self) -> bool:
        """A new partition's leader is the controller's choice (LeaderAndIsr)."""
        return False

    def _become_follower(self, p: ClusterPartition, ps: Any) -> None:
        was_leader = p.is_leader(self.node_id)
        p.leader_id = ps.leader
        p.leader_epoch = ps.leader_epoch
        p.isr = list(ps.isr)
        p.pending_isr = None
        p.follower_leo = {}
        p.caught_up_ms = {}
        p.log.tail_cache.configure(0)
        if was_leader:
            p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.leadership_changed(p.topic, p.index, False, p.leader_epoch)
        p.wake()
        self._remove_follower((p.topic, p.index))
        log.info("%s-%d: follower of %d (epoch %d)", p.topic, p.index, ps.leader, ps.leader_epoch)
        if ps.leader == NO_LEADER:
            return
        ep = self.store.live.get(ps.leader)
        addr = self._leader_address(ps.leader)
        if addr is None and ep is None:
            log.warning("%s-%d: leader %d has no known endpoint yet", p.topic, p.index, ps.leader)
        f = self.fetchers.get(ps.leader)
        if f is None or (addr is not None and (f.host, f.port) != addr):
            if f is not None:
                asyncio.get_running_loop().create_task(f.close())
            f = ReplicaFetcher(self, ps.leader, addr)
            self.fetchers[ps.leader] = f
        f.add(p)

    def _leader_address(self, broker_id: int) -> tuple[str, int] | None:
        b = self.store.live.get(broker_id)
        if b is None:
            return self._pending_leaders.get(broker_id)
        name = self.cluster.listener_name
        ep = b.endpoints.get(name) or next(iter(b.endpoints.values()), None)
        return ep

    def note_live_leaders(self, leaders: Iterable[Any]) -> None:
        """LeaderAndIsr's live_leaders: endpoints to fetch from before UpdateMetadata arrives."""
        for ll in leaders:
            self._pending_leaders[ll.broker_id] = (ll.host_name, ll.port)

    def _remove_follower(self, key: tuple[str, int]) -> None:
        for f in self.fetchers.values():
            f.remove(key)

    def leader_epoch_of(self, topic: str, index: int) -> int | None:
        """The leader epoch this broker knows for a partition it hosts, None when it hosts none."""
        p = self.partitions.get((topic, index))
        return p.leader_epoch if isinstance(p, ClusterPartition) else None

    def stop_replica(self, topic: str, index: int, delete: bool) -> int:
        key = (topic, index)
        self._remove_follower(key)
        p = self.partitions.get(key)
        if isinstance(p, ClusterPartition):
            p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.leadership_changed(p.topic, p.index, False, None)
            p.leader_id = NO_LEADER
            p.log.tail_cache.configure(0)
        if delete:
            self._delete_replica(key)
        return ErrorCode.NONE

    def _delete_replica(self, key: tuple[str, int]) -> None:
        """StopReplica with delete (a replica reassigned away): the partition goes, its directory is renamed
        to ``<topic>-<p>.<id>-delete`` at once and removed after log.segment.delete.delay.ms in a worker
        thread, as Kafka's LogManager.asyncDelete; a restart before that removes it at load."""
        p = self.partitions.pop(key, None)
        if p is not None:
            p.deleted = True
            p.wake()
        doomed = self.services.log_manager.rename_for_delete(*key)
        if doomed is None:
            return
        delay = self.services.config.log.segment_delete_delay_ms / 1000.0
        log.info("%s-%d: replica deleted; removing %s in %.0f s", key[0], key[1], doomed, delay)
        loop = asyncio.get_running_loop()

        def remove() -> None:
            fut = loop.run_in_executor(None, shutil.rmtree, doomed, True)
            self._deletions.discard(handle)
            fut.add_done_callback(lambda _f: log.info("removed %s", doomed))

        handle = loop.call_later(delay, remove)
        self._deletions.add(handle)

    # ------------------------------------------------------------------------------------------ append
    def append(
        self,
        p: Partition,
        records: Any,
        *,
        internal: bool = False,
        now_ms: int | None = None,
        verify_txn: Any = None,
        required_acks: int = -1,
    ) -> AppendResult:
        if not isinstance(p, ClusterPartition) or not p.is_leader(self.node_id):
            return AppendResult(
                error=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                error_message=f"This server is not the leader for {p.topic}-{p.index}",
            )
        return super().append(
            p, records, internal=internal, now_ms=now_ms, verify_txn=verify_txn, required_acks=required_acks
        )

    def _after_append(self, p: Partition, res: AppendResult, required_acks: int) -> None:
        assert isinstance(p, ClusterPartition)
        plog = p.log
        self._maybe_advance_hw(p)
        p.wake()
        flush = self.flusher.request(p) if plog.needs_flush() else None
        if required_acks != -1 or p.high_watermark >= plog.log_end_offset:
            res.flush = flush
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        p.produce_waiters.append((plog.log_end_offset, fut))
        res.flush = fut if flush is None else asyncio.ensure_future(_both(flush, fut))

    def _after_duplicate(self, p: Partition, res: AppendResult, last_offset: int, required_acks: int) -> None:
        """acks=all for a retried batch waits, like the original, until the high watermark passes it."""
        assert isinstance(p, ClusterPartition)
        super()._after_duplicate(p, res, last_offset, required_acks)
        if required_acks != -1 or p.high_watermark > last_offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        p.produce_waiters.append((last_offset + 1, fut))
        res.flush = fut if res.flush is None else asyncio.ensure_future(_both(res.flush, fut))

    # ------------------------------------------------------------------------------------------ read
    def read(
        self,
        p: Partition,
        offset: int,
        max_bytes: int,
        *,
        min_one: bool,
        isolation_level: int = 0,
        replica_id: int = -1,
        follower_ok: bool = False,
        regions: bool = False,
    ) -> ReadInfo:
        if not isinstance(p, ClusterPartition):
            return ReadInfo(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if replica_id < 0 and not p.is_leader(self.node_id):
            # a consumer on a follower (KIP-392): up to this replica's high watermark, which the leader's
            # fetch responses move; older Fetch versions only from the leader
            if not follower_ok or p.leader_id == NO_LEADER or self.node_id not in p.replicas:
                return ReadInfo(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return super().read(p, offset, max_bytes, min_one=min_one, isolation_level=isolation_level,
                                regions=regions)
        if not p.is_leader(self.node_id):
            return ReadInfo(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if replica_id < 0:
            return super().read(p, offset, max_bytes, min_one=min_one, isolation_level=isolation_level,
                                regions=regions)
        if replica_id not in p.replicas:
            return ReadInfo(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._update_follower(p, replica_id, offset)
        plog = p.log
        info = ReadInfo(
            ErrorCode.NONE, None, 0, plog.high_watermark, plog.last_stable_offset, plog.log_start_offset
        )
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            info.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return info
        if offset >= plog.log_end_offset:
            return info
        rr = plog.read(offset, max_bytes, max_offset=plog.log_end_offset, min_one=min_one, regions=regions)
        info.records = rr.chunks if rr.size else None
        info.size = rr.size
        return info

    def preferred_read_replica(self, p: Partition, client_rack: str, fetch_offset: int) -> int:
        """KIP-392 with RackAwareReplicaSelector, on the leader: for a consumer in rack ``client_rack``, the
        in-sync follower in that rack that holds ``fetch_offset`` (the most caught up first), unless the
        leader is in that rack itself; -1: read from the leader."""
        if (not self.replica_selector or not client_rack or not isinstance(p, ClusterPartition)
                or not p.is_leader(self.node_id) or self.rack == client_rack):
            return -1
        live = self.store.live
        candidates = [r for r in p.isr if r != self.node_id and r in live and live[r].rack == client_rack
                      and p.follower_leo.get(r, -1) >= fetch_offset >= p.log_start_offset]
        if not candidates:
            return -1
        return max(candidates, key=lambda r: (p.follower_leo.get(r, -1), p.caught_up_ms.get(r, 0)))

    def list_offsets_error(self, p: Partition, replica_id: int, timestamp: int, version: int) -> int:
        """ListOffsets only on the leader (replica id -2, Kafka's debugging id: any replica); a leader whose
        high watermark has not reached the start of its epoch yet: OFFSET_NOT_AVAILABLE (v2+ clients, except
        for the earliest offsets), as Kafka's Partition.fetchOffsetForTimestamp."""
        if not isinstance(p, ClusterPartition):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if replica_id == DEBUGGING_REPLICA_ID:
            return ErrorCode.NONE
        if not p.is_leader(self.node_id):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if version >= 2 and timestamp not in (-2, -4) and self._epoch_start(p) > p.high_watermark:
            return ErrorCode.OFFSET_NOT_AVAILABLE
        return ErrorCode.NONE

    # ------------------------------------------------------------------------------------------ ISR, HW
    def _update_follower(self, p: ClusterPartition, replica_id: int, leo: int) -> None:
        now = self.services.clock.time_ms()
        p.follower_leo[replica_id] = leo
        if leo >= p.log_end_offset:
            p.caught_up_ms[replica_id] = now
        if (replica_id not in p.isr and p.pending_isr is None and leo >= p.high_watermark
                and self._epoch_start(p) <= leo):
            self._change_isr(p, sorted(set(p.isr) | {replica_id}), "caught up")
        self._maybe_advance_hw(p)

    @staticmethod
    def _epoch_start(p: ClusterPartition) -> int:
        eps = p.log.leader_epochs
        return eps[-1][1] if eps and eps[-1][0] == p.leader_epoch else 0

    def _maybe_advance_hw(self, p: ClusterPartition) -> None:
        if not p.is_leader(self.node_id):
            return
        leo = p.log_end_offset
        hw = leo
        for r in p.maximal_isr():
            if r != self.node_id:
                hw = min(hw, p.follower_leo.get(r, -1))
        if hw > p.high_watermark:
            p.high_watermark = hw
            p.log.tail_cache.release(hw)  # the ISR has it: followers out of the ISR read the file
            p.wake()
            self._complete_produces(p)

    def _complete_produces(self, p: ClusterPartition) -> None:
        hw = p.high_watermark
        if not p.produce_waiters:
            return
        keep = []
        enough = len(p.maximal_isr()) >= p.config.min_insync_replicas
        for off, fut in p.produce_waiters:
            if fut.done():
                continue
            if off <= hw:
                if enough:
                    fut.set_result(None)
                else:
                    fut.set_exception(
                        KafkaError.for_code(
                            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                            f"{p.topic}-{p.index}: the ISR {p.isr} shrank below min.insync.replicas",
                        )
                    )
            else:
                keep.append((off, fut))
        p.produce_waiters = keep

    async def _isr_maintenance(self) -> None:
        interval = max(self.lag_max_ms / 2000.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                self.shrink_isrs()
            except Exception:
                log.exception("ISR expiration failed")

    def shrink_isrs(self) -> None:
        """Followers that have not caught up for replica.lag.time.max.ms leave the ISR."""
        now = self.services.clock.time_ms()
        for p in list(self.partitions.values()):
            if not isinstance(p, ClusterPartition) or not p.is_leader(self.node_id) or p.pending_isr:
                continue
            out = [
                r for r in p.isr if r != self.node_id and now - p.caught_up_ms.get(r, now) > self.lag_max_ms
            ]
            if out:
                self._change_isr(p, [r for r in p.isr if r not in out], f"{out} lagging")

    def _change_isr(self, p: ClusterPartition, new_isr: list[int], why: str) -> None:
        """Propose the new ISR to the controller (AlterPartition); one change in flight per partition."""
        if p.pending_isr is not None or not p.is_leader(self.node_id):
            return
        pending = PendingIsr(list(new_isr), len(new_isr) > len(p.isr), p.leader_epoch, p.zk_version, why)
        p.pending_isr = pending
        log.info("%s-%d: proposing ISR %s -> %s (%s)", p.topic, p.index, p.isr, new_isr, why)
        task = asyncio.get_running_loop().create_task(propose(self, p, pending))
        self._isr_proposals.add(task)
        task.add_done_callback(self._isr_proposals.discard)

    def isr_committed(self, p: ClusterPartition) -> None:
        """The controller committed (or dropped) an ISR change: the high watermark and waiting produces."""
        self._maybe_advance_hw(p)
        self._complete_produces(p)

    # ------------------------------------------------------------------------------------------ follower side
    def follower_append(self, p: ClusterPartition, data: Any, leader_hw: int, leader_start: int) -> int:
        """Append the leader's batches as bytes, as Kafka's follower does: offsets, leader epochs and
        timestamps kept, each batch's CRC checked, nothing decoded, re-compressed or copied (``data`` is the
        fetch response's records, a view of the received frame). The log rebuilds the producer state and the
        leader epoch cache from the batch headers. The follower's high watermark follows the leader's."""
        plog = p.log
        n = 0
        if data is not None and len(data):
            leo = plog.log_end_offset
            batches = [
                (pos, h) for pos, h in split_batches(data, allow_truncated=True) if h.last_offset >= leo
            ]
            if batches:
                for pos, h in batches:
                    check_crc(data, pos, h)
                plog.append(data, batches, self.services.clock.time_ms(), assign_offsets=False)
                n = len(batches)
        new_hw = min(leader_hw, plog.log_end_offset)
        if new_hw > plog.high_watermark:
            plog.high_watermark = new_hw
            p.wake()  # consumers long-polling on this follower (KIP-392)
        return n


async def _both(a: asyncio.Future[Any], b: asyncio.Future[Any]) -> None:
    await a
    await b


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, rm: ClusterReplicaManager, leader_id: int, addr: tuple[str, int] | None) -> None:
        self.rm = rm
        self.leader_id = leader_id
        self.host, self.port = addr if addr is not None else ("", -1)
        self.partitions: dict[tuple[str, int], ClusterPartition] = {}
        self.truncating: set[tuple[str, int]] = set()
        self.conn: Any = None
        self._wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{leader_id}")

    def add(self, p: ClusterPartition) -> None:
        key = (p.topic, p.index)
        self.partitions[key] = p
        self.truncating.add(key)
        self._wake.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self.truncating.discard(key)

    async def close(self) -> None:
        await stop_task_and_connection(self.task, self.conn)
        self.conn = None

    async def _connection(self) -> Any:
        from moldau.client.conn import Connection

        if self.conn is not None and self.conn.connected:
            return self.conn
        if self.port < 0:
            addr = self.rm._leader_address(self.leader_id)
            if addr is None:
                raise ConnectionError(f"no endpoint for broker {self.leader_id}")
            self.host, self.port = addr
        self.conn = await Connection.open(
            self.host,
            self.port,
            client_id=f"replica-fetcher-{self.rm.node_id}",
            request_timeout_ms=30000,
            connect_timeout_ms=10000,
            reuse_receive_buffer=True,  # one fetch in flight, each answer appended before the next
        )
        return self.conn

    async def _run(self) -> None:
        backoff = self.rm.fetch_backoff_ms / 1000.0
        while True:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                conn = await self._connection()
                if self.truncating:
                    await self._truncate(conn)
                await self._fetch(conn)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001
                log.info("replica fetcher from broker %d: %s", self.leader_id, e)
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                await asyncio.sleep(backoff)

    async def _truncate(self, conn: Any) -> None:
        """OffsetForLeaderEpoch for the last epoch of each new follower partition, then truncation."""
        Req = m.OffsetForLeaderEpochRequest
        by_topic: dict[str, list[Any]] = {}
        keys = [k for k in self.truncating if k in self.partitions]
        for key in keys:
            part = self.partitions[key]
            eps = part.log.leader_epochs
            last_epoch = eps[-1][0] if eps else -1
            by_topic.setdefault(key[0], []).append(
                Req.OffsetForLeaderPartition(
                    partition=key[1], current_leader_epoch=part.leader_epoch, leader_epoch=last_epoch
                )
            )
        req = Req.new(
            replica_id=self.rm.node_id,
            topics=[Req.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        resp = await conn.send(23, req, version=OFFSET_FOR_LEADER_EPOCH_VERSION)
        for t in resp.topics:
            for pr in t.partitions:
                key = (t.topic, pr.partition)
                p = self.partitions.get(key)
                if p is None or key not in self.truncating:
                    continue
                if pr.error_code != 0:
                    log.info(
                        "%s-%d: OffsetForLeaderEpoch from %d: error %d",
                        key[0],
                        key[1],
                        self.leader_id,
                        pr.error_code,
                    )
                    continue
                plog = p.log
                if pr.leader_epoch < 0 or pr.end_offset < 0:
                    target = plog.high_watermark
                else:
                    _ep, local_end = plog.end_offset_for_epoch(pr.leader_epoch)
                    target = min(pr.end_offset, local_end if local_end >= 0 else plog.log_end_offset)
                if target < plog.log_end_offset:
                    log.info(
                        "%s-%d: truncating from %d to %d (leader %d epoch %d ends at %d)",
                        key[0],
                        key[1],
                        plog.log_end_offset,
                        target,
                        self.leader_id,
                        pr.leader_epoch,
                        pr.end_offset,
                    )
                    plog.truncate_to(target)
                self.truncating.discard(key)

    async def _fetch(self, conn: Any) -> None:
        Req = m.FetchRequest
        ready = {k: p for k, p in self.partitions.items() if k not in self.truncating}
        if not ready:
            await asyncio.sleep(self.rm.fetch_backoff_ms / 1000.0)
            return
        by_topic: dict[str, list[Any]] = {}
        for (t, i), part in ready.items():
            by_topic.setdefault(t, []).append(
                Req.FetchPartition(
                    partition=i,
                    current_leader_epoch=part.leader_epoch,
                    fetch_offset=part.log_end_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=part.log_start_offset,
                    partition_max_bytes=self.rm.fetch_max_bytes,
                )
            )
        req = Req.new(
            cluster_id=None,
            replica_id=self.rm.node_id,
            max_wait_ms=self.rm.fetch_wait_ms,
            min_bytes=self.rm.fetch_min_bytes,
            max_bytes=self.rm.fetch_response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[Req.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        resp = await conn.send(1, req, version=FETCH_VERSION, timeout_ms=self.rm.fetch_wait_ms + 30000)
        if resp.error_code:
            raise ConnectionError(f"fetch error {resp.error_code}")
        errors = 0
        for t in resp.responses:
            for pr in t.partitions:
                key = (t.topic, pr.partition_index)
                p = ready.get(key)
                if p is None or self.partitions.get(key) is not p:
                    continue
                if pr.error_code == 0:
                    try:
                        self.rm.follower_append(p, pr.records, pr.high_watermark, pr.log_start_offset)
                    except Exception as e:  # noqa: BLE001
                        log.warning("%s-%d: follower append failed: %s; truncating again", key[0], key[1], e)
                        self.truncating.add(key)
                elif pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.truncating.add(key)
                    errors += 1
                else:
                    errors += 1
        if errors:
            await asyncio.sleep(self.rm.fetch_backoff_ms / 1000.0)
