"""The Kafka 0.7 listener's connections: frames in, ``Kafka07Service`` answers out, in request order.

A frame that does not parse (unknown request type, truncated body, size out of range) closes the
connection, as Kafka 0.7's socket server did; so does a failed PRODUCE (see ``service``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from typing import Any

from moldau.protocol import kafka07 as k07

from .service import KEEP_INDEXES_S, CloseConnection, IndexPending, Kafka07Service

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
        self.pending: deque[bytes] = deque()  # request bodies not handled yet, in order
        self.waiting: IndexPending | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.host = self.peer[0] if isinstance(self.peer, tuple) and self.peer else ""
        self.transport.set_write_buffer_limits(high=_HIGH_WATER)  # a stream (write) transport
        self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        self.transport = None
        self.pending.clear()
        self.waiting = None

    def pause_writing(self) -> None:  # the client reads slower than it asks: stop reading its requests
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        try:
            self.pending.extend(self.reader.feed(data))
        except k07.Kafka07RequestError as e:
            log.info("0.7 connection from %s: invalid request (%s); closing", self.peer, e)
            self.close()
            return
        if self.waiting is None:
            self._process()

    def _process(self) -> None:
        """Handle the queued requests in order; a request whose partition's byte-offset index is behind
        waits while the index is extended one step per event-loop callback (``IndexPending``)."""
        transport = self.transport
        try:
            while self.pending and transport is not None:
                kind, req = k07.parse_request(self.pending[0])
                try:
                    out = self.service.handle(kind, req, self.host)
                except IndexPending as e:
                    self.waiting = e
                    transport.pause_reading()
                    e.advance(self.service.executor, self._indexed)
                    return
                self.pending.popleft()
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

    def _indexed(self, error: BaseException | None) -> None:
        w, self.waiting = self.waiting, None
        if self.transport is None:
            return
        if error is not None:
            log.error("0.7 connection from %s: indexing %s failed (%s); closing", self.peer,
                      w.plog.dir if w is not None else "?", error)
            self.close()
            return
        self.transport.resume_reading()
        self._process()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Kafka07Listener:
    """One bound 0.7 listener and its open connections."""

    def __init__(self, server: asyncio.Server, connections: set[Kafka07Connection],
                 service: Kafka07Service | None = None) -> None:
        self.server = server
        self.connections = connections
        self.service = service
        self.keeper: asyncio.TimerHandle | None = None  # the periodic Kafka07Service.keep_indexes
        self.registration: Any = None  # zookeeper.ZooKeeperRegistration, when configured

    def close(self) -> None:
        self.server.close()
        for c in list(self.connections):
            c.close()
        if self.keeper is not None:
            self.keeper.cancel()
            self.keeper = None
        if self.service is not None:
            self.service.close()
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
    listener = Kafka07Listener(srv, connections, service)

    def keep() -> None:
        try:
            service.keep_indexes()
        except Exception:  # pragma: no cover - logged, tried again at the next period
            log.exception("keeping the 0.7 byte-offset indexes failed")
        listener.keeper = loop.call_later(KEEP_INDEXES_S, keep)

    listener.keeper = loop.call_later(KEEP_INDEXES_S, keep)
    return listener
