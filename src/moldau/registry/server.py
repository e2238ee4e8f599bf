"""Running the registry: ``RegistryServer`` (start/stop inside a running event loop: the broker's
``schema.registry.listener`` and the tests) and ``run_registry`` (the blocking ``moldau registry``)."""

from __future__ import annotations

import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from moldau._serve import serve_until_signal

from .api import RegistryAPI
from .election import LeaderElector
from .service import Registry
from .state import RegistryState
from .store import TOPIC, KafkaStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RegistrySettings:
    client_conf: dict[str, Any]  # the Kafka client's configuration (bootstrap.servers, security...)
    host: str = "127.0.0.1"
    port: int = 8081
    topic: str = TOPIC
    replication_factor: int = -1  # of _schemas when the registry creates it; -1: the cluster's default
    timeout: float = 30.0  # for a write to be read back, and for the first replay
    group_id: str | None = "schema-registry"  # the leader election's group; None: no election (one writer)
    advertised_url: str | None = None  # what followers forward to; default http://HOST:PORT
    session_timeout_ms: int = 10000  # of the election's group membership: how soon a dead leader is replaced
    # HTTP basic auth: user -> (password, role); role "admin" (everything) or "readonly" (reads, lookups and
    # compatibility checks); empty: no authentication
    users: dict[str, tuple[str, str]] = field(default_factory=dict)
    tls_cert: str | None = None  # PEM certificate (chain) and key: serve HTTPS
    tls_key: str | None = None
    tls_ca: str | None = None  # CA file the instances trust when a follower forwards to an HTTPS leader
    extra: dict[str, Any] = field(default_factory=dict)


class RegistryServer:
    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self.state = RegistryState()
        self.store = KafkaStore(
            settings.client_conf, self.state, settings.topic, settings.replication_factor, settings.timeout
        )
        self.registry = Registry(self.state, self.store)
        self.port = settings.port
        self._runner: web.AppRunner | None = None
        self.elector: LeaderElector | None = None
        self.api: RegistryAPI | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.settings.tls_cert else "http"

    @property
    def url(self) -> str:
        host = self.settings.host
        return f"{self.scheme}://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.settings.tls_cert:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.settings.tls_cert, self.settings.tls_key)
        return ctx

    async def start(self) -> None:
        await self.store.start()
        self.api = RegistryAPI(self.registry, users=self.settings.users, tls_ca=self.settings.tls_ca)
        app = self.api.app()
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(
            runner,
            self.settings.host,
            self.settings.port,
            reuse_address=True,
            ssl_context=self._ssl_context(),
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            await self.store.stop()
            raise
        self._runner = runner
        server: Any = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        if self.settings.group_id:
            self.elector = LeaderElector(
                self.settings.client_conf,
                self.settings.topic,
                self.settings.group_id,
                self.advertised_url,
                self.settings.session_timeout_ms,
            )
            await self.elector.start()
            self.api.elector = self.elector
        log.info(
            "moldau schema registry on %s (cluster %s, topic %s)",
            self.url,
            self.settings.client_conf.get("bootstrap.servers"),
            self.settings.topic,
        )

    @property
    def advertised_url(self) -> str:
        if self.settings.advertised_url:
            return self.settings.advertised_url.rstrip("/")
        host = self.settings.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        return f"{self.scheme}://{'[' + host + ']' if ':' in host else host}:{self.port}"

    async def stop(self) -> None:
        if self.elector is not None:
            await self.elector.stop()
            self.elector = None
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self.api is not None:
            await self.api.close()
        await self.store.stop()


def run_registry(settings: RegistrySettings) -> None:
    """Serve until SIGINT/SIGTERM."""
    serve_until_signal(RegistryServer(settings))
