"""Transactions against a real broker process: transactional producers (confluent-kafka, kafka-python,
aiokafka, moldau), read_committed / read_uncommitted consumers of every client, exactly-once
consume-transform-produce with kill -9 of the worker, zombie fencing, broker crashes in the middle of a
transaction, and the last stable offset / aborted-transaction list at the protocol level."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness.kafkautil import committed_after_restart, create_topic, unique_topic

pytestmark = pytest.mark.moldau_only("transactions need moldau's transaction coordinator")

# abort timed-out transactions every 200 ms (Kafka: 10 s), so timeout tests stay short
TXN_SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def txn_broker(module_broker_factory):
    return module_broker_factory(settings=TXN_SETTINGS)


def _txid(prefix: str = "tx") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# The tests fence, time out and kill -9 transactional producers on purpose: their fatal errors and reconnect
# attempts go to logging (captured by pytest) instead of librdkafka's stderr.
_TXN_LOG = {"logger": logging.getLogger("test_transactions.producer")}


def txn_producer(bootstrap: str, txid: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid, "linger.ms": 2,
                  "retry.backoff.ms": 50, **_TXN_LOG, **conf})
    p.init_transactions(20)
    return p


def run_txn(p: Producer, topic: str, values: list[bytes], *, commit: bool, partitions: int = 1) -> list[Any]:
    """One transaction: produce ``values`` round robin over the partitions, flush, commit or abort.
    Returns the delivered messages (offsets known)."""
    delivered: list[Any] = []
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions,
                  on_delivery=lambda err, msg: delivered.append(msg) if err is None else None)
    assert p.flush(20) == 0
    if commit:
        p.commit_transaction(20)
    else:
        p.abort_transaction(20)
    return delivered


# ------------------------------------------------------------------------------------------------ readers


def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 20.0
                   ) -> list[tuple[int, int, bytes]]:
    """Everything readable up to the end (partition EOF: the LSO for read_committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-" + uuid.uuid4().hex[:8],
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[tuple[int, int, bytes]] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"no EOF on {set(range(partitions)) - eof}"
            for m in c.consume(1000, 0.1):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise KafkaException(m.error())
                eof.discard(m.partition())
                out.append((m.partition(), m.offset(), m.value()))
        return out
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
                      timeout: float = 20.0) -> list[tuple[int, int, bytes]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100, request_timeout_ms=15000)
    try:
        tps = [KTP(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                out.extend((m.partition, m.offset, m.value) for m in msgs)
        for _ in range(3):  # nothing more may come
            for msgs in c.poll(timeout_ms=150).values():
                out.extend((m.partition, m.offset, m.value) for m in msgs)
        return out
    finally:
        c.close(autocommit=False)


def read_aiokafka(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
                  timeout: float = 20.0) -> list[tuple[int, int, bytes]]:
    async def go() -> list[tuple[int, int, bytes]]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, request_timeout_ms=15000)
        await c.start()
        try:
            tps = [ATP(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    out.extend((m.partition, m.offset, m.value) for m in msgs)
            for _ in range(3):
                for msgs in (await c.getmany(timeout_ms=150)).values():
                    out.extend((m.partition, m.offset, m.value) for m in msgs)
            return out
        finally:
            await c.stop()

    return asyncio.run(go())


def read_moldau(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
                timeout: float = 20.0) -> list[tuple[int, int, bytes]]:
    from moldau.client import Consumer as MConsumer
    from moldau.client import TopicPartition as MTP

    c = MConsumer(config={"bootstrap.servers": bootstrap, "isolation.level": isolation,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "fetch.max.wait.ms": 100})
    try:
        c.assign([MTP(topic, p) for p in range(partitions)])
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.poll(0.2):
                out.append((m.partition, m.offset, m.value))
        for _ in range(3):
            for m in c.poll(0.15):
                out.append((m.partition, m.offset, m.value))
        return out
    finally:
        c.close()


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _p, _o, v in records)


# EndTxn's answer: moldau answers once the markers and the Complete record are written
# (docs/transactions.md), Apache Kafka once the decision (PrepareCommit / PrepareAbort) is in its transaction
# log, writing the markers after (TransactionCoordinator.endTransaction: "we can respond to the client
# immediately and continue to write the txn markers"). What the markers decide (the last stable offset, the
# offsets committed in the transaction) shows at once on moldau and a moment later on Kafka, whose clients
# see UNSTABLE_OFFSET_COMMIT or a last stable offset below the end meanwhile. A test that reads it right
# after the end waits on Kafka only.
MARKERS_AFTER_END_TXN_S = 15.0


def after_end_txn(kind: str, check: Callable[[], bool]) -> bool:
    """Whether ``check()`` holds after a transaction ended: at once on moldau, within seconds on Kafka."""
    deadline = time.monotonic() + (MARKERS_AFTER_END_TXN_S if kind == "kafka" else 0.0)
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _stable(bs: str, topic: str, partition: int) -> bool:
    """No transaction open on the partition any more: its last stable offset is its high watermark."""
    lso, hw = _lso_and_hw(bs, topic, partition)
    return lso == hw


# ------------------------------------------------------------------------------------------------ tests


def test_commit_and_abort_seen_by_every_read_committed_client(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-mixed"), 3)
    p = txn_producer(bs, _txid())
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for t in range(6):
        vals = [f"t{t}-r{i}".encode() for i in range(7)]
        commit = t % 3 != 1
        run_txn(p, topic, vals, commit=commit, partitions=3)
        (committed if commit else aborted).extend(vals)
    # a non-transactional producer in between: always visible
    plain = Producer({"bootstrap.servers": bs})
    for i in range(4):
        plain.produce(topic, value=f"plain-{i}".encode(), partition=i % 3)
    assert plain.flush(10) == 0
    visible = sorted(committed + [f"plain-{i}".encode() for i in range(4)])
    everything = sorted(visible + aborted)
    p.flush(5)

    assert values(read_confluent(bs, topic, 3, "read_committed")) == visible
    assert values(read_confluent(bs, topic, 3, "read_uncommitted")) == everything
    assert values(read_kafka_python(bs, topic, 3, "read_committed", len(visible))) == visible
    assert values(read_kafka_python(bs, topic, 3, "read_uncommitted", len(everything))) == everything
    assert values(read_aiokafka(bs, topic, 3, "read_committed", len(visible))) == visible
    assert values(read_aiokafka(bs, topic, 3, "read_uncommitted", len(everything))) == everything


def test_zombie_producer_is_fenced(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-zombie"), 1)
    txid = _txid("zombie")
    old = txn_producer(bs, txid)
    old.begin_transaction()
    old.produce(topic, value=b"zombie-1")
    assert old.flush(10) == 0
    new = txn_producer(bs, txid)  # fences the old producer, aborts its open transaction
    with pytest.raises(KafkaException) as info:
        old.produce(topic, value=b"zombie-2")
        old.flush(10)
        old.commit_transaction(10)
    err = info.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    run_txn(new, topic, [b"new-1"], commit=True)
    assert values(read_confluent(bs, topic, 1, "read_committed")) == [b"new-1"]
    assert b"zombie-1" in values(read_confluent(bs, topic, 1, "read_uncommitted"))


def test_transaction_timeout_aborts_and_fences(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-timeout"), 1)
    p = txn_producer(bs, _txid("slow"), **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, value=b"late")
    assert p.flush(10) == 0
    # the open transaction holds the last stable offset back
    assert read_confluent(bs, topic, 1, "read_committed") == []
    time.sleep(2.5)
    # the coordinator aborted it: read_committed consumers are no longer held back
    assert read_confluent(bs, topic, 1, "read_uncommitted")[0][2] == b"late"
    lo, hi = _lso_and_hw(bs, topic, 0)
    assert lo == hi
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_invalid_transaction_timeout_is_refused(txn_broker):
    p = Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": _txid("big"),
                  "transaction.timeout.ms": 900001, **_TXN_LOG})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(10)
    assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


# ------------------------------------------------------------------------------------------------ protocol


def _lso_and_hw(bs: str, topic: str, partition: int) -> tuple[int, int]:
    """(ListOffsets latest read_committed, ListOffsets latest read_uncommitted) via kafka-python's
    protocol."""
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    from harness.rawkafka import RawConnection

    out = []
    with RawConnection.to_leader(bs, topic, partition) as conn:
        for iso in (1, 0):
            T = ListOffsetsRequest.ListOffsetsTopic
            req = ListOffsetsRequest(replica_id=-1, isolation_level=iso, topics=[
                T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                                                 current_leader_epoch=-1)])])
            resp = conn.call(req, ListOffsetsResponse, 7)
            pr = resp.topics[0].partitions[0]
            assert pr.error_code == 0
            out.append(pr.offset)
    return out[0], out[1]


