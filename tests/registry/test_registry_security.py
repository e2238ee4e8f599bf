"""The registry's listener with TLS and HTTP basic auth: an admin and a read-only user, through
confluent-kafka's SchemaRegistryClient (``basic.auth.user.info``, ``ssl.ca.location``) and ``moldau
schemas``."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.security.tls import generate

from harness.registryutil import RegistryThread, avro_record


@pytest.fixture(scope="module")
def secured(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RegistryThread, Path]]:
    certs = tmp_path_factory.mktemp("registry-certs")
    generate(certs, hostnames=["localhost", "127.0.0.1"])
    r = RegistryThread(
        broker.bootstrap,
        topic=f"_schemas-sec-{uuid.uuid4().hex[:6]}",
        users={"admin": ("s3cret", "admin"), "viewer": ("look", "readonly")},
        tls_cert=str(certs / "broker.pem"),
        tls_key=str(certs / "broker.key"),
    )
    r.start()
    try:
        yield r, certs / "ca.pem"
    finally:
        r.stop()


def _get(url: str, ca: Path, user: str | None) -> tuple[int, Any]:
    headers = {} if user is None else {"Authorization": "Basic " + base64.b64encode(user.encode()).decode()}
    ctx = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=30, context=ctx
        ) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_tls_and_basic_auth(secured: tuple[RegistryThread, Path]) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    r, ca = secured
    assert r.url.startswith("https://")
    assert _get(r.url + "/subjects", ca, None) == (401, {"error_code": 401, "message": "Unauthorized"})
    assert _get(r.url + "/subjects", ca, "admin:wrong")[0] == 401
    admin = SchemaRegistryClient(
        {"url": r.url, "basic.auth.user.info": "admin:s3cret", "ssl.ca.location": str(ca)}
    )
    sid = admin.register_schema("sec-value", Schema(avro_record("Sec", ("a", "int")), "AVRO"))
    viewer = SchemaRegistryClient(
        {"url": r.url, "basic.auth.user.info": "viewer:look", "ssl.ca.location": str(ca)}
    )
    assert viewer.get_latest_version("sec-value").schema_id == sid
    assert viewer.lookup_schema("sec-value", Schema(avro_record("Sec", ("a", "int")), "AVRO")).version == 1
    with pytest.raises(SchemaRegistryError) as e:
        viewer.register_schema("sec-value", Schema(avro_record("Sec", ("a", "int"), ("b", "int", 0)), "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as e:
        viewer.set_compatibility("sec-value", "NONE")
    assert e.value.error_code == 40301
    # without the CA the certificate is not trusted
    with pytest.raises(Exception):
        SchemaRegistryClient(
            {"url": r.url, "basic.auth.user.info": "admin:s3cret", "max.retries": 0}
        ).get_subjects()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "moldau",
            "schemas",
            "--registry",
            r.url,
            "--user",
            "viewer:look",
            "--ca",
            str(ca),
            "list",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert [x["subject"] for x in json.loads(out.stdout)] == ["sec-value"]
