"""The bench's workloads, each a thread in the test process talking to the cluster through the bridge, each
recording what it was told so the checker can compare it with what the cluster holds at the end:

* :class:`Producers` - idempotent producers, ``acks=all``, values ``w<producer>-<seq>`` sent to partition
  ``seq % partitions`` at a bounded rate; every acknowledgement (partition, offset) and every failure is kept.
* :class:`GroupConsumer` - a consumer group member (plain, read_uncommitted) reading the produced topic; every
  (partition, offset, value) it saw, and the group's committed offsets as it commits them.
* :class:`OffsetWatch` - reads a group's committed offsets from the broker once a second (must never go back).
* :class:`Transactions` - a transactional producer writing batches ``a<n>-<k>`` to the output topic,
  committing even-numbered transactions and aborting odd ones on purpose; the outcome of each is kept.
* :class:`Processor` - consume-transform-produce with transactions: reads the produced topic (read_committed),
  writes ``x:<value>`` to the output topic and commits its offsets in the same transaction.
* :class:`CommittedReader` - a read_committed reader of the output topic during the run.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

log = logging.getLogger(__name__)


def _quiet() -> dict[str, Any]:
    return {"log_level": 2}


class Worker(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:
            log.exception("%s failed", self.name)
            self.failure = e

    def work(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stop_event.set()

    def note(self, err: object) -> None:
        if len(self.errors) < 200:
            self.errors.append(f"{time.strftime('%H:%M:%S')} {err}")


@dataclass(slots=True)
class Ack:
    value: bytes
    partition: int
    offset: int
    sent: float
    acked: float


class Producers(Worker):
    """``count`` idempotent acks=all producers at ``rate`` records/s each (together, one thread)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        count: int = 2,
        rate: float = 100.0,
        message_timeout_ms: int = 60000,
    ) -> None:
        super().__init__("producers")
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.count, self.rate, self.message_timeout_ms = count, rate, message_timeout_ms
        self.acks: list[Ack] = []
        self.failed: list[tuple[bytes, float, str]] = []
        self.sent = 0
        self.started = 0.0
        self.finished = 0.0
        self._lock = threading.Lock()

    def work(self) -> None:
        ps = [self._producer() for _ in range(self.count)]
        seq = [0] * self.count
        self.started = time.monotonic()
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stop_event.is_set():
            for w, p in enumerate(ps):
                v = b"w%d-%d" % (w, seq[w])
                part = seq[w] % self.partitions
                seq[w] += 1
                sent = time.monotonic()
                try:
                    try:
                        p.produce(
                            self.topic,
                            value=v,
                            partition=part,
                            on_delivery=functools.partial(self._on_delivery, v, sent),
                        )
                        self.sent += 1
                    except BufferError:
                        p.poll(0.5)
                    p.poll(0)
                except KafkaException as e:
                    # a fatal idempotence error (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER after an unclean election
                    # lost the producer's state): what is in flight is not acknowledged, a new one goes on
                    self.note(e)
                    ps[w] = p = self._producer()
            nxt += interval
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()
        self.finished = time.monotonic()
        for p in ps:
            try:
                left = p.flush(self.message_timeout_ms / 1000 + 10)
            except KafkaException as e:
                self.note(e)
                continue
            if left:
                self.note(f"{left} records still undelivered after flush")

    def _producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": self.message_timeout_ms,
                "linger.ms": 5,
                "socket.timeout.ms": 10000,
                "metadata.max.age.ms": 5000,
                **_quiet(),
            }
        )

    def _on_delivery(self, value: bytes, sent: float, err: Any, msg: Any) -> None:
        now = time.monotonic()
        with self._lock:
            if err is None:
                self.acks.append(Ack(value, msg.partition(), msg.offset(), sent, now))
            else:
                self.failed.append((value, now, str(err)))
                self.note(err)


