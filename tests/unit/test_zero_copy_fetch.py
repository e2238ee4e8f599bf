"""Zero-copy fetch on an in-process broker with raw sockets: a Fetch answer sent with sendfile is byte for
byte the answer of the same request on a connection that sends from memory (many partitions, KIP-74 limits),
a reader that does not keep up gets the rest once the socket drains, in order with the requests behind it,
and a segment deleted by retention while its region waits to be sent is still sent whole."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

from moldau.broker.broker import Broker
from moldau.broker.config import BrokerConfig
from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.records import BatchBuilder, split_batches


async def start_broker(tmp_path, **overrides):
    cfg = BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                                   **overrides}, env={})
    b = Broker(cfg)
    await b.start()
    return b


def batch(n: int, size: int, tag: int) -> bytes:
    bb = BatchBuilder()
    ts = int(time.time() * 1000)
    for i in range(n):
        bb.append(timestamp=ts, key=None, value=bytes([65 + (tag + i) % 26]) * size)
    return bb.build(0)


def produce(topic: str, partition: int, records: bytes) -> bytes:
    M = m.ProduceRequest
    req = M.new(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[M.TopicProduceData(
        name=topic, partition_data=[M.PartitionProduceData(index=partition, records=records)])])
    return frame.encode_request(0, 9, 1, "t", req)


def fetch(topic: str, partitions: list[int], *, max_bytes: int, partition_max_bytes: int, corr: int) -> bytes:
    M = m.FetchRequest
    req = M.new(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[M.FetchTopic(topic=topic, partitions=[
                    M.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes,
                                     current_leader_epoch=-1, log_start_offset=-1) for p in partitions])],
                forgotten_topics_data=[], rack_id="")
    return frame.encode_request(1, 12, corr, "t", req)


def api_versions(corr: int) -> bytes:
    return frame.encode_request(18, 0, corr, "t", m.ApiVersionsRequest.new())


async def connect(b: Broker, rcvbuf: int = 0):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", b.port))
    r, w = await asyncio.open_connection(sock=sock, limit=1 << 24)
    port = sock.getsockname()[1]
    for _ in range(100):
        conns = [c for c in b.connections if c.peer[1] == port]
        if conns:
            return r, w, conns[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the broker has no connection for the client")


async def read_frame(r) -> bytes:
    size = struct.unpack(">i", await r.readexactly(4))[0]
    return await r.readexactly(size)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_sendfile_answers_equal_memory_answers_many_partitions_and_limits(tmp_path):
    async def main():
        b = await start_broker(tmp_path)
        try:
            b.services.metadata.create_topic("many", 30, 1)
            r, w, _ = await connect(b)
            for p in range(30):
                for j in range(1 + p % 4):  # batches of 1-6 records of 10 B - 5 KiB
                    w.write(produce("many", p, batch(1 + (p + j) % 6, (10, 700, 5000)[(p + j) % 3], p + j)))
                    body = await read_frame(r)
                    _h, off = frame.decode_response_header(body, 0, 9)
                    pr = m.ProduceResponse.decode(body, 9, off)[0].responses[0].partition_responses[0]
                    assert pr.error_code == 0
            zr, zw, zconn = await connect(b)
            cr, cw, cconn = await connect(b)
            cconn.sendfile_ok = False  # the same broker, sending from memory
            assert zconn.sendfile_ok
            cases = [(1 << 20, 1 << 20), (60_000, 3_000), (10_000, 100), (1, 1), (200, 1 << 20)]
            for corr, (max_bytes, part_max) in enumerate(cases):
                req = fetch("many", list(range(30)), max_bytes=max_bytes, partition_max_bytes=part_max,
                            corr=corr)
                zw.write(req)
                cw.write(req)
                a, c = await read_frame(zr), await read_frame(cr)
                assert a == c
                hdr, off = frame.decode_response_header(a, 1, 12)
                resp, _ = m.FetchResponse.decode(a, 12, off)
                sizes = []
                for pd in resp.responses[0].partitions:
                    data = bytes(pd.records) if pd.records is not None else b""
                    batches = list(split_batches(data))  # whole batches only
                    assert sum(h.batch_length + 12 for _p, h in batches) == len(data)
                    sizes.append(len(data))
                assert sizes[0] > 0  # the first partition's first batch comes whole (KIP-74)
                assert sum(sizes[1:]) <= max_bytes
            assert zconn.sent_from_files > 0 and cconn.sent_from_files == 0
        finally:
            await b.stop()
    run(main())


def test_slow_reader_gets_the_rest_in_order_after_retention_deleted_the_segments(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"socket.send.buffer.bytes": "16384"})
        try:
            b.services.metadata.create_topic("slow", 1, 1, {"segment.bytes": "1048576"})
            r, w, _ = await connect(b)
            for j in range(30):  # ~3 MB in 3 segments
                w.write(produce("slow", 0, batch(10, 10_000, j)))
                await read_frame(r)
            plog = b.services.replica_manager.get_partition("slow", 0).log
            assert len(plog.segments) >= 3
            paths = [s.log_path for s in plog.segments[:-1]]
            cr, cw, cconn = await connect(b)
            cconn.sendfile_ok = False
            cw.write(fetch("slow", [0], max_bytes=1 << 23, partition_max_bytes=1 << 23, corr=7))
            expected = await read_frame(cr)

            zr, zw, zconn = await connect(b, rcvbuf=4096)
            zw.write(fetch("slow", [0], max_bytes=1 << 23, partition_max_bytes=1 << 23, corr=7)
                     + api_versions(8))
            for _ in range(200):  # the socket is full: the rest waits for it
                if zconn._pending_out is not None:
                    break
                await asyncio.sleep(0.01)
            assert zconn._pending_out is not None
            plog.delete_records_before(plog.segments[-1].base_offset)
            plog.enforce_retention(int(time.time() * 1000))
            assert not any(os.path.exists(p) for p in paths)
            got = await read_frame(zr)
            assert got == expected
            assert struct.unpack_from(">i", await read_frame(zr))[0] == 8  # the next answer, after it
            assert zconn.sent_from_files > 2_000_000 and zconn._pending_out is None
        finally:
            await b.stop()
    run(main())


def test_closing_with_an_answer_waiting_for_the_socket_still_sends_it(tmp_path):
    async def main():
        b = await start_broker(tmp_path, **{"socket.send.buffer.bytes": "16384"})
        try:
            b.services.metadata.create_topic("closing", 1, 1)
            r, w, _ = await connect(b)
            for j in range(20):
                w.write(produce("closing", 0, batch(10, 10_000, j)))
                await read_frame(r)
            zr, zw, zconn = await connect(b, rcvbuf=4096)
            zw.write(fetch("closing", [0], max_bytes=1 << 23, partition_max_bytes=1 << 23, corr=3))
            for _ in range(200):
                if zconn._pending_out is not None:
                    break
                await asyncio.sleep(0.01)
            assert zconn._pending_out is not None
            zconn.close()  # as a clean stop does after draining
            got = await read_frame(zr)
            assert struct.unpack_from(">i", got)[0] == 3 and len(got) > 2_000_000
            assert await zr.read() == b""  # then the connection ends
        finally:
            await b.stop()
    run(main())
