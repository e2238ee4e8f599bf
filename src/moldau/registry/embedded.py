"""The registry inside a broker process (``schema.registry.listener=HOST:PORT``): it connects to the
broker's own first PLAINTEXT listener like any client would, as the embedded console does
(``moldau._serve.start_embedded``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from moldau._serve import start_embedded

from .server import RegistryServer, RegistrySettings

if TYPE_CHECKING:
    from moldau.broker.config import Listener

CONFIG_KEY = "schema.registry.listener"


async def start_registry(config_value: object, listeners: Sequence[Listener]) -> RegistryServer | None:
    """``config_value``: the broker's ``schema.registry.listener``; ``listeners``: its bound listeners."""
    return await start_embedded(
        config_value, CONFIG_KEY, "moldau registry", listeners,
        lambda bootstrap, host, port: RegistryServer(
            RegistrySettings({"bootstrap.servers": bootstrap}, host=host, port=port)),
    )
