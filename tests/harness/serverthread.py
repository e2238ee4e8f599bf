"""A moldau HTTP server (the console's ConsoleServer, the registry's RegistryServer) on a loopback port, in
a thread with its own event loop: what the console and registry tests drive in-process."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Self


class ServerThread:
    """``server`` has ``start()``/``stop()`` coroutines and a ``url``; ``name`` names the thread."""

    def __init__(self, server: Any, name: str) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)

    def start(self) -> Self:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)
        return self

    @property
    def url(self) -> str:
        return str(self.server.url)

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
