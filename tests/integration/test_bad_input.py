"""Hostile and malformed input on raw sockets. The broker refuses it and stays healthy.

The broker here is this module's own (a crash must not take other modules' tests along). Valid request
frames for the fuzzer are captured from real clients (confluent-kafka, kafka-python) through a recording
proxy, so they cover the APIs and versions those clients really send.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.brokerproc import BrokerProcess
from harness.clients import Confluent, KafkaPython, make_records
from harness.faultproxy import FaultProxy
from harness.kafkautil import consume_confluent, create_topic, produce_confluent, unique_topic, watermarks
from harness.rawkafka import RawConnection, produce_request, read_frame, record_batch

MAX_REQUEST = 100 * 1024 * 1024  # socket.request.max.bytes default


class Target:
    """The module's broker. It advertises a pass-through proxy (which captured the clients' requests),
    so real clients go through ``bootstrap``; raw tests talk to ``broker.port`` directly."""

    def __init__(self, broker: BrokerProcess, proxy: FaultProxy) -> None:
        self.broker = broker
        self.proxy = proxy
        self.bootstrap = proxy.bootstrap
        self.port = broker.port
        self.frames = list(proxy.requests)

    def alive(self) -> bool:
        return self.broker.alive()

    def output(self) -> str:
        return self.broker.output()


@pytest.fixture(scope="module")
def target(module_broker_factory):
    proxy = FaultProxy()
    b: BrokerProcess = module_broker_factory(advertised_port=proxy.listen_port)
    proxy.target = ("127.0.0.1", b.port)
    proxy.record = True
    try:
        for client in (Confluent(), KafkaPython()):
            topic = create_topic(proxy.bootstrap, unique_topic("fuzz-capture"), 2)
            specs = make_records(2, 4, client.caps)
            client.produce(proxy.bootstrap, topic, specs)
            client.consume(proxy.bootstrap, topic, 2, len(specs), group=True)
        proxy.record = False
        t = Target(b, proxy)
        assert len({struct.unpack_from(">h", f, 4)[0] for f in t.frames}) >= 8, "too few APIs captured"
        yield t
    finally:
        proxy.close()


def _exchange(port: int, data: bytes, half_close: bool = True, timeout: float = 2.0) -> tuple[bytes, bool]:
    """Send data; return (what came back, whether the broker closed the connection in time)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(timeout)
    got = b""
    closed = False
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN: the broker already closed the connection
            return got, True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            except socket.timeout:
                break
            if not chunk:
                closed = True
                break
            got += chunk
    finally:
        s.close()
    return got, closed


def _healthy(b: Target) -> None:
    assert b.alive(), f"broker died:\n{b.output()[-5000:]}"
    topic = create_topic(b.bootstrap, unique_topic("after-abuse"), 1)
    produce_confluent(b.bootstrap, topic, [dict(value=b"still-ok-%d" % i, partition=0) for i in range(3)])
    recs = consume_confluent(b.bootstrap, topic, 1, 3)
    assert [r.value for r in recs] == [b"still-ok-0", b"still-ok-1", b"still-ok-2"]


OVERSIZE_GAP = pytest.mark.tansu_gap("tansu does not refuse oversized frames before reading them")


@pytest.mark.parametrize("size", [
    pytest.param(MAX_REQUEST + 1, marks=OVERSIZE_GAP, id="limit+1"),
    pytest.param(2**31 - 1, marks=OVERSIZE_GAP, id="int32max"),
    pytest.param(-1, id="minus1"),
    pytest.param(-(2**31), id="int32min"),
])
def test_oversized_or_negative_size_prefix_is_refused(target, size):
    b = target
    t0 = time.monotonic()
    _, closed = _exchange(b.port, struct.pack(">i", size) + b"\x00\x12\x00\x03", half_close=False, timeout=3)
    elapsed = time.monotonic() - t0
    assert closed, f"connection with size prefix {size} not closed within 3 s"
    assert elapsed < 1.0, f"took {elapsed:.2f}s to refuse"
    _healthy(b)


def test_size_prefix_at_the_limit_is_not_refused_early(target):
    """Exactly socket.request.max.bytes is allowed: the broker waits for the body instead of closing."""
    b = target
    s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
    try:
        s.sendall(struct.pack(">i", MAX_REQUEST) + b"\x00" * 1000)
        s.settimeout(0.7)
        with pytest.raises(socket.timeout):
            data = s.recv(10)
            pytest.fail(f"connection answered/closed early: {data!r}")
    finally:
        s.close()
    assert b.alive()