def _fetch_committed(bs: str, topic: str, partition: int, offset: int = 0, isolation: int = 1) -> Any:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    from harness.rawkafka import RawConnection

    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=isolation,
                       session_id=0, session_epoch=-1,
                       topics=[T(topic=topic, partitions=[P(partition=partition, current_leader_epoch=-1,
                                                            fetch_offset=offset, log_start_offset=-1,
                                                            partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    with RawConnection.to_leader(bs, topic, partition) as conn:
        resp = conn.call(req, FetchResponse, 11)
    return resp.responses[0].partitions[0]


def test_lso_and_aborted_transactions_at_the_protocol_level(txn_broker, kind):
    """Mixed non-transactional, committed, aborted and open transactional batches on one partition."""
    from moldau.protocol.records import split_batches

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-lso"), 1)
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    plain.produce(topic, value=b"p0")
    plain.produce(topic, value=b"p1")
    assert plain.flush(10) == 0
    a = txn_producer(bs, _txid("A"))
    b = txn_producer(bs, _txid("B"))
    run_txn(a, topic, [b"a0", b"a1"], commit=True)          # committed
    aborted_msgs = run_txn(b, topic, [b"b0", b"b1", b"b2"], commit=False)  # aborted
    first_aborted = min(m.offset() for m in aborted_msgs)
    # both markers written (on Kafka a moment after EndTxn's answer) before p2, which must follow them
    assert after_end_txn(kind, lambda: _stable(bs, topic, 0))
    plain.produce(topic, value=b"p2")
    assert plain.flush(10) == 0
    # an open transaction: the last stable offset stops at its first record
    c = txn_producer(bs, _txid("C"))
    c.begin_transaction()
    delivered: list[Any] = []
    c.produce(topic, value=b"c0", on_delivery=lambda e, m: delivered.append(m))
    assert c.flush(10) == 0
    first_open = delivered[0].offset()
    plain.produce(topic, value=b"p3")
    assert plain.flush(10) == 0

    lso, hw = _lso_and_hw(bs, topic, 0)
    assert lso == first_open and hw > lso
    pd = _fetch_committed(bs, topic, 0)
    assert pd.error_code == 0 and pd.high_watermark == hw and pd.last_stable_offset == lso
    b_pid = _producer_id_of(pd.records, b"b0")
    assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions] == [(b_pid, first_aborted)]
    # nothing at or past the LSO is returned to read_committed
    assert max(h.last_offset for _pos, h in split_batches(bytes(pd.records))) < lso
    # read_uncommitted: no aborted list, data up to the high watermark
    pu = _fetch_committed(bs, topic, 0, isolation=0)
    assert pu.aborted_transactions is None
    assert max(h.last_offset for _pos, h in split_batches(bytes(pu.records))) == hw - 1
    # from an offset after the aborted transaction's marker: not listed any more
    pd2 = _fetch_committed(bs, topic, 0, offset=first_open - 1)
    assert not pd2.aborted_transactions
    # the transaction ends: the LSO catches up
    c.commit_transaction(10)
    assert after_end_txn(kind, lambda: _stable(bs, topic, 0))
    got = values(read_confluent(bs, topic, 1, "read_committed"))
    assert got == sorted([b"p0", b"p1", b"a0", b"a1", b"p2", b"c0", b"p3"])


def _producer_id_of(records: Any, value: bytes) -> int:
    from moldau.protocol.records import decode_batch, split_batches

    buf = bytes(records)
    for pos, h in split_batches(buf):
        if not h.is_control and any(r.value == value for r in decode_batch(buf, pos, header=h)):
            return h.producer_id
    raise AssertionError(f"{value!r} not found")


def test_describe_list_transactions_and_producers(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-describe"), 2)
    txid = _txid("desc")
    p = txn_producer(bs, txid)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    assert p.flush(10) == 0

    from kafka.protocol.admin import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )

    from harness.rawkafka import RawConnection, RawRouter, broker_addresses

    with RawRouter(bs) as route:
        # "no-such-id" asked of the coordinator it would have (NOT_COORDINATOR from any other broker)
        d = route.txn(txid).call(DescribeTransactionsRequest(transactional_ids=[txid]),
                                 DescribeTransactionsResponse, 0)
        (st,) = d.transaction_states
        assert st.error_code == 0 and st.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in st.topics] == [(topic, [1])]
        d = route.txn("no-such-id").call(DescribeTransactionsRequest(transactional_ids=["no-such-id"]),
                                         DescribeTransactionsResponse, 0)
        assert d.transaction_states[0].error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
        # ListTransactions answers for the coordinators of one broker: asked of every broker (as Kafka's
        # admin client does), the open transaction is listed by exactly one
        listed = []
        for address in broker_addresses(bs):
            with RawConnection.to(address) as conn:
                lst = conn.call(ListTransactionsRequest(state_filters=["Ongoing", "Nope"],
                                                        producer_id_filters=[], duration_filter=-1,
                                                        transactional_id_pattern=None),
                                ListTransactionsResponse, 1)
            assert lst.error_code == 0 and list(lst.unknown_state_filters) == ["Nope"]
            listed += [t.transactional_id for t in lst.transaction_states]
        assert listed.count(txid) == 1
        T = DescribeProducersRequest.TopicRequest
        p0, p1 = (
            route.leader(topic, i).call(
                DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[i])]),
                DescribeProducersResponse, 0,
            ).topics[0].partitions[0]
            for i in (0, 1)
        )
        assert p0.active_producers == [] and len(p1.active_producers) == 1
        prod = p1.active_producers[0]
        assert prod.producer_id == st.producer_id and prod.current_txn_start_offset == 0
    p.commit_transaction(10)


