"""ISR changes through the controller: AlterPartition (56), as ZooKeeper-mode Kafka 3.x (KIP-497, KIP-841).

Leader side (Kafka's ``Partition.sendAlterPartitionRequest`` / ``handleAlterPartitionError`` and
``AlterPartitionManager``):

* A leader that wants to add a caught-up follower to the ISR or drop a lagging one does not write ZooKeeper:
  it records a ``PendingIsr`` on the partition and submits it to its ``AlterPartitionManager``, which batches
  the pending changes of all its partitions into one AlterPartition request to the active controller, one
  request in flight at a time.
* While a change is pending the partition's committed ISR stays as it was; the high watermark is computed over
  the *maximal* ISR (committed ISR plus the proposed members): an expansion counts at once, a shrink only once
  the controller committed it. No second change is proposed while one is pending.
* The answer: success moves the partition to the committed state the controller returned (its ISR and
  partition epoch = the state znode's version); INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED drop the
  proposal; FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
  INVALID_REQUEST and NEW_LEADER_ELECTED keep it pending until the controller's next LeaderAndIsr resets the
  partition; anything else is retried. An answer for a proposal the partition no longer holds (a LeaderAndIsr
  came meanwhile) is dropped. NOT_CONTROLLER, STALE_BROKER_EPOCH and lost connections make the manager send
  the batch again, to the controller the broker's metadata names then.

Controller side (Kafka's ``KafkaController.processAlterPartition``, ZooKeeper mode): ``process`` validates the
broker epoch (the czxid of the broker's registration znode), then per partition the leader epoch and the
partition epoch, writes the state znode with a conditional set, sends UpdateMetadata for the partitions and
answers each with the new leader epoch, ISR and partition epoch.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from . import zkdata as zd

# the controller, the replica manager and its partitions are passed in (typed Any: they import this module)
Controller = Any
ClusterPartition = Any
ClusterReplicaManager = Any

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 2  # topic ids (KIP-841); v0-1 (topic names) are served too
RETRY_BACKOFF_S = 0.1
CONTROLLER_CHECK_S = 0.2  # how often a request in flight looks whether the controller moved
TP = tuple[str, int]

# partition errors after which the proposal stays pending until the next LeaderAndIsr (no retry)
WAIT_FOR_LEADER_AND_ISR = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED,
})
# partition errors that tell the proposal was not applied and the partition epoch is right: drop it
NOT_APPLIED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})


@dataclass(slots=True)
class PendingIsr:
    """An ISR change sent to the controller and not answered yet (Kafka's PendingExpandIsr /
    PendingShrinkIsr)."""

    isr: list[int]
    expand: bool
    leader_epoch: int
    partition_epoch: int
    why: str


@dataclass(slots=True)
class PartitionChange:
    """One partition of an AlterPartition request."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(slots=True)
class PartitionResult:
    """One partition of an AlterPartition answer."""

    error: int
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = -1


