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
        """To the first address of a bootstrap list (one broker, or any broker of a cluster)."""
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return cls(host, int(port), timeout)

    @classmethod
    def to_leader(cls, bootstrap: str, topic: str, partition: int, *,
                  timeout: float = 15.0) -> "RawConnection":
        """To the broker that leads ``topic``/``partition`` (the only broker of a single-broker setup)."""
        return cls.to(leader_address(bootstrap, topic, partition), timeout)

    @classmethod
    def to_coordinator(cls, bootstrap: str, key: str, key_type: int,
                       timeout: float = 15.0) -> "RawConnection":
        """To the coordinator of a group (``key_type`` 0) or transactional id (1)."""
        return cls.to(coordinator_address(bootstrap, key, key_type), timeout)

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


class RawRouter:
    """Raw connections to the broker each request belongs to: a partition's leader, a group's or a
    transactional id's coordinator (on one broker they are all the same connection). Cached by address."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.conns: dict[str, RawConnection] = {}

    def at(self, address: str) -> RawConnection:
        if address not in self.conns:
            self.conns[address] = RawConnection.to(address, self.timeout)
        return self.conns[address]

    def leader(self, topic: str, partition: int) -> RawConnection:
        return self.at(leader_address(self.bootstrap, topic, partition))

    def group(self, group_id: str) -> RawConnection:
        return self.at(coordinator_address(self.bootstrap, group_id, 0))

    def txn(self, transactional_id: str) -> RawConnection:
        return self.at(coordinator_address(self.bootstrap, transactional_id, 1))

    def drop(self, conn: RawConnection) -> None:
        """Close ``conn`` (a coordinator that moved: the next request looks its broker up again)."""
        for address, c in list(self.conns.items()):
            if c is conn:
                del self.conns[address]
        conn.close()

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def __enter__(self) -> "RawRouter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def broker_addresses(bootstrap: str) -> list[str]:
    """Every broker's host:port from Metadata (one for a single broker, three for the test cluster)."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    with RawConnection.to(bootstrap) as conn:
        md = conn.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 9)
    return sorted(f"{b.host}:{b.port}" for b in md.brokers)


def api_versions(address: str) -> dict[int, tuple[int, int]]:
    """{api key: (min version, max version)} as the broker at ``address`` advertises them (ApiVersions v3)."""
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    with RawConnection.to(address) as conn:
        r = conn.call(ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1"),
                      ApiVersionsResponse, 3)
    assert r.error_code == 0, r
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def leader_address(bootstrap: str, topic: str, partition: int) -> str:
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    T = MetadataRequest.MetadataRequestTopic
    with RawConnection.to(bootstrap) as conn:
        md = conn.call(MetadataRequest(topics=[T(name=topic)], allow_auto_topic_creation=False),
                       MetadataResponse, 9)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    (t,) = md.topics
    assert t.error_code == 0, (topic, t.error_code)
    (p,) = [p for p in t.partitions if p.partition_index == partition]
    assert p.error_code == 0 and p.leader_id in brokers, (topic, partition, p)
    return brokers[p.leader_id]


def coordinator_address(bootstrap: str, key: str, key_type: int) -> str:
    import time

    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    deadline = time.monotonic() + 30
    while True:
        with RawConnection.to(bootstrap) as conn:
            r = conn.call(FindCoordinatorRequest(key=key, key_type=key_type), FindCoordinatorResponse, 2)
        # COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS while the internal topic is created or loaded:
        # retried, as every client does
        if r.error_code not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.error_code == 0, (key, key_type, r)
    return f"{r.host}:{r.port}"


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
