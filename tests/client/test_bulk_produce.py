"""The producer's bulk forms, send_many and send_arrow, against a real broker: what confluent-kafka reads back
(keys, values, headers, timestamps, partitions, order per partition) is what a loop of send() produces; bad
input is refused with a clear error before anything is queued."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from moldau.client import AsyncProducer, Producer

from harness.kafkautil import by_partition, consume_confluent

PARTITIONS = 4
TS0 = (int(time.time()) - 3600) * 1000  # recent: older records would be due for retention


def _records(n: int) -> list[tuple]:
    """(key, value, headers, timestamp, partition): keyed and keyless, nulls, headers, big and small values;
    keyless records name a partition (sticky partitioning is random, so only those compare exactly)."""
    out = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            out.append((b"k%d" % (i % 37), b"v%d" % i, None, TS0 + i, None))
        elif kind == 1:
            out.append((None, b"keyless-%d" % i, None, TS0 + i, i % PARTITIONS))
        elif kind == 2:
            out.append((b"h%d" % i, None, [("a", b"1"), ("null", None)], TS0 + i, None))
        elif kind == 3:
            out.append((os.urandom(8), b"x" * 9000, None, TS0 - i, None))  # over the fast path's sizes
        elif kind == 4:
            out.append((b"", b"", None, TS0 + 5000 + i, None))
        else:
            out.append((b"k%d" % (i % 37), "välue-%d" % i, None, TS0 + i, 2))
    return out


def _read(bootstrap: str, topic: str, n: int) -> dict[int, list[tuple]]:
    recs = consume_confluent(bootstrap, topic, PARTITIONS, n)
    return {p: [(r.key, r.value, r.headers, r.timestamp) for r in rs] for p, rs in by_partition(recs).items()}


def _send_loop(bootstrap: str, topic: str, records: list[tuple]) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for key, value, headers, ts, part in records:
            p.send(topic, value, key=key, headers=headers, timestamp=ts, partition=part)
        p.flush()


def test_send_many_reads_back_as_the_send_loop(broker, make_topic):
    records = _records(3000)
    loop_topic, many_topic = make_topic(PARTITIONS), make_topic(PARTITIONS)
    _send_loop(broker.bootstrap, loop_topic, records)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        res = p.send_many(many_topic, records)
        assert res.result(30) == len(records)
        assert res.done() and res.errors() == []
    n = len(records)
    assert _read(broker.bootstrap, many_topic, n) == _read(broker.bootstrap, loop_topic, n)


def test_send_many_record_forms_and_keyless_bulk(broker, make_topic):
    topic = make_topic(PARTITIONS)
    forms = [b"plain", None, (b"k", b"pair"),
             {"key": b"d", "value": b"dict", "partition": 3, "timestamp": TS0},
             (b"t", b"triple", [("h", b"v")])]
    bulk = [b"%06d" % i for i in range(20000)]
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=5) as p:
        assert p.send_many(topic, forms).result(30) == len(forms)
        assert p.send_many(topic, iter(bulk)).result(30) == len(bulk)  # any iterable, keyless: sticky
    got = consume_confluent(broker.bootstrap, topic, PARTITIONS, len(forms) + len(bulk))
    values = [r.value for r in got]
    assert sorted(v for v in values if v is not None and v.isdigit()) == bulk
    by_value = {r.value: r for r in got}
    assert by_value[b"dict"].partition == 3 and by_value[b"dict"].key == b"d"
    assert by_value[b"dict"].timestamp == TS0
    assert by_value[b"triple"].headers == [("h", b"v")]
    assert None in values
    # keyless bulk records keep their order within each partition
    for rs in by_partition(r for r in got if r.value and r.value.isdigit()).values():
        vs = [r.value for r in rs]
        assert vs == sorted(vs)


def _table(n: int) -> pa.Table:
    keys = [None if i % 10 == 0 else b"key-%d" % (i % 53) for i in range(n)]
    values = [None if i % 17 == 0 else "row %d ✓" % i for i in range(n)]
    headers = [None if i % 3 else [{"key": "src", "value": b"arrow"}, {"key": "i", "value": b"%d" % i}]
               for i in range(n)]
    ts = pa.array([(TS0 + i) * 1000 for i in range(n)], pa.timestamp("us"))
    hdr_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.string()),
                     "headers": pa.array(headers, hdr_type), "ts": ts,
                     "part": pa.array([i % PARTITIONS for i in range(n)], pa.int32())})


def _table_as_records(t: pa.Table, with_partition: bool) -> list[tuple]:
    out = []
    for i, row in enumerate(t.to_pylist()):
        hs = [(h["key"], h["value"]) for h in row["headers"]] if row["headers"] else None
        value = None if row["value"] is None else row["value"].encode()
        out.append((row["key"], value, hs, TS0 + i, row["part"] if with_partition else None))
    return out


def test_send_arrow_reads_back_as_the_send_loop(broker, make_topic):
    t = _table(2500)
    records = _table_as_records(t, with_partition=False)
    loop_topic, arrow_topic = make_topic(PARTITIONS), make_topic(PARTITIONS)
    # keyed rows by murmur2; keyless rows (every 10th) spread by the sticky partitioner: compare those
    # apart, by content
    keyed = [r for r in records if r[0] is not None]
    _send_loop(broker.bootstrap, loop_topic, keyed)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        assert p.send_arrow(arrow_topic, t, headers="headers", timestamp="ts").result(30) == t.num_rows
    got = consume_confluent(broker.bootstrap, arrow_topic, PARTITIONS, t.num_rows)
    arrow_keyed = {p: [(r.key, r.value, r.headers, r.timestamp) for r in rs]
                   for p, rs in by_partition(r for r in got if r.key is not None).items()}
    assert arrow_keyed == _read(broker.bootstrap, loop_topic, len(keyed))
    keyless = sorted((r.value or b"", r.timestamp) for r in got if r.key is None)
    assert keyless == sorted((r[1] or b"", r[3]) for r in records if r[0] is None)


def test_send_arrow_partition_column_and_record_batch_async(broker, make_topic):
    t = _table(1000)
    records = _table_as_records(t, with_partition=True)
    loop_topic, arrow_topic = make_topic(PARTITIONS), make_topic(PARTITIONS)
    _send_loop(broker.bootstrap, loop_topic, records)

    async def main() -> int:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap) as p:
            total = 0
            for rb in t.to_batches(max_chunksize=300):  # RecordBatches, awaited results
                res = await p.send_arrow(arrow_topic, rb, headers="headers", timestamp="ts", partition="part")
                total += await res
            many = await p.send_many(arrow_topic, [])
            assert await many == 0
            return total

    assert asyncio.run(main()) == t.num_rows
    assert _read(broker.bootstrap, arrow_topic, t.num_rows) == _read(broker.bootstrap, loop_topic, t.num_rows)


def test_bulk_bad_input_is_refused_clearly(broker, make_topic):
    topic = make_topic(1)
    ok = pa.table({"value": pa.array([b"a", b"b"])})
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        with pytest.raises(TypeError, match="binary or string"):
            p.send_arrow(topic, pa.table({"value": pa.array([1, 2])}))
        with pytest.raises(TypeError, match="key column 'k' must be binary or string"):
            p.send_arrow(topic, pa.table({"k": pa.array([1.5]), "value": pa.array([b"a"])}), key="k")
        with pytest.raises(ValueError, match="'nope' is not in the table"):
            p.send_arrow(topic, ok, value="nope")
        with pytest.raises(ValueError, match="null"):
            p.send_arrow(topic, ok.append_column("ts", pa.array([1, None], pa.int64())), timestamp="ts")
        with pytest.raises(ValueError, match="null"):
            p.send_arrow(topic, ok.append_column("p", pa.array([None, 0], pa.int32())), partition="p")
        with pytest.raises(TypeError, match="timestamp column"):
            p.send_arrow(topic, ok.append_column("ts", pa.array(["x", "y"])), timestamp="ts")
        with pytest.raises(TypeError, match="partition column"):
            p.send_arrow(topic, ok.append_column("p", pa.array([0.0, 1.0])), partition="p")
        with pytest.raises(TypeError, match="headers column"):
            p.send_arrow(topic, ok.append_column("h", pa.array([1, 2])), headers="h")
        with pytest.raises(TypeError, match="Table or RecordBatch"):
            p.send_arrow(topic, {"value": [b"a"]})
        with pytest.raises(ValueError, match="key, value"):
            p.send_many(topic, [(b"k", b"v", None, None, None, None)])
        with pytest.raises(TypeError, match="timestamp must be an int"):
            p.send_many(topic, [(b"k", b"v", None, 1.5)])
        with pytest.raises(TypeError, match="a record is"):
            p.send_many(topic, [42])
        with pytest.raises(ValueError, match="partition 5"):
            p.send_many(topic, [(b"k", b"v", None, None, 5)])
        assert p.send_arrow(topic, ok).result(30) == 2  # the producer is still usable
    assert [r.value for r in consume_confluent(broker.bootstrap, topic, 1, 2)] == [b"a", b"b"]


def test_the_client_does_not_import_pyarrow():
    code = ("import sys, moldau.client, moldau.client.producer, moldau.client.arrow; "
            "assert 'pyarrow' not in sys.modules, 'pyarrow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