# ------------------------------------------------------------------------------------------------ crashes

# Apache Kafka 4.4.0 loses the markers of a transaction it completes while restarting after kill -9, in
# KRaft: until the restarted node has registered again, its partitions have no leader, and Kafka 4.4's
# KRaftMetadataCache.getPartitionLeaderEndpoint answers "no such partition" for a partition whose leader is
# not a registered broker (the Scala cache it replaced answered "leader unknown", which the coordinator
# retries). The transaction coordinator, loading __transaction_state meanwhile, completes the transaction
# and takes its partitions for deleted ones: "Couldn't find leader endpoint for partitions ... these
# partitions are likely deleted already and hence can be skipped" in its log. No marker is written, the
# partitions' last stable offset stays at the transaction's first record, and the producer id's next
# transaction commits the old records with its own on the partitions it writes again.
KAFKA_20734 = ("KAFKA-20734 (apache/kafka#22680, open): after kill -9 the restarted node's transaction "
               "coordinator drops the markers of the transaction it completes, taking its leaderless "
               "partitions for deleted ones; the transaction hangs")



@pytest.mark.durable("an open transaction found after kill -9")
@pytest.mark.kafka_bug(KAFKA_20734)
def test_broker_kill9_with_an_ongoing_transaction_aborts_it_by_timeout(broker_factory):
    b = broker_factory(settings=TXN_SETTINGS)
    bs = b.bootstrap
    topic = create_topic(bs, unique_topic("txn-crash"), 2)
    txid = _txid("crash")
    p = txn_producer(bs, txid, **{"transaction.timeout.ms": 1500})
    run_txn(p, topic, [b"before-0", b"before-1"], commit=True, partitions=2)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"open-{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    b.kill9()
    b.start()
    # the transaction was Ongoing at the crash: still open after the restart, then aborted by its timeout
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if all(lso == hw for lso, hw in (_lso_and_hw(bs, topic, i) for i in range(2))):
            break
        time.sleep(0.2)
    assert values(read_confluent(bs, topic, 2, "read_committed")) == [b"before-0", b"before-1"]
    # the same transactional id works again
    p2 = txn_producer(bs, txid)
    run_txn(p2, topic, [b"after"], commit=True)
    assert values(read_confluent(bs, topic, 2, "read_committed")) == [b"after", b"before-0", b"before-1"]


