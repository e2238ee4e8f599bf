"""The real 0.7-era Node.js client franz-kafka 0.7.5 against the legacy listener, and cross-reads with
confluent-kafka on the modern listener (modern lz4/zstd batches down-converted for the 0.7 client)."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, Producer

from moldau.protocol import kafka07 as k07

from .conftest import Broker07, franz_consume, franz_produce, message_payloads, walk, walk_all


def _as_franz_emits(payloads: list[bytes], compressed: bool) -> list[bytes]:
    """franz-kafka opens the gzip messages of one fetch concurrently (node's zlib thread pool) and emits
    each one's payloads when its decompression completes: across compressed messages the order it emits is
    not the log's. The log's order is checked with the raw 0.7 client; franz's output as a multiset."""
    return sorted(payloads) if compressed else payloads


def _payloads(tag: str, n: int) -> list[bytes]:
    # varied sizes and bytes, including empty and binary payloads
    return [b""] + [f"{tag}-{i}:".encode() + os.urandom(i % 7) + bytes(range(i % 200)) for i in range(1, n)]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy"])
def test_franz_produce_and_consume(broker07: Broker07, topic07: str, compression: str) -> None:
    payloads = _payloads(compression, 30)
    franz_produce(broker07.legacy_port, topic07, payloads, compression, batch_size=8)
    with broker07.client07() as c:
        msgs = walk_all(c, topic07, 0, len(payloads))
        if compression == "gzip":
            # franz-kafka gzips its batches concurrently (node's zlib thread pool) and sends each when its
            # compression completes: the batches may arrive in any order, each one whole and in order
            batches = [payloads[i:i + 8] for i in range(0, len(payloads), 8)]
            stored = [message_payloads([x]) for x in msgs]
            assert sorted(stored) == sorted(batches)
            payloads = [p for b in stored for p in b]  # the log's order, which a consumer sees
        else:
            assert message_payloads(msgs) == payloads  # exact bytes, in order
        codecs = {m.codec for _o, m in msgs}
        # a compressed batch of the producer stays one compressed message (4 batches of <= 8)
        wrapper = {"none": k07.NONE, "gzip": k07.GZIP, "snappy": k07.SNAPPY}[compression]
        assert codecs == {wrapper}
        if compression != "none":
            assert len(msgs) == 4
        err, (latest,) = c.offsets(topic07, 0, k07.LATEST_TIME, 1)
        assert err == 0
        assert latest == msgs[-1][0] + msgs[-1][1].size
    # 1 KiB fetches: several of them, each from an offset the client computed from what it received
    got, fetch_offsets = franz_consume(broker07.legacy_port, topic07, len(payloads), max_fetch_size=1024)
    assert _as_franz_emits(got, compression == "gzip") == _as_franz_emits(payloads, compression == "gzip")
    boundaries = {o for o, _m in msgs} | {latest}
    # every offset the client computed from the sizes it received is a message boundary of the log
    assert fetch_offsets[0] == 0 and set(fetch_offsets) <= boundaries
    assert len(set(fetch_offsets)) >= 2  # it went on from an offset it computed itself
    # and the client can start in the middle, at any boundary
    mid_offset, _ = msgs[len(msgs) // 2]
    tail = message_payloads(msgs[len(msgs) // 2:])
    got_tail, _ = franz_consume(broker07.legacy_port, topic07, len(tail), offset=mid_offset)
    assert _as_franz_emits(got_tail, compression == "gzip") == _as_franz_emits(tail, compression == "gzip")


def test_small_fetch_size_partial_messages(broker07: Broker07, topic07: str) -> None:
    """A fetch size that is not a multiple of the message size: every response ends with part of a message
    (30 bytes of a 60-byte one); the client keeps only whole messages and fetches again from the next
    boundary it computed. (franz-kafka cannot read a response that ends inside a length field.)"""
    payloads = [bytes([i]) * 50 for i in range(20)]  # 4 + 6 + 50 = 60 bytes per message
    franz_produce(broker07.legacy_port, topic07, payloads, "none", batch_size=20)
    with broker07.client07() as c:
        walk_all(c, topic07, 0, len(payloads))
        err, data = c.fetch(topic07, 0, 0, 150)
        assert err == 0 and len(data) == 150 and data[120:] == k07.encode_message(payloads[2])[:30]
    got, fetch_offsets = franz_consume(broker07.legacy_port, topic07, len(payloads), max_fetch_size=150)
    assert got == payloads
    assert fetch_offsets[:10] == [120 * i for i in range(10)]


def test_franz_written_read_by_confluent(broker07: Broker07, topic07: str) -> None:
    payloads = [f"m{i}".encode() for i in range(12)]
    franz_produce(broker07.legacy_port, topic07, payloads[:6], "gzip", batch_size=3)
    with broker07.client07() as c07:
        walk_all(c07, topic07, 0, 6)
    franz_produce(broker07.legacy_port, topic07, payloads[6:], "snappy", batch_size=3)
    with broker07.client07() as c07:
        walk_all(c07, topic07, 0, len(payloads))
    c = Consumer({"bootstrap.servers": broker07.bootstrap, "group.id": f"g-{topic07}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic07])
        got: list[tuple[int, bytes]] = []
        for _ in range(200):
            m = c.poll(0.2)
            if m is None or m.error():
                if len(got) >= len(payloads):
                    break
                continue
            got.append((m.offset(), m.value()))
            if len(got) >= len(payloads):
                break
    finally:
        c.close()
    assert [v for _o, v in got] == payloads
    assert [o for o, _v in got] == list(range(len(payloads)))  # logical offsets, one per inner message


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_written_read_by_franz(broker07: Broker07, topic07: str, codec: str) -> None:
    payloads = [f"{codec}-{i}-".encode() * (i + 1) for i in range(25)]
    p = Producer({"bootstrap.servers": broker07.bootstrap, "compression.type": codec, "linger.ms": 50,
                  "batch.num.messages": 10})
    for i, v in enumerate(payloads):
        p.produce(topic07, v, key=f"k{i}".encode(), partition=0)
    assert p.flush(20) == 0
    got, _ = franz_consume(broker07.legacy_port, topic07, len(payloads))
    gz = codec in ("gzip", "lz4", "zstd")  # served as gzip messages
    assert _as_franz_emits(got, gz) == _as_franz_emits(payloads, gz)
    with broker07.client07() as c:
        msgs = walk(c, topic07, 0)
    assert message_payloads(msgs) == payloads
    if codec == "none":
        assert {m.codec for _o, m in msgs} == {k07.NONE} and len(msgs) == len(payloads)
    else:  # each modern batch is one compressed 0.7 message: snappy stays snappy, the rest is gzip
        assert {m.codec for _o, m in msgs} == {k07.SNAPPY if codec == "snappy" else k07.GZIP}
        assert len(msgs) < len(payloads)
