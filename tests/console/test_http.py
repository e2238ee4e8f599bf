"""The console's own security over plain HTTP: CSRF, Origin, token and basic auth, headers; the `moldau
console` command and the broker's console.listener as real processes."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import moldau

from harness.brokerproc import free_port
from harness.consoleutil import ConsoleThread, Http


def test_changes_need_the_csrf_token(console: Any, broker: Any, topic: str) -> None:
    http = Http(console.url)
    token = http.csrf()
    status, _h, body = http.request("POST", "/topics", {"name": topic, "partitions": "1"})
    assert status == 403 and "CSRF" in body
    status, _h, _b = http.request(
        "POST", "/topics", {"name": topic, "partitions": "1", "csrf_token": "0" * 64}
    )
    assert status == 403
    # the right token from another site (a browser sends Origin) is refused too
    status, _h, body = http.request(
        "POST",
        "/topics",
        {"name": topic, "partitions": "1", "csrf_token": token},
        headers={"Origin": "http://evil.example"},
    )
    assert status == 403 and "cross-site" in body
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert topic not in admin.list_topics()
    status, headers, _b = http.request(
        "POST",
        "/topics",
        {"name": topic, "partitions": "2", "csrf_token": token},
        headers={"Origin": console.url},
    )
    assert status == 303 and headers["Location"] == f"/topics/{urllib.parse.quote(topic, safe='')}"
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.list_topics()[topic] == 2


def test_security_headers_and_escaped_errors(console: Any) -> None:
    http = Http(console.url)
    status, headers, _b = http.request("GET", "/")
    assert status == 200
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    evil = "<script>alert(1)</script>"
    status, _h, body = http.request("GET", "/topics/" + urllib.parse.quote(evil, safe=""))
    assert status == 404 and evil not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    status, _h, body = http.request("GET", "/groups/x/reset?strategy=" + urllib.parse.quote(evil))
    assert status == 400 and evil not in body


def test_token_auth(broker: Any) -> None:
    c = ConsoleThread(broker.bootstrap, token="s3cret-token").start()
    try:
        http = Http(c.url)
        status, _h, _b = http.request("GET", "/topics")
        assert status == 401
        status, _h, _b = http.request("GET", "/topics", headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, _h, _b = http.request("GET", "/topics", headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200
        # ?token= once: a cookie, and the token leaves the URL
        status, headers, _b = http.request("GET", "/topics?token=s3cret-token&q=x")
        assert status == 303 and headers["Location"] == "/topics?q=x"
        status, _h, _b = http.request("GET", "/topics?q=x")
        assert status == 200
    finally:
        c.stop()


def test_basic_auth(broker: Any) -> None:
    c = ConsoleThread(broker.bootstrap, basic_auth="admin:pw").start()
    try:
        http = Http(c.url)
        status, headers, _b = http.request("GET", "/")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        bad = base64.b64encode(b"admin:nope").decode()
        assert http.request("GET", "/", headers={"Authorization": f"Basic {bad}"})[0] == 401
        good = base64.b64encode(b"admin:pw").decode()
        assert http.request("GET", "/", headers={"Authorization": f"Basic {good}"})[0] == 200
    finally:
        c.stop()


def _wait_http(url: str, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            if Http(url).request("GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


def _moldau() -> list[str]:
    return [str(Path(sys.executable).parent / "moldau")]


def test_moldau_console_command(broker: Any) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*_moldau(), "console", "-b", broker.bootstrap, "--listen", f"127.0.0.1:{port}", "--read-only"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MOLDAU_CONSOLE_TOKEN": ""},
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}", proc)
        status, _h, body = Http(f"http://127.0.0.1:{port}").request("GET", "/topics")
        assert status == 200 and 'id="read-only-badge"' in body and 'method="post"' not in body
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.returncode == 0
    assert f"moldau console on http://127.0.0.1:{port}" in (proc.stderr.read() if proc.stderr else "")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--listen", "nowhere"], "--listen 'nowhere': expected HOST:PORT"),
        (["--sample-interval", "0"], "--sample-interval 0.0: must be > 0"),
        (["--basic-auth", "nocolon"], "--basic-auth expects USER:PASSWORD"),
        (["-b", "127.0.0.1:1"], "cannot reach the broker at 127.0.0.1:1"),
    ],
)
def test_moldau_console_bad_arguments(argv: list[str], message: str) -> None:
    port = free_port()
    res = subprocess.run(
        [*_moldau(), "console", "--listen", f"127.0.0.1:{port}", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "MOLDAU_BOOTSTRAP": "127.0.0.1:1"},
    )
    assert res.returncode in (1, 2)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.moldau_only("console.listener is a moldau broker setting")
def test_broker_serves_the_console(broker_factory: Any) -> None:
    port = free_port()
    b = broker_factory(settings={"console.listener": f"127.0.0.1:{port}"})
    status, _h, body = Http(f"http://127.0.0.1:{port}").request("GET", "/")
    assert status == 200 and re.search(r'id="stat-brokers">1<', body)
    b.stop()
    with pytest.raises(OSError):
        Http(f"http://127.0.0.1:{port}").request("GET", "/")


@pytest.mark.moldau_only("SASL listeners are configured through moldau's settings")
def test_moldau_console_over_sasl_scram(tmp_path: Path) -> None:
    """The console uses the CLI's client security options: SCRAM over SASL_PLAINTEXT, and a wrong password
    is refused in one line."""
    from moldau.broker.security.credentials import CredentialStore

    from harness.brokerproc import BrokerProcess
    from harness.kafkautil import create_topic

    data = tmp_path / "data"
    data.mkdir()
    CredentialStore(data).add_password("alice", "alice-secret")
    sasl_port = free_port()
    b = BrokerProcess(
        "moldau",
        data,
        log_dir=tmp_path,
        settings={
            "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "connection.failed.authentication.delay.ms": "50",
        },
    )
    b.start()
    try:
        topic = create_topic(b.bootstrap, "sasl-console-topic", 2)
        base = [
            *_moldau(),
            "console",
            "-b",
            f"127.0.0.1:{sasl_port}",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=SCRAM-SHA-256",
            "-X",
            "sasl.username=alice",
        ]
        port = free_port()
        proc = subprocess.Popen(
            [*base, "-X", "sasl.password=alice-secret", "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_http(f"http://127.0.0.1:{port}", proc)
            status, _h, body = Http(f"http://127.0.0.1:{port}").request("GET", "/topics")
            assert status == 200 and f'data-topic="{topic}"' in body
        finally:
            proc.terminate()
            proc.wait(15)
        res = subprocess.run(
            [*base, "-X", "sasl.password=wrong", "--listen", f"127.0.0.1:{free_port()}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 1 and len(lines) == 1, res.stderr
        assert lines[0].startswith("moldau console: error:") and "auth" in lines[0].lower(), lines
    finally:
        b.close()


@pytest.mark.moldau_only("console.listener is a moldau broker setting")
def test_broker_console_listener_errors_are_one_line(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            *_moldau(),
            "broker",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
            "--set",
            "console.listener=nope",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "moldau broker: error: Invalid value 'nope' for configuration console.listener: expected HOST:PORT, "
        "e.g. 127.0.0.1:8080"
    )
    # the console's port taken: the broker does not start, and says why in one line
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run(
            [
                *_moldau(),
                "broker",
                "--port",
                "0",
                "--data-dir",
                str(tmp_path / "d2"),
                "--set",
                f"console.listener=127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "cannot start the broker" in res.stderr.strip().splitlines()[-1]
