"""HTTP plumbing of the console: settings, security middleware (auth, CSRF, read-only, headers), templates,
list paging and sorting. The pages themselves are in ``moldau.console.pages`` and its mixins.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import math
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web

from moldau.client.errors import ClientError, KafkaError

log = logging.getLogger(__name__)

# what the cluster (or the way to it) can raise: shown to the user as the page's error
CLUSTER_ERRORS = (KafkaError, ClientError)

CSRF_COOKIE = "moldau_console_csrf"
TOKEN_COOKIE = "moldau_console_token"
FLASH_COOKIE = "moldau_console_flash"
CSRF_FIELD = "csrf_token"

# per-request values the middleware hands to the pages (typed keys where aiohttp has them)
_Key: Any = getattr(web, "RequestKey", None)
CSRF_KEY: Any = _Key("moldau_console_csrf", str) if _Key else "moldau_console_csrf"
FLASH_KEY: Any = _Key("moldau_console_flash", object) if _Key else "moldau_console_flash"
FORM_KEY: Any = _Key("moldau_console_form", object) if _Key else "moldau_console_form"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)


@dataclass(slots=True)
class ConsoleSettings:
    """What ``moldau console`` (or the broker's ``console.listener``) was started with."""

    client_conf: dict[str, Any]
    host: str = "127.0.0.1"
    port: int = 8080
    read_only: bool = False
    token: str | None = None  # bearer token / ?token= once (then a cookie)
    basic_auth: str | None = None  # "user:password"
    sample_interval: float = 5.0
    history_seconds: float = 3600.0
    max_sampled_groups: int = 100
    page_size: int = 50
    cache_ttl: float = 2.0                # a cluster snapshot younger than this is used as it is
    stale_ttl: float = 30.0               # ... younger than this is shown while a fresh one is taken
    schema_registry: str | None = None    # URL of a registry (Confluent's REST API): the Schemas pages


# ---------------------------------------------------------------------------------------------- templates
def fmt_bytes(n: Any) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def fmt_ts(ms: Any) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def fmt_num(n: Any) -> str:
    if n is None:
        return "-"
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"


def fmt_ms(v: Any) -> str:
    """A retention-like duration in ms as text (-1: forever)."""
    if v is None:
        return "-"
    try:
        ms = int(v)
    except (TypeError, ValueError):
        return str(v)
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("moldau.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        bytes=fmt_bytes, ts=fmt_ts, num=fmt_num, ms=fmt_ms, q=lambda s: urllib.parse.quote(str(s), safe="")
    )
    return env


# ---------------------------------------------------------------------------------------------- lists
@dataclass(slots=True)
class Page:
    items: list[Any]
    total: int
    page: int
    pages: int
    sort: str
    desc: bool
    q: str
    args: dict[str, str]

    def url(self, path: str, **changes: Any) -> str:
        a = {k: v for k, v in self.args.items() if v not in ("", None)}
        for k, v in changes.items():
            if v in ("", None):
                a.pop(k, None)
            else:
                a[k] = str(v)
        return path + ("?" + urllib.parse.urlencode(a) if a else "")

    def sort_url(self, path: str, column: str) -> str:
        desc = not self.desc if column == self.sort else False
        return self.url(path, sort=column, dir="desc" if desc else "", page="")


def paginate(
    request: web.Request,
    items: Iterable[Any],
    *,
    text: Callable[[Any], str],
    keys: dict[str, Callable[[Any], Any]],
    default_sort: str,
    page_size: int,
    extra_filter: Callable[[Any], bool] | None = None,
) -> Page:
    """Server-side filter (``q``: substring of ``text(item)``), sort (``sort``, ``dir=desc``) and paging."""
    q = request.query.get("q", "").strip()
    sort = request.query.get("sort", default_sort)
    if sort not in keys:
        sort = default_sort
    desc = request.query.get("dir") == "desc"
    ql = q.lower()
    rows = [
        i for i in items if (not ql or ql in text(i).lower()) and (extra_filter is None or extra_filter(i))
    ]
    key = keys[sort]

    def safe_key(i: Any) -> tuple[int, Any]:
        v = key(i)
        return (1, 0) if v is None else (0, v)

    rows.sort(key=safe_key, reverse=desc)
    pages = max(math.ceil(len(rows) / page_size), 1)
    try:
        page = min(max(int(request.query.get("page", "1")), 1), pages)
    except ValueError:
        page = 1
    args = {k: v for k, v in request.query.items()}
    return Page(rows[(page - 1) * page_size : page * page_size], len(rows), page, pages, sort, desc, q, args)


# ---------------------------------------------------------------------------------------------- security
class Refused(Exception):
    """A request refused with a message shown to the user (status 400/403/404)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def check_auth(request: web.Request, settings: ConsoleSettings) -> web.StreamResponse | None:
    """None when the request may proceed; else the 401 (or the redirect that stores a ?token= cookie)."""
    if not settings.token and not settings.basic_auth:
        return None
    header = request.headers.get("Authorization", "")
    if settings.token:
        tok = settings.token
        if header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), tok):
            return None
        if hmac.compare_digest(request.cookies.get(TOKEN_COOKIE, ""), tok):
            return None
        given = request.query.get("token")
        if given is not None and hmac.compare_digest(given, tok):
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.path + ("?" + urllib.parse.urlencode(query) if query else "")
            resp = web.Response(status=303, headers={"Location": target})
            resp.set_cookie(TOKEN_COOKIE, tok, httponly=True, samesite="Strict", path="/")
            return resp
    if settings.basic_auth and header.startswith("Basic "):
        try:
            given_pair = base64.b64decode(header[6:].strip()).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            given_pair = ""
        if hmac.compare_digest(given_pair.encode(), settings.basic_auth.encode()):
            return None
    headers = {"WWW-Authenticate": 'Basic realm="moldau console"'} if settings.basic_auth else {}
    return web.Response(
        status=401, text="moldau console: authentication required (token or basic auth)\n", headers=headers
    )


def make_middlewares(
    settings: ConsoleSettings, render_error: Callable[..., Awaitable[web.StreamResponse]]
) -> Sequence[Any]:
    @web.middleware
    async def security(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith("/static/"):
            denied = check_auth(request, settings)
            if denied is not None:
                return denied
        cookie = request.cookies.get(CSRF_COOKIE, "")
        fresh = not (len(cookie) == 64 and all(c in "0123456789abcdef" for c in cookie))
        request[CSRF_KEY] = secrets.token_hex(32) if fresh else cookie
        flash = request.cookies.get(FLASH_COOKIE)
        request[FLASH_KEY] = urllib.parse.unquote(flash) if flash else None
        try:
            if request.method not in ("GET", "HEAD", "OPTIONS"):
                if settings.read_only:
                    raise Refused("this console is read-only: nothing can be changed", 403)
                form = await request.post()
                request[FORM_KEY] = form
                given = str(form.get(CSRF_FIELD, ""))
                if fresh or not given or not hmac.compare_digest(given, cookie):
                    raise Refused(
                        "the form's CSRF token is missing or wrong: reload the page and try again", 403
                    )
                origin = request.headers.get("Origin")
                if origin and origin != "null" and urllib.parse.urlsplit(origin).netloc != request.host:
                    raise Refused(f"cross-site request from {origin} refused", 403)
            resp = await handler(request)
        except Refused as e:
            resp = await render_error(request, str(e), e.status)
        except web.HTTPNotFound:
            resp = await render_error(request, f"no page at {request.path}", 404)
        except web.HTTPException:
            raise
        except CLUSTER_ERRORS as e:
            log.info("console: %s %s: %s", request.method, request.path, e)
            resp = await render_error(request, f"the cluster answered: {e}", 502)
        except Exception as e:
            log.exception("console: %s %s failed", request.method, request.path)
            resp = await render_error(request, f"{type(e).__name__}: {e}", 500)
        if fresh:
            resp.set_cookie(CSRF_COOKIE, request[CSRF_KEY], httponly=True, samesite="Strict", path="/")
        if flash:
            resp.del_cookie(FLASH_COOKIE, path="/")
        if not resp.prepared:
            resp.headers.setdefault("Content-Security-Policy", CSP)
            resp.headers.setdefault("X-Content-Type-Options", "nosniff")
            resp.headers.setdefault("Referrer-Policy", "same-origin")
            resp.headers.setdefault("X-Frame-Options", "DENY")
        return resp

    return [security]


def redirect(location: str, flash: str | None = None) -> web.Response:
    resp = web.Response(status=303, headers={"Location": location})
    if flash:
        resp.set_cookie(
            FLASH_COOKIE, urllib.parse.quote(flash[:500]), samesite="Strict", path="/", max_age=60
        )
    return resp


def json_response(data: Any) -> web.Response:
    return web.Response(text=json.dumps(data, separators=(",", ":")), content_type="application/json")
