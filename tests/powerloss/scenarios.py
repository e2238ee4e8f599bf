"""Power-loss scenarios: brokers whose data dirs are on lazy file systems (:mod:`tests.powerloss.lazyfs`), an
idempotent acks=all producer that remembers every acknowledgement, power losses at chosen moments, restarts
from what survived, and the checker of the fault bench (lost, duplicated, moved, reused records).

* :func:`single_node`: one ``moldau broker`` (no ZooKeeper); each cycle: produce for a while, power loss
  (everything not fsynced is gone; optionally the last unsynced write torn, or some unsynced pages kept),
  kill -9, remount, restart. With ``log.flush.interval.messages=1`` nothing acknowledged may be lost.
* :func:`cluster`: ZooKeeper (its data on the ordinary disk: it is another machine that keeps its power)
  and three brokers, each on its own lazy file system, Kafka's default flush settings (no fsync per
  message), a topic with replication factor 3 and ``min.insync.replicas=2``; each cycle ``victims`` brokers
  lose power at the same moment and restart. One victim: nothing acknowledged may be lost (an in-sync
  replica that kept its power holds every acknowledged record). Two or three: the loss is measured.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.cluster.local import LocalCluster, free_port, moldau_command
from tests.faults.checker import Result, compare_acks
from tests.faults.harness import Proc
from tests.faults.workload import Producers, read_all

from .lazyfs import LazyFSMount

log = logging.getLogger(__name__)

TOPIC = "powerloss"


@dataclass
class PowerLossResult:
    """The checker's result and what each power loss dropped."""

    result: Result
    losses: list[dict[str, Any]] = field(default_factory=list)
    recovered: int = 0  # acknowledged records read back after the last restart
    traceback_logs: list[str] = field(default_factory=list)

    @property
    def acked(self) -> int:
        return self.result.acked

    @property
    def lost(self) -> int:
        return self.result.lost


def _durable_dir(path: Path) -> None:
    """Create ``path`` (on a lazy file system) and make it durable: the test's own set-up survives."""
    path.mkdir(parents=True, exist_ok=True)
    for d in (path, path.parent):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tracebacks(log_path: str) -> list[str]:
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith("Traceback")]


def _finish(out: PowerLossResult, prod: Producers, bootstrap: str, partitions: int, t0: float) -> None:
    prod.stop()
    prod.join(180)
    r = out.result
    r.seconds = time.monotonic() - t0
    r.acked, r.failed = len(prod.acks), len(prod.failed)
    compare_acks(r, prod.acks, read_all(bootstrap, TOPIC, partitions, timeout=180))
    out.recovered = r.acked - r.lost
    if prod.errors:
        r.notes.append(f"producer: {len(prod.errors)} errors, first: {prod.errors[0]}")


