"""HTTP helpers of the console tests: a cookie-keeping client without redirects, and a sweep that posts to
every change route of a console."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class Http:
    """A tiny HTTP client that keeps cookies (for the CSRF cookie), no redirects followed."""

    def __init__(self, base: str) -> None:
        import http.cookiejar

        self.base = base
        self.jar = http.cookiejar.CookieJar()

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a: Any, **k: Any) -> None:
                return None

        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def request(
        self,
        method: str,
        path: str,
        data: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    def csrf(self) -> str:
        for c in self.jar:
            if c.name == "moldau_console_csrf":
                return c.value
        self.request("GET", "/health")
        for c in self.jar:
            if c.name == "moldau_console_csrf":
                return c.value
        raise AssertionError("the console set no CSRF cookie")


FORM = {
    "name": "x-console-sweep",
    "partitions": "1",
    "replication": "-1",
    "total": "9",
    "key": "retention.ms",
    "value": "1000",
    "op": "set",
    "strategy": "earliest",
    "partition": "0",
    "resource_type": "TOPIC",
    "resource_name": "x",
    "pattern_type": "LITERAL",
    "principal": "User:x",
    "host": "*",
    "operation": "READ",
    "permission": "ALLOW",
    "mechanism": "SCRAM-SHA-256",
    "password": "secret-pw",
    "iterations": "4096",
}


def every_post_route(console: Any, topic: str, group: str) -> list[tuple[str, int]]:
    """POST (with a valid CSRF token and a plausible form) to every change route; [(path, status)]."""
    http = Http(console.url)
    token = http.csrf()
    out = []
    for route in console.server.app.router.routes():
        if route.method != "POST":
            continue
        info = route.resource.get_info()
        path = info.get("path") or info.get("formatter", "")
        path = path.replace("{name}", urllib.parse.quote(topic, safe="")).replace(
            "{gid}", urllib.parse.quote(group, safe="")
        )
        status, _h, _body = http.request("POST", path, {**FORM, "topic": topic, "csrf_token": token})
        out.append((path, status))
    return out
