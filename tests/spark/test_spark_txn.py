"""The exactly-once machinery of the sink without Spark: the Arrow writer's transactions, the driver's
EndTxn, batch markers, fencing of an earlier attempt (real broker; read back with confluent-kafka)."""

from __future__ import annotations

import logging
import uuid

import pyarrow as pa
import pytest

from moldau.spark.options import OptionError, parse_sink_options
from moldau.spark.produce import ArrowProducer, TaskTransaction, bulk_session
from moldau.spark.source import kafka_schema
from moldau.spark.txn import BatchMarker, TransactionError, missing_transaction_apis
from moldau.spark.writer import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    _eos_client,
    end_transactions,
    make_stream_writer,
    transactional_id,
    transactions_unavailable,
)

from harness.apiproxy import HidingProxy
from harness.brokerproc import free_port
from harness.spark_helpers import read_values


def _opts(bootstrap: str, **extra: str):
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, **extra}, streaming=True)


def _attempt(bootstrap: str, topic: str, tid: str, query: str, batch: int, values: list[bytes]):
    """One task attempt: start the transaction, write, prepare; (started?, handle)."""
    opts = _opts(bootstrap)
    client = _eos_client(opts)
    s = bulk_session(client)
    txn = TaskTransaction(s, tid, query, batch, DEFAULT_TRANSACTION_TIMEOUT_MS)
    if not txn.start():
        return False, None
    p = ArrowProducer(client, topic, txn, s)
    n = len(values)
    p.write(pa.RecordBatch.from_arrays([pa.array([b"k%d" % i for i in range(n)], pa.binary()),
                                        pa.array(values, pa.binary())], names=["key", "value"]))
    assert p.finish() == n
    return True, txn.prepare(n)


def test_task_transactions_commit_fence_and_skip_replays(bootstrap, make_topic):
    topic = make_topic(3)
    query = str(uuid.uuid4())
    tid = transactional_id(None, query, 0)
    opts = _opts(bootstrap)
    assert tid == f"moldau-spark-{query}-0"

    # attempt 1 of batch 0 writes and fails before the driver commits; attempt 2 fences it
    ok, h1 = _attempt(bootstrap, topic, tid, query, 0, [b"a1-%d" % i for i in range(100)])
    assert ok and h1 is not None
    assert len(read_values(bootstrap, topic, 3, "read_uncommitted")) == 100
    assert read_values(bootstrap, topic, 3, "read_committed") == []  # open: nothing stable yet
    ok, h2 = _attempt(bootstrap, topic, tid, query, 0, [b"a2-%d" % i for i in range(100)])
    assert ok and h2 is not None and h2.producer_epoch > h1.producer_epoch
    # a zombie commit of attempt 1 (old epoch) is refused
    [(h, exc)] = end_transactions(opts, [h1], True)
    assert h == h1 and isinstance(exc, TransactionError) and exc.fenced
    assert end_transactions(opts, [h2], True) == []
    assert end_transactions(opts, [h2], True) == []  # committing again is harmless
    got = read_values(bootstrap, topic, 3, "read_committed")
    assert sorted(got) == sorted(b"a2-%d" % i for i in range(100))

    # batch 0 replayed after its commit (driver died before Spark's commit log): skipped
    ok, h3 = _attempt(bootstrap, topic, tid, query, 0, [b"a3-%d" % i for i in range(100)])
    assert not ok and h3 is None
    # the next batch is written; another query using the same ids (a new checkpoint) is not skipped
    ok, h4 = _attempt(bootstrap, topic, tid, query, 1, [b"b1-%d" % i for i in range(10)])
    assert ok and end_transactions(opts, [h4], True) == []
    other = str(uuid.uuid4())
    ok, h5 = _attempt(bootstrap, topic, tid, other, 0, [b"q2-%d" % i for i in range(10)])
    assert ok and end_transactions(opts, [h5], False) == []  # aborted by the driver
    got = read_values(bootstrap, topic, 3, "read_committed")
    assert sorted(got) == sorted([b"a2-%d" % i for i in range(100)] + [b"b1-%d" % i for i in range(10)])
    assert len(read_values(bootstrap, topic, 3, "read_uncommitted")) == 100 + 100 + 10 + 10


