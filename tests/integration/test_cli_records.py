"""moldau produce / moldau consume as a user runs them: files back byte-exact, formats, groups, Ctrl-C."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .test_cli_topics import cli, js, ok, one_line_error
from harness.brokerproc import BrokerProcess, moldau_command
from harness.kafkautil import unique_topic


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def test_file_round_trip_text_and_json(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-rt")
    ok(cli("topics", "create", name, "-p", "1", bootstrap=b))
    records = [f"line {i} ünïcode ✓".encode() for i in range(300)] + [
        b"",
        b"\xff\xfe\x00binary\x80",
        b"tab\there",
    ]
    data = b"\n".join(records) + b"\n"
    f = tmp_path / "in.txt"
    f.write_bytes(data)
    p = ok(cli("produce", name, "--file", str(f), "--compression", "zstd", "--json", bootstrap=b))
    summary = json.loads(p.stdout)
    assert summary == {**summary, "records": len(records), "delivered": len(records), "failed": 0}

    raw = subprocess.run(
        check=False,
        args=moldau_command() + ["consume", name, "--from-beginning", "-e", "-b", b],
        capture_output=True,
        timeout=60,
    )
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout == data  # byte-exact, binary record included

    rows = _lines(ok(cli("consume", name, "--from-beginning", "-e", "--json", bootstrap=b)).stdout)
    assert [r["offset"] for r in rows] == list(range(len(records)))
    back = []
    for r in rows:
        v = r["value"]
        back.append(base64.b64decode(v) if r.get("value_encoding") == "base64" else v.encode())
    assert back == records
    assert rows[-2]["value_encoding"] == "base64" and "value_encoding" not in rows[0]
    assert all(r["topic"] == name and r["partition"] == 0 and r["key"] is None for r in rows)
    assert raw.stderr.decode().strip().endswith(f"consumed {len(records)} records from {name}")


@pytest.mark.tansu_gap("ListOffsets latest answers the last batch's base offset")
def test_keys_headers_format_partition(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-fmt")
    ok(cli("topics", "create", name, "-p", "3", bootstrap=b))
    ok(cli("produce", name, "-K", ":", "-H", "src=cli", "-p", "2", "--acks", "1", "-q",
           input=b"k1:v1\nk2:v:with:colons\nnokey\n", bootstrap=b))
    ok(cli("produce", name, "-F", "%p|%k|%h|%s", "-q", input=b"1|fk|a=1,b=2|formatted value\n", bootstrap=b))
    out = ok(cli("consume", name, "-p", "2", "--offset", "earliest", "-e",
                 "-f", "%t/%p/%o %k=%s [%h] %S\\n", bootstrap=b)).stdout
    assert out.splitlines() == [f"{name}/2/0 k1=v1 [src=cli] 2", f"{name}/2/1 k2=v:with:colons [src=cli] 13",
                                f"{name}/2/2 =nokey [src=cli] 5"]
    rows = _lines(ok(cli("consume", name, "-p", "1", "--from-beginning", "-e", "--json", bootstrap=b)).stdout)
    assert len(rows) == 1
    r = rows[0]
    assert (r["key"], r["value"]) == ("fk", "formatted value")
    assert r["headers"] == [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]
    # -K on the consume side; --offset -1 = the last record; --max-messages
    out = ok(cli("consume", name, "-p", "2", "--offset", "-1", "-e", "-K", "\t", bootstrap=b)).stdout
    assert out == "=nokey\n".replace("=", "\t")
    out = ok(cli("consume", name, "-p", "2", "--from-beginning", "-n", "2", bootstrap=b)).stdout
    assert out == "v1\nv:with:colons\n"


def test_produce_failures_exit_nonzero(broker: BrokerProcess, kind: str) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-fail")
    ok(cli("topics", "create", name, "-p", "1", bootstrap=b))
    line = one_line_error(cli("produce", name, "-p", "5", input=b"x\n", bootstrap=b))
    assert "no partition 5" in line
    # a record the format does not match is counted as failed; the others are sent
    p = cli("produce", name, "-F", "%k=%s", input=b"a=1\nnot matching\nb=2\n", bootstrap=b)
    assert p.returncode == 1
    assert "1 of 3 records failed" in p.stderr and "does not match --format" in p.stderr
    out = ok(cli("consume", name, "--from-beginning", "--timeout", "1.5", "-K", "=", bootstrap=b)).stdout
    assert out == "a=1\nb=2\n"
    if kind == "moldau":  # the broker refuses keyless records on a compacted topic
        comp = unique_topic("cli-compact")
        ok(cli("topics", "create", comp, "--config", "cleanup.policy=compact", bootstrap=b))
        p = cli("produce", comp, "--acks", "1", input=b"no key\n", bootstrap=b)
        assert p.returncode == 1 and "1 of 1 record failed" in p.stderr, p.stderr
    line = one_line_error(cli("produce", name, "--file", "/nonexistent/file.txt", bootstrap=b))
    assert "/nonexistent/file.txt" in line
    line = one_line_error(cli("consume", unique_topic("nope"), "-e", bootstrap=b))
    assert "does not exist" in line


@pytest.mark.tansu_gap("JoinGroup of a new group's first member is not answered in time")
def test_consume_group_commits(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-grp")
    group = unique_topic("cli-g")
    ok(cli("topics", "create", name, "-p", "2", bootstrap=b))
    ok(cli("produce", name, "-K", ":", "-q", input=b"".join(b"k%d:v%d\n" % (i, i) for i in range(20)),
           bootstrap=b))
    out = ok(cli("consume", name, "-g", group, "--from-beginning", "-n", "5", bootstrap=b)).stdout
    assert len(out.splitlines()) == 5
    d = js(cli("groups", "describe", group, "--json", bootstrap=b))
    assert sum(o["committed_offset"] or 0 for o in d["offsets"]) == 5
    # the rest, then nothing: the group resumes where it committed
    out = ok(cli("consume", name, "-g", group, "-e", bootstrap=b)).stdout
    assert len(out.splitlines()) == 15
    d = js(cli("groups", "describe", group, "--json", bootstrap=b))
    assert d["total_lag"] == 0 and sum(o["committed_offset"] for o in d["offsets"]) == 20
    out = ok(cli("consume", name, "-g", group, "--timeout", "1.5", bootstrap=b)).stdout
    assert out == ""


@pytest.mark.tansu_gap("JoinGroup of a new group's first member is not answered in time")
def test_ctrl_c_commits_and_exits_cleanly(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-int")
    group = unique_topic("cli-gi")
    ok(cli("topics", "create", name, "-p", "1", bootstrap=b))
    ok(cli("produce", name, "-q", input=b"".join(b"r%d\n" % i for i in range(7)), bootstrap=b))
    env = {k: v for k, v in os.environ.items() if k != "MOLDAU_BOOTSTRAP"}
    proc = subprocess.Popen(moldau_command() + ["consume", name, "-g", group, "--from-beginning", "-b", b],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 20
        seen = b""
        os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        while seen.count(b"\n") < 7 and time.monotonic() < deadline:
            chunk = proc.stdout.read()  # type: ignore[union-attr]
            if chunk:
                seen += chunk
            time.sleep(0.05)
        assert seen.count(b"\n") == 7, seen
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"consumed 7 records" in err
    d = js(cli("groups", "describe", group, "--json", bootstrap=b))
    assert d["offsets"][0]["committed_offset"] == 7 and d["members"] == []
