"""Helpers of the console tests: the console in a thread, a cookie-keeping HTTP client without redirects, a
sweep that posts to every change route, and browser steps (submit a change form and accept its
confirmation)."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from harness.serverthread import ServerThread


class ConsoleThread(ServerThread):
    """A console (moldau.console.ConsoleServer) on a free loopback port, in a thread with its own loop."""

    def __init__(self, bootstrap: str, **settings: Any) -> None:
        from moldau.console import ConsoleServer, ConsoleSettings

        settings.setdefault("sample_interval", 0.5)
        settings.setdefault("cache_ttl", 0.0)
        settings.setdefault("stale_ttl", 0.0)  # the tests look at what they just changed
        self.settings = ConsoleSettings(
            {"bootstrap.servers": bootstrap}, host="127.0.0.1", port=0, **settings
        )
        super().__init__(ConsoleServer(self.settings), "console")


def q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def wait(browser: Any, timeout: float = 15.0) -> WebDriverWait:
    return WebDriverWait(browser, timeout, poll_frequency=0.1)


def submit(browser: Any, form_id: str) -> None:
    """Submit a change form: its confirmation dialog is accepted, then the page after the redirect loads."""
    form = browser.find_element(By.ID, form_id)
    old = browser.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, 5).until(EC.alert_is_present())
    browser.switch_to.alert.accept()
    wait(browser).until(EC.staleness_of(old))


def assert_no_alert(browser: Any) -> None:
    try:
        text = browser.switch_to.alert.text
    except NoAlertPresentException:
        return
    raise AssertionError(f"a JavaScript alert is open: {text!r}")


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
