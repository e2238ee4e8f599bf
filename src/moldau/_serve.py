"""The HTTP servers of moldau (the console, the schema registry): run one in the foreground until SIGTERM
(``moldau console``, ``moldau registry``), or inside a broker process (``console.listener``,
``schema.registry.listener``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from moldau.broker.config import Listener

log = logging.getLogger(__name__)


class Startable(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


S = TypeVar("S", bound=Startable)


def parse_listen(text: str, what: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; no host: 127.0.0.1) -> (host, port); ValueError naming ``what``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return (host.strip("[]") or "127.0.0.1"), int(port)


async def start_embedded(
    spec: object, config_key: str, command: str, listeners: Sequence[Listener],
    make: Callable[[str, str, int], S],
) -> S | None:
    """Start the server a broker runs in its own process when ``config_key`` (``spec``: its value,
    ``HOST:PORT``) is set: ``make(bootstrap, host, port)`` builds it as a client of the broker's own first
    PLAINTEXT listener (``bootstrap``), listening on ``host:port``. None when ``spec`` is empty, or (logged)
    when the broker has no PLAINTEXT listener: ``command`` (``moldau console``) then serves it with the
    client's security settings. A malformed ``spec`` is the broker's ConfigError."""
    if not spec:
        return None
    from moldau.broker.config import ConfigError

    try:
        host, port = parse_listen(str(spec), config_key)
    except ValueError as e:
        raise ConfigError(config_key, str(e)) from None
    plain = [lst for lst in listeners if str(lst.security_protocol).upper() == "PLAINTEXT"]
    if not plain:
        log.error("%s: the broker has no PLAINTEXT listener to connect to; run `%s` with the client's "
                  "security settings instead", config_key, command)
        return None
    lst = plain[0]
    target = lst.host if lst.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    target = f"[{target}]" if ":" in target else target
    server = make(f"{target}:{lst.port}", host, port)
    await server.start()
    return server


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