class GroupConsumer(Worker):
    """A member of ``group`` reading ``topic``; commits synchronously after each poll."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(f"group-{group}")
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.seen: dict[tuple[int, int], bytes] = {}
        self.conflicts: list[tuple[int, int, bytes, bytes]] = []  # an offset read twice with different values

    def work(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        c.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                msgs = c.consume(200, 0.5)
                got = False
                for m in msgs:
                    if m.error() is not None:
                        self.note(m.error())
                        continue
                    got = True
                    part, off, value = record(m)
                    old = self.seen.get((part, off))
                    if old is not None and old != value:
                        self.conflicts.append((part, off, old, value))
                    self.seen[(part, off)] = value
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException as e:
                        self.note(e)
        finally:
            c.close()


class OffsetWatch(Worker):
    """The committed offsets of ``group`` on ``topic`` once a second; ``backwards`` lists every decrease."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, group: str) -> None:
        super().__init__(f"offsets-{group}")
        self.bootstrap, self.topic, self.partitions, self.group = bootstrap, topic, partitions, group
        self.last: dict[int, int] = {}
        self.backwards: list[tuple[int, int, int]] = []
        self.samples = 0

    def work(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        try:
            while not self.stop_event.wait(1.0):
                self.sample(c)
            self.sample(c)
        finally:
            c.close()

    def sample(self, c: Consumer) -> None:
        try:
            tps = c.committed([TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=10)
        except KafkaException as e:
            self.note(e)
            return
        self.samples += 1
        for tp in tps:
            if tp.error is not None or tp.offset < 0:
                continue
            prev = self.last.get(tp.partition)
            if prev is not None and tp.offset < prev:
                self.backwards.append((tp.partition, prev, tp.offset))
            self.last[tp.partition] = max(prev or 0, tp.offset)


class Transactions(Worker):
    """Transactions of ``size`` records; even ones committed, odd ones aborted on purpose."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, *, size: int = 5, pause: float = 0.2
    ) -> None:
        super().__init__("transactions")
        self.bootstrap, self.topic, self.partitions, self.size, self.pause = (
            bootstrap,
            topic,
            partitions,
            size,
            pause,
        )
        self.committed: set[bytes] = set()
        self.aborted: set[bytes] = set()
        self.unknown: set[bytes] = set()  # a commit that failed without a clear outcome

    def _producer(self) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": "bench-txn",
                "transaction.timeout.ms": 20000,
                "message.timeout.ms": 20000,
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        p.init_transactions(60)
        return p

    def work(self) -> None:
        p: Producer | None = None
        n = 0
        while not self.stop_event.is_set():
            if p is None:
                try:
                    p = self._producer()
                except KafkaException as e:
                    self.note(e)
                    time.sleep(1)
                    continue
            values = [b"a%d-%d" % (n, k) for k in range(self.size)]
            commit = n % 2 == 0
            n += 1
            try:
                p.begin_transaction()
                for k, v in enumerate(values):
                    p.produce(self.topic, value=v, partition=k % self.partitions)
                if commit:
                    p.commit_transaction(30)
                    self.committed.update(values)
                else:
                    p.flush(30)  # the records are written before the abort: an aborted read is possible
                    p.abort_transaction(30)
                    self.aborted.update(values)
            except KafkaException as e:
                self.note(e)
                outcome = self.aborted if not commit else self.unknown
                try:
                    p.abort_transaction(30)
                    outcome = self.aborted
                except KafkaException as e2:
                    self.note(e2)
                    p = None
                outcome.update(values)
            self.stop_event.wait(self.pause)


class Processor(Worker):
    """Consume-transform-produce: ``source`` (read_committed) -> ``x:<value>`` in ``sink``, exactly once."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str = "bench-ctp") -> None:
        super().__init__("processor")
        self.bootstrap, self.source, self.sink, self.group = bootstrap, source, sink, group
        self.commits = 0
        self.restarts = 0

    def work(self) -> None:
        while not self.stop_event.is_set():
            try:
                self._session()
            except KafkaException as e:
                self.note(e)
                self.restarts += 1
                self.stop_event.wait(1.0)

    def _session(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": "bench-ctp",
                "transaction.timeout.ms": 20000,
                "message.timeout.ms": 20000,
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        try:
            p.init_transactions(60)
            c.subscribe([self.source])
            while not self.stop_event.is_set():
                msgs = [m for m in c.consume(200, 0.5) if m.error() is None]
                if not msgs:
                    continue
                p.begin_transaction()
                for m in msgs:
                    part, _off, value = record(m)
                    p.produce(self.sink, value=b"x:" + value, partition=part)
                try:
                    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
                    p.commit_transaction(30)
                    self.commits += 1
                except KafkaException as e:
                    # whatever the error: abort, and start again from the committed offsets with a new session
                    self.note(e)
                    try:
                        p.abort_transaction(30)
                    except KafkaException as e2:
                        self.note(e2)
                    raise
        finally:
            c.close()


class CommittedReader(Worker):
    """Reads ``topic`` read_committed from the start during the run; every value it saw."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__("reader")
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.seen: set[bytes] = set()

    def work(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "bench-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "socket.timeout.ms": 10000,
                **_quiet(),
            }
        )
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self.stop_event.is_set():
                for m in c.consume(500, 0.5):
                    if m.error() is None:
                        self.seen.add(record(m)[2])
        finally:
            c.close()


def record(m: Any) -> tuple[int, int, bytes]:
    """(partition, offset, value) of a consumed message (the bench writes no null values)."""
    part, off, value = m.partition(), m.offset(), m.value()
    assert part is not None and off is not None and value is not None
    return part, off, value


def read_all(
    bootstrap: str, topic: str, partitions: int, *, committed: bool = False, timeout: float = 120.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every (offset, value) of every partition up to its high watermark (or last stable offset)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "socket.timeout.ms": 10000,
            **_quiet(),
        }
    )
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {}
        for p in range(partitions):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            ends[p] = high
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error() is not None:
                    continue
                part, off, value = record(m)
                out[part].append((off, value))
                pos[part] = off + 1
            if committed:  # control records and aborted data leave gaps: ask where the reader stands
                for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]):
                    if tp.offset >= 0:
                        pos[tp.partition] = max(pos[tp.partition], tp.offset)
        missing = {p: (pos[p], ends[p]) for p in pos if pos[p] < ends[p]}
        if missing:
            raise RuntimeError(f"{topic}: could not read to the end within {timeout:.0f} s: {missing}")
    finally:
        c.close()
    return out


@dataclass(slots=True)
class Workloads:
    producers: Producers
    group: GroupConsumer
    offsets: OffsetWatch
    transactions: Transactions
    processor: Processor
    reader: CommittedReader
    extra: dict[str, Any] = field(default_factory=dict)

    def all(self) -> list[Worker]:
        return [self.producers, self.group, self.offsets, self.transactions, self.processor, self.reader]

    def start(self) -> None:
        for w in self.all():
            w.start()

    def stop(self, timeout: float = 120.0) -> None:
        for w in self.all():
            w.stop()
        deadline = time.monotonic() + timeout
        for w in self.all():
            w.join(max(1.0, deadline - time.monotonic()))
