"""Per-request context handed to every handler: the request's identity, its connection and the broker's
services (``moldau.broker.services.BrokerServices``), never the ``Broker`` itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .services import BrokerServices


class ClientConnection(Protocol):
    """What handlers use of the connection a request came on (``connection.Connection``)."""

    listener_name: str
    principal: str
    peer: tuple[str, int]
    client_id: str | None
    client_software: tuple[str, str] | None
    auth: Any  # security.sasl.AuthSession on SASL listeners
    sendfile_ok: bool  # a plaintext socket: a response may carry segment file regions (zero-copy fetch)

    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def local_address(self) -> tuple[str, int] | None:
        """The (host, port) of this broker's end of the connection (None once closed)."""


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices  # shared by every request of the broker
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    connection: ClientConnection
    header: Any = None        # the decoded request header (tagged fields etc.)
