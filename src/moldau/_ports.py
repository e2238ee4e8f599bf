"""Free loopback ports for servers started by this process (tests, embedded brokers, local clusters)."""

from __future__ import annotations

import collections
import socket
import threading

_lock = threading.Lock()
_recent: collections.deque[int] = collections.deque(maxlen=4096)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, and not handed out by an earlier call of this process.

    The port is released before it is returned, so the kernel may give the same one to the next
    ``bind(0)``: two calls in a row (a broker's port and a proxy's, say) could otherwise both get it.
    """
    with _lock:
        for _ in range(64):
            with socket.socket() as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if port not in _recent:
                break
        _recent.append(port)
        return port