@pytest.mark.durable("a prepared commit found after a crash")
@pytest.mark.kafka_bug(KAFKA_20734)
def test_broker_crash_after_prepare_commit_completes_the_commit(broker_factory, kind):
    """A crash between PrepareCommit and the markers: the restarted coordinator writes the markers.

    The crash point is made exact offline: with an Ongoing transaction (records written, no marker) the broker
    is killed, and the PrepareCommit record it would have written next is appended to __transaction_state
    with moldau's log library; the restart then finds the transaction prepared."""
    from moldau.broker.txn.state import TxnState, decode_key, decode_value, encode_value
    from moldau.log import LogConfig, LogManager
    from moldau.protocol.records import BatchBuilder, decode_batch, split_batches

    b = broker_factory(settings=TXN_SETTINGS)
    bs = b.bootstrap
    topic = create_topic(bs, unique_topic("txn-prepared"), 2)
    txid = _txid("prep")
    p = txn_producer(bs, txid)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"decided-{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    assert read_confluent(bs, topic, 2, "read_committed") == []
    b.kill9()

    # on the cluster the record goes to every replica of the transaction's __transaction_state partition
    # (all three brokers were killed with their replicas in sync: acks=all, min ISR 2), as replication
    # would have put it there
    appended = 0
    for data_dir in getattr(b, "data_dirs", [b.data_dir]):
        lm = LogManager([str(data_dir)], LogConfig(), time)
        try:
            last = None
            where = None
            for (t, part) in list(lm.partitions()):
                if t != "__transaction_state":
                    continue
                plog = lm.get(t, part)
                rr = plog.read(plog.log_start_offset, 1 << 24)
                data = b"".join(bytes(c) for c in rr.chunks)
                for pos, h in split_batches(data):
                    for r in decode_batch(data, pos, header=h):
                        if r.key is not None and decode_key(r.key) == txid and r.value is not None:
                            last, where = decode_value(r.value), part
            if last is None and kind == "cluster":
                continue  # this broker holds no replica of that partition
            assert last is not None and last.transaction_status == TxnState.ONGOING
            last.transaction_status = TxnState.PREPARE_COMMIT
            bb = BatchBuilder()
            bb.append(int(time.time() * 1000), _key(txid), encode_value(last))
            buf = bytearray(bb.build(0))
            plog = lm.get("__transaction_state", where)
            plog.append(buf, split_batches(buf))
            appended += 1
        finally:
            lm.close()
    assert appended == (3 if kind == "cluster" else 1)

    b.start()
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(got) < 6:
        got = values(read_confluent(bs, topic, 2, "read_committed"))
        time.sleep(0.1)
    assert got == sorted(f"decided-{i}".encode() for i in range(6))


def _key(txid: str) -> bytes:
    from moldau.broker.txn.state import encode_key

    return encode_key(txid)


# ------------------------------------------------------------------------------------------------ exactly
# once

WORKERS = {
    "confluent": textwrap.dedent("""
        import sys, time
        from confluent_kafka import Consumer, Producer, TopicPartition
        bs, src, dst, group, txid, parts, batch = sys.argv[1:8]
        parts, batch = int(parts), int(batch)
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 20})
        p = Producer({"bootstrap.servers": bs, "transactional.id": txid, "linger.ms": 1,
                      "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        tps = [TopicPartition(src, i) for i in range(parts)]
        committed = c.committed(tps, timeout=10)
        c.assign([TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else -2) for tp in committed])
        print("started", [tp.offset for tp in committed], flush=True)
        idle = seen = 0
        while idle < (10 if seen else 150):  # first records may take a while, the last wait is short
            msgs = [m for m in c.consume(batch, 0.1) if m.error() is None]
            if not msgs:
                idle += 1
                continue
            idle, seen = 0, 1
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
                time.sleep(0.002)   # spend time inside the transaction: the kill lands mid-transaction
            p.flush(30)
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            print("committed", len(msgs), flush=True)
        print("done", flush=True)
    """),
    # KIP-447: a subscribed consumer; TxnOffsetCommit carries its generation and member id
    "confluent-subscribe": textwrap.dedent("""
        import sys, time
        from confluent_kafka import Consumer, Producer
        bs, src, dst, group, txid, parts, batch = sys.argv[1:8]
        batch = int(batch)
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 20,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        p = Producer({"bootstrap.servers": bs, "transactional.id": txid, "linger.ms": 1})
        p.init_transactions(30)
        c.subscribe([src])
        idle = seen = 0
        while idle < (10 if seen else 150):
            msgs = [m for m in c.consume(batch, 0.1) if m.error() is None]
            if not msgs:
                idle += 1
                continue
            idle, seen = 0, 1
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            print("committed", len(msgs), flush=True)
        c.close()
        print("done", flush=True)
    """),
    "moldau": textwrap.dedent("""
        import sys, time
        from moldau.client import Consumer, Producer, TopicPartition
        bs, src, dst, group, txid, parts, batch = sys.argv[1:8]
        parts, batch = int(parts), int(batch)
        c = Consumer(config={"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "fetch.max.wait.ms": 20})
        p = Producer(config={"bootstrap.servers": bs, "transactional.id": txid, "linger.ms": 1,
                             "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        tps = [TopicPartition(src, i) for i in range(parts)]
        c.assign(tps)
        committed = c.committed(tps)
        for tp in tps:
            if committed.get(tp) is not None:
                c.seek(tp, committed[tp].offset)
        print("started", committed, flush=True)
        idle = seen = 0
        while idle < (10 if seen else 150):  # first records may take a while, the last wait is short
            recs = c.poll(0.1, max_records=batch)
            if not recs:
                idle += 1
                continue
            idle, seen = 0, 1
            p.begin_transaction()
            for r in recs:
                p.send(dst, b"out:" + r.value, key=r.key, partition=r.partition)
                time.sleep(0.002)   # spend time inside the transaction: the kill lands mid-transaction
            p.flush()
            p.send_offsets_to_transaction({tp: c.position(tp) for tp in tps}, c)
            p.commit_transaction()
            print("committed", len(recs), flush=True)
        print("done", flush=True)
    """),
}


