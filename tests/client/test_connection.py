"""Connections, version negotiation, bootstrap errors, configuration."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from moldau._ports import free_port
from moldau.client import AsyncProducer, BootstrapError, ConfigError, Consumer, Producer
from moldau.client.cluster import Cluster
from moldau.client.config import resolve_config
from moldau.client.conn import Connection
from moldau.protocol import messages as m


def _free_port() -> int:
    return free_port()


def test_unreachable_bootstrap_names_address_and_cause():
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(BootstrapError) as ei:
        Producer(bootstrap_servers=f"127.0.0.1:{port}")
    assert str(ei.value) == f"cannot reach bootstrap server 127.0.0.1:{port}: connection refused"
    assert time.monotonic() - t0 < 5


def test_unreachable_bootstrap_lists_every_server():
    p1, p2 = _free_port(), _free_port()
    with pytest.raises(BootstrapError) as ei:
        Consumer(bootstrap_servers=[f"127.0.0.1:{p1}", f"no-such-host.invalid:{p2}"])
    msg = str(ei.value)
    assert msg.startswith("cannot reach any bootstrap server: ")
    assert f"127.0.0.1:{p1}: connection refused" in msg
    assert f"no-such-host.invalid:{p2}: cannot resolve host name" in msg


def test_bootstrap_falls_through_to_a_live_server(broker):
    with Producer(bootstrap_servers=[f"127.0.0.1:{_free_port()}", broker.bootstrap]) as p:
        assert p.partitions_for is not None


def test_config_names_and_errors():
    c = resolve_config(
        "producer", {"linger.ms": "7", "acks": "all"}, {"batch_size": 1000, "enable_idempotence": "false"}
    )
    assert (c["linger.ms"], c["acks"], c["batch.size"], c["enable.idempotence"]) == (7, -1, 1000, False)
    with pytest.raises(ConfigError, match="unknown producer config 'lingr.ms'"):
        resolve_config("producer", {"lingr.ms": 1}, {})
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        resolve_config("consumer", {}, {"auto_offset_reset": "sometimes"})
    with pytest.raises(ConfigError, match="enable.idempotence=true needs acks=all"):
        resolve_config("producer", {}, {"acks": 1, "enable_idempotence": True})


def test_api_versions_negotiated_and_pipelined(broker):
    host, port = broker.bootstrap.split(":")

    async def main():
        conn = await Connection.open(host, int(port))
        try:
            # the highest common version of each API is used
            for key in (0, 1, 3):
                lo, hi = conn.broker_versions[key]
                assert lo <= conn.api_version(key) <= hi
            # many requests in flight on one connection, matched by correlation id
            reqs = [conn.send(3, m.MetadataRequest.new(topics=[], allow_auto_topic_creation=False))
                    for _ in range(50)]
            reqs.append(conn.send(18, m.ApiVersionsRequest.new(client_software_name="t",
                                                               client_software_version="1"), version=0))
            resps = await asyncio.gather(*reqs)
            assert all(r.brokers for r in resps[:-1])
            assert resps[-1].error_code == 0 and resps[-1].api_keys
        finally:
            conn.close()

    asyncio.run(main())


def test_api_versions_unsupported_version_falls_back_to_v0():
    """A broker that cannot parse ApiVersions v3 answers UNSUPPORTED_VERSION with a v0 body."""
    import struct

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    seen = []

    def serve():
        conn, _ = srv.accept()
        with conn:
            for _ in range(2):
                n = struct.unpack(">i", conn.recv(4))[0]
                data = b""
                while len(data) < n:
                    data += conn.recv(n - len(data))
                _api_key, version, corr = struct.unpack_from(">hhi", data)
                seen.append(version)
                # v0 body: error_code, [api_key, min, max]
                code = 35 if version > 0 else 0
                body = (
                    struct.pack(">ihi", corr, code, 2)
                    + struct.pack(">hhh", 18, 0, 0)
                    + struct.pack(">hhh", 3, 0, 12)
                )
                conn.sendall(struct.pack(">i", len(body)) + body)

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    async def main():
        conn = await Connection.open("127.0.0.1", port)
        conn.close()
        return conn.broker_versions

    versions = asyncio.run(main())
    t.join(5)
    srv.close()
    assert seen == [3, 0]
    assert versions == {18: (0, 0), 3: (0, 12)}


def test_reconnects_with_backoff_after_connection_loss(broker, make_topic):
    topic = make_topic(1)

    async def main():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap) as p:
            md1 = await p.send_and_wait(topic, b"a")
            for conn in list(p._cluster._conns.values()):
                conn._transport.abort()  # drop every connection under the producer
            await asyncio.sleep(0.05)
            md2 = await p.send_and_wait(topic, b"b")
            return md1, md2

    md1, md2 = asyncio.run(main())
    assert md2.offset == md1.offset + 1


def test_metadata_refresh_and_topic_wait(broker, make_topic):
    topic = make_topic(3)

    async def main():
        cfg = resolve_config("admin", {"bootstrap.servers": broker.bootstrap}, {})
        cl = Cluster(cfg)
        await cl.start()
        try:
            md = await cl.wait_for_topic(topic, 10_000)
            assert sorted(md.partitions) == [0, 1, 2]
            assert all(cl.leader(topic, p) in cl.brokers for p in range(3))
            v = cl.version
            await cl.refresh()
            assert cl.version > v
        finally:
            await cl.close()

    asyncio.run(main())
