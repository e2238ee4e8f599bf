"""The registry inside a broker process (``schema.registry.listener=HOST:PORT``): it connects to the
broker's own first PLAINTEXT listener like any client would, as the embedded console does."""

from __future__ import annotations

import logging
from typing import Any

from .server import RegistryServer, RegistrySettings

log = logging.getLogger(__name__)

CONFIG_KEY = "schema.registry.listener"


async def start_registry(services: Any, listeners: list[Any]) -> RegistryServer | None:
    """``services``: the broker's (``moldau.broker.services.BrokerServices``); ``listeners``: its bound
    listeners."""
    spec = services.config.get(CONFIG_KEY)
    if not spec:
        return None
    from moldau.broker.config import ConfigError
    from moldau.console.web import parse_listen

    try:
        host, port = parse_listen(str(spec), CONFIG_KEY)
    except ValueError as e:
        raise ConfigError(CONFIG_KEY, str(e)) from None
    plain = [lst for lst in listeners if str(lst.security_protocol).upper() == "PLAINTEXT"]
    if not plain:
        log.error(
            "%s: the broker has no PLAINTEXT listener for the registry to use; run `moldau registry` "
            "with the client's security settings instead",
            CONFIG_KEY,
        )
        return None
    lst = plain[0]
    target = lst.host if lst.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    target = f"[{target}]" if ":" in target else target
    server = RegistryServer(
        RegistrySettings({"bootstrap.servers": f"{target}:{lst.port}"}, host=host, port=port)
    )
    await server.start()
    return server
