"""The console inside a broker process (``console.listener=HOST:PORT``): it connects to the broker's own
first PLAINTEXT listener like any client would (``moldau._serve.start_embedded``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from moldau._serve import start_embedded

from .server import ConsoleServer
from .web import ConsoleSettings

if TYPE_CHECKING:
    from moldau.broker.config import Listener

CONFIG_KEY = "console.listener"


async def start_console(config_value: object, listeners: Sequence[Listener]) -> ConsoleServer | None:
    """``config_value``: the broker's ``console.listener``; ``listeners``: its bound listeners."""
    return await start_embedded(
        config_value, CONFIG_KEY, "moldau console", listeners,
        lambda bootstrap, host, port: ConsoleServer(
            ConsoleSettings({"bootstrap.servers": bootstrap}, host=host, port=port)),
    )