def _start_worker(tmp: Path, client: str, args: list[str]) -> subprocess.Popen[bytes]:
    script = tmp / f"ctp_worker_{client}.py"
    script.write_text(WORKERS[client])
    with open(tmp / f"worker-{time.monotonic_ns()}.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True)


@pytest.mark.parametrize("client", ["confluent", "moldau"])
def test_consume_transform_produce_exactly_once_across_kill9(txn_broker, tmp_path, client):
    bs = txn_broker.bootstrap
    parts = 2
    src = create_topic(bs, unique_topic("eos-in"), parts)
    dst = create_topic(bs, unique_topic("eos-out"), parts)
    n = 600
    inp = Producer({"bootstrap.servers": bs})
    for i in range(n):
        inp.produce(src, key=str(i).encode(), value=f"v{i}".encode(), partition=i % parts)
    assert inp.flush(10) == 0
    group, txid = "eos-" + uuid.uuid4().hex[:6], _txid("eos")
    args = [bs, src, dst, group, txid, str(parts), "20"]

    w = _start_worker(tmp_path, client, args)
    assert w.stdout is not None
    commits = 0
    deadline = time.monotonic() + 60
    while commits < 5 and time.monotonic() < deadline:
        line = w.stdout.readline().decode()
        commits += line.startswith("committed")
    assert commits >= 5, "worker made no progress"
    time.sleep(0.03)
    os.killpg(w.pid, 9)  # kill -9 in the middle of a transaction (most likely)
    w.wait(10)
    w.stdout.close()

    w2 = _start_worker(
        tmp_path, client, args
    )  # same transactional id: fences and aborts the dead one's transaction
    try:
        out, _ = w2.communicate(timeout=120)
    finally:
        if w2.poll() is None:
            os.killpg(w2.pid, 9)
    assert b"done" in out, out[-500:]
    got = read_confluent(bs, dst, parts, "read_committed")
    outs = sorted(v for _p, _o, v in got)
    assert len(outs) == n, f"{len(outs)} outputs for {n} inputs ({len(outs) - len(set(outs))} duplicates)"
    assert outs == sorted(f"out:v{i}".encode() for i in range(n))
    # some output of the killed worker's open transaction is in the log, aborted
    raw = read_confluent(bs, dst, parts, "read_uncommitted")
    assert len(raw) >= n
    # the group's committed offsets are exactly the end of the input
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        committed = c.committed([TopicPartition(src, i) for i in range(parts)], timeout=10)
        assert [tp.offset for tp in committed] == [n // parts] * parts
    finally:
        c.close()


def test_consume_transform_produce_with_a_subscribed_consumer(txn_broker, tmp_path):
    """send_offsets_to_transaction with the group metadata of a subscribed consumer (generation, member id:
    TxnOffsetCommit v3+ is validated against the live group)."""
    bs = txn_broker.bootstrap
    src = create_topic(bs, unique_topic("eos447-in"), 2)
    dst = create_topic(bs, unique_topic("eos447-out"), 2)
    inp = Producer({"bootstrap.servers": bs})
    for i in range(200):
        inp.produce(src, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    assert inp.flush(10) == 0
    group = "eos447-" + uuid.uuid4().hex[:6]
    w = _start_worker(tmp_path, "confluent-subscribe", [bs, src, dst, group, _txid("s"), "2", "25"])
    try:
        out, _ = w.communicate(timeout=90)
    finally:
        if w.poll() is None:
            os.killpg(w.pid, 9)
    assert b"done" in out and b"committed" in out, out[-300:]
    outs = sorted(v for _p, _o, v in read_confluent(bs, dst, 2, "read_committed"))
    assert outs == sorted(f"out:v{i}".encode() for i in range(200))
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(src, i) for i in range(2)], timeout=10)] == [
            100,
            100,
        ]
    finally:
        c.close()


# ------------------------------------------------------------------------------------------------ other
# clients


def test_kafka_python_transactional_producer(txn_broker):
    from kafka import KafkaProducer

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-kp"), 2)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=_txid("kp"), request_timeout_ms=15000)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, value=f"kp-c{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, value=f"kp-a{i}".encode(), partition=i % 2)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, value=b"kp-last", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=5)
    want = sorted([f"kp-c{i}".encode() for i in range(5)] + [b"kp-last"])
    assert values(read_confluent(bs, topic, 2, "read_committed")) == want
    assert len(read_confluent(bs, topic, 2, "read_uncommitted")) == 11


def test_kafka_python_send_offsets_to_transaction(txn_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    bs = txn_broker.bootstrap
    src = create_topic(bs, unique_topic("kp-src"), 1)
    group = "kp-g-" + uuid.uuid4().hex[:6]
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=_txid("kpo"), request_timeout_ms=15000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(src, value=b"x", partition=0)
        p.send_offsets_to_transaction({KTP(src, 0): OffsetAndMetadata(7, "meta", -1)}, group)
        p.abort_transaction()
        # read_committed: committed() asks for stable offsets (OffsetFetch require_stable, KIP-447), so the
        # answer waits for the transaction's markers (UNSTABLE_OFFSET_COMMIT, retried by the client, until
        # then), which Kafka writes after EndTxn's answer; a read_uncommitted consumer may see the offsets
        # from before the transaction there
        c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                          isolation_level="read_committed")
        try:
            assert c.committed(KTP(src, 0)) is None  # aborted offsets are never visible
            p.begin_transaction()
            p.send(src, value=b"y", partition=0)
            p.send_offsets_to_transaction({KTP(src, 0): OffsetAndMetadata(9, "meta", -1)}, group)
            p.commit_transaction()
            assert c.committed(KTP(src, 0)) == 9
        finally:
            c.close(autocommit=False)
    finally:
        p.close(timeout=5)