def single_node(
    folder: str | Path,
    *,
    cycles: int = 3,
    fsync: bool = True,
    tear: bool = False,
    keep: float = 0.0,
    run_s: float = 3.0,
    rate: float = 150.0,
    partitions: int = 3,
    seed: int = 1,
    during_write: bool = False,
    settings: dict[str, str] | None = None,
) -> PowerLossResult:
    """``during_write``: the power goes during a write picked at random (torn when ``tear``), else at a
    random moment."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fs = LazyFSMount(folder / "disk", folder / "mnt").mount()
    data = folder / "mnt" / "data"
    _durable_dir(data)
    port = free_port()
    cmd = [*moldau_command(), "broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data)]
    if fsync:
        cmd += ["--set", "log.flush.interval.messages=1"]
    for key, value in (settings or {}).items():
        cmd += ["--set", f"{key}={value}"]
    broker = Proc("broker", "127.0.0.1", port, cmd, str(folder / "broker.log"))
    how = ("fsync per message" if fsync else "no per-message fsync") + (", torn write" if tear else "") + (
        ", during a write" if during_write else "") + (
        f", {keep:.0%} of unsynced pages kept" if keep else "")
    out = PowerLossResult(Result(f"single node, {cycles} x power loss, {how}"))
    rng = random.Random(seed)
    t0 = time.monotonic()
    prod: Producers | None = None
    try:
        broker.start()
        broker.wait_listening(60)
        bs = broker.address
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)], operation_timeout=20,
                            request_timeout=30)[TOPIC].result(30)
        prod = Producers(bs, TOPIC, partitions, count=1, rate=rate, message_timeout_ms=180000)
        prod.start()
        for i in range(cycles):
            time.sleep(run_s * rng.uniform(0.6, 1.4))  # the moment of the loss varies
            acked = len(prod.acks)
            loss: dict[str, Any] | None = None
            if during_write:
                fs.arm(rng.randint(1, 300), tear=tear, keep=keep, seed=seed * 1000 + i)
                loss = fs.wait_dead(60)
            if loss is None:
                loss = fs.power_loss(tear=tear, keep=keep, seed=seed * 1000 + i)
            broker.kill()
            out.losses.append({"cycle": i + 1, "acked_before": acked, **loss})
            out.result.faults.append(f"cycle {i + 1}: power loss after {acked} acknowledged: {loss}")
            fs.remount()
            broker.start()
            broker.wait_listening(90)
        time.sleep(run_s)
        _finish(out, prod, bs, partitions, t0)
        out.traceback_logs = _tracebacks(broker.log_path)
        return out
    finally:
        if prod is not None and prod.is_alive():
            prod.stop()
        gc.collect()
        broker.kill()
        fs.unmount()


def cluster(
    folder: str | Path,
    *,
    victims: int = 1,
    cycles: int = 1,
    run_s: float = 6.0,
    rate: float = 150.0,
    partitions: int = 3,
    settle_s: float = 4.0,
    seed: int = 1,
    tear: bool = False,
    keep: float = 0.0,
) -> PowerLossResult:
    """``victims`` brokers lose power at once, ``cycles`` times (the victims picked at random); ``tear`` and
    ``keep`` as for :meth:`LazyFSMount.power_loss` (a victim may come back with records the others never
    had: unsynced pages kept, out of order)."""
    folder = Path(folder)
    configs = [
        "zookeeper.session.timeout.ms=6000",
        "replica.lag.time.max.ms=3000",
        "replica.fetch.wait.max.ms=200",
        "offsets.topic.num.partitions=3",
        "transaction.state.log.num.partitions=3",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
        "transaction.state.log.min.isr=2",
    ]
    c = LocalCluster(str(folder / "cluster"), 3, broker_configs=configs)
    mounts: dict[int, LazyFSMount] = {}
    name = f"3 brokers, {victims} losing power at once, {cycles} x, no fsync per message" + (
        ", torn write" if tear else "") + (f", {keep:.0%} of unsynced pages kept" if keep else "")
    out = PowerLossResult(Result(name))
    rng = random.Random(seed)
    t0 = time.monotonic()
    prod: Producers | None = None
    try:
        for b in c.brokers:
            fs = LazyFSMount(folder / f"disk-{b.node_id}", folder / f"mnt-{b.node_id}").mount()
            mounts[b.node_id] = fs
            b.data_dir = str(folder / f"mnt-{b.node_id}" / "data")
            _durable_dir(Path(b.data_dir))
        c.start()
        bs = c.bootstrap
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 2})
        _wait(lambda: _formed(admin), 60, "the cluster to form (3 brokers, a controller)")
        admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=30, request_timeout=40)[TOPIC].result(40)
        _wait_isr(admin, partitions, 3, 60)
        prod = Producers(bs, TOPIC, partitions, count=1, rate=rate, message_timeout_ms=180000)
        prod.start()
        for i in range(cycles):
            time.sleep(run_s * rng.uniform(0.7, 1.3))
            acked = len(prod.acks)
            chosen = rng.sample([b.node_id for b in c.brokers], victims)
            losses = {n: mounts[n].power_loss(tear=tear, keep=keep, seed=seed * 1000 + i * 10 + n)
                      for n in chosen}
            for n in chosen:
                c.broker(n).kill()
            out.losses.append({"cycle": i + 1, "acked_before": acked, "brokers": chosen, **{
                f"broker {n}": v for n, v in losses.items()}})
            out.result.faults.append(f"cycle {i + 1}: brokers {chosen} lost power after {acked} acknowledged")
            time.sleep(settle_s)  # the survivors notice (sessions expire, ISRs shrink)
            for n in chosen:
                mounts[n].remount()
                c.broker(n).start()
            for n in chosen:
                c.broker(n).wait_listening(90)
            _wait_isr(admin, partitions, 3, 120)
        time.sleep(run_s / 2)
        _finish(out, prod, bs, partitions, t0)
        for b in c.brokers:
            out.traceback_logs += _tracebacks(b.log_path)
        return out
    finally:
        if prod is not None and prod.is_alive():
            prod.stop()
        gc.collect()
        c.stop(graceful=False)
        for fs in mounts.values():
            fs.unmount()


def _formed(admin: AdminClient) -> bool:
    md = admin.list_topics(timeout=5)
    return len(md.brokers) == 3 and md.controller_id > 0


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except Exception as e:  # noqa: BLE001  (a broker still starting: ask again)
            last = e
        time.sleep(0.3)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} ({last})")


def _wait_isr(admin: AdminClient, partitions: int, size: int, timeout: float) -> None:
    """Every partition of the topic has a leader and ``size`` in-sync replicas."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(TOPIC, timeout=10)
            parts = md.topics[TOPIC].partitions
            last = {p: (m.leader, list(m.isrs)) for p, m in parts.items()}
            full = all(m.leader >= 0 and len(m.isrs) == size for m in parts.values())
            if len(parts) == partitions and full:
                return
        except Exception as e:  # noqa: BLE001  (a broker still starting: ask again)
            last = e
        time.sleep(0.5)
    raise RuntimeError(f"{TOPIC}: in-sync replicas not {size} within {timeout:.0f} s: {last}")