# ---------------------------------------------------------------------------------------------- controller
async def process(ctrl: Controller, broker_id: int, broker_epoch: int,
                  changes: list[PartitionChange]) -> tuple[int, dict[TP, PartitionResult]]:
    """The controller's handling of one AlterPartition request, run as a controller event.
    (top-level error, {tp: result})."""
    if not ctrl.active:
        return ErrorCode.NOT_CONTROLLER, {}
    if broker_id not in ctrl.ctx.live:
        log.info("controller: AlterPartition from broker %d, which is not live", broker_id)
        return ErrorCode.STALE_BROKER_EPOCH, {}
    if ctrl.ctx.broker_epochs.get(broker_id) != broker_epoch:
        await ctrl.refresh_broker_epoch(broker_id)  # re-registered since the controller read it
        if ctrl.ctx.broker_epochs.get(broker_id) != broker_epoch:
            log.info("controller: AlterPartition from broker %d with stale broker epoch %d (now %s)",
                     broker_id, broker_epoch, ctrl.ctx.broker_epochs.get(broker_id))
            return ErrorCode.STALE_BROKER_EPOCH, {}
    eligible = {b for b in ctrl.ctx.live if b not in ctrl.ctx.shutting_down}
    results: dict[TP, PartitionResult] = {}
    to_write: list[tuple[TP, zd.LeaderAndIsr]] = []
    for ch in changes:
        tp = (ch.topic, ch.partition)
        st = ctrl.ctx.states.get(tp)
        if st is None or ch.topic not in ctrl.ctx.assignments:
            results[tp] = PartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif ch.partition_epoch > st.zk_version or ch.leader_epoch > st.leader_epoch:
            # the leader knows a newer state than this controller: likely no longer the controller
            results[tp] = PartitionResult(ErrorCode.NOT_CONTROLLER)
        elif ch.leader_epoch < st.leader_epoch:
            results[tp] = PartitionResult(ErrorCode.FENCED_LEADER_EPOCH)
        elif st.leader == broker_id and set(ch.new_isr) == set(st.isr) and ch.leader_recovery_state == 0:
            results[tp] = _result(st)  # already so (a retry): idempotent, before the partition epoch check
        elif ch.partition_epoch < st.zk_version:
            results[tp] = PartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
        elif st.leader != broker_id or ch.leader_recovery_state != 0 or not ch.new_isr:
            results[tp] = PartitionResult(ErrorCode.INVALID_REQUEST)
        elif any(b not in eligible for b in ch.new_isr):
            results[tp] = PartitionResult(ErrorCode.INELIGIBLE_REPLICA)
        else:
            new = zd.LeaderAndIsr(st.leader, st.leader_epoch, list(ch.new_isr), ctrl.ctx.epoch, st.zk_version)
            to_write.append((tp, new))
    written: list[TP] = []
    for tp, new in to_write:
        old_isr = ctrl.ctx.states[tp].isr
        if await ctrl.partitions.write_state(tp, new):
            written.append(tp)
            results[tp] = _result(new)
            ctrl.alter_partition_updates += 1
            log.info("controller: %s-%d ISR %s -> %s (AlterPartition from broker %d, partition epoch %d)",
                     tp[0], tp[1], old_isr, new.isr, broker_id, new.zk_version)
        else:
            log.info("controller: %s-%d ISR change to %s failed: bad zkVersion", tp[0], tp[1], new.isr)
            results[tp] = PartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
    known = [tp for tp in results if tp in ctrl.ctx.states]
    if known:
        ctrl.requests.update_metadata(list(ctrl.ctx.live), known)
    for tp in written:  # a reassignment waits for its target replicas to join the ISR
        await ctrl.maybe_complete_reassignment(tp)
    return ErrorCode.NONE, results


def _result(st: zd.LeaderAndIsr) -> PartitionResult:
    return PartitionResult(ErrorCode.NONE, st.leader, st.leader_epoch, list(st.isr), st.zk_version)


def topic_data(cls: Any, version: int, name: str, topic_id: Any, partitions: list[Any]) -> Any:
    """An AlterPartition request's or response's TopicData: by name (v0-1) or by id (v2+)."""
    td = cls(partitions=partitions)
    if version >= 2:
        td.topic_id = topic_id
    else:
        td.topic_name = name
    return td


def decode_request(req: Any, version: int, topic_names: Any) -> tuple[list[PartitionChange], dict[Any, str]]:
    """The request's partitions (topic ids resolved with ``topic_names(uuid) -> name | None``); unknown topic
    ids are returned apart ({id: ""})."""
    out: list[PartitionChange] = []
    unknown: dict[Any, str] = {}
    for t in req.topics:
        if version >= 2:
            name = topic_names(t.topic_id)
            if name is None:
                unknown[t.topic_id] = ""
                continue
        else:
            name = t.topic_name
        for pd in t.partitions:
            isr = [b.broker_id for b in pd.new_isr_with_epochs] if version >= 3 else list(pd.new_isr)
            out.append(PartitionChange(name, pd.partition_index, pd.leader_epoch, isr, pd.partition_epoch,
                                       pd.leader_recovery_state if version >= 1 else 0))
    return out, unknown


