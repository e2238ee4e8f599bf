"""Run an HTTP server of moldau (the console, the schema registry) in the foreground until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from typing import Protocol


class Startable(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def serve_until_signal(server: Startable) -> None:
    """Start ``server``, wait for SIGINT or SIGTERM, stop it."""

    async def main() -> None:
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
                pass  # no loop signal handlers (Windows, or not the main thread): Ctrl-C still interrupts
        try:
            await stop.wait()
        finally:
            await server.stop()

    asyncio.run(main())
