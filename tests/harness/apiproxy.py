"""A TCP proxy in front of a real broker that hides some APIs from ApiVersions answers.

The broker advertises the proxy's port (``broker_factory(advertised_port=port)``), so every client
connection goes through it; ApiVersions responses are decoded, the hidden api keys removed, and re-encoded.
To the clients the broker then looks like one without those APIs (e.g. without transactions).
"""

from __future__ import annotations

import socket
import struct
import threading

from moldau.protocol import messages as m

API_VERSIONS = 18


class HidingProxy:
    def __init__(self, target: tuple[str, int], listen_port: int, hidden: set[int]) -> None:
        self.target = target
        self.hidden = hidden
        self._srv = socket.create_server(("127.0.0.1", listen_port))
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self.rewritten = 0
        threading.Thread(target=self._accept, daemon=True, name="apiproxy").start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self._srv.getsockname()[1]}"

    def close(self) -> None:
        self._srv.close()
        with self._lock:
            for s in self._socks:
                s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._srv.accept()
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                return
            upstream.settimeout(None)
            with self._lock:
                self._socks += [client, upstream]
            versions: dict[int, int] = {}  # correlation id -> ApiVersions request version
            threading.Thread(target=self._pump, args=(client, upstream, versions, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, versions, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, versions: dict[int, int], requests: bool) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    return
                buf += data
                while len(buf) >= 8:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    if requests:
                        api_key, version, corr = struct.unpack_from(">hhi", frame)
                        if api_key == API_VERSIONS:
                            versions[corr] = version
                    else:
                        (corr,) = struct.unpack_from(">i", frame)
                        if corr in versions:
                            frame = frame[:4] + self._filter(frame[4:], versions.pop(corr))
                    dst.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            src.close()
            dst.close()

    def _filter(self, body: bytes, version: int) -> bytes:
        resp, _ = m.ApiVersionsResponse.decode(body, version)
        resp.api_keys = [k for k in resp.api_keys if k.api_key not in self.hidden]
        self.rewritten += 1
        return m.ApiVersionsResponse.encode(resp, version)
