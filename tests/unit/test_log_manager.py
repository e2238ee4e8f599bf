"""moldau.log: LogManager (directories, meta.properties, partition.metadata, create/delete, LRU of open
segments), LogConfig parsing, dump."""

from __future__ import annotations

import io
import json
import os
import uuid

import pytest

from moldau.log import InvalidConfigError, InvalidTopicError, LogConfig, LogManager, StorageError
from moldau.log import dump as dump_mod
from moldau.log.checkpoint import base64_to_uuid, read_meta_properties, uuid_to_base64
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def make_batch(n: int, ts: int = 1000, size: int = 20) -> bytearray:
    b = BatchBuilder()
    for i in range(n):
        b.append(ts + i, b"key-%d" % i, b"value-%d" % i + b"." * size)
    return bytearray(b.build())


def append(lg, buf: bytearray, now: int = 5000):
    return lg.append(buf, split_batches(buf), now)


def test_meta_properties_and_cluster_id(tmp_path):
    d = str(tmp_path / "a")
    lm = LogManager([d], LogConfig(), FakeClock(), node_id=3)
    cid = lm.cluster_id
    assert isinstance(cid, str) and len(cid) == 22 and "=" not in cid
    base64_to_uuid(cid)  # decodes as a UUID
    meta = read_meta_properties(d)
    assert meta is not None
    assert (meta["version"], meta["cluster.id"], meta["node.id"]) == ("1", cid, "3")
    assert len(meta["directory.id"]) == 22
    with pytest.raises(StorageError):  # the directory is locked while in use
        LogManager([d], LogConfig(), FakeClock())
    lm.close()
    lm2 = LogManager([d], LogConfig(), FakeClock())
    assert lm2.cluster_id == cid and lm2.node_id == 3
    lm2.close()
    with pytest.raises(StorageError):
        LogManager([d], LogConfig(), FakeClock(), cluster_id="AAAAAAAAAAAAAAAAAAAAAB")


def test_create_get_delete_and_partition_metadata(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs, LogConfig(), FakeClock())
    tid = uuid.uuid4()
    logs = [lm.create("orders", p, topic_id=tid) for p in range(4)]
    assert lm.partitions() == [("orders", p) for p in range(4)]
    # spread over the directories
    assert {lm.dir_of("orders", p) for p in range(4)} == {os.path.abspath(d) for d in dirs}
    with open(os.path.join(logs[0].dir, "partition.metadata")) as f:
        assert f.read() == f"version: 0\ntopic_id: {uuid_to_base64(tid)}\n"
    assert lm.topic_id("orders") == uuid_to_base64(tid)
    assert lm.get("orders", 2) is logs[2]
    assert lm.create("orders", 2) is logs[2]  # idempotent
    append(logs[1], make_batch(3))
    assert lm.delete("orders", 1)
    assert not os.path.exists(logs[1].dir)
    assert lm.get("orders", 1) is None
    assert lm.delete_topic("orders") == 3
    assert lm.partitions() == []
    for bad in ("", "..", "a/b", "x" * 250, "spa ce"):
        with pytest.raises(InvalidTopicError):
            lm.create(bad, 0)
    lm.close()


def test_reload_finds_partitions_and_skips_deleted_dirs(tmp_path):
    d = str(tmp_path / "a")
    lm = LogManager([d], LogConfig(), FakeClock())
    lg = lm.create("my-topic.v1", 7)
    append(lg, make_batch(5))
    lm.close()
    os.makedirs(os.path.join(d, "gone-0.0123abcd-delete"))
    os.makedirs(os.path.join(d, "not a partition"))
    lm2 = LogManager([d], LogConfig(), FakeClock())
    assert lm2.partitions() == [("my-topic.v1", 7)]
    assert lm2.get("my-topic.v1", 7).log_end_offset == 5
    assert not os.path.exists(os.path.join(d, "gone-0.0123abcd-delete"))
    lm2.close()


def test_clean_restart_opens_partitions_in_parallel_each_with_its_own_data(tmp_path):
    """After a clean shutdown partitions are opened by several threads, in chunks of half the segment cache:
    every partition comes back with its own records, topic id and offsets, the cache stays bounded."""
    d = str(tmp_path / "a")
    lm = LogManager([d], LogConfig(), FakeClock(), max_open_segments=8)
    for t in range(3):
        for p in range(20):
            lg = lm.create(f"t{t}", p, topic_id=uuid.UUID(int=t + 1))
            append(lg, make_batch(1 + (t * 20 + p) % 7, ts=1000 + t * 100 + p))
    lm.close()
    lm2 = LogManager([d], LogConfig(), FakeClock(), max_open_segments=8, load_threads=8)
    assert lm2.partitions() == sorted((f"t{t}", p) for t in range(3) for p in range(20))
    for t in range(3):
        for p in range(20):
            lg = lm2.get(f"t{t}", p)
            n = 1 + (t * 20 + p) % 7
            assert lg.log_end_offset == n
            assert base64_to_uuid(lg.topic_id) == uuid.UUID(int=t + 1)
            c = lg.read(0, 10**6).chunks[0]
            recs = [r for q, _h in split_batches(c) for r in decode_batch(c, q)]
            assert [r.timestamp for r in recs] == [1000 + t * 100 + p + i for i in range(n)]
            assert len(lm2.cache) <= 8
    assert lm2.cache.evictions > 0
    assert append(lm2.get("t2", 19), make_batch(1)).base_offset == 1 + 59 % 7
    lm2.close()


