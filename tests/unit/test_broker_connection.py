"""The connection layer and router, on a real listening socket (ApiVersions needs no storage)."""

import asyncio
import struct

import pytest

from moldau.broker.broker import Broker
from moldau.broker.config import BrokerConfig
from moldau.broker.registry import load_all
from moldau.broker.server import Server
from moldau.protocol import frame
from moldau.protocol import messages as m


async def _server(tmp_path, **overrides):
    cfg = BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                   **overrides}, env={})
    broker = Broker(cfg)
    srv = Server(broker)
    await srv.start()
    broker.server = srv
    broker.listeners = srv.bound
    return broker, srv


async def _read_frame(reader):
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def _api_versions_request(corr, version=0):
    req = m.ApiVersionsRequest.new(client_software_name="t", client_software_version="1")
    return frame.encode_request(18, version, corr, "test", req)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_api_versions_all_versions_and_pipelining(tmp_path):
    async def main():
        _broker, srv = await _server(tmp_path)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            # pipelined: five requests in one write, answers in order
            w.write(b"".join(_api_versions_request(100 + v, v) for v in range(5)))
            for v in range(5):
                body = await _read_frame(r)
                hdr, off = frame.decode_response_header(body, 18, v)
                assert hdr.correlation_id == 100 + v
                resp, _ = m.ApiVersionsResponse.decode(body, v, off)
                assert resp.error_code == 0
                keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
                assert keys == {s.api_key: (s.min_version, s.max_version) for s in load_all().values()}
                assert keys[18] == (0, 4)
            w.close()
        finally:
            srv.stop_accepting()
    run(main())


def test_unsupported_api_versions_version_gets_v0_error(tmp_path):
    async def main():
        _broker, srv = await _server(tmp_path)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            # ApiVersions v9 with a body we do not know: error 35 in a v0 body with the supported ranges
            hdr = struct.pack(">hhih", 18, 9, 7, 4) + b"test" + b"\x00\x00\x00"
            w.write(struct.pack(">i", len(hdr)) + hdr)
            body = await _read_frame(r)
            assert struct.unpack_from(">i", body)[0] == 7
            resp, _ = m.ApiVersionsResponse.decode(body, 0, 4)
            assert resp.error_code == 35
            assert any(k.api_key == 18 and k.max_version == 4 for k in resp.api_keys)
            w.close()
        finally:
            srv.stop_accepting()
    run(main())


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 0),                       # size 0
    struct.pack(">i", -5),                      # negative size
    struct.pack(">i", 2_000_000),               # above socket.request.max.bytes (1 MB here)
    struct.pack(">ihhi", 8, 9999, 0, 1),        # unknown api key
    struct.pack(">ihhi", 8, 3, 99, 1),          # unsupported Metadata version
    struct.pack(">ihhih", 10, 18, 0, 1, 50),    # header claims a client id longer than the frame
])
def test_bad_frames_close_connection(tmp_path, payload):
    async def main():
        _broker, srv = await _server(tmp_path, **{"socket.request.max.bytes": "1000000"})
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            w.write(payload)
            assert await r.read() == b""  # closed without an answer
            # the server survives
            r, w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            w.write(_api_versions_request(1))
            body = await _read_frame(r)
            assert struct.unpack_from(">i", body)[0] == 1
            w.close()
        finally:
            srv.stop_accepting()
    run(main())


def test_large_frame_split_across_reads(tmp_path):
    async def main():
        _broker, srv = await _server(tmp_path)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            # an ApiVersions v3 request with a 600 kB client software name arrives in pieces; it is answered
            # with INVALID_REQUEST (the name is not a valid software name) after the whole frame arrived
            name = "a" * 600_000
            req = m.ApiVersionsRequest.new(client_software_name=name, client_software_version="1-")
            data = frame.encode_request(18, 3, 5, "c", req)
            for i in range(0, len(data), 65536):
                w.write(data[i:i + 65536])
                await w.drain()
                await asyncio.sleep(0)
            body = await _read_frame(r)
            resp, _ = m.ApiVersionsResponse.decode(body, 3, 4)
            assert resp.error_code == 42
            w.write(_api_versions_request(6, 3))
            body = await _read_frame(r)
            resp, _ = m.ApiVersionsResponse.decode(body, 3, 4)
            assert struct.unpack_from(">i", body)[0] == 6 and resp.error_code == 0
            w.close()
        finally:
            srv.stop_accepting()
    run(main())


def test_idle_connection_closed(tmp_path):
    async def main():
        _broker, srv = await _server(tmp_path, **{"connections.max.idle.ms": "200"})
        try:
            r, _w = await asyncio.open_connection("127.0.0.1", srv.bound[0].port)
            t0 = asyncio.get_running_loop().time()
            assert await r.read() == b""
            assert 0.15 < asyncio.get_running_loop().time() - t0 < 2
        finally:
            srv.stop_accepting()
    run(main())
