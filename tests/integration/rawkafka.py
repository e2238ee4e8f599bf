"""Raw Kafka requests on a plain socket, built with kafka-python's protocol classes (an implementation
independent of moldau's own codec). Used where a test needs exact control over one request."""

from __future__ import annotations

import socket
import struct
from typing import Any

CLIENT_ID = "moldau-tests"


def frame(request: Any, version: int, corr: int) -> bytes:
    """A size-prefixed request (header + body) for a kafka-python ApiMessage request object."""
    request.with_header(correlation_id=corr, client_id=CLIENT_ID)
    return bytes(request.encode(version=version, header=True, framed=True))


def read_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, f"connection closed after {len(out)} of {n} bytes"
        out += chunk
    return out


def read_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", read_exact(s, 4))
    return read_exact(s, size)


class RawConnection:
    def __init__(self, host: str, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.corr = 0

    @classmethod
    def to(cls, bootstrap: str, timeout: float = 15.0) -> "RawConnection":
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout)

    def send(self, request: Any, version: int) -> int:
        self.corr += 1
        self.sock.sendall(frame(request, version, self.corr))
        return self.corr

    def receive(self, response_cls: Any, version: int, corr: int) -> Any:
        resp = response_cls.decode(read_frame(self.sock), version=version, header=True)
        assert resp.header.correlation_id == corr, (resp.header.correlation_id, corr)
        return resp

    def call(self, request: Any, response_cls: Any, version: int) -> Any:
        return self.receive(response_cls, version, self.send(request, version))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def produce_request(topic: str, partition: int, batch: bytes, acks: int = -1) -> Any:
    from kafka.protocol.producer import ProduceRequest

    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                          topic_data=[T(name=topic, partition_data=[P(index=partition, records=batch)])])


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int = 1) -> Any:
    from kafka.protocol.consumer import FetchRequest

    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[T(topic=topic, partitions=[P(partition=partition, current_leader_epoch=-1,
        fetch_offset=offset,
                                             log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )


def record_batch(values: list[bytes], timestamp_ms: int, key: bytes | None = None) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, v in enumerate(values):
        builder.append(i, timestamp_ms, key, v, [])
    return bytearray(builder.build())
