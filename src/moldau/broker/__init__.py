"""moldau's Kafka-compatible broker.

    from moldau.broker import Broker, BrokerConfig
    broker = Broker(BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/d"}))
    await broker.start(); ...; await broker.stop()

or ``moldau broker`` on the command line (moldau.broker.broker.run).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Broker", "BrokerConfig", "ConfigError"]


def __getattr__(name: str) -> Any:  # lazy: importing moldau.broker.x must not load every handler
    if name == "Broker":
        from .broker import Broker

        return Broker
    if name in ("BrokerConfig", "ConfigError"):
        from . import config

        return getattr(config, name)
    raise AttributeError(name)
