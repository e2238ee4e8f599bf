"""Byte offsets of a compacted topic: a cleaning pass does not move any surviving message; what it removed is
served as fillers (gzip messages holding nothing) and padded gzip messages of the same sizes, which the 0.7
client skips: franz-kafka reads exactly the surviving records, from byte 0 or from an offset saved before the
pass; confluent-kafka reads the same records on the modern listener."""

from __future__ import annotations

import gzip
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from moldau.protocol import kafka07 as k07

from .conftest import Broker07, franz_consume, franz_produce, message_payloads, wait_for, walk, walk_all


def _produce(b: Broker07, topic: str, codec: str, rounds: int) -> list[tuple[bytes, bytes]]:
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 20,
                  "batch.num.messages": 12})
    sent = []
    for r in range(rounds):
        for k in range(6):
            # small values (15-byte messages: runs of one or two of them are kept) and larger ones
            v = (f"{codec}{r}{k}".encode() if k % 2 else f"{codec}-round-{r}-key-{k}-".encode() * 3)
            # gzip: each key twice per batch, so the last batch loses half of its records
            key = f"key-{k}".encode() if codec == "none" else f"gzip-key-{k % 3}".encode()
            p.produce(topic, v, key=key, partition=0)
            sent.append((key, v))
        p.flush(10)
    assert p.flush(10) == 0
    return sent


def _modern(b: Broker07, topic: str) -> list[tuple[bytes, bytes]]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}-{id(b)}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    got: list[tuple[bytes, bytes]] = []
    try:
        c.subscribe([topic])
        for _ in range(300):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if got:
                    break
                continue
            got.append((m.key(), m.value()))
    finally:
        c.close()
    return got


def _compact(admin: AdminClient, topic: str) -> None:
    """Turn ``topic`` into a compacted topic, cleaned as soon as anything is dirty."""
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)


def _is_filler(m: k07.Message07) -> bool:
    return m.codec == k07.GZIP and gzip.decompress(m.payload) == b""


