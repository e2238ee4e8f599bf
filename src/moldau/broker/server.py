"""The listening sockets of a broker, and uvloop installation (the process entry point, ``run``, is in
``moldau.broker.broker``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any, Protocol

from moldau._aio import wait_for

from .connection import Connection, ConnectionHost
from .router import Router

if TYPE_CHECKING:
    from .config import Listener
    from .services import BrokerServices

log = logging.getLogger(__name__)


class ServerHost(ConnectionHost, Protocol):
    """What the server needs of its broker (``broker.Broker`` is one)."""

    @property
    def services(self) -> BrokerServices: ...


class Server:
    """The listening sockets of one broker."""

    def __init__(self, host: ServerHost) -> None:
        self.host = host
        self.router = Router(host.services)
        self.servers: list[asyncio.AbstractServer] = []
        self.bound: list["Listener"] = []  # listeners with their actual ports
        self.legacy: list[Any] = []  # Kafka 0.7 listeners (broker.kafka07)

    async def start(self) -> None:
        from .config import Listener
        from .security import ensure_security

        loop = asyncio.get_running_loop()
        cfg = self.host.services.config
        security = ensure_security(self.host.services)  # validates listeners, loads TLS certificates
        backlog = cfg.socket.listen_backlog_size
        sndbuf = cfg.socket.send_buffer_bytes
        rcvbuf = cfg.socket.receive_buffer_bytes
        for lst in cfg.listeners:
            name = lst.name
            host = lst.host or None
            if lst.security_protocol == "KAFKA07":
                self.bound.append(await self._start_kafka07(lst, backlog))
                continue
            srv = await loop.create_server(
                lambda name=name: Connection(self.host, self.router, name), host, lst.port,
                backlog=backlog, reuse_address=True, ssl=security.ssl_context(name))
            for sock in srv.sockets:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if sndbuf > 0:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
                    if rcvbuf > 0:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                except OSError:  # pragma: no cover
                    pass
            port = srv.sockets[0].getsockname()[1] if srv.sockets else lst.port
            self.servers.append(srv)
            self.bound.append(Listener(name, lst.host, port, lst.security_protocol))

    async def _start_kafka07(self, lst: "Listener", backlog: int) -> "Listener":
        from .config import Listener
        from .kafka07 import Kafka07Service, start_listener

        s = self.host.services
        service = Kafka07Service(s.replica_manager, s.metadata, s.config, s.clock, s.authorizer)
        if s.log_manager is not None:  # compacted logs are indexed before they are cleaned (docs/kafka07.md)
            s.log_manager.cleaner.kafka07_indexes = True
        legacy = await start_listener(service, lst.host or None, lst.port, backlog=backlog,
                                      max_request=int(s.config.get("socket.request.max.bytes")))
        self.legacy.append(legacy)
        self.servers.append(legacy.server)
        port = legacy.server.sockets[0].getsockname()[1] if legacy.server.sockets else lst.port
        if s.config.get("kafka07.zookeeper.connect"):
            from .kafka07.zookeeper import start_registration

            legacy.registration = await start_registration(s.config, s.node_id, lst.host, port, s.metadata)
        return Listener(lst.name, lst.host, port, lst.security_protocol)

    def stop_accepting(self) -> None:
        for srv in self.servers:
            srv.close()
        for legacy in self.legacy:
            legacy.close()

    async def wait_closed(self) -> None:
        for srv in self.servers:
            try:
                await wait_for(srv.wait_closed(), 1.0)
            except (asyncio.TimeoutError, Exception):  # pragma: no cover
                pass


def install_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
