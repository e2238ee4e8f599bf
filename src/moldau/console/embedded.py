"""The console inside a broker process (``console.listener=HOST:PORT``): it connects to the broker's own
first PLAINTEXT listener like any client would."""

from __future__ import annotations

import logging
from typing import Any

from .server import ConsoleServer
from .web import ConsoleSettings, parse_listen

log = logging.getLogger(__name__)

CONFIG_KEY = "console.listener"


async def start_console(services: Any, listeners: list[Any]) -> ConsoleServer | None:
    """``services``: the broker's (``moldau.broker.services.BrokerServices``); ``listeners``: its bound
    listeners."""
    spec = services.config.get(CONFIG_KEY)
    if not spec:
        return None
    from moldau.broker.config import ConfigError

    try:
        host, port = parse_listen(str(spec), CONFIG_KEY)
    except ValueError as e:
        raise ConfigError(CONFIG_KEY, str(e)) from None
    plain = [lst for lst in listeners if str(lst.security_protocol).upper() == "PLAINTEXT"]
    if not plain:
        log.error(
            "console.listener: the broker has no PLAINTEXT listener for the console to use; "
            "run `moldau console` with the client's security settings instead"
        )
        return None
    lst = plain[0]
    target = lst.host if lst.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    target = f"[{target}]" if ":" in target else target
    server = ConsoleServer(
        ConsoleSettings({"bootstrap.servers": f"{target}:{lst.port}"}, host=host, port=port)
    )
    await server.start()
    return server
