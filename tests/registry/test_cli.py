"""``moldau schemas`` (the CLI client) against moldau's registry: register, show, check, config, mode, list,
delete, and its one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.registryutil import RegistryProcess, avro_record


def run(registry: RegistryProcess, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moldau", "schemas", "--registry", registry.url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=input,
    )


def test_schemas_cli(broker: Any, schemas_topic: str, tmp_path: Path) -> None:
    """Against ``moldau registry`` (the standalone command) in a process of its own."""
    registry = RegistryProcess(broker.bootstrap, schemas_topic).wait_ready()
    try:
        _cli(registry, tmp_path)
    finally:
        registry.stop()


def _cli(registry: RegistryProcess, tmp_path: Path) -> None:
    v1 = tmp_path / "user.avsc"
    v1.write_text(avro_record("CliUser", ("name", "string")))
    v2 = tmp_path / "user2.avsc"
    v2.write_text(avro_record("CliUser", ("name", "string"), ("email", "string")))  # no default: not BACKWARD
    r = run(registry, "register", "cli-value", str(v1))
    assert r.returncode == 0 and "registered cli-value version 1 id " in r.stdout, r.stderr
    r = run(registry, "check", "cli-value", str(v2))
    assert r.returncode == 1 and "NOT compatible" in r.stdout and "email" in r.stdout
    r = run(registry, "register", "cli-value", str(v2))
    assert r.returncode == 1 and "error 409" in r.stderr and r.stderr.count("\n") == 1
    assert run(registry, "config", "cli-value", "--set", "none").stdout.strip() == "NONE"
    assert run(registry, "config", "cli-value").stdout.strip() == "NONE"
    assert run(registry, "register", "cli-value", "-", input=v2.read_text()).returncode == 0
    shown = json.loads(run(registry, "show", "cli-value").stdout)
    assert shown["version"] == 2 and json.loads(shown["schema"]) == json.loads(v2.read_text())
    r = run(registry, "list", "--prefix", "cli-", "--json")
    assert [(x["subject"], x["version"]) for x in json.loads(r.stdout)] == [("cli-value", 2)]
    assert run(registry, "mode", "cli-value", "--set", "readonly").stdout.strip() == "READONLY"
    r = run(registry, "delete", "cli-value")
    assert r.returncode == 1 and "read-only" in r.stderr
    assert run(registry, "mode", "cli-value", "--delete").stdout.strip() == "READONLY"
    assert run(registry, "delete", "cli-value").stdout.strip() == "deleted cli-value version(s) [1, 2]"
    r = run(registry, "show", "cli-value")
    assert r.returncode == 1 and "error 40401" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "moldau", "schemas", "--registry", "http://127.0.0.1:1", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "cannot reach the schema registry" in r.stderr
