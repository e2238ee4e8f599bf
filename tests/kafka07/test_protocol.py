"""The 0.7 requests and their error cases as Kafka 0.7 answered them (layouts from the driver document,
behaviour from 0.7's KafkaRequestHandlers / LogManager / Log), and a fuzz run of mutated frames."""

from __future__ import annotations

import random
import socket
import struct
import zlib

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol import kafka07 as k07

from .conftest import Broker07, Client07, message_payloads, wait_for, walk, walk_all


def _create(b: Broker07, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def _msgs(*payloads: bytes) -> bytes:
    return b"".join(k07.encode_message(p) for p in payloads)


def test_multiproduce_and_multifetch(broker07: Broker07, topic07: str) -> None:
    a, b = topic07 + "-a", topic07 + "-b"
    _create(broker07, a, 3)
    _create(broker07, b, 2)
    with broker07.client07() as c:
        c.send(k07.MultiProduceRequest([
            k07.ProduceRequest(a, 0, _msgs(b"a0-1", b"a0-2")),
            k07.ProduceRequest(a, 2, _msgs(b"a2-1")),
            k07.ProduceRequest(b, 1, _msgs(b"b1-1", b"b1-2", b"b1-3")),
        ]))
        walk_all(c, b, 1, 3)
        frame = c.call(k07.MultiFetchRequest([
            k07.FetchRequest(a, 0, 0, 1000),
            k07.FetchRequest(a, 2, 0, 1000),
            k07.FetchRequest(b, 1, 0, 1000),
            k07.FetchRequest(a, 1, 0, 1000),       # empty partition
            k07.FetchRequest(a, 7, 0, 1000),       # WrongPartition
            k07.FetchRequest(b, 1, 10_000, 1000),  # OffsetOutOfRange
        ]))
    parts = k07.decode_multifetch_response(frame)
    assert [e for e, _d in parts] == [0, 0, 0, 0, k07.WRONG_PARTITION, k07.OFFSET_OUT_OF_RANGE]
    assert parts[0][1] == _msgs(b"a0-1", b"a0-2")
    assert parts[1][1] == _msgs(b"a2-1")
    assert parts[2][1] == _msgs(b"b1-1", b"b1-2", b"b1-3")
    assert parts[3][1] == parts[4][1] == parts[5][1] == b""
    # the layout (MultiMessageSetSend): int32 size, int16 0, then per fetch int32 2 + n, int16 error, n bytes
    size, err = struct.unpack_from(">ih", frame)
    assert err == 0 and size == len(frame) - 4 == 2 + sum(6 + len(d) for _e, d in parts)
    assert frame[6:12] == struct.pack(">ih", 2 + len(parts[0][1]), 0)


def test_fetch_errors_and_edges(broker07: Broker07, topic07: str) -> None:
    with broker07.client07() as c:
        c.produce(topic07, 0, _msgs(b"first", b"second"))  # auto-created (num.partitions = 1)
        msgs = walk_all(c, topic07, 0, 2)
        end = msgs[-1][0] + msgs[-1][1].size
        assert c.fetch(topic07, 1, 0) == (k07.WRONG_PARTITION, b"")
        assert c.fetch(topic07, -1, 0) == (k07.WRONG_PARTITION, b"")
        assert c.fetch(topic07, 0, end + 1) == (k07.OFFSET_OUT_OF_RANGE, b"")
        assert c.fetch(topic07, 0, -5) == (k07.OFFSET_OUT_OF_RANGE, b"")
        assert c.fetch(topic07, 0, end) == (0, b"")  # the end: nothing yet
        assert c.fetch(topic07, 0, 0, -1) == (k07.INVALID_FETCH_SIZE, b"")
        # unknown topic: 0.7's getLog returns null -> an empty set; a partition beyond num.partitions: 3
        assert c.fetch(topic07 + "-none", 0, 0) == (0, b"")
        assert c.fetch(topic07 + "-none", 1, 0) == (k07.WRONG_PARTITION, b"")
        # fetch sizes cut messages anywhere, even inside the length field
        whole = _msgs(b"first", b"second")
        for n in (1, 3, 4, 7, len(whole) - 1):
            assert c.fetch(topic07, 0, 0, n) == (0, whole[:n])
        # an offset that is not a message boundary gets the bytes from there, as 0.7 sent the file's bytes
        assert c.fetch(topic07, 0, 3, 100) == (0, whole[3:])
        assert c.fetch(topic07, 0, msgs[1][0] + 9, 100) == (0, whole[msgs[1][0] + 9:])


def test_offsets_requests(broker07: Broker07, topic07: str) -> None:
    with broker07.client07() as c:
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 5) == (0, [0])  # unknown topic: getEmptyOffsets
        assert c.offsets(topic07, 0, k07.EARLIEST_TIME, 5) == (0, [0])
        assert c.offsets(topic07, 0, 123, 5) == (0, [])
        c.produce(topic07, 0, _msgs(b"x" * 10, b"y" * 20))
        msgs = walk_all(c, topic07, 0, 2)
        end = msgs[-1][0] + msgs[-1][1].size
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 5) == (0, [end, 0])
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (0, [end])
        assert c.offsets(topic07, 0, k07.EARLIEST_TIME, 5) == (0, [0])
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 0) == (0, [])
    # a partition out of range: 0.7's LogManager.getOffsets -> getLogPool threw InvalidPartitionException,
    # which its OFFSETS handler did not catch: the socket server closed the connection (no answer)
    for topic, partition in ((topic07, 3), (topic07, -1), (topic07 + "-none", 1)):
        with broker07.client07() as c:
            c.send(k07.OffsetsRequest(topic, partition, k07.LATEST_TIME, 5))
            assert c.closed_by_peer(), f"OFFSETS for {topic}-{partition} answered"
    with broker07.client07() as c:  # the listener serves on
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (0, [end])


