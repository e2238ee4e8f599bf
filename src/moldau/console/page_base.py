"""The console's pages' common ground: ``PageBase`` (state, rendering, shared lookups) and small helpers."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from typing import Any

from aiohttp import web

from .cluster import ClusterView
from .records import DECODINGS, decode
from .sampler import Sampler
from .schemas import SchemaBrowser
from .web import (
    CSRF_FIELD,
    CSRF_KEY,
    FLASH_KEY,
    FORM_KEY,
    ConsoleSettings,
    Refused,
    make_env,
)

NAV = [
    ("overview", "/", "Overview"),
    ("topics", "/topics", "Topics"),
    ("groups", "/groups", "Consumer groups"),
    ("transactions", "/transactions", "Transactions"),
    ("security", "/security", "Security"),
    ("flow", "/flow", "Data flow"),
]


class PageBase:
    """The console's state (settings, cluster view, sampler, schema browser) and what every page uses:
    rendering, the form, a topic by name, the key and value decoders of a browse."""

    def __init__(self, settings: ConsoleSettings, view: ClusterView | None = None) -> None:
        self.settings = settings
        self.schemas: SchemaBrowser | None = (
            SchemaBrowser(settings.schema_registry) if settings.schema_registry else None
        )
        self.decodings = DECODINGS + (("registry",) if self.schemas is not None else ())
        self.view = view or ClusterView(
            settings.client_conf, cache_ttl=settings.cache_ttl, stale_ttl=settings.stale_ttl
        )
        self.sampler = Sampler(
            self.view,
            interval=settings.sample_interval,
            window=settings.history_seconds,
            max_groups=settings.max_sampled_groups,
        )
        self.env = make_env()
        self.started = time.time()

    # ------------------------------------------------------------------------------------------ rendering
    def render(self, request: web.Request, template: str, status: int = 200, **ctx: Any) -> web.Response:
        ctx.setdefault("title", "")
        ctx.setdefault("active", "")
        base = {
            "nav": NAV + ([("schemas", "/schemas", "Schemas")] if self.schemas is not None else []),
            "read_only": self.settings.read_only,
            "csrf": request[CSRF_KEY],
            "csrf_field": CSRF_FIELD,
            "flash": request.get(FLASH_KEY),
            "request": request,
            "bootstrap": self.settings.client_conf.get("bootstrap.servers", ""),
            "sampler_error": self.sampler.last_error,
        }
        base.update(ctx)
        html = self.env.get_template(template).render(**base)
        return web.Response(text=html, content_type="text/html", status=status)

    async def render_error(self, request: web.Request, message: str, status: int = 400) -> web.Response:
        return self.render(request, "error.html", status=status, title="Error", message=message)

    def form(self, request: web.Request) -> Any:
        return request[FORM_KEY]

    # ------------------------------------------------------------------------------------------ lookups
    async def _topic(self, name: str) -> Any:
        t = await self.view.topic(name)
        if t is None:
            raise Refused(f"no topic named {name!r}", 404)
        return t

    async def _decoders(self, form: dict[str, Any], records: list[Any]) -> dict[str, Any]:
        """The key and value decoders of a browse; ``registry`` fetches its schemas first, in a thread."""
        out: dict[str, Any] = {}
        for field, attr in (("kdecode", "key"), ("decode", "value")):
            how = form[field]
            if how == "registry" and self.schemas is not None:
                await asyncio.to_thread(self.schemas.prefetch, [getattr(r, attr) for r in records])
                out[field] = self.schemas.decode
            else:
                out[field] = lambda data, how=how: decode(data, how)
        return out


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _safe_file(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "records"


def _int(v: Any, what: str) -> int:
    try:
        return int(str(v).strip())
    except ValueError:
        raise Refused(f"{what} must be an integer, got {str(v)!r}") from None
