"""What the fuzzers found, each fixed in the broker and held here with the request that showed it."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

from moldau.log.checkpoint import atomic_write, deferred_writes
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from .harness import FuzzBroker, Raw

LONG = "v" * 32767  # the longest string a non-compact (int16 length) field can carry


def _still_serving(r: Raw) -> None:
    assert r.call(18, 0, m.ApiVersionsRequest.new()).error_code == 0


def test_metadata_v10_v11_topic_ids_are_invalid_request(fuzz_broker: FuzzBroker) -> None:
    """v10-11 declare topic ids, but Kafka serves them from v12 only (a v10-11 response has no null topic
    name): a null name or a topic id there answers INVALID_REQUEST for every requested topic, as Kafka's
    handleTopicMetadataRequest; the broker used to fail encoding the response and close the connection."""
    T = m.MetadataRequest.MetadataRequestTopic
    with Raw(fuzz_broker.port) as r:
        for version in (10, 11):
            for topics in ([T(name=None, topic_id=uuid.uuid4())],
                           [T(name="fuzz-x", topic_id=uuid.uuid4()), T(name="fuzz-y")],
                           [T(name=None)]):
                req = m.MetadataRequest.new(topics=topics, allow_auto_topic_creation=False)
                resp = r.call(3, version, req)
                assert [t.error_code for t in resp.topics] == [ErrorCode.INVALID_REQUEST] * len(topics)
                assert [t.name for t in resp.topics] == [t.name or "" for t in topics]
                assert resp.brokers == []
            _still_serving(r)
        # v12 still resolves ids: an unknown one is UNKNOWN_TOPIC_ID
        resp = r.call(3, 12, m.MetadataRequest.new(topics=[T(name=None, topic_id=uuid.uuid4())],
                                                   allow_auto_topic_creation=False))
        assert [t.error_code for t in resp.topics] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_error_message_echoing_a_long_name_is_answered(fuzz_broker: FuzzBroker) -> None:
    """A topic name of 32,767 bytes: "Topic name is illegal ... topic name: <name>" outgrew the non-compact
    error_message string, the response did not encode and the connection closed with a traceback; now the
    message is cut and the request answered with Kafka's error code."""
    C = m.CreateTopicsRequest
    P = m.CreatePartitionsRequest
    with Raw(fuzz_broker.port) as r:
        for version in (0, 1, 4):
            resp = r.call(19, version, C.new(topics=[C.CreatableTopic(
                name=LONG, num_partitions=1, replication_factor=1)], timeout_ms=1000))
            (t,) = resp.topics
            assert t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            if version >= 1:
                assert t.error_message.startswith("Topic name is illegal")
                assert len(t.error_message) < 2048
        resp = r.call(37, 1, P.new(topics=[P.CreatePartitionsTopic(name=LONG, count=2, assignments=None)],
                                   timeout_ms=1000, validate_only=False))
        assert resp.results[0].error_code != ErrorCode.NONE
        _still_serving(r)
    assert "Traceback" not in fuzz_broker.proc.output(limit=1 << 30)


def test_deferred_write_into_a_deleted_directory(tmp_path: Path) -> None:
    """A CreateTopics racing a DeleteTopics of the same topic: the topic's files were queued (deferred writes,
    fsynced off the event loop), the delete removed its directory meanwhile, and the queued write raised
    FileNotFoundError out of the CreateTopics handler (connection closed, traceback). A write whose
    directory is gone is now skipped; one whose directory exists still fails loudly."""
    part = tmp_path / "t-0"
    part.mkdir()

    async def go() -> None:
        with deferred_writes() as batch:
            atomic_write(str(part / "partition.metadata"), b"version: 0\n")
        shutil.rmtree(part)
        await batch.flush()

    asyncio.run(go())
    assert not part.exists()


def test_invalid_utf8_is_answered_not_closed(fuzz_broker: FuzzBroker) -> None:
    """Kafka reads a string with ``new String(bytes, UTF_8)`` (Readable.readString): malformed UTF-8 becomes
    U+FFFD and the request is answered with the error its values deserve. moldau closed the connection as
    on a request that does not parse."""
    from moldau.protocol import frame as fr

    C = m.CreateTopicsRequest
    T = m.MetadataRequest.MetadataRequestTopic
    with Raw(fuzz_broker.port) as r:
        for key, version, req in (
                (19, 2, C.new(topics=[C.CreatableTopic(name="QQQQ", num_partitions=1, replication_factor=1)],
                              timeout_ms=1000)),
                (19, 7, C.new(topics=[C.CreatableTopic(name="QQQQ", num_partitions=1, replication_factor=1)],
                              timeout_ms=1000)),
                (3, 9, m.MetadataRequest.new(topics=[T(name="QQQQ")], allow_auto_topic_creation=True))):
            r.corr += 1
            frame = fr.encode_request(key, version, r.corr, "fuzz", req).replace(b"QQQQ", b"\xff\xfeQ\xc3")
            r.sock.sendall(frame)
            body = r.recv_frame()
            hdr, off = fr.decode_response_header(body, key, version)
            assert hdr.correlation_id == r.corr
            resp, _ = m.RESPONSES[key].decode(body, version, off)
            (t,) = resp.topics
            assert t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, (key, version, t)
        _still_serving(r)


