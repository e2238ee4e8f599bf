"""An in-process broker on an ephemeral port, driven with raw frames built by moldau.protocol."""

import asyncio
import struct
import time
import uuid

import pytest

from moldau.broker.broker import Broker
from moldau.broker.config import BrokerConfig
from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches


class RawClient:
    def __init__(self, reader, writer):
        self.r, self.w = reader, writer
        self.corr = 0

    @classmethod
    async def connect(cls, port):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        return cls(r, w)

    async def send(self, api_key, version, req):
        self.corr += 1
        self.w.write(frame.encode_request(api_key, version, self.corr, "smoke", req))
        return self.corr

    async def recv(self, api_key, version, corr):
        size = struct.unpack(">i", await self.r.readexactly(4))[0]
        body = await self.r.readexactly(size)
        hdr, off = frame.decode_response_header(body, api_key, version)
        assert hdr.correlation_id == corr
        resp, _ = m.RESPONSES[api_key].decode(body, version, off)
        return resp

    async def call(self, api_key, version, req):
        corr = await self.send(api_key, version, req)
        return await self.recv(api_key, version, corr)

    def close(self):
        self.w.close()


async def start_broker(tmp_path, **overrides):
    cfg = BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                                   **overrides}, env={})
    b = Broker(cfg)
    await b.start()
    return b


def batch(values, key=None, ts=None):
    bb = BatchBuilder()
    ts = ts if ts is not None else int(time.time() * 1000)
    for v in values:
        bb.append(timestamp=ts, key=key, value=v)
    return bb.build(0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def produce_req(topic, partition, records, acks=1, version=9):
    M = m.ProduceRequest
    return M.new(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            M.TopicProduceData(
                name=topic, partition_data=[M.PartitionProduceData(index=partition, records=records)]
            )
        ],
    )


def fetch_req(topic, partition, offset, *, max_wait=0, min_bytes=1, max_bytes=1 << 20, session_id=0,
              session_epoch=-1, topic_id=None):
    M = m.FetchRequest
    return M.new(replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                 isolation_level=0,
                 session_id=session_id, session_epoch=session_epoch, topics=[
                     M.FetchTopic(topic=topic, topic_id=topic_id or uuid.UUID(int=0), partitions=[
                         M.FetchPartition(partition=partition, fetch_offset=offset,
                         partition_max_bytes=max_bytes,
                                          current_leader_epoch=-1, log_start_offset=-1)])],
                 forgotten_topics_data=[], rack_id="")


def records_of(pd):
    recs = pd.records
    if recs is None:
        return []
    buf = bytes(recs) if not isinstance(recs, (list, tuple)) else b"".join(bytes(c) for c in recs)
    out = []
    for pos, h in split_batches(buf, allow_truncated=True):
        out.extend(decode_batch(buf, pos))
    return out


def test_metadata_produce_fetch_roundtrip(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"num.partitions": "2"})
        try:
            c = await RawClient.connect(b.port)
            md = await c.call(
                3,
                12,
                m.MetadataRequest.new(
                    topics=[m.MetadataRequest.MetadataRequestTopic(name="events")],
                    allow_auto_topic_creation=True,
                ),
            )
            assert md.cluster_id == b.services.cluster_id and md.controller_id == 1
            assert [(br.node_id, br.host, br.port) for br in md.brokers] == [(1, "127.0.0.1", b.port)]
            (t,) = md.topics
            assert t.error_code == 0 and t.name == "events" and len(t.partitions) == 2
            assert t.partitions[0].leader_id == 1 and t.partitions[0].isr_nodes == [1]
            topic_id = t.topic_id

            pr = await c.call(0, 9, produce_req("events", 1, batch([b"a", b"b", b"c"])))
            p = pr.responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (0, 0)
            pr = await c.call(0, 9, produce_req("events", 1, batch([b"d"])))
            assert pr.responses[0].partition_responses[0].base_offset == 3

            lo = await c.call(2, 7, m.ListOffsetsRequest.new(replica_id=-1, isolation_level=0, topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(name="events", partitions=[
                    m.ListOffsetsRequest.ListOffsetsPartition(partition_index=1, timestamp=-1)])]))
            assert lo.topics[0].partitions[0].offset == 4

            f = await c.call(1, 12, fetch_req("events", 1, 1))
            pd = f.responses[0].partitions[0]
            assert pd.error_code == 0 and pd.high_watermark == 4
            vals = [r.value for r in records_of(pd) if r.offset >= 1]
            assert vals == [b"b", b"c", b"d"]  # offset 1 is inside the first batch: that batch comes whole

            # by topic id (v13+)
            f = await c.call(1, 13, fetch_req(None, 1, 0, topic_id=topic_id))
            assert f.responses[0].topic_id == topic_id and len(records_of(f.responses[0].partitions[0])) == 4

            # out of range
            f = await c.call(1, 12, fetch_req("events", 1, 99))
            assert f.responses[0].partitions[0].error_code == 1
            c.close()
        finally:
            await b.stop()
    run(main())