# every file a single node writes while it serves, and what makes it write one
_NEEDS_TOPIC = ("leader-epoch-checkpoint", "partition.metadata", "__moldau_metadata.json")
# the log cleaner's files (a compacted topic written with keys): a write to a .cleaned file; the second
# operation on a .swap name (after the commit rename, before or during the swap's completion)
CLEANER_KINDS = (".cleaned", ".swap")
FILE_KINDS = (
    ".log", ".index", ".timeindex", ".txnindex", ".snapshot", "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint", *_NEEDS_TOPIC, *CLEANER_KINDS,
)
COMPACT_TOPIC = "powerloss-compact"


class KeyedWriter(threading.Thread):
    """acks=all writes of ``keys`` keys in turn to a compacted topic; remembers, per key, the values sent in
    order and the last acknowledged one."""

    def __init__(self, bootstrap: str, keys: int = 20) -> None:
        super().__init__(name="keyed-writer", daemon=True)
        self.bootstrap, self.keys = bootstrap, keys
        self.sent: dict[bytes, list[bytes]] = {}
        self.acked: dict[bytes, bytes] = {}
        self.stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 120000, "log_level": 2, "linger.ms": 5})
        i = 0
        while not self.stop_event.is_set():
            key, value = b"k%d" % (i % self.keys), b"c%d" % i
            self.sent.setdefault(key, []).append(value)
            try:
                p.produce(COMPACT_TOPIC, key=key, value=value + b"-" + b"y" * 100, on_delivery=self._acked)
            except BufferError:
                p.poll(0.5)
            p.poll(0)
            i += 1
            time.sleep(0.01)
        p.flush(150)

    def _acked(self, err: Any, msg: Any) -> None:
        if err is None:
            with self._lock:
                key, value = msg.key(), msg.value().split(b"-")[0]
                order = self.sent[key]
                if key not in self.acked or order.index(value) > order.index(self.acked[key]):
                    self.acked[key] = value

    def check(self, r: Result) -> None:
        """The value of each key at the end: its last acknowledged one or one sent after it."""
        final: dict[bytes, bytes] = {}
        for recs in read_all(self.bootstrap, COMPACT_TOPIC, 1, timeout=120).values():
            for _off, v in recs:
                final_key = b"k%d" % (int(v.split(b"-")[0][1:]) % self.keys)
                final[final_key] = v.split(b"-")[0]
        r.notes.append(f"compacted topic: {sum(len(v) for v in self.sent.values())} keyed records sent, "
                       f"{len(self.acked)} keys acknowledged")
        for key, value in self.acked.items():
            order = self.sent[key]
            got = final.get(key)
            if got is None or order.index(got) < order.index(value):
                r.lost += 1
                r.example("lost", f"key {key.decode()}: acknowledged {value.decode()}, holds {got!r}")