def test_byte_offsets_survive_a_cleaning_pass(broker07_factory, topic07: str) -> None:
    b: Broker07 = broker07_factory({"log.cleaner.backoff.ms": "200", "log.segment.bytes": "1500"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic07, 1, 1)])[topic07].result(15)
    sent = _produce(b, topic07, "none", 8) + _produce(b, topic07, "gzip", 4) + _produce(b, topic07, "none", 3)
    with b.client07() as c:
        before = walk(c, topic07, 0)  # the first 0.7 read: the partition gets its byte-offset index
    assert message_payloads(before) == [v for _k, v in sent]
    saved = before[len(before) // 2][0]  # an offset a 0.7 consumer saved
    _compact(admin, topic07)
    del admin

    by_offset = dict(before)
    ends = {o + m.size for o, m in before}

    def cleaned() -> list[tuple[int, k07.Message07]] | None:
        """The view once the cleaner is done (the dirty part may take more than one pass): an uncompressed
        message gone, a gzip unit thinned, and the same view half a second later."""
        with b.client07() as c:
            msgs = walk(c, topic07, 0)
            if not (any(_is_filler(m) and by_offset[o].codec == k07.NONE for o, m in msgs)
                    and any(not _is_filler(m) and m != by_offset[o] for o, m in msgs)):
                return None
            time.sleep(0.5)
            return msgs if walk(c, topic07, 0) == msgs else None

    after = wait_for(cleaned, timeout=60, what="the cleaning passes")
    for o, m in after:
        assert o in by_offset and o + m.size in ends  # every unit starts and ends where messages did
        if not (_is_filler(m) or by_offset[o] == m):  # a compressed unit thinned: padded gzip, same size
            assert m.codec == k07.GZIP and m.size == by_offset[o].size
    with b.client07() as c:
        # any offset a consumer may have saved (the start of a message before the pass), removed or not, is
        # still a place to read from: a removed message's is served a shorter filler to the end of its hole
        for o, _m in before:
            tail = message_payloads([x for x in after if x[0] >= o])
            assert message_payloads(walk(c, topic07, 0, o)) == tail
    survivors = message_payloads(after)
    assert len(survivors) < len(sent)
    latest = {k: v for k, v in sent}
    assert set(latest.values()) <= set(survivors)
    modern = _modern(b, topic07)
    assert [v for _k, v in modern] == survivors
    # franz-kafka skips the fillers: exactly the survivors, from byte 0 and from the saved offset (it opens
    # the gzip messages of a fetch concurrently, so across them its order is not the log's: compared sorted)
    got, fetches = franz_consume(b.legacy_port, topic07, len(survivors))
    assert sorted(got) == sorted(survivors) and set(fetches) <= {o for o, _m in after} | ends
    tail = message_payloads([x for x in after if x[0] >= saved])
    got, _ = franz_consume(b.legacy_port, topic07, len(tail), offset=saved)
    assert sorted(got) == sorted(tail)
    b.restart()
    with b.client07() as c:
        assert walk(c, topic07, 0) == after


def test_0_7_messages_on_a_compacted_topic(broker07_factory, topic07: str) -> None:
    """0.7 messages carry no key. A 0.7 PRODUCE to a compacted topic is refused as Kafka refuses keyless
    records there: the set is dropped whole and the connection closed. Messages 0.7 producers wrote before
    the topic became compacted are removed by the cleaner as keyless, each run of them becoming a filler at
    the same byte offsets, except where a filler could not cover the run's end: the short messages (under
    ``FILLER_MIN`` bytes) that end a batch stay. Keyed records of modern producers keep their latest
    values; franz-kafka, the 0.6-era client and confluent-kafka read exactly what is left."""
    from .test_kafka06_interop import consume06, produce06

    b: Broker07 = broker07_factory({"log.cleaner.backoff.ms": "200", "log.segment.bytes": "1500"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic07, 1, 1)])[topic07].result(15)
    long07 = [b"a 0.7 message without a key, number %d" % i for i in range(6)]
    short07 = [b"s%d" % i for i in range(2)]
    franz_produce(b.legacy_port, topic07, long07[:3] + short07[:1], "none", batch_size=4)
    franz_produce(b.legacy_port, topic07, long07[3:] + short07[1:], "none", batch_size=4)
    long06 = [f"a 0.6 message without a key, number {i}" for i in range(3)]
    produce06(b.legacy_port, topic07, [long06])
    with b.client07() as c:
        walk_all(c, topic07, 0, 11)
    keyed = _produce(b, topic07, "none", 6)  # rolls the segments holding the 0.7 messages
    with b.client07() as c:
        before = walk_all(c, topic07, 0, 11 + len(keyed))
    _compact(admin, topic07)
    del admin
    by_offset = dict(before)
    ends = {o + m.size for o, m in before}

    def cleaned() -> list[tuple[int, k07.Message07]] | None:
        with b.client07() as c:
            msgs = walk(c, topic07, 0)
            payloads = message_payloads(msgs)
            if any(p in payloads for p in long07 + [x.encode() for x in long06]):
                return None
            time.sleep(0.5)
            return msgs if walk(c, topic07, 0) == msgs else None

    after = wait_for(cleaned, timeout=60, what="the cleaning passes")
    for o, m in after:  # units where messages were: fillers, or messages kept with their bytes
        assert o in by_offset and o + m.size in ends
        assert _is_filler(m) or m == by_offset[o]
    survivors = message_payloads(after)
    assert [p for p in survivors if p in short07] == short07  # the short ends of the 0.7 batches stay
    latest = {k: v for k, v in keyed}
    assert set(latest.values()) <= set(survivors)
    modern = _modern(b, topic07)
    assert [v for _k, v in modern] == survivors
    assert [k for k, v in modern if v in short07] == [None, None]  # kept keyless records
    got, _ = franz_consume(b.legacy_port, topic07, len(survivors))
    assert sorted(got) == sorted(survivors)
    # the 0.6-era client reads the fillers as messages of gzip bytes and counts their sizes: its byte offsets
    # are the units' ends
    got06 = consume06(b.legacy_port, topic07, len(after))
    assert [end for _p, end in got06] == [o + m.size for o, m in after]
    # a 0.7 PRODUCE to the compacted topic: dropped, connection closed
    end = after[-1][0] + after[-1][1].size
    with b.client07() as c:
        c.produce(topic07, 0, k07.encode_message(b"refused: no key"))
        assert c.closed_by_peer()
    with b.client07() as c:
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (k07.NO_ERROR, [end])
        assert walk(c, topic07, 0) == after
