"""moldau producer -> broker -> moldau consumer: exact bytes, every codec, sync and async APIs."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import time

import pytest

from moldau.client import (
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    Producer,
    RecordMetadata,
    TopicPartition,
)

from harness.clientutil import CODECS, awkward_records


def _consume_all(conf, topic, partitions, expected, timeout=20.0, **extra):
    out = []
    with Consumer(config=conf, auto_offset_reset="earliest", **extra) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(c.poll(0.5))
        assert not c.poll(0.3), "more records than produced"
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_sync_exact_bytes_every_codec(conf, make_topic, codec):
    topic = make_topic(2)
    specs = awkward_records(40, seed=len(codec))
    ts0 = int(time.time() * 1000) - 3_600_000  # recent: retention deletes older records
    with Producer(config=conf, compression_type=codec, linger_ms=10) as p:
        futs = [p.send(topic, value=v, key=k, partition=i % 2, timestamp=ts0 + i, headers=h)
                for i, (k, v, h) in enumerate(specs)]
        p.flush()
        mds = [f.result(10) for f in futs]
    assert all(isinstance(f, cf.Future) for f in futs)
    # offsets are contiguous per partition, in send order
    for part in (0, 1):
        offs = [md.offset for md in mds if md.partition == part]
        assert offs == list(range(len(offs)))
    assert [md.timestamp for md in mds] == [ts0 + i for i in range(len(specs))]

    got = _consume_all(conf, topic, 2, len(specs))
    by_pos = {(r.partition, r.offset): r for r in got}
    for i, ((k, v, h), md) in enumerate(zip(specs, mds)):
        r = by_pos[(md.partition, md.offset)]
        assert (r.key, r.value) == (k, v), f"record {i}"
        assert r.headers == h
        assert r.timestamp == ts0 + i and r.timestamp_type == 0


def test_async_producer_and_consumer(conf, make_topic):
    topic = make_topic(3)

    async def main():
        async with AsyncProducer(config=conf, linger_ms=5) as p:
            futs = [await p.send(topic, b"v%d" % i, key=b"k%d" % (i % 10)) for i in range(300)]
            md0 = await futs[0]
            assert isinstance(md0, RecordMetadata) and md0.topic == topic
            mds = [await f for f in futs]
            one = await p.send_and_wait(topic, b"last", partition=1)
        async with AsyncConsumer(config=conf, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, i) for i in range(3)])
            got = []
            deadline = time.monotonic() + 20
            while len(got) < 301 and time.monotonic() < deadline:
                got += await c.poll(0.5)
            assert await c.position(TopicPartition(topic, 1)) == one.offset + 1
        return mds, one, got

    mds, one, got = asyncio.run(main())
    assert len(got) == 301
    # the same key always lands on the same partition
    parts = {}
    for i, md in enumerate(mds):
        parts.setdefault(i % 10, set()).add(md.partition)
    assert all(len(s) == 1 for s in parts.values())
    values = {(r.partition, r.offset): r.value for r in got}
    assert values[(one.partition, one.offset)] == b"last"
    assert sorted(v for v in values.values() if v != b"last") == sorted(b"v%d" % i for i in range(300))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(conf, make_topic, acks):
    topic = make_topic(1)
    with Producer(config=conf, acks=acks, enable_idempotence=False) as p:
        futs = [p.send(topic, b"r%d" % i) for i in range(50)]
        p.flush()
        mds = [f.result(10) for f in futs]
    if acks == 0:
        assert all(md.offset == -1 for md in mds)  # no response, no offset
    else:
        assert [md.offset for md in mds] == list(range(50))
    got = _consume_all(conf, topic, 1, 50)
    assert [r.value for r in got] == [b"r%d" % i for i in range(50)]


def test_idempotent_producer_orders_and_numbers(conf, make_topic):
    topic = make_topic(2)
    with Producer(config=conf, linger_ms=0, batch_size=200, max_in_flight_requests_per_connection=5) as p:
        futs = [p.send(topic, b"%06d" % i, partition=i % 2) for i in range(2000)]
        p.flush()
        pid, epoch = p.producer_id
        mds = [f.result(10) for f in futs]
    assert pid >= 0 and epoch >= 0
    for part in (0, 1):
        assert [md.offset for md in mds if md.partition == part] == list(range(1000))
    got = _consume_all(conf, topic, 2, 2000)
    for part in (0, 1):
        vals = [int(r.value) for r in got if r.partition == part]
        assert vals == list(range(part, 2000, 2))


def test_serializers_and_str_values(conf, make_topic):
    topic = make_topic(1)
    with Producer(config={**conf, "key.serializer": lambda k: k.upper().encode(),
                          "value.serializer": lambda v: repr(v).encode()}) as p:
        p.send(topic, {"a": 1}, key="abc").result(10)
    with Producer(config=conf) as p:
        p.send(topic, "plain str", key="k").result(10)
    with Consumer(config=conf, auto_offset_reset="earliest",
                  value_deserializer=lambda b: b.decode(), key_deserializer=lambda b: b.decode()) as c:
        c.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 2 and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert [(r.key, r.value) for r in got] == [("ABC", "{'a': 1}"), ("k", "plain str")]


def test_delivery_callback_and_futures_helpers(conf, make_topic):
    topic = make_topic(1)
    seen = []
    with Producer(config=conf) as p:
        futs = [p.produce(topic, b"x%d" % i, on_delivery=lambda err, md: seen.append((err, md)))
                for i in range(20)]
        _done, not_done = cf.wait(futs, timeout=10)
        assert not not_done
        assert len(list(cf.as_completed(futs, timeout=5))) == 20
        p.flush()
    assert len(seen) == 20 and all(err is None for err, _ in seen)
    assert sorted(md.offset for _, md in seen) == list(range(20))


def test_keyless_records_stick_to_one_partition_per_batch(conf, make_topic):
    topic = make_topic(4)
    with Producer(config=conf, linger_ms=50) as p:
        futs = [p.send(topic, b"v") for _ in range(10)]
        p.flush()
        parts = {f.result().partition for f in futs}
    assert len(parts) == 1  # sticky partitioning: one small burst goes to one partition


def test_consumer_iteration_seek_pause(conf, make_topic):
    topic = make_topic(2)
    with Producer(config=conf) as p:
        for i in range(20):
            p.send(topic, b"%d" % i, partition=i % 2)
        p.flush()
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(config=conf, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            got += c.poll(0.5)
        assert {r.partition for r in got} == {0} and len(got) == 10
        c.resume(tp1)
        c.seek(tp0, 7)
        got = []
        it = iter(c)
        while len(got) < 13:
            got.append(next(it))
        assert sorted((r.partition, r.offset) for r in got) == [(0, 7), (0, 8), (0, 9)] + [
            (1, i) for i in range(10)
        ]
        assert c.position(tp0) == 10
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0


@pytest.mark.tansu_gap("ListOffsets latest answers the last batch's base offset + 1, not the log end offset")
def test_seek_to_end_and_end_offsets(conf, make_topic):
    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    with Producer(config=conf, linger_ms=20) as p:
        for i in range(10):
            p.send(topic, b"%d" % i)
        p.flush()
    with Consumer(config=conf, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert c.end_offsets([tp]) == {tp: 10}
        c.seek_to_end(tp)
        assert c.position(tp) == 10


@pytest.mark.tansu_gap("ListOffsets by timestamp ignores record timestamps (answers offset 0)")
def test_offsets_for_times(conf, make_topic):
    topic = make_topic(1)
    base = 1_800_000_000_000
    with Producer(config=conf) as p:
        for i in range(10):
            p.send(topic, b"%d" % i, timestamp=base + 1000 * i)
        p.flush()
    tp = TopicPartition(topic, 0)
    with Consumer(config=conf) as c:
        res = c.offsets_for_times({tp: base + 4500})
        assert res[tp].offset == 5 and res[tp].timestamp == base + 5000
        assert c.offsets_for_times({tp: base + 99_999})[tp] is None
        assert c.beginning_offsets([tp]) == {tp: 0}


def test_auto_offset_reset_latest_and_none(conf, make_topic, group_id):
    from moldau.client import NoOffsetForPartitionError

    topic = make_topic(1)
    tp = TopicPartition(topic, 0)
    with Producer(config=conf) as p:
        for i in range(5):
            p.send(topic, b"old%d" % i).result(10)  # one record per batch (tansu's ListOffsets quirk)
    with Consumer(config=conf, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.position(tp) == 5
        with Producer(config=conf) as p:
            p.send(topic, b"new").result(10)
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = c.poll(0.5)
        assert [r.value for r in got] == [b"new"]
    with Consumer(config=conf, group_id=group_id, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                c.poll(0.5)


def _broker_has_transactions(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)

    async def main():
        from moldau.client.conn import Connection

        conn = await Connection.open(host, int(port))
        conn.close()
        return 26 in conn.broker_versions and 24 in conn.broker_versions

    return asyncio.run(main())


@pytest.mark.tansu_gap(
    "tansu's Fetch responses list no aborted transactions, so read_committed cannot skip them"
)
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_read_committed_skips_aborted_transactions(conf, make_topic, broker, codec):
    if not _broker_has_transactions(broker.bootstrap):
        pytest.skip("the broker under test has no transactions (EndTxn/AddPartitionsToTxn)")
    from confluent_kafka import Producer as CProducer

    topic = make_topic(1)
    p = CProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-" + topic,
                   "compression.type": codec})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"aborted-%d" % i, partition=0)
    p.flush(20)  # written to the log before the abort (librdkafka purges what it still holds)
    p.abort_transaction(20)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"committed-%d" % i, partition=0)
    p.commit_transaction(20)
    tp = TopicPartition(topic, 0)
    for level, expected in (("read_committed", [b"committed-%d" % i for i in range(3)]),
                            ("read_uncommitted", [b"aborted-%d" % i for i in range(5)] +
                             [b"committed-%d" % i for i in range(3)])):
        with Consumer(config=conf, auto_offset_reset="earliest", isolation_level=level) as c:
            c.assign([tp])
            got = []
            deadline = time.monotonic() + 15
            while len(got) < len(expected) and time.monotonic() < deadline:
                got += c.poll(0.5)
            got += c.poll(0.5)
            assert [r.value for r in got] == expected, level
            # control markers are skipped but advance the position
            assert c.position(tp) == 10