# ---------------------------------------------------------------------------------------------- leader
class AlterPartitionManager:
    """Sends the leader's pending ISR changes to the active controller, batched, one request in flight."""

    def __init__(self, rm: ClusterReplicaManager) -> None:
        self.rm = rm
        self._unsent: dict[TP, tuple[ClusterPartition, PendingIsr, asyncio.Future[PartitionResult]]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None
        self._conn_broker = -1
        self.requests_sent = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition-manager")

    async def close(self) -> None:
        from .channel import stop_task_and_connection

        if self._task is not None:
            await stop_task_and_connection(self._task, self._conn)
        self._conn = None
        for _p, _pending, fut in self._unsent.values():
            if not fut.done():
                fut.cancel()
        self._unsent.clear()

    def submit(self, p: ClusterPartition, pending: PendingIsr) -> asyncio.Future[PartitionResult]:
        fut: asyncio.Future[PartitionResult] = asyncio.get_running_loop().create_future()
        key = (p.topic, p.index)
        if key in self._unsent:  # Kafka: one item per partition
            fut.set_result(PartitionResult(ErrorCode.OPERATION_NOT_ATTEMPTED))
            return fut
        self._unsent[key] = (p, pending, fut)
        self._wake.set()
        return fut

    # ------------------------------------------------------------------------------------------ sending
    async def _run(self) -> None:
        while True:
            if not self._unsent:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch, self._unsent = self._unsent, {}
            try:
                answered = await self._send(batch)
            except asyncio.CancelledError:
                self._unsent.update(batch)
                raise
            except Exception as e:  # noqa: BLE001 - connection lost, controller gone: send again
                log.info("AlterPartition to the controller failed: %s; retrying", e)
                self._drop_connection()
                answered = False
            if not answered:
                for key, item in batch.items():
                    self._unsent.setdefault(key, item)
                await asyncio.sleep(RETRY_BACKOFF_S)

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._conn_broker = -1

    async def _connection(self) -> Any:
        from moldau.client.conn import Connection

        store = self.rm.services.metadata
        cid = store.controller_id()
        if self._conn is not None and self._conn.connected and self._conn_broker == cid:
            return self._conn
        self._drop_connection()
        b = store.live.get(cid)
        name = self.rm.services.cluster.listener_name
        ep = (b.endpoints.get(name) or next(iter(b.endpoints.values()), None)) if b is not None else None
        if ep is None:
            raise ConnectionError(f"no endpoint for the controller ({cid})")
        self._conn = await Connection.open(ep[0], ep[1], client_id=f"alter-partition-{self.rm.node_id}",
                                           request_timeout_ms=30000, connect_timeout_ms=10000)
        self._conn_broker = cid
        return self._conn

    async def _send(self, batch: dict[TP, tuple[ClusterPartition, PendingIsr,
                                                 asyncio.Future[PartitionResult]]]) -> bool:
        """One request for ``batch``; True when the answer was handed to the partitions."""
        live = {k: v for k, v in batch.items() if not v[2].done()}
        if not live:
            return True
        Req = m.AlterPartitionRequest
        by_topic: dict[str, list[Any]] = {}
        ids: dict[str, Any] = {}
        for (topic, idx), (p, pending, _fut) in live.items():
            ids[topic] = p.topic_id
            by_topic.setdefault(topic, []).append(Req.PartitionData(
                partition_index=idx, leader_epoch=pending.leader_epoch, new_isr=list(pending.isr),
                new_isr_with_epochs=[], leader_recovery_state=0, partition_epoch=pending.partition_epoch))
        version = ALTER_PARTITION_VERSION if all(ids.values()) else 1
        topics = [topic_data(Req.TopicData, version, t, ids[t], parts) for t, parts in by_topic.items()]
        cluster = self.rm.services.cluster
        req = Req.new(broker_id=self.rm.node_id, broker_epoch=cluster.broker_epoch, topics=topics)
        conn = await self._connection()
        self.requests_sent += 1
        sent = asyncio.ensure_future(conn.send(56, req, version=version, timeout_ms=30000))
        store = self.rm.services.metadata
        while True:  # as Kafka's controller channel: a new controller in the metadata -> send it there
            done, _ = await asyncio.wait({sent}, timeout=CONTROLLER_CHECK_S)
            if done:
                break
            if store.controller_id() != self._conn_broker:
                sent.cancel()
                log.info("AlterPartition: the controller moved from %d to %d; sending again",
                         self._conn_broker, store.controller_id())
                self._drop_connection()
                return False
        resp = sent.result()
        if resp.error_code in (ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH):
            log.info("AlterPartition: %s from broker %d; retrying", ErrorCode(resp.error_code).name,
                     self._conn_broker)
            if resp.error_code == ErrorCode.NOT_CONTROLLER:
                self._drop_connection()
            return False
        got: dict[TP, PartitionResult] = {}
        names = {ids[t]: t for t in ids}
        for t in resp.topics:
            tname: str | None = names.get(t.topic_id) if version >= 2 else t.topic_name
            if tname is None:
                continue
            for pd in t.partitions:
                got[(tname, pd.partition_index)] = PartitionResult(
                    pd.error_code, pd.leader_id, pd.leader_epoch, list(pd.isr), pd.partition_epoch)
        for key, (_p, _pending, fut) in live.items():
            if fut.done():
                continue
            if resp.error_code:
                fut.set_result(PartitionResult(resp.error_code))
            else:
                fut.set_result(got.get(key, PartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR)))
        return True


