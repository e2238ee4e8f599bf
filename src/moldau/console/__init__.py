"""moldau console: a web console for a Kafka-compatible cluster (topics, messages, consumer groups,
transactions, security, data flow, throughput and lag plots).

It speaks only the Kafka protocol, through the moldau client, so it works against any Kafka-compatible
cluster. Start it with ``moldau console -b HOST:PORT`` or from a broker with
``moldau broker --set console.listener=127.0.0.1:8080``. See docs/console.md.
"""

from __future__ import annotations

from .server import ConsoleServer, run_console
from .web import ConsoleSettings

__all__ = ["ConsoleServer", "ConsoleSettings", "run_console"]
