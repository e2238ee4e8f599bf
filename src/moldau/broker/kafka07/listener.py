"""The Kafka 0.7 listener's connections: frames in, ``Kafka07Service`` answers out, in request order.

A frame that does not parse (unknown request type, truncated body, size out of range) closes the
connection, as Kafka 0.7's socket server did; so does a failed PRODUCE (see ``service``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from moldau.protocol import kafka07 as k07

from .service import CloseConnection, Kafka07Service

log = logging.getLogger(__name__)

KAFKA07_PROTOCOL = "KAFKA07"
_HIGH_WATER = 8 << 20


class Kafka07Connection(asyncio.Protocol):
    def __init__(self, service: Kafka07Service, max_request: int, connections: set[Any]) -> None:
        self.service = service
        self.reader = k07.FrameReader(max_request)
        self.connections = connections
        self.transport: Any = None  # asyncio's or uvloop's transport
        self.peer: Any = None
        self.host = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.host = self.peer[0] if isinstance(self.peer, tuple) and self.peer else ""
        transport.set_write_buffer_limits(high=_HIGH_WATER)
        self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        self.transport = None

    def pause_writing(self) -> None:  # the client reads slower than it asks: stop reading its requests
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None:
            return
        try:
            for body in self.reader.feed(data):
                kind, req = k07.parse_request(body)
                out = self.service.handle(kind, req, self.host)
                if out and not transport.is_closing():
                    transport.writelines(out)
        except k07.Kafka07RequestError as e:
            log.info("0.7 connection from %s: invalid request (%s); closing", self.peer, e)
            self.close()
        except CloseConnection:
            self.close()
        except Exception:
            log.exception("0.7 connection from %s: request failed; closing", self.peer)
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Kafka07Listener:
    """One bound 0.7 listener and its open connections."""

    def __init__(self, server: asyncio.AbstractServer, connections: set[Kafka07Connection]) -> None:
        self.server = server
        self.connections = connections
        self.registration: Any = None  # zookeeper.ZooKeeperRegistration, when configured

    def close(self) -> None:
        self.server.close()
        for c in list(self.connections):
            c.close()
        if self.registration is not None:
            self.registration.stop()
            self.registration = None


async def start_listener(service: Kafka07Service, host: str | None, port: int, *, max_request: int,
                         backlog: int = 100) -> Kafka07Listener:
    loop = asyncio.get_running_loop()
    connections: set[Kafka07Connection] = set()
    srv = await loop.create_server(lambda: Kafka07Connection(service, max_request, connections), host, port,
                                   backlog=backlog, reuse_address=True)
    for sock in srv.sockets:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover
            pass
    return Kafka07Listener(srv, connections)