def test_batch_marker_metadata_roundtrip():
    mk = BatchMarker("q-1", 17)
    assert BatchMarker.parse(17, mk.metadata(5)) == mk
    assert BatchMarker.parse(16, mk.metadata(5)) is None  # offset and metadata disagree: not ours
    assert BatchMarker.parse(17, "") is None and BatchMarker.parse(17, '{"x":1}') is None


def test_transaction_support_probe(bootstrap):
    assert transactions_unavailable(_opts(bootstrap)) is None
    assert make_stream_writer({"kafka.bootstrap.servers": bootstrap, "topic": "out"}, kafka_schema(),
                              False).exactly_once is True
    # a transaction timeout the broker refuses is an error in any mode, not a reason to fall back
    with pytest.raises(OptionError, match=r"kafka.transaction.timeout.ms=3600000 is refused"):
        make_stream_writer({"kafka.bootstrap.servers": bootstrap, "topic": "out",
                            "kafka.transaction.timeout.ms": "3600000"}, kafka_schema(), False)
    s = bulk_session(_eos_client(_opts(bootstrap)))

    async def conn():
        return await s.cluster.any_connection()

    c = s.lt.run(conn())
    assert missing_transaction_apis(c) == []


def test_without_broker_transactions_streaming_writes_fall_back_or_refuse(broker_factory, caplog):
    """A broker whose ApiVersions lacks the transaction APIs (a real broker behind a proxy hiding them):
    by default the streaming writer warns and is at least once; deliveryGuarantee=exactly-once refuses."""
    port = free_port()
    b = broker_factory(advertised_port=port)
    proxy = HidingProxy(("127.0.0.1", b.port), port, {22, 24, 25, 26, 28})
    try:
        schema = kafka_schema()
        base = {"kafka.bootstrap.servers": proxy.bootstrap, "topic": "out"}
        why = transactions_unavailable(_opts(proxy.bootstrap))
        assert why is not None and "EndTxn" in why and "InitProducerId" in why
        with caplog.at_level(logging.WARNING, logger="moldau.spark.writer"):
            w = make_stream_writer(base, schema, False)
        assert w.exactly_once is False
        assert any("at least once, not exactly once" in r.getMessage() for r in caplog.records)
        with pytest.raises(OptionError, match="'exactly-once' needs Kafka transactions.*EndTxn"):
            make_stream_writer({**base, "deliveryGuarantee": "exactly-once"}, schema, False)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="moldau.spark.writer"):
            w = make_stream_writer({**base, "deliveryGuarantee": "at-least-once"}, schema, False)
        assert w.exactly_once is False and not caplog.records  # asked for: no warning, no probe
        assert proxy.rewritten >= 2
    finally:
        proxy.close()


@pytest.mark.parametrize("options, streaming, message", [
    ({"deliveryGuarantee": "twice"}, True, "must be 'exactly-once' or 'at-least-once'"),
    ({"deliveryGuarantee": "exactly-once"}, False, "applies to streaming writes"),
    ({"transactionalIdPrefix": "x"}, False, "exactly-once streaming writes only"),
    ({"transactionalIdPrefix": "x", "deliveryGuarantee": "at-least-once"}, True, "no use"),
    ({"transactionalIdPrefix": " "}, True, "must not be empty"),
    ({"deliveryGuarantee": "exactly-once", "kafka.acks": "1", "kafka.enable.idempotence": "false"}, True,
     "transactions need acks=all"),
    ({"kafka.transactional.id": "t"}, True, "transactionalIdPrefix"),
])
def test_delivery_options_refused(options, streaming, message):
    with pytest.raises(OptionError, match=message):
        parse_sink_options({"kafka.bootstrap.servers": "localhost:1", **options}, streaming=streaming)


def test_delivery_options():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1"}, streaming=True)
    assert o.delivery is None and o.txn_prefix is None  # exactly once where the broker can
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "deliveryguarantee": "EXACTLY_ONCE",
                            "transactionalidprefix": "app"}, streaming=True)
    assert o.delivery == "exactly-once" and o.txn_prefix == "app"
    assert transactional_id("app", "ignored", 3) == "app-3"
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1",
                            "kafka.enable.idempotence": "false"}, streaming=True)
    assert o.delivery == "at-least-once" and "acks" in (o.fallback_reason or "")
    assert parse_sink_options({"kafka.bootstrap.servers": "h:1"}).delivery == "at-least-once"  # batch