def test_lru_bound_on_open_segments(tmp_path):
    cfg = LogConfig(segment_bytes=500)
    lm = LogManager([str(tmp_path / "a")], cfg, FakeClock(), max_open_segments=3)
    logs = [lm.create("t", p) for p in range(4)]
    for i in range(10):
        for lg in logs:
            append(lg, make_batch(2, 1000 + i))
    assert all(len(lg.segments) > 2 for lg in logs)
    for lg in logs:  # reads across all segments of all partitions
        rr = lg.read(0, 10**6)
        offs = [r.offset for c in rr.chunks for p, _h in split_batches(c) for r in decode_batch(c, p)]
        assert offs == list(range(20))
        assert len(lm.cache) <= 3
    assert lm.cache.evictions > 0
    for lg in logs:
        assert append(lg, make_batch(1)).base_offset == 20
    lm.close()


def test_log_config_from_props_and_validation():
    cfg = LogConfig.from_props(
        {"segment.bytes": "1048576", "retention.ms": -1, "cleanup.policy": "compact,delete",
         "message.timestamp.type": "LogAppendTime", "preallocate": "true"}
    )
    assert cfg.segment_bytes == 1048576 and cfg.retention_ms == -1
    assert cfg.cleanup_policy == ("compact", "delete") and cfg.compact_enabled and cfg.delete_enabled
    assert cfg.log_append_time and cfg.preallocate
    assert cfg.to_props()["segment.bytes"] == "1048576"
    assert cfg.diff_props() == {
        "segment.bytes": "1048576", "retention.ms": "-1", "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime", "preallocate": "true",
    }
    for key, value in (
        ("segment.bytes", "abc"),
        ("retention.ms", -5),
        ("cleanup.policy", "forever"),
        ("message.timestamp.type", "Now"),
        ("no.such.key", 1),
        ("min.cleanable.dirty.ratio", 2),
    ):
        with pytest.raises(InvalidConfigError) as ei:
            LogConfig.from_props({key: value})
        assert ei.value.key == key and key in str(ei.value)
        assert ei.value.code == 40
    b = LogConfig.from_broker_props(
        {
            "log.retention.hours": "1",
            "log.segment.bytes": "2048",
            "num.partitions": 3,
            "log.roll.hours": 2,
            "message.max.bytes": 5000,
        }
    )
    assert (b.retention_ms, b.segment_bytes, b.segment_ms, b.max_message_bytes) == (
        3600000,
        2048,
        7200000,
        5000,
    )
    assert LogConfig.from_broker_props({"log.retention.ms": 5, "log.retention.hours": 1}).retention_ms == 5
    assert LogConfig.from_props({"retention.ms": "10"}, base=b).segment_bytes == 2048


def test_dump_log_index_timeindex_and_json(tmp_path):
    lm = LogManager([str(tmp_path / "a")], LogConfig(index_interval_bytes=50), FakeClock())
    lg = lm.create("t", 0)
    for i in range(4):
        append(lg, make_batch(2, 1000 + 10 * i))
    lg.flush()
    seg = lg.segments[0]
    lines = list(dump_mod.dump_segment(seg.log_path))
    assert lines[0].startswith("Dumping ") and lines[1] == "Log starting offset: 0"
    batch_lines = [ln for ln in lines if ln.startswith("baseOffset:")]
    assert len(batch_lines) == 4
    assert batch_lines[1].startswith("baseOffset: 2 lastOffset: 3 count: 2 ")
    assert "isvalid: true" in batch_lines[1] and "compresscodec: none" in batch_lines[1]
    rec_lines = [ln for ln in lines if ln.startswith("| offset:")]
    assert rec_lines[0] == (
        "| offset: 0 CreateTime: 1000 keySize: 5 valueSize: 27 sequence: -1 headerKeys: [] key: key-0 "
        "payload: value-0" + "." * 20
    )
    idx = list(dump_mod.dump_segment(seg.index_path))
    assert idx[1:] and all(ln.startswith("offset: ") and " position: " in ln for ln in idx[1:])
    tix = list(dump_mod.dump_segment(seg.timeindex_path, json=True))
    assert tix and all(set(e) == {"timestamp", "offset"} for e in tix)
    out = io.StringIO()
    dump_mod.dump(lg.dir, json=True, records=False, out=out)
    objs = [json.loads(ln) for ln in out.getvalue().splitlines()]
    batches = [o for o in objs if "baseOffset" in o]
    assert [o["baseOffset"] for o in batches] == [0, 2, 4, 6]
    assert all("records" not in o for o in batches)
    # a corrupt batch is reported, not raised
    with open(seg.log_path, "r+b") as f:
        f.seek(60)
        f.write(b"\x00\x00")
    shallow = list(dump_mod.dump_segment(seg.log_path, deep=False))
    assert "isvalid: false" in shallow[2]
    lm.close()