def test_produce_checks_drop_the_whole_set_and_close(broker07: Broker07, topic07: str) -> None:
    with broker07.client07() as c:
        c.produce(topic07, 0, _msgs(b"kept"))
        walk_all(c, topic07, 0, 1)
    good = k07.encode_message(b"good")
    bad = bytearray(k07.encode_message(b"bad-crc"))
    bad[-1] ^= 0xFF
    bad_magic = bytearray(k07.encode_message(b"magic"))
    bad_magic[4] = 7
    inner = _msgs(b"i1", b"i2")
    broken_inner = bytearray(inner)
    broken_inner[-1] ^= 1
    cases = [
        (topic07, 0, good + bytes(bad)),                                        # InvalidMessage: bad CRC
        (topic07, 0, bytes(bad_magic)),                                        # unknown magic byte
        (topic07, 0, k07.encode_message(zlib.compress(inner), k07.GZIP)),      # not gzip
        (topic07, 0, k07.encode_message(b"\x1f\x8b" + bytes(broken_inner), k07.GZIP)),
        (topic07, 0, struct.pack(">i", 50) + b"short"),                         # first message incomplete
        (topic07, 4, good),                                                    # WrongPartition
    ]
    for t, p, data in cases:
        with broker07.client07() as c:
            c.produce(t, p, data)
            assert c.closed_by_peer(), f"connection stays open after {data!r}"
    with broker07.client07() as c:
        assert message_payloads(walk(c, topic07, 0)) == [b"kept"]  # none of it was written
        # a trailing partial message is not an error: the whole messages before it are written
        c.produce(topic07, 0, good + k07.encode_message(b"cut")[:-2])
        c.produce(topic07, 0, k07.encode_message(b"old", magic=0))  # magic 0 (Kafka 0.6)
        c.produce(topic07, -1, _msgs(b"random partition"))         # -1: the broker picks one (here: 0)
        msgs = walk_all(c, topic07, 0, 4)
    assert message_payloads(msgs) == [b"kept", b"good", b"old", b"random partition"]
    assert [m.magic for _o, m in msgs] == [1, 1, 0, 1]  # the magic-0 message keeps its magic (and size)