async def propose(rm: ClusterReplicaManager, p: ClusterPartition, pending: PendingIsr) -> None:
    """Send ``pending`` (already set as ``p.pending_isr``) until the controller answers for good, then apply
    the answer (Kafka's ``Partition.sendAlterPartitionRequest`` and its callback)."""
    key = f"{p.topic}-{p.index}"
    while True:
        try:
            res = await rm.alter_partition.submit(p, pending)
        except asyncio.CancelledError:
            return
        if p.pending_isr is not pending:
            log.debug("%s: dropping a stale AlterPartition answer", key)
            return
        err = res.error
        if err == ErrorCode.NONE:
            if res.leader_epoch != p.leader_epoch or res.partition_epoch < p.zk_version:
                log.info("%s: ignoring AlterPartition answer (leader epoch %d, partition epoch %d)", key,
                         res.leader_epoch, res.partition_epoch)
                return
            old = p.isr
            p.isr = list(res.isr)
            p.zk_version = res.partition_epoch
            p.pending_isr = None
            log.info("%s: ISR %s -> %s (%s), partition epoch %d", key, old, p.isr, pending.why,
                     p.zk_version)
            metrics = rm.services.metrics
            if metrics is not None and hasattr(metrics, "record_isr_change") and set(old) != set(p.isr):
                metrics.record_isr_change(len(p.isr) > len(old))
            rm.isr_committed(p)
            return
        if err in NOT_APPLIED:
            log.info("%s: ISR change to %s not applied (%s)", key, pending.isr, ErrorCode(err).name)
            p.pending_isr = None
            rm.isr_committed(p)
            return
        if err in WAIT_FOR_LEADER_AND_ISR:
            log.info("%s: ISR change to %s refused (%s); waiting for the controller's LeaderAndIsr", key,
                     pending.isr, ErrorCode(err).name)
            return
        log.info("%s: ISR change to %s failed (%s); retrying", key, pending.isr, ErrorCode(err).name)
        await asyncio.sleep(RETRY_BACKOFF_S)
        if p.pending_isr is not pending:
            return
