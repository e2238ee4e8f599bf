"""Running the console: ``ConsoleServer`` (start/stop inside a running event loop, used by the broker's
``console.listener`` and by the tests) and ``run_console`` (the blocking ``moldau console`` command)."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from moldau._serve import serve_until_signal

from .pages import Console
from .web import ConsoleSettings

log = logging.getLogger(__name__)


class ConsoleServer:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.console = Console(settings)
        self._runner: web.AppRunner | None = None
        self.app: web.Application | None = None
        self.port = settings.port

    @property
    def url(self) -> str:
        host = self.settings.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    async def start(self) -> None:
        app = self.app = self.console.app()
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.host, self.settings.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server: Any = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        log.info(
            "moldau console on %s (cluster %s%s)",
            self.url,
            self.settings.client_conf.get("bootstrap.servers"),
            ", read-only" if self.settings.read_only else "",
        )

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


def run_console(settings: ConsoleSettings) -> None:
    """Serve until SIGINT/SIGTERM."""
    serve_until_signal(ConsoleServer(settings))
