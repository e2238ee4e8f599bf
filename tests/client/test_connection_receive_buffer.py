"""Connection(reuse_receive_buffer=True), the replica fetchers' connection: large answers are received into
one buffer kept by the connection, each decoded correctly, without a new allocation per answer."""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer

from moldau.client.conn import Connection
from moldau.protocol import messages as m
from moldau.protocol.records import decode_batch, split_batches

SIZES = (300_000, 150_000, 200_000)  # each answer larger than the connection's scratch buffer


def _fetch(topic: str, offset: int) -> m.FetchRequest:
    Req = m.FetchRequest
    part = Req.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1,
    )  # one (whole) batch per answer
    return Req.new(
        cluster_id=None,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[Req.FetchTopic(topic=topic, partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )


async def _read_each(host: str, port: int, topic: str, reuse: bool) -> list[tuple[bytes, object]]:
    conn = await Connection.open(host, port, reuse_receive_buffer=reuse)
    out = []
    try:
        for offset in range(len(SIZES)):
            resp = await conn.send(1, _fetch(topic, offset), version=12)
            pr = resp.responses[0].partitions[0]
            assert pr.error_code == 0
            records = pr.records
            ((pos, h),) = split_batches(records)
            (rec,) = decode_batch(records, pos, header=h, verify_crc=True)
            # the value is copied out at once; the buffer object stays referenced for the identity check
            out.append((bytes(rec.value), getattr(records, "obj", records)))
    finally:
        conn.close()
    return out


def test_reused_receive_buffer_decodes_every_large_answer(broker, make_topic):
    topic = make_topic(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "compression.type": "none"})
    for i, n in enumerate(SIZES):
        p.produce(topic, value=bytes([65 + i]) * n)
        assert p.flush(10) == 0
    host, port = broker.bootstrap.rsplit(":", 1)
    reused = asyncio.run(_read_each(host, int(port), topic, True))
    assert [v for v, _ in reused] == [bytes([65 + i]) * n for i, n in enumerate(SIZES)]
    assert all(buf is reused[0][1] for _, buf in reused)  # one buffer served all three answers
    fresh = asyncio.run(_read_each(host, int(port), topic, False))
    assert [v for v, _ in fresh] == [v for v, _ in reused]
    assert len({id(buf) for _, buf in fresh}) == len(SIZES)  # without reuse: a buffer per answer