def test_long_poll_woken_by_produce(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("lp", 1, 1)
            c1 = await RawClient.connect(b.port)
            c2 = await RawClient.connect(b.port)
            t0 = time.monotonic()
            corr = await c1.send(1, 12, fetch_req("lp", 0, 0, max_wait=5000, min_bytes=1))
            await asyncio.sleep(0.2)
            await c2.call(0, 9, produce_req("lp", 0, batch([b"x"])))
            f = await c1.recv(1, 12, corr)
            elapsed = time.monotonic() - t0
            assert 0.15 < elapsed < 2.0
            assert [r.value for r in records_of(f.responses[0].partitions[0])] == [b"x"]
            # nothing new: waits max_wait then answers empty
            t0 = time.monotonic()
            f = await c1.call(1, 12, fetch_req("lp", 0, 1, max_wait=300))
            assert 0.25 < time.monotonic() - t0 < 2.0
            assert not records_of(f.responses[0].partitions[0])
        finally:
            await b.stop()
    run(main())


def test_acks0_no_response_but_written(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("a0", 1, 1)
            c = await RawClient.connect(b.port)
            for i in range(24):
                await c.send(0, 9, produce_req("a0", 0, batch([b"%d" % i]), acks=0))
            # the next answer on this connection is the ListOffsets one
            lo = await c.call(2, 1, m.ListOffsetsRequest.new(replica_id=-1, topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(name="a0", partitions=[
                    m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            assert lo.topics[0].partitions[0].offset == 24
        finally:
            await b.stop()
    run(main())


def test_produce_errors(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"message.max.bytes": "2000"})
        try:
            b.services.metadata.create_topic("e", 1, 1)
            b.services.metadata.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})
            c = await RawClient.connect(b.port)

            async def code(topic, records, partition=0):
                r = await c.call(0, 9, produce_req(topic, partition, records))
                return r.responses[0].partition_responses[0]

            assert (await code("nope", batch([b"x"]))).error_code == 3
            assert (await code("e", batch([b"x"]), partition=5)).error_code == 3
            bad = bytearray(batch([b"x"]))
            bad[-1] ^= 0xFF
            assert (await code("e", bytes(bad))).error_code == 2
            assert (await code("e", batch([b"x" * 3000]))).error_code == 10
            pr = await code("compacted", batch([b"x", b"y"]))
            assert pr.error_code == 87 and [e.batch_index for e in pr.record_errors] == [0, 1]
            assert (await code("compacted", batch([b"x"], key=b"k"))).error_code == 0
            # nothing was written by the failures
            lo = await c.call(2, 1, m.ListOffsetsRequest.new(replica_id=-1, topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(name="e", partitions=[
                    m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            assert lo.topics[0].partitions[0].offset == 0
        finally:
            await b.stop()
    run(main())


def test_fetch_session_incremental(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("s", 1, 1)
            c = await RawClient.connect(b.port)
            await c.call(0, 9, produce_req("s", 0, batch([b"1"])))
            f = await c.call(1, 12, fetch_req("s", 0, 0, session_id=0, session_epoch=0))
            sid = f.session_id
            assert sid > 0 and len(records_of(f.responses[0].partitions[0])) == 1
            # incremental, nothing changed: no partitions in the answer
            M = m.FetchRequest
            inc = M.new(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=sid,
                        session_epoch=1, topics=[M.FetchTopic(topic="s", partitions=[
                            M.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])
            f = await c.call(1, 12, inc)
            assert f.error_code == 0 and f.session_id == sid and f.responses == []
            await c.call(0, 9, produce_req("s", 0, batch([b"2"])))
            inc2 = M.new(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=sid,
                         session_epoch=2, topics=[], forgotten_topics_data=[])
            f = await c.call(1, 12, inc2)
            assert [r.value for r in records_of(f.responses[0].partitions[0])] == [b"2"]
            # wrong epoch / unknown session
            f = await c.call(1, 12, inc2)
            assert f.error_code == 71
            inc2.session_id = sid + 1 if sid < 2**31 - 1 else 1
            inc2.session_epoch = 3
            f = await c.call(1, 12, inc2)
            assert f.error_code == 70
        finally:
            await b.stop()
    run(main())


def test_restart_keeps_data_and_topic(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("keep", 1, 1)
            c = await RawClient.connect(b.port)
            await c.call(0, 9, produce_req("keep", 0, batch([b"x", b"y"])))
            pid1 = b.services.producer_ids.next_id()
            c.close()
        finally:
            await b.stop()
        b = await start_broker(tmp_path)
        try:
            assert "keep" in b.services.metadata.topics
            assert b.services.replica_manager.get_partition("keep", 0).high_watermark == 2
            assert b.services.producer_ids.next_id() > pid1
        finally:
            await b.stop()
    run(main())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_fetch_versions_down_convert(tmp_path, version):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("old", 1, 1)
            c = await RawClient.connect(b.port)
            await c.call(0, 9, produce_req("old", 0, batch([b"v1", b"v2"], key=b"k")))
            f = await c.call(1, version, fetch_req("old", 0, 0))
            pd = f.responses[0].partitions[0]
            raw = bytes(pd.records) if not isinstance(pd.records, list) else b"".join(map(bytes, pd.records))
            assert raw[16] == (0 if version <= 1 else 1)  # magic byte of the first message
            assert b"v1" in raw and b"v2" in raw
        finally:
            await b.stop()
    run(main())


def test_stop_answers_pending_long_poll(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        b.services.metadata.create_topic("sd", 1, 1)
        c = await RawClient.connect(b.port)
        corr = await c.send(1, 12, fetch_req("sd", 0, 0, max_wait=30000))
        await asyncio.sleep(0.1)
        t0 = time.monotonic()
        await b.stop()
        f = await c.recv(1, 12, corr)
        assert time.monotonic() - t0 < 2 and f.responses[0].partitions[0].error_code == 0
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    run(main())


def test_delete_topic_then_recreate(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("gone", 2, 1)
            c = await RawClient.connect(b.port)
            await c.call(0, 9, produce_req("gone", 0, batch([b"x"])))
            b.services.metadata.delete_topic("gone")
            assert b.services.replica_manager.get_partition("gone", 0) is None
            r = await c.call(0, 9, produce_req("gone", 0, batch([b"x"])))
            assert r.responses[0].partition_responses[0].error_code == 3
            b.services.metadata.create_topic("gone", 1, 1)
            f = await c.call(1, 12, fetch_req("gone", 0, 0))
            assert f.responses[0].partitions[0].high_watermark == 0
        finally:
            await b.stop()
    run(main())


def test_topic_compression_type_recompresses(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("gz", 1, 1, {"compression.type": "gzip"})
            c = await RawClient.connect(b.port)
            bb = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0)
            for i in range(50):
                bb.append(1000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"1")])
            await c.call(0, 9, produce_req("gz", 0, bb.build(0)))
            f = await c.call(1, 12, fetch_req("gz", 0, 0))
            pd = f.responses[0].partitions[0]
            raw = bytes(pd.records)
            (pos, h), = split_batches(raw)
            assert h.compression == 1 and h.producer_id == 7 and h.base_sequence == 0
            recs = decode_batch(raw, pos)
            assert [r.value for r in recs] == [b"value-%d" % i for i in range(50)]
            assert recs[3].timestamp == 1003 and recs[3].headers == [("h", b"1")]
        finally:
            await b.stop()
    run(main())


def test_topic_ids_and_metadata_versions(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"auto.create.topics.enable": "false"})
        try:
            t = b.services.metadata.create_topic("ids", 1, 1)
            b.services.metadata.create_topic("other", 1, 1)
            c = await RawClient.connect(b.port)
            M = m.ProduceRequest
            req = M.new(
                acks=-1,
                timeout_ms=1000,
                topic_data=[
                    M.TopicProduceData(
                        topic_id=t.topic_id,
                        partition_data=[M.PartitionProduceData(index=0, records=batch([b"a", b"b"]))],
                    )
                ],
            )
            r = await c.call(0, 13, req)
            assert r.responses[0].topic_id == t.topic_id
            assert r.responses[0].partition_responses[0].error_code == 0
            req.topic_data[0].topic_id = uuid.uuid4()
            r = await c.call(0, 13, req)
            assert r.responses[0].partition_responses[0].error_code == 100
            # Metadata v0: an empty list means all topics
            md = await c.call(3, 0, m.MetadataRequest.new(topics=[]))
            assert sorted(x.name for x in md.topics) == ["ids", "other"]
            # v1+: empty list = none, null = all
            md = await c.call(3, 1, m.MetadataRequest.new(topics=[]))
            assert md.topics == []
            md = await c.call(3, 1, m.MetadataRequest.new(topics=None))
            assert len(md.topics) == 2
            # by id (v12), unknown id, unknown name without auto-creation, invalid name
            MT = m.MetadataRequest.MetadataRequestTopic
            md = await c.call(3, 12, m.MetadataRequest.new(topics=[
                MT(name=None, topic_id=t.topic_id), MT(name=None, topic_id=uuid.uuid4()), MT(name="missing"),
                MT(name="bad name")], allow_auto_topic_creation=True,
                include_topic_authorized_operations=True))
            got = [(x.name, x.error_code) for x in md.topics]
            assert got == [("ids", 0), (None, 100), ("missing", 3), ("bad name", 17)]
            assert md.topics[0].topic_authorized_operations > 0
            assert "missing" not in b.services.metadata.topics
        finally:
            await b.stop()
    run(main())


def test_init_producer_id(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            c = await RawClient.connect(b.port)
            M = m.InitProducerIdRequest
            ids = []
            for v in (0, 2, 4):
                r = await c.call(22, v, M.new(transactional_id=None, transaction_timeout_ms=60000))
                assert r.error_code == 0 and r.producer_epoch == 0
                ids.append(r.producer_id)
            assert len(set(ids)) == 3
            r = await c.call(22, 4, M.new(transactional_id="tx", transaction_timeout_ms=60000))
            assert r.error_code in (0, 53)
            r = await c.call(22, 4, M.new(transactional_id="tx", transaction_timeout_ms=10**9))
            assert r.error_code == 50
        finally:
            await b.stop()
    run(main())


def test_many_pipelined_requests_answered_in_order(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"queued.max.requests": "16"})
        try:
            b.services.metadata.create_topic("pipe", 1, 1)
            c = await RawClient.connect(b.port)
            data = batch([b"x" * 100])
            corrs = [await c.send(0, 9, produce_req("pipe", 0, data)) for _ in range(500)]
            offsets = []
            for corr in corrs:
                r = await c.recv(0, 9, corr)
                offsets.append(r.responses[0].partition_responses[0].base_offset)
            assert offsets == list(range(500))
        finally:
            await b.stop()
    run(main())


def test_acks0_error_closes_connection(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            c = await RawClient.connect(b.port)
            await c.send(0, 9, produce_req("unknown-topic", 0, batch([b"x"]), acks=0))
            assert await c.r.read() == b""
        finally:
            await b.stop()
    run(main())


def test_flush_every_message_acks_after_fsync(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"log.flush.interval.messages": "1"})
        try:
            b.services.metadata.create_topic("durable", 1, 1)
            b.services.metadata.create_topic("lazy", 1, 1, {"flush.messages": "1000000"})
            c = await RawClient.connect(b.port)
            corrs = [await c.send(0, 9, produce_req("durable", 0, batch([b"x"]), acks=-1)) for _ in range(20)]
            for corr in corrs:
                r = await c.recv(0, 9, corr)
                off = r.responses[0].partition_responses[0].base_offset
                # acknowledged => fsynced: the recovery point covers the record
                assert b.services.replica_manager.get_partition("durable", 0).log.recovery_point >= off + 1
            await c.call(0, 9, produce_req("lazy", 0, batch([b"x"])))
            assert b.services.replica_manager.get_partition("lazy", 0).log.recovery_point == 0
        finally:
            await b.stop()
    run(main())


def test_fetch_session_round_robin(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("rr", 2, 1)
            c = await RawClient.connect(b.port)
            for part, n in ((0, 2), (1, 1)):
                for _ in range(n):
                    await c.call(0, 9, produce_req("rr", part, batch([b"x" * 1000])))
            M = m.FetchRequest

            def req(epoch, sid, parts):
                return M.new(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=100, session_id=sid,
                             session_epoch=epoch, topics=[M.FetchTopic(topic="rr", partitions=[
                                 M.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                                 for p, o in parts])] if parts else [], forgotten_topics_data=[])

            f = await c.call(1, 12, req(0, 0, [(0, 0), (1, 0)]))
            with_data = [(p.partition_index, len(records_of(p))) for t in f.responses for p in t.partitions
                         if records_of(p)]
            assert with_data == [(0, 1)]
            f = await c.call(1, 12, req(1, f.session_id, [(0, 1)]))
            with_data = [(p.partition_index, len(records_of(p))) for t in f.responses for p in t.partitions
                         if records_of(p)]
            assert with_data == [(1, 1)]  # partition 1 is served first now
        finally:
            await b.stop()
    run(main())