def file_kinds(
    folder: str | Path,
    kinds: tuple[str, ...] = FILE_KINDS,
    *,
    rate: float = 150.0,
    partitions: int = 3,
    seed: int = 1,
    wait_s: float = 30.0,
) -> PowerLossResult:
    """One broker with an fsync per message, small segments and checkpoints every second, an idempotent
    producer and a transactional one (every other transaction aborted); for each kind of file in turn the
    power goes during a write to such a file (torn), and the broker restarts from what survived. At the end:
    every acknowledged record at its offset, every committed transaction's records there and no aborted one
    read_committed."""
    from tests.faults.workload import Transactions

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fs = LazyFSMount(folder / "disk", folder / "mnt").mount()
    data = folder / "mnt" / "data"
    _durable_dir(data)
    port = free_port()
    cmd = [*moldau_command(), "broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data)]
    for kv in ("log.flush.interval.messages=1", "log.segment.bytes=16384",
               "log.flush.offset.checkpoint.interval.ms=1000",
               "log.flush.start.offset.checkpoint.interval.ms=1000"):
        cmd += ["--set", kv]
    if any(k in CLEANER_KINDS for k in kinds):
        cmd += ["--set", "log.cleaner.backoff.ms=200"]
    broker = Proc("broker", "127.0.0.1", port, cmd, str(folder / "broker.log"))
    name = f"single node, power lost during a write of each of {len(kinds)} file kinds"
    out = PowerLossResult(Result(name))
    t0 = time.monotonic()
    prod: Producers | None = None
    txn: Transactions | None = None
    keyed: KeyedWriter | None = None
    try:
        broker.start()
        broker.wait_listening(60)
        bs = broker.address
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, partitions, 1), NewTopic("powerloss-txn", partitions, 1)],
                            operation_timeout=20, request_timeout=30)[TOPIC].result(30)
        prod = Producers(bs, TOPIC, partitions, count=1, rate=rate, message_timeout_ms=180000)
        txn = Transactions(bs, "powerloss-txn", partitions, pause=0.1)
        if any(k in CLEANER_KINDS for k in kinds):
            compact_cfg = {"cleanup.policy": "compact",
                           "min.cleanable.dirty.ratio": "0.01"}
            admin.create_topics([NewTopic(COMPACT_TOPIC, 1, 1, config=compact_cfg)], operation_timeout=20,
                                request_timeout=30)[COMPACT_TOPIC].result(30)
            keyed = KeyedWriter(bs)
            keyed.start()
        prod.start()
        txn.start()
        time.sleep(2)
        for i, kind in enumerate(kinds):
            acked = len(prod.acks)
            if kind == ".swap":
                fs.arm(ops=2, match=kind, tear=True, seed=seed * 1000 + i)
            else:
                fs.arm(1, match=kind, tear=True, seed=seed * 1000 + i)
            if kind in _NEEDS_TOPIC:  # a new topic, and a record in it (its first leader epoch entry)
                try:
                    admin.create_topics([NewTopic(f"extra-{i}", 1, 1)], operation_timeout=20,
                                        request_timeout=30)[f"extra-{i}"].result(30)
                    one = Producer({"bootstrap.servers": bs, "log_level": 2, "message.timeout.ms": 10000})
                    one.produce(f"extra-{i}", value=b"x")
                    one.flush(15)
                except KafkaException as e:  # the power went while the topic was made
                    out.result.notes.append(f"{kind}: {e}")
            loss = fs.wait_dead(wait_s)
            if loss is None:
                fs.disarm()
                out.losses.append({"kind": kind, "written": False})
                out.result.notes.append(f"{kind}: not written within {wait_s:.0f} s")
                continue
            broker.kill()
            out.losses.append({"kind": kind, "written": True, "acked_before": acked, **loss})
            out.result.faults.append(f"power loss during a write to {loss.get('during_write_to')}")
            fs.remount()
            broker.start()
            broker.wait_listening(90)
            time.sleep(1)
        txn.stop()
        txn.join(120)
        _finish(out, prod, bs, partitions, t0)
        if keyed is not None:
            keyed.stop_event.set()
            keyed.join(180)
            keyed.check(out.result)
        r = out.result
        r.txn_committed, r.txn_aborted = len(txn.committed), len(txn.aborted)
        txn_log = read_all(bs, "powerloss-txn", partitions, committed=True)
        seen = {v for recs in txn_log.values() for _, v in recs}
        for v in sorted(seen & txn.aborted):
            r.aborted_read += 1
            r.example("aborted_read", v.decode())
        for v in sorted(txn.committed - seen):
            r.txn_lost += 1
            r.example("txn_lost", v.decode())
        out.traceback_logs = _tracebacks(broker.log_path)
        return out
    finally:
        for w in (prod, txn):
            if w is not None and w.is_alive():
                w.stop()
        if keyed is not None:
            keyed.stop_event.set()
        gc.collect()
        broker.kill()
        fs.unmount()