def test_aiokafka_transactional_producer(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-aio"), 1)

    async def go() -> None:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=_txid("aio"), request_timeout_ms=15000)
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-c0")
                await p.send_and_wait(topic, b"aio-c1")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-a0")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(go())
    assert values(read_confluent(bs, topic, 1, "read_committed")) == [b"aio-c0", b"aio-c1"]
    assert values(read_moldau(bs, topic, 1, "read_committed", 2)) == [b"aio-c0", b"aio-c1"]
    assert values(read_moldau(bs, topic, 1, "read_uncommitted", 3)) == [b"aio-a0", b"aio-c0", b"aio-c1"]


@pytest.mark.durable("transactional offsets after a restart")
def test_committed_offsets_survive_a_broker_restart(broker_factory):
    """TxnOffsetCommit records are transactional batches in __consumer_offsets: a restart keeps committed
    ones and never resurrects aborted ones."""
    b = broker_factory(settings=TXN_SETTINGS)
    bs = b.bootstrap
    src = create_topic(bs, unique_topic("restart-src"), 1)
    group = "rg-" + uuid.uuid4().hex[:6]
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.assign([TopicPartition(src, 0)])
    meta = c.consumer_group_metadata()
    p = txn_producer(bs, _txid("offs"))
    p.begin_transaction()
    p.produce(src, value=b"v")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], meta, 10)
    p.commit_transaction(10)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(src, 0, 50)], meta, 10)
    p.abort_transaction(10)
    assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 5
    c.close()
    del p  # its transactions are complete: released before the kill
    b.kill9()
    b.start()
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        assert committed_after_restart(c, [TopicPartition(src, 0)])[0].offset == 5
    finally:
        c.close()


# ------------------------------------------------------------------------------------------------ moldau
# client


def test_moldau_transactional_producer_commit_abort(txn_broker):
    from moldau.client import Producer as MProducer
    from moldau.client import TransactionAbortedError

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-moldau"), 2)
    with MProducer(bootstrap_servers=bs, transactional_id=_txid("m"), linger_ms=2) as p:
        from moldau.client import IllegalStateError

        with pytest.raises(IllegalStateError):
            p.send(topic, b"outside")  # before init_transactions / begin_transaction
        p.init_transactions()
        committed, aborted = [], []
        for t in range(5):
            p.begin_transaction()
            vals = [f"m{t}-{i}".encode() for i in range(6)]
            futs = [p.send(topic, v, partition=i % 2) for i, v in enumerate(vals)]
            if t % 2:
                p.flush()
                p.abort_transaction()
                aborted += vals
            else:
                p.commit_transaction()
                committed += vals
            assert all(f.result(10).offset >= 0 for f in futs)
        # records still buffered at the abort are never sent
        p.begin_transaction()
        lingering = [p.send(topic, b"never", partition=0) for _ in range(3)]
        p.abort_transaction()
        for f in lingering:
            assert isinstance(f.exception(10), TransactionAbortedError)
        with pytest.raises(IllegalStateError):
            p.commit_transaction()  # no transaction open
    assert values(read_confluent(bs, topic, 2, "read_committed")) == sorted(committed)
    got = values(read_confluent(bs, topic, 2, "read_uncommitted"))
    assert got == sorted(committed + aborted)
    assert values(read_moldau(bs, topic, 2, "read_committed", len(committed))) == sorted(committed)
    assert values(read_moldau(bs, topic, 2, "read_uncommitted", len(got))) == got


def test_moldau_producer_is_fenced_by_a_newer_instance(txn_broker):
    from moldau.client import IllegalStateError
    from moldau.client import Producer as MProducer

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-mfence"), 1)
    txid = _txid("mf")
    old = MProducer(bootstrap_servers=bs, transactional_id=txid)
    new = MProducer(bootstrap_servers=bs, transactional_id=txid)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie").result(10)
        new.init_transactions()
        with pytest.raises(Exception) as info:
            old.send(topic, b"zombie-2").result(10)
            old.commit_transaction()
        assert getattr(getattr(info.value, "code", None), "name", "") in (
            "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH") or isinstance(info.value, IllegalStateError)
        with pytest.raises(IllegalStateError):
            old.begin_transaction()  # fatal: the zombie can only be closed
        new.begin_transaction()
        new.send(topic, b"fresh")
        new.commit_transaction()
    finally:
        old.close(5)
        new.close(5)
    assert values(read_confluent(bs, topic, 1, "read_committed")) == [b"fresh"]


@pytest.mark.durable("a transaction's state after a restart")
@pytest.mark.kafka_bug(KAFKA_20734)
def test_moldau_transaction_across_a_broker_restart(broker_factory):
    """kill -9 of the broker with the moldau producer's transaction open: after the restart that
    transaction times out (aborted), the producer is fenced, a new instance commits."""
    from moldau.client import Producer as MProducer

    b = broker_factory(settings=TXN_SETTINGS)
    bs = b.bootstrap
    topic = create_topic(bs, unique_topic("txn-mrestart"), 1)
    txid = _txid("mr")
    p = MProducer(bootstrap_servers=bs, transactional_id=txid, transaction_timeout_ms=1500,
                  reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kept")
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"lost").result(10)
        b.kill9()
        b.start()
        time.sleep(2)  # the open transaction's timeout passes; the coordinator aborts it
        from moldau.protocol.errors import KafkaError as MKafkaError

        with pytest.raises(MKafkaError) as info:
            p.commit_transaction(10)
        assert info.value.code.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    finally:
        p.close(5)
    with MProducer(bootstrap_servers=bs, transactional_id=txid) as p2:
        p2.init_transactions()
        p2.begin_transaction()
        p2.send(topic, b"again")
        p2.commit_transaction()
    assert values(read_confluent(bs, topic, 1, "read_committed")) == [b"again", b"kept"]
    assert values(read_moldau(bs, topic, 1, "read_committed", 2)) == [b"again", b"kept"]


