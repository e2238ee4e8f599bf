"""Per-request context handed to every handler."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .broker import Broker
    from .connection import Connection


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"          # .config, .metadata, .replica_manager, .log_manager, .clock, .node_id, ...
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    connection: "Connection"  # .peer (host, port), .listener_name, .principal
    header: Any = None        # the decoded request header (tagged fields etc.)
