"""A TCP proxy between Kafka clients and the broker that can lose Produce responses (and record requests).

The broker advertises the proxy's address, so every client connection goes through it. When armed, the
proxy lets a Produce request reach the broker, swallows the broker's response, and closes that client
connection: the write happened but the client never heard so, and retries. An idempotent producer's
retry must not create a duplicate, and records must stay in order.
"""

from __future__ import annotations

import socket
import struct
import threading

PRODUCE = 0


class FaultProxy:
    def __init__(self, target: tuple[str, int] | None = None, listen_port: int = 0) -> None:
        """Listen on listen_port (0: an ephemeral port, held from now on, so a broker started next
        cannot be given the same one); `target` may be set later, before the first client connects."""
        self.target = target
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", listen_port))
        self.listen_port = self._srv.getsockname()[1]
        self._srv.listen(64)
        self._lock = threading.Lock()
        self._closed = False
        self._conns: list[socket.socket] = []
        self.drop_every = 0  # 0 = disarmed; N = lose the response of every Nth Produce request
        self.max_drops = 0
        self.produce_responses = 0
        self.drops = 0
        self.record = False  # keep a copy of every client->broker request frame in .requests
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True, name="faultproxy-accept").start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    def arm(self, drop_every: int, max_drops: int) -> None:
        with self._lock:
            self.drop_every, self.max_drops = drop_every, max_drops

    def disarm(self) -> None:
        with self._lock:
            self.drop_every = 0

    def close(self) -> None:
        self._closed = True
        try:
            self._srv.close()
        except OSError:
            pass
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            _close(s)

    # ------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                assert self.target is not None, "FaultProxy.target is set before clients connect"
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._conns += [client, upstream]
            produce_ids: set[int] = set()
            threading.Thread(target=self._c2b, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._b2c, args=(upstream, client, produce_ids), daemon=True).start()

    def _c2b(self, client: socket.socket, upstream: socket.socket, produce_ids: set[int]) -> None:
        buf = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                buf += data
                # note the correlation ids of Produce requests (header: api_key, api_version, corr id)
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    if size >= 8:
                        api_key, _ver, corr = struct.unpack_from(">hhi", buf, 4)
                        if api_key == PRODUCE:
                            produce_ids.add(corr)
                    if self.record:
                        with self._lock:
                            self.requests.append(bytes(buf[: 4 + size]))
                    upstream.sendall(buf[: 4 + size])
                    buf = buf[4 + size:]
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)

    def _b2c(self, upstream: socket.socket, client: socket.socket, produce_ids: set[int]) -> None:
        buf = b""
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 8:
                    size, corr = struct.unpack_from(">ii", buf)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[: 4 + size], buf[4 + size:]
                    if corr in produce_ids:
                        produce_ids.discard(corr)
                        if self._should_drop():
                            return  # the broker wrote it; the client never hears so
                    client.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)

    def _should_drop(self) -> bool:
        with self._lock:
            self.produce_responses += 1
            if (
                self.drop_every
                and self.drops < self.max_drops
                and self.produce_responses % self.drop_every == 0
            ):
                self.drops += 1
                return True
            return False


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