# ------------------------------------------------------------------------------------------------ every
# version


def _txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, seq, 1 << 20)
    for i, v in enumerate(values):
        builder.append(i, int(time.time() * 1000), None, v, [])
    return bytes(builder.build())


COORDINATOR_MOVING = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _at_coordinator(route: Any, key_type: int, key: str, request: Any, response_cls: Any, version: int,
                    codes: Callable[[Any], list[int]]) -> tuple[Any, Any]:
    """A request to the coordinator of a transactional id (key_type 1) or group (0): (its connection, the
    response). The coordinator errors are retried with a new lookup, as clients do: in a cluster a new
    internal topic partition's leader takes over a moment after another broker's metadata names it."""
    deadline = time.monotonic() + 30
    while True:
        conn = route.txn(key) if key_type == 1 else route.group(key)
        resp = conn.call(request, response_cls, version)
        if not set(codes(resp)) & set(COORDINATOR_MOVING) or time.monotonic() > deadline:
            return conn, resp
        route.drop(conn)
        time.sleep(0.1)


def _init_producer_id(route: Any, txid: str, version: int) -> tuple[Any, Any]:
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    req = InitProducerIdRequest(transactional_id=txid, transaction_timeout_ms=30000, producer_id=-1,
                                producer_epoch=-1)
    return _at_coordinator(route, 1, txid, req, InitProducerIdResponse, version, lambda r: [r.error_code])


def test_every_version_of_the_transaction_apis(txn_broker, kind):
    """One transaction per step, each API at a different version (kafka-python's codec, independent of
    moldau's): InitProducerId v0-6, AddPartitionsToTxn v0-3, Produce, AddOffsetsToTxn v0-4, TxnOffsetCommit
    v0-5, EndTxn v0-4; the committed records and offsets are visible afterwards.

    InitProducerId v6 (KIP-939's two-phase commit fields) only where the broker advertises it: moldau does,
    Apache Kafka 4.4 keeps it unstable (not advertised; a request at v6 closes the connection)."""
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.protocol.producer.transaction import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        EndTxnRequest,
        EndTxnResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    )

    from harness.rawkafka import RawRouter, api_versions

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-versions"), 1)
    init_max = min(api_versions(bs)[22][1], 6)
    assert init_max >= 5  # InitProducerId v5: Kafka 4.4's highest stable version
    expected: list[bytes] = []
    with RawRouter(bs) as route:
        for step in range(7):
            txid, group = _txid(f"v{step}"), f"vg-{step}-{uuid.uuid4().hex[:4]}"
            _, init = _init_producer_id(route, txid, min(step, init_max))
            assert init.error_code == 0, (step, init)
            pid, epoch = init.producer_id, init.producer_epoch
            T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            add = route.txn(txid).call(AddPartitionsToTxnRequest(v3_and_below_transactional_id=txid,
                                                      v3_and_below_producer_id=pid,
                                                      v3_and_below_producer_epoch=epoch,
                                                      v3_and_below_topics=[T(name=topic, partitions=[0])]),
                            AddPartitionsToTxnResponse, min(step, 3))
            codes = [
                p.partition_error_code
                for t in add.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            assert codes == [0], (step, add)
            vals = [f"s{step}-{i}".encode() for i in range(3)]
            PT = ProduceRequest.TopicProduceData
            prod = route.leader(topic, 0).call(ProduceRequest(
                transactional_id=txid, acks=-1, timeout_ms=5000, topic_data=[
                PT(name=topic, partition_data=[PT.PartitionProduceData(index=0, records=_txn_batch(
                    pid, epoch, 0, vals))])]), ProduceResponse, 9)
            assert prod.responses[0].partition_responses[0].error_code == 0
            off = route.txn(txid).call(
                AddOffsetsToTxnRequest(
                    transactional_id=txid, producer_id=pid, producer_epoch=epoch, group_id=group
                ),
                AddOffsetsToTxnResponse,
                min(step, 4),
            )
            assert off.error_code == 0, (step, off)
            OT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            _, toc = _at_coordinator(route, 0, group, TxnOffsetCommitRequest(
                transactional_id=txid, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=-1,
                member_id="", group_instance_id=None,
                topics=[OT(name=topic, partitions=[OT.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=100 + step, committed_leader_epoch=-1,
                    committed_metadata="m")])]), TxnOffsetCommitResponse, min(step, 5),
                lambda r: [p.error_code for t in r.topics for p in t.partitions])
            assert [p.error_code for t in toc.topics for p in t.partitions] == [0], (step, toc)
            end = route.txn(txid).call(EndTxnRequest(transactional_id=txid, producer_id=pid,
                                                     producer_epoch=epoch, committed=step != 3),
                                       EndTxnResponse, min(step, 4))
            assert end.error_code == 0, (step, end)
            if step != 3:
                expected += vals
            answers: list[Any] = []

            def offset_stable() -> bool:
                FT = OffsetFetchRequest.OffsetFetchRequestTopic
                answers.append(route.group(group).call(
                    OffsetFetchRequest(group_id=group, topics=[FT(name=topic, partition_indexes=[0])],
                                       require_stable=True),
                    OffsetFetchResponse,
                    7,
                ).topics[0].partitions[0])
                return answers[-1].error_code != 88  # UNSTABLE_OFFSET_COMMIT: the markers are not written yet

            assert after_end_txn(kind, offset_stable), (step, answers[-1])
            got = answers[-1]
            assert (got.error_code, got.committed_offset) == (0, -1 if step == 3 else 100 + step), (step, got)
    assert after_end_txn(kind, lambda: _stable(bs, topic, 0))
    assert values(read_confluent(bs, topic, 1, "read_committed")) == sorted(expected)