def test_bad_frames_close_the_connection(broker07: Broker07, topic07: str) -> None:
    frames = [
        struct.pack(">ih", 2, 9),                                   # unknown request type
        struct.pack(">ihh", 4, k07.FETCH, 50),                      # truncated body
        struct.pack(">i", -4),                                      # negative size
        struct.pack(">i", 1 << 30),                                 # beyond socket.request.max.bytes
        struct.pack(">ihh", 4, k07.FETCH, -1),                      # null topic
    ]
    for frame in frames:
        with broker07.client07() as c:
            c.sock.sendall(frame)
            assert c.closed_by_peer(), frame
    with broker07.client07() as c:
        assert c.offsets(topic07, 0, k07.EARLIEST_TIME, 1) == (0, [0])


def test_fuzz_mutated_frames_keep_both_listeners_serving(broker07: Broker07, topic07: str) -> None:
    rng = random.Random(0x0707)
    with broker07.client07() as c:
        c.produce(topic07, 0, _msgs(*[bytes([i]) * i for i in range(1, 30)]))
        walk_all(c, topic07, 0, 29)
    valid = [
        k07.encode_request(k07.ProduceRequest(topic07, 0, _msgs(b"fuzz-a", b"fuzz-b"))),
        k07.encode_request(k07.FetchRequest(topic07, 0, 0, 500)),
        k07.encode_request(k07.MultiFetchRequest([k07.FetchRequest(topic07, 0, 0, 100),
                                                  k07.FetchRequest(topic07, 0, 17, 100)])),
        k07.encode_request(k07.MultiProduceRequest([k07.ProduceRequest(topic07, 0, _msgs(b"fuzz-c"))])),
        k07.encode_request(k07.OffsetsRequest(topic07, 0, k07.LATEST_TIME, 10)),
    ]
    def mutate(frame: bytearray) -> bytes:
        for _m in range(rng.randint(1, 4)):
            kind = rng.random()
            i = rng.randrange(len(frame))
            if kind < 0.5:
                frame[i] = rng.randrange(256)
            elif kind < 0.7:
                del frame[i:i + rng.randint(1, 8)]
            elif kind < 0.85:
                frame[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif i + 4 <= len(frame):
                frame[i:i + 4] = struct.pack(">i", rng.choice([0, -1, (1 << 31) - 1, rng.randrange(1 << 16)]))
            if not frame:
                frame.append(rng.randrange(256))
        return bytes(frame)

    sent = 0
    for _conn in range(50):  # 50 connections of 8 mutated frames each
        with socket.create_connection(("127.0.0.1", broker07.legacy_port), timeout=5) as conn:
            try:
                for _f in range(8):
                    conn.sendall(mutate(bytearray(rng.choice(valid))))
                    sent += 1
                conn.settimeout(0.02)
                while conn.recv(65536):  # answers, until EOF (the broker closed) or quiet
                    pass
            except (TimeoutError, ConnectionResetError, BrokenPipeError):
                pass  # the broker closed the connection or has nothing more to say
    assert sent >= 50 and broker07.alive()
    # the legacy listener still serves
    with broker07.client07() as c:
        msgs = walk(c, topic07, 0)
        assert message_payloads(msgs)[:29] == [bytes([i]) * i for i in range(1, 30)]
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (0, [msgs[-1][0] + msgs[-1][1].size])
    # and so does the modern one
    p = Producer({"bootstrap.servers": broker07.bootstrap})
    p.produce(topic07, b"modern", partition=0)
    assert p.flush(10) == 0
    del p
    cons = Consumer({"bootstrap.servers": broker07.bootstrap, "group.id": f"g-{topic07}",
                     "auto.offset.reset": "earliest"})
    try:
        cons.assign([TopicPartition(topic07, 0, 0)])
        def first_value() -> bytes | None:
            m = cons.poll(0.5)
            return m.value() if m is not None and not m.error() else None

        vals = wait_for(first_value, what="a record from the modern listener")
        assert vals == b"\x01"
    finally:
        cons.close()


@pytest.mark.parametrize("max_size", [1, 61, 1000])
def test_walking_with_any_fetch_size_sees_the_same_messages(broker07: Broker07, topic07: str,
                                                            max_size: int) -> None:
    """Byte ranges of every size join up into the same log (responses of a few bytes included)."""
    with broker07.client07() as c:
        c.produce(topic07, 0, _msgs(*[b"p%d" % i * i for i in range(12)]))
        whole = walk_all(c, topic07, 0, 12)
        end = whole[-1][0] + whole[-1][1].size
        got = bytearray()
        while len(got) < end:
            err, data = c.fetch(topic07, 0, len(got), max_size)
            assert err == 0 and data
            got += data
        assert bytes(got) == b"".join(k07.encode_message(m.payload) for _o, m in whole)


def test_client07_helper_reads_frames(broker07: Broker07) -> None:
    """Client07 sees the broker's reply frames whole (guards the harness itself)."""
    c = Client07("127.0.0.1", broker07.legacy_port)
    try:
        frame = c.call(k07.OffsetsRequest("k07-helper-none", 0, k07.LATEST_TIME, 1))
    finally:
        c.close()
    assert frame == struct.pack(">ihiq", 2 + 4 + 8, 0, 1, 0)


def test_acls_apply_to_the_anonymous_07_client(broker07_factory, topic07: str) -> None:
    """With an authorizer and no ACLs (allow.everyone.if.no.acl.found=false), a 0.7 client, User:ANONYMOUS,
    may do nothing: 0.7 has no authorization error, so FETCH and OFFSETS answer Unknown (-1) and PRODUCE is
    dropped (the connection closed) without creating the topic."""
    b = broker07_factory({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                          "allow.everyone.if.no.acl.found": "false"})
    with b.client07() as c:
        assert c.fetch(topic07, 0, 0) == (k07.UNKNOWN, b"")
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (k07.UNKNOWN, [])
        c.produce(topic07, 0, _msgs(b"denied"))
        assert c.closed_by_peer()
    assert not (b.data_dir / f"{topic07}-0").exists()
    b.stop()
    b.settings["allow.everyone.if.no.acl.found"] = "true"  # no ACL on the topic: everyone may
    b.start()
    with b.client07() as c:
        c.produce(topic07, 0, _msgs(b"allowed"))
        assert message_payloads(walk_all(c, topic07, 0, 1)) == [b"allowed"]


def test_delete_records_inside_a_batch(broker07: Broker07, topic07: str) -> None:
    """DeleteRecords to an offset inside a batch: the batch stays readable as a whole from its byte offset
    (as Kafka returns whole batches), the batches after it keep their byte offsets."""
    with broker07.client07() as c:
        c.produce(topic07, 0, _msgs(b"d0", b"d1", b"d2", b"d3"))
        walk_all(c, topic07, 0, 4)
        c.produce(topic07, 0, _msgs(b"d4", b"d5"))
        before = walk_all(c, topic07, 0, 6)
    admin = AdminClient({"bootstrap.servers": broker07.bootstrap})
    for f in admin.delete_records([TopicPartition(topic07, 0, 2)]).values():
        assert f.result(15).low_watermark == 2
    with broker07.client07() as c:
        assert c.offsets(topic07, 0, k07.EARLIEST_TIME, 1) == (0, [0])  # the first batch still holds d2, d3
        assert walk(c, topic07, 0, 0) == before
    admin.delete_records([TopicPartition(topic07, 0, 4)])[TopicPartition(topic07, 0, 4)].result(15)
    with broker07.client07() as c:
        first = before[4][0]
        assert c.offsets(topic07, 0, k07.EARLIEST_TIME, 1) == (0, [first])
        assert c.fetch(topic07, 0, 0)[0] == k07.OFFSET_OUT_OF_RANGE
        assert walk(c, topic07, 0, first) == before[4:]
