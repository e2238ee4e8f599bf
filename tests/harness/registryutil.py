"""Helpers of the registry tests: a registry in a thread, and a small HTTP client that returns status and
JSON body (urllib: nothing between the test and the wire)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from harness.brokerproc import free_port
from harness.serverthread import ServerThread

CT = "application/vnd.schemaregistry.v1+json"


class RegistryThread(ServerThread):
    """A registry (moldau.registry.RegistryServer) on a free loopback port, in a thread with its own loop."""

    def __init__(self, bootstrap: str, **settings: Any) -> None:
        from moldau.registry import RegistryServer, RegistrySettings

        # one election group per state topic: the modules' registries do not elect among each other
        settings.setdefault("group_id", f"sr-{settings.get('topic', '_schemas')}")

        self.settings = RegistrySettings(
            {"bootstrap.servers": bootstrap}, host="127.0.0.1", port=0, **settings
        )
        super().__init__(RegistryServer(self.settings), "registry")

    def call(self, method: str, path: str, body: Any = None, raw: bool = False) -> tuple[int, Any]:
        return call(self.url, method, path, body, raw)


def call(base: str, method: str, path: str, body: Any = None, raw: bool = False) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": CT})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, ctype, text = resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        status, ctype, text = e.code, e.headers.get("Content-Type", ""), e.read().decode()
    assert ctype.startswith(CT), (status, ctype, text)
    return status, (text if raw else json.loads(text))


def q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def avro_record(name: str, *fields: tuple[str, Any] | tuple[str, Any, Any], namespace: str = "t") -> str:
    """An Avro record schema's text: fields are (name, type) or (name, type, default)."""
    fs = []
    for f in fields:
        d: dict[str, Any] = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            d["default"] = f[2]
        fs.append(d)
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": fs})


class RegistryProcess:
    """``moldau registry`` as a process of its own (what SIGKILL can kill)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.port = free_port()
        self.bootstrap = bootstrap
        self.group = f"sr-{topic}"
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "moldau",
                "registry",
                "-b",
                bootstrap,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--topic",
                topic,
                "--group-id",
                f"sr-{topic}",
                "--session-timeout-ms",
                "6000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )

    def wait_ready(self, timeout: float = 30.0) -> RegistryProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stderr.read().decode() if self.proc.stderr else ""
            try:
                if call(self.url, "GET", "/subjects")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"registry on {self.url} not ready")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(self.url, method, path, body)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
