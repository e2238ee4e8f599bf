"""moldau's schema registry: Confluent's REST API over state kept in the ``_schemas`` topic.

``RegistryServer`` (start/stop inside a running loop; the broker's ``schema.registry.listener`` and the tests)
and ``run_registry`` (the blocking ``moldau registry`` command). docs/schema-registry.md describes the API.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RegistryServer", "RegistrySettings", "run_registry"]


def __getattr__(name: str) -> Any:  # the server (aiohttp) is imported only when asked for
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