def _mutations(frames: list[bytes]) -> st.SearchStrategy[bytes]:
    frame = st.sampled_from(frames)

    @st.composite
    def strat(draw) -> bytes:
        kind = draw(st.sampled_from(["random", "flip", "truncate", "resize", "header", "splice"]))
        if kind == "random":
            body = draw(st.binary(min_size=0, max_size=600))
            if draw(st.booleans()):  # a plausible size prefix in front of random bytes
                return struct.pack(">i", len(body)) + body
            return body
        f = bytearray(draw(frame))
        if kind == "flip":
            for _ in range(draw(st.integers(1, 10))):
                i = draw(st.integers(4, len(f) - 1))
                f[i] = draw(st.integers(0, 255))
        elif kind == "truncate":  # the body ends early, size prefix fixed up to match
            cut = draw(st.integers(4, len(f) - 1))
            f = f[:cut]
            struct.pack_into(">i", f, 0, len(f) - 4)
        elif kind == "resize":  # the size prefix lies
            struct.pack_into(">i", f, 0, draw(st.integers(0, 4096)))
        elif kind == "header":  # unknown/other api key or version
            struct.pack_into(">hh", f, 4, draw(st.integers(-1, 120)), draw(st.integers(-1, 40)))
        else:  # two frames glued, the second cut short
            g = draw(frame)
            f = f + g[: draw(st.integers(1, len(g)))]
        return bytes(f)

    return strat()


def test_fuzzed_frames_do_not_hurt_the_broker(target):
    b = target
    frames = b.frames
    stats = {"n": 0, "answered": 0, "closed": 0}

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=_mutations(frames))
    def run(data: bytes) -> None:
        got, closed = _exchange(b.port, data, timeout=2.0)
        stats["n"] += 1
        stats["answered"] += bool(got)
        stats["closed"] += closed
        assert b.alive(), f"broker died on input {data[:200]!r}:\n{b.output()[-5000:]}"

    run()
    assert stats["n"] >= 200
    # after the client's EOF the broker closes its side: a connection left hanging is a leak
    assert stats["closed"] >= stats["n"] * 0.95, stats
    _healthy(b)


@pytest.mark.tansu_gap("tansu appends batches whose CRC does not match")
@pytest.mark.parametrize("where", ["record-byte", "crc-field", "attributes"])
def test_corrupt_crc_gets_corrupt_message(target, where):
    from kafka.protocol.producer import ProduceResponse

    b = target
    topic = create_topic(b.bootstrap, unique_topic("crc"), 1)
    good = bytes(record_batch([b"value-%d" % i for i in range(3)], int(time.time() * 1000), key=b"k"))
    batch = bytearray(good)
    if where == "record-byte":
        batch[-1] ^= 0xFF
    elif where == "crc-field":
        batch[17] ^= 0x01  # CRC is at bytes 17..20 of the batch
    else:
        batch[21] ^= 0x02  # attributes (covered by the CRC): flip a timestamp-type/compression bit

    with RawConnection("127.0.0.1", b.port) as conn:
        resp = conn.call(produce_request(topic, 0, bytes(batch)), ProduceResponse, 7)
    (tresp,) = resp.responses
    (presp,) = tresp.partition_responses
    assert presp.error_code == 2, f"expected CORRUPT_MESSAGE (2), got {presp}"
    assert watermarks(b.bootstrap, topic, 0) == (0, 0)

    # the same batch, intact, is accepted on the same topic
    with RawConnection("127.0.0.1", b.port) as conn:
        resp = conn.call(produce_request(topic, 0, good), ProduceResponse, 7)
    assert resp.responses[0].partition_responses[0].error_code == 0
    assert watermarks(b.bootstrap, topic, 0) == (0, 3)


@pytest.mark.tansu_gap("tansu closes the connection on an ApiVersions version it does not know")
def test_api_versions_too_new_gets_unsupported_version_with_v0_body(target):
    b = target
    corr = 4242
    client_id = b"moldau-tests"
    # request header v2 (flexible): api_key, api_version, correlation id, client id, no tagged fields;
    # body shaped like ApiVersions v3 (client software name and version, compact strings)
    header = struct.pack(">hhih", 18, 99, corr, len(client_id)) + client_id + b"\x00"
    body = b"\x05moldu" + b"\x040.1" + b"\x00"
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(frame)
        payload = read_frame(s)
        # the connection stays usable: a v0 ApiVersions request right after is answered
        v0 = struct.pack(">hhih", 18, 0, corr + 1, len(client_id)) + client_id
        s.sendall(struct.pack(">i", len(v0)) + v0)
        payload2 = read_frame(s)

    # response header v0 (correlation id only), then the v0 body: error_code, [api_key, min, max]
    got_corr, error_code, n = struct.unpack_from(">ihi", payload)
    assert got_corr == corr
    assert error_code == 35, f"expected UNSUPPORTED_VERSION (35), got {error_code}"
    assert n == 1  # ApiVersions' own range only, as Kafka answers (KIP-511)
    ranges = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", payload, 10 + 6 * i)
        ranges[key] = (lo, hi)
    assert len(payload) == 10 + 6 * n, "v0 body must end after the ranges (no throttle, no tagged fields)"
    assert list(ranges) == [18] and ranges[18][0] == 0 and ranges[18][1] >= 3

    # the v0 request gets every range: Produce, Fetch, ListOffsets, Metadata and the rest
    got_corr2, error_code2, n2 = struct.unpack_from(">ihi", payload2)
    assert (got_corr2, error_code2) == (corr + 1, 0) and 10 <= n2 <= 200
    keys = {struct.unpack_from(">h", payload2, 10 + 6 * i)[0] for i in range(n2)}
    assert {0, 1, 2, 3, 18} <= keys