def test_broker_forms_add_partitions_v4_v5_end_txn_v5_and_write_txn_markers(txn_broker):
    """AddPartitionsToTxn v4/v5 (batched, verify_only), EndTxn v5 (transactions V2: the epoch is bumped at
    the end), WriteTxnMarkers v0-2 aborting an open transaction on its partition (what
    ``kafka-transactions.sh abort`` does).

    WriteTxnMarkers v0 only where the broker advertises it: moldau serves it (as it serves the other versions
    Kafka 4.0 removed, KIP-896), Apache Kafka 4.x answers v1 and v2 only and closes the connection on v0."""
    from kafka.protocol.producer.transaction import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        EndTxnRequest,
        EndTxnResponse,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

    from harness.rawkafka import RawConnection, RawRouter, api_versions, leader_address

    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique_topic("txn-broker-forms"), 3)
    txid = _txid("bf")
    with RawRouter(bs) as route:
        conn, init = _init_producer_id(route, txid, 5)
        assert init.error_code == 0, init
        pid, epoch = init.producer_id, init.producer_epoch
        X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        T = X.AddPartitionsToTxnTopic

        def batched(version: int, verify: bool, parts: list[int], e: int = epoch) -> dict[int, int]:
            resp = conn.call(AddPartitionsToTxnRequest(transactions=[X(
                transactional_id=txid, producer_id=pid, producer_epoch=e, verify_only=verify,
                topics=[T(name=topic, partitions=parts)])]), AddPartitionsToTxnResponse, version)
            assert resp.error_code == 0
            (res,) = resp.results_by_transaction
            return {p.partition_index: p.partition_error_code for t in res.topic_results
                    for p in t.results_by_partition}

        assert batched(4, False, [0, 1]) == {0: 0, 1: 0}
        assert batched(5, True, [0, 1, 2]) == {0: 0, 1: 0, 2: 120}  # TRANSACTION_ABORTABLE: not in it
        assert batched(4, True, [0], e=epoch + 1) == {0: 90}       # PRODUCER_FENCED for the whole txn
        end = conn.call(EndTxnRequest(transactional_id=txid, producer_id=pid, producer_epoch=epoch,
                                      committed=True), EndTxnResponse, 5)
        assert end.error_code == 0 and (end.producer_id, end.producer_epoch) == (pid, epoch + 1)

    # an open transaction aborted on its partition by WriteTxnMarkers, of a producer's second instance
    # (epoch 1), so that its first epoch is a stale one (-1 is no epoch: Kafka answers UNKNOWN_SERVER_ERROR)
    wm = _txid("wm")
    first = txn_producer(bs, wm)
    p = txn_producer(bs, wm)
    p.begin_transaction()
    got: list[Any] = []
    p.produce(topic, value=b"hanging", partition=2, on_delivery=lambda e, m: got.append(m))
    assert p.flush(10) == 0
    lso, hw = _lso_and_hw(bs, topic, 2)
    assert lso < hw
    desc = _describe_producer(bs, topic, 2)
    assert desc.producer_epoch >= 1, desc
    W = WriteTxnMarkersRequest.WritableTxnMarker
    lowest, highest = api_versions(leader_address(bs, topic, 2))[27]
    assert lowest <= 1 and highest >= 2, (lowest, highest)
    with RawConnection.to_leader(bs, topic, 2) as conn:  # markers are written by the partition's leader
        for version in range(lowest, 3):
            stale = conn.call(WriteTxnMarkersRequest(markers=[W(
                producer_id=desc.producer_id, producer_epoch=desc.producer_epoch - 1,
                transaction_result=False,
                topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[2])],
                coordinator_epoch=desc.coordinator_epoch, transaction_version=0)]), WriteTxnMarkersResponse,
                version)
            assert stale.markers[0].topics[0].partitions[0].error_code == 47  # INVALID_PRODUCER_EPOCH
        resp = conn.call(WriteTxnMarkersRequest(markers=[W(
            producer_id=desc.producer_id, producer_epoch=desc.producer_epoch, transaction_result=False,
            topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[2]),
                    W.WritableTxnMarkerTopic(name="no-such-topic-x", partition_indexes=[0])],
            coordinator_epoch=desc.coordinator_epoch, transaction_version=0)]), WriteTxnMarkersResponse, 1)
        errs = {t.name: t.partitions[0].error_code for t in resp.markers[0].topics}
        assert errs == {topic: 0, "no-such-topic-x": 3}
    lso, hw = _lso_and_hw(bs, topic, 2)
    assert lso == hw
    pd = _fetch_committed(bs, topic, 2)
    assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions] == [
        (desc.producer_id, got[0].offset())]
    p.abort_transaction(10)
    del first


def _describe_producer(bs: str, topic: str, partition: int) -> Any:
    from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

    from harness.rawkafka import RawConnection

    T = DescribeProducersRequest.TopicRequest
    with RawConnection.to_leader(bs, topic, partition) as conn:
        dp = conn.call(DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[partition])]),
                       DescribeProducersResponse, 0)
    (prod,) = dp.topics[0].partitions[0].active_producers
    return prod