def test_offset_commit_retention_at_the_int64_range(fuzz_broker: FuzzBroker) -> None:
    """OffsetCommit v2-v4 with a retention_time_ms near int64's range: the expire timestamp (now + retention)
    outgrew int64, the __consumer_offsets record did not encode and the connection closed with a traceback;
    now it saturates, as a stored int64 must, and the commit is answered."""
    C = m.CreateTopicsRequest
    O = m.OffsetCommitRequest  # noqa: E741
    topic = "fuzz-offset-retention"
    with Raw(fuzz_broker.port) as r:
        resp = r.call(19, 4, C.new(topics=[C.CreatableTopic(name=topic, num_partitions=1,
                                                              replication_factor=1)], timeout_ms=5000))
        assert resp.topics[0].error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        for version, retention in ((2, 2**63 - 1), (3, -(2**63)), (4, 2**62)):
            req = O.new(group_id=f"fuzz-retention-{version}", generation_id_or_member_epoch=-1, member_id="",
                        retention_time_ms=retention,
                        topics=[O.OffsetCommitRequestTopic(name=topic, partitions=[
                            O.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                           committed_metadata="")])])
            resp = r.call(8, version, req)
            assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.NONE], version
        _still_serving(r)
    assert "Traceback" not in fuzz_broker.proc.output(limit=1 << 30)


def test_a_size_prefix_alone_holds_no_memory(fuzz_broker: FuzzBroker) -> None:
    """Connections that announce 96 MB frames (under socket.request.max.bytes) and send a few bytes of them
    hold a few bytes each: the broker used to allocate (and zero) a buffer of the announced size at once,
    and under the byte-mutation fuzzer (a size prefix left as it was makes the broker read the next body
    bytes as a size) its RSS grew to the high-water mark of such announcements, 2.2x in 1,000,000 frames.
    A large frame that does arrive, in pieces, is still read whole: its buffer grows as its bytes come."""
    import socket
    import struct
    import time

    from moldau.protocol.records import build_batch

    announced, conns = 96 << 20, 6
    before = fuzz_broker.rss()
    socks = []
    try:
        for _ in range(conns):
            s = socket.create_connection(("127.0.0.1", fuzz_broker.port), timeout=5)
            s.sendall(struct.pack(">i", announced) + b"\x00\x12\x00\x03" + bytes(300))
            socks.append(s)
        time.sleep(0.5)
        fuzz_broker.ping()  # the broker has read what was sent and serves others meanwhile
        grown_kb = fuzz_broker.rss() - before
        assert grown_kb < 16 * 1024, f"RSS grew {grown_kb} kB for {conns} announced 96 MB frames"
    finally:
        for s in socks:
            s.close()
    C = m.CreateTopicsRequest
    P = m.ProduceRequest
    topic = f"fuzz-big-{uuid.uuid4().hex[:8]}"
    value = bytes(range(256)) * (12 << 10)  # 3 MB: the frame's buffer grows from 256 kB three times
    with Raw(fuzz_broker.port, 30.0) as r:
        resp = r.call(19, 5, C.new(topics=[C.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1,
            configs=[C.CreatableTopicConfig(name="max.message.bytes", value=str(8 << 20))])],
            timeout_ms=10000, validate_only=False))
        assert resp.topics[0].error_code == 0, resp
        batch = build_batch([(int(time.time() * 1000), b"k", value)])
        resp = r.call(0, 9, P.new(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0), resp
        F = m.FetchRequest
        resp = r.call(1, 12, F.new(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20,
                                    isolation_level=0, session_id=0, session_epoch=-1, topics=[
            F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=8 << 20)])]))
        records = bytes(resp.responses[0].partitions[0].records)
        assert value in records, "the 3 MB record did not come back"
        r.call(20, 6, m.DeleteTopicsRequest.new(topics=[m.DeleteTopicsRequest.DeleteTopicState(name=topic)],
                                                timeout_ms=30000))
