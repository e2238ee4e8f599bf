"""The operator CLI as a user runs it (a subprocess against a real broker): topics, configs, offsets, and the
error paths every command shares (unreachable broker, bad arguments)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from harness.brokerproc import BrokerProcess, free_port, moldau_command
from harness.kafkautil import unique_topic


def cli(*args: str, bootstrap: str | None, input: bytes | None = None, timeout: float = 60,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "MOLDAU_BOOTSTRAP"}
    full_env.update(env or {})
    cmd = moldau_command() + list(args)
    if bootstrap is not None:
        cmd += ["-b", bootstrap]
    p = subprocess.run(cmd, check=False, input=input, capture_output=True, timeout=timeout, env=full_env)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(errors="replace"),
                                       p.stderr.decode(errors="replace"))


def ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    return p


def js(p: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(p).stdout)


def one_line_error(p: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert p.returncode == code, f"exit {p.returncode}, expected {code}\n{p.stdout}\n{p.stderr}"
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{p.stderr}"
    assert "Traceback" not in p.stderr
    return lines[0]


@pytest.mark.tansu_gap("DescribeConfigs returns no topic config overrides")
def test_topic_lifecycle(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-topic")
    out = ok(cli("topics", "create", name, "--partitions", "3", "--config", "retention.ms=3600000",
                 bootstrap=b)).stdout
    assert f"created topic {name}" in out and "3 partitions" in out

    listed = js(cli("topics", "list", "--json", bootstrap=b))
    assert {"name": name, "partitions": 3} in listed
    assert name in ok(cli("topics", "list", bootstrap=b)).stdout

    [desc] = js(cli("topics", "describe", name, "--json", bootstrap=b))
    assert desc["name"] == name and len(desc["partitions"]) == 3
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    for p in desc["partitions"]:
        assert p["leader"] >= 0 and p["leader"] in p["replicas"] and p["isr"]
        assert p["earliest_offset"] == 0 and p["latest_offset"] == 0
    assert desc["configs"].get("retention.ms") == "3600000"
    table = ok(cli("topics", "describe", name, bootstrap=b)).stdout
    assert f"Topic: {name}" in table and "retention.ms=3600000" in table and "LEADER" in table

    # exists already: error, or fine with --if-not-exists
    err = one_line_error(cli("topics", "create", name, bootstrap=b))
    assert "already exists" in err
    ok(cli("topics", "create", name, "--if-not-exists", bootstrap=b))

    ok(cli("topics", "alter", name, "--config", "cleanup.policy=compact", "--delete-config", "retention.ms",
           bootstrap=b))
    [desc] = js(cli("topics", "describe", name, "--json", bootstrap=b))
    assert desc["configs"].get("cleanup.policy") == "compact" and "retention.ms" not in desc["configs"]

    deleted = js(cli("topics", "delete", name, "--json", bootstrap=b))
    assert deleted == [{"topic": name, "deleted": True}]
    assert name not in [t["name"] for t in js(cli("topics", "list", "--json", bootstrap=b))]
    err = one_line_error(cli("topics", "delete", name, bootstrap=b))
    assert "no such topic" in err
    ok(cli("topics", "delete", name, "--if-exists", bootstrap=b))


@pytest.mark.tansu_gap("CreatePartitions")
def test_topic_add_partitions(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-grow")
    ok(cli("topics", "create", name, "-p", "1", bootstrap=b))
    ok(cli("topics", "alter", name, "--partitions", "4", bootstrap=b))
    [desc] = js(cli("topics", "describe", name, "--json", "--no-offsets", bootstrap=b))
    assert len(desc["partitions"]) == 4
    err = one_line_error(cli("topics", "alter", name, "--partitions", "2", bootstrap=b))
    assert "can only grow" in err


def test_unreachable_broker_one_line() -> None:
    port = free_port()
    for args in (["topics", "list"], ["produce", "t"], ["consume", "t"], ["groups", "list"],
                 ["configs", "describe", "--broker"], ["offsets", "t"], ["perf", "produce", "t", "-n", "1"]):
        p = cli(*args, bootstrap=f"127.0.0.1:{port}", input=b"x\n")
        line = one_line_error(p)
        assert f"cannot reach the broker at 127.0.0.1:{port}: connection refused" in line, (args, line)


def test_bootstrap_from_environment(broker: BrokerProcess) -> None:
    p = cli("topics", "list", "--json", bootstrap=None, env={"MOLDAU_BOOTSTRAP": broker.bootstrap})
    assert isinstance(js(p), list)
    # the default (localhost:9092) is used without either; an explicit dead address fails in one line
    port = free_port()
    line = one_line_error(
        cli("topics", "list", bootstrap=None, env={"MOLDAU_BOOTSTRAP": f"127.0.0.1:{port}"})
    )
    assert f"127.0.0.1:{port}" in line


def test_bad_arguments_one_line(broker: BrokerProcess, tmp_path: Any) -> None:
    b = broker.bootstrap
    line = one_line_error(cli("topics", "create", bootstrap=b), code=2)
    assert "TOPIC" in line and "--help" in line
    line = one_line_error(cli("topics", "create", "x", "--partitions", "zero", bootstrap=b), code=2)
    assert "positive integer" in line
    line = one_line_error(cli("groups", "reset-offsets", "g", "--topic", "t", bootstrap=b), code=2)
    assert "--to-earliest" in line
    line = one_line_error(cli("offsets", "t", "--time", "yesterday-ish", bootstrap=b), code=2)
    assert "bad time" in line
    line = one_line_error(cli("topics", "list", "--command-config", str(tmp_path / "missing.properties"),
                              bootstrap=b), code=2)
    assert "missing.properties" in line
    line = one_line_error(cli("topics", "list", "-X", "no.such.setting=1", bootstrap=b), code=2)
    assert "no.such.setting" in line
    line = one_line_error(cli("consume", "t", "--json", "-f", "%s", bootstrap=b), code=2)
    assert "--json" in line


def test_help_has_examples() -> None:
    for args in (["topics"], ["produce"], ["consume"], ["groups"], ["configs"], ["offsets"], ["perf"]):
        p = cli(*args, "--help", bootstrap=None)
        assert p.returncode == 0 and "examples:" in p.stdout, args


def test_command_config_passed_to_client(broker: BrokerProcess, tmp_path: Any) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# client settings\nsecurity.protocol=PLAINTEXT\nrequest.timeout.ms=5000\n"
                     "client.id=from-file\n")
    assert isinstance(js(cli("topics", "list", "--json", "--command-config", str(props),
                             bootstrap=broker.bootstrap)), list)
    bad = tmp_path / "bad.properties"
    bad.write_text("request.timeout.ms=soon\n")
    line = one_line_error(
        cli("topics", "list", "--command-config", str(bad), bootstrap=broker.bootstrap), code=2
    )
    assert "request.timeout.ms" in line


@pytest.mark.tansu_gap("DescribeConfigs returns no topic config overrides")
def test_configs_topic_and_broker(broker: BrokerProcess, kind: str) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-cfg")
    ok(cli("topics", "create", name, bootstrap=b))
    ok(cli("configs", "alter", "--topic", name, "--set", "retention.ms=7200000",
           "--add-config", "segment.bytes=1048576,cleanup.policy=[compact,delete]", bootstrap=b))
    d = js(cli("configs", "describe", "--topic", name, "--json", bootstrap=b))
    got = {c["name"]: c["value"] for c in d["configs"]}
    assert got["retention.ms"] == "7200000" and got["segment.bytes"] == "1048576"
    assert got["cleanup.policy"] in ("compact,delete", "delete,compact")
    ok(cli("configs", "alter", "--topic", name, "--delete", "segment.bytes", bootstrap=b))
    d = js(cli("configs", "describe", "--topic", name, "--json", bootstrap=b))
    assert "segment.bytes" not in {c["name"] for c in d["configs"]}
    full = js(cli("configs", "describe", "--topic", name, "--all", "--json", bootstrap=b))
    names = {c["name"] for c in full["configs"]}
    assert {"retention.ms", "segment.bytes", "cleanup.policy"} <= names
    assert any(c["source"] == "DEFAULT_CONFIG" for c in full["configs"])
    line = one_line_error(cli("configs", "alter", "--topic", name, "--set", "no.such.config=1", bootstrap=b))
    assert "no.such.config" in line or "INVALID_CONFIG" in line
    if kind == "moldau":
        broker_cfg = js(cli("configs", "describe", "--broker", "--all", "--json", bootstrap=b))
        assert any(c["name"] == "log.retention.hours" or c["name"] == "log.retention.ms"
                   for c in broker_cfg["configs"])
        ok(cli("configs", "alter", "--broker", "--set", "log.retention.ms=604800000", bootstrap=b))
        dyn = js(cli("configs", "describe", "--broker", "--json", bootstrap=b))
        assert {"name": "log.retention.ms", "value": "604800000"}.items() <= next(
            c for c in dyn["configs"] if c["name"] == "log.retention.ms").items()
        ok(cli("configs", "alter", "--broker", "--delete", "log.retention.ms", bootstrap=b))


@pytest.mark.tansu_gap("ListOffsets latest answers the last batch's base offset")
def test_offsets_command(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-offsets")
    ok(cli("topics", "create", name, "-p", "2", bootstrap=b))
    ok(cli("produce", name, "-p", "0", "-q", input=b"a\nb\nc\n", bootstrap=b))
    ok(cli("produce", name, "-p", "1", "-q", input=b"d\n", bootstrap=b))
    d = js(cli("offsets", name, "--json", bootstrap=b))
    rows = {r["partition"]: r for r in d["partitions"]}
    assert (rows[0]["earliest"], rows[0]["latest"], rows[0]["records"]) == (0, 3, 3)
    assert (rows[1]["earliest"], rows[1]["latest"]) == (0, 1)
    table = ok(cli("offsets", name, bootstrap=b)).stdout
    assert "EARLIEST" in table and "LATEST" in table
    # by time: an hour ago -> the first record; in the future -> none
    d = js(cli("offsets", name, "--time", "now-1h", "-p", "0", "--json", bootstrap=b))
    assert d["partitions"][0]["offset_at_time"] == 0
    d = js(cli("offsets", name, "--time", "now+1h", "-p", "0", "--json", bootstrap=b))
    assert d["partitions"][0]["offset_at_time"] is None
    line = one_line_error(cli("offsets", name, "-p", "7", bootstrap=b))
    assert "no partition 7" in line
    line = one_line_error(cli("offsets", unique_topic("missing"), bootstrap=b))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in line
