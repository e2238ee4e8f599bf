"""moldau groups as a user runs it: describe with lag, reset-offsets dry run vs --execute, refusal while the
group has members, delete."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from .test_cli_topics import cli, js, ok, one_line_error
from harness.brokerproc import BrokerProcess, moldau_command
from harness.kafkautil import unique_topic


def _offsets(d: dict) -> dict[int, int | None]:
    return {o["partition"]: o["committed_offset"] for o in d["offsets"]}


@pytest.mark.tansu_gap("ListOffsets latest answers the last batch's base offset")
def test_describe_lag_and_reset_offsets(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-reset")
    group = unique_topic("cli-rg")
    ok(cli("topics", "create", name, "-p", "2", bootstrap=b))
    ok(cli("produce", name, "-p", "0", "-q", input=b"".join(b"a%d\n" % i for i in range(10)), bootstrap=b))
    ok(cli("produce", name, "-p", "1", "-q", input=b"".join(b"b%d\n" % i for i in range(4)), bootstrap=b))
    # consume 3 records of partition 0 only, committing for the group without joining it
    ok(cli("consume", name, "-g", group, "-p", "0", "--from-beginning", "-n", "3", bootstrap=b))

    d = js(cli("groups", "describe", group, "--json", bootstrap=b))
    assert d["group"] == group and d["members"] == []
    rows = {o["partition"]: o for o in d["offsets"]}
    assert rows[0]["committed_offset"] == 3 and rows[0]["log_end_offset"] == 10 and rows[0]["lag"] == 7
    assert d["total_lag"] == 7
    table = ok(cli("groups", "describe", group, bootstrap=b)).stdout
    assert "LAG" in table and "Total lag: 7" in table
    assert group in [g["group"] for g in js(cli("groups", "list", "--json", bootstrap=b))]

    # dry run: shows the plan, changes nothing
    plan = js(cli("groups", "reset-offsets", group, "--topic", name, "--to-earliest", "--json", bootstrap=b))
    assert plan["executed"] is False
    assert {(p["partition"], p["new_offset"]) for p in plan["offsets"]} == {(0, 0), (1, 0)}
    p = ok(cli("groups", "reset-offsets", group, "--topic", name, "--to-earliest", bootstrap=b))
    assert "dry run" in p.stderr and "NEW-OFFSET" in p.stdout
    assert _offsets(js(cli("groups", "describe", group, "--json", bootstrap=b)))[0] == 3

    # --execute moves the group
    ok(cli("groups", "reset-offsets", group, "--topic", name, "--to-latest", "--execute", bootstrap=b))
    assert _offsets(js(cli("groups", "describe", group, "--json", bootstrap=b))) == {0: 10, 1: 4}
    ok(cli("groups", "reset-offsets", group, "--all-topics", "--shift-by", "-2", "--execute", bootstrap=b))
    assert _offsets(js(cli("groups", "describe", group, "--json", bootstrap=b))) == {0: 8, 1: 2}
    ok(cli("groups", "reset-offsets", group, "--topic", f"{name}:0", "--to-offset", "999", "--execute",
           bootstrap=b))  # clamped to the log end
    assert _offsets(js(cli("groups", "describe", group, "--json", bootstrap=b)))[0] == 10
    ok(
        cli(
            "groups", "reset-offsets", group, "--topic", name, "--by-duration", "1h", "--execute", bootstrap=b
        )
    )
    assert _offsets(js(cli("groups", "describe", group, "--json", bootstrap=b))) == {0: 0, 1: 0}
    ok(cli("groups", "reset-offsets", group, "--topic", name, "--to-datetime", "2999-01-01T00:00:00Z",
           "--execute", bootstrap=b))  # after every record: the log end
    d = js(cli("groups", "describe", group, "--json", bootstrap=b))
    assert _offsets(d) == {0: 10, 1: 4} and d["total_lag"] == 0

    # the group reads from where it was reset
    ok(cli("groups", "reset-offsets", group, "--topic", f"{name}:1", "--to-offset", "2", "--execute",
    bootstrap=b))
    out = ok(cli("consume", name, "-g", group, "-p", "1", "-e", bootstrap=b)).stdout
    assert out == "b2\nb3\n"

    ok(cli("groups", "delete", group, bootstrap=b))
    line = one_line_error(cli("groups", "describe", group, bootstrap=b))
    assert "does not exist" in line


@pytest.mark.tansu_gap("JoinGroup of a new group's first member is not answered in time")
def test_reset_refused_while_group_has_members(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-busy")
    group = unique_topic("cli-bg")
    ok(cli("topics", "create", name, "-p", "1", bootstrap=b))
    ok(cli("produce", name, "-q", input=b"x\ny\n", bootstrap=b))
    env = {k: v for k, v in os.environ.items() if k != "MOLDAU_BOOTSTRAP"}
    member = subprocess.Popen(moldau_command() + ["consume", name, "-g", group, "--from-beginning", "-q",
                                                  "-b", b], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 20
        d: dict = {}
        while time.monotonic() < deadline:
            p = cli("groups", "describe", group, "--json", bootstrap=b)
            if p.returncode == 0:
                d = js(p)
                if d["members"] and d["state"] == "Stable":
                    break
            time.sleep(0.2)
        assert d.get("members"), d
        m = d["members"][0]
        assert m["assignment"] == [{"topic": name, "partition": 0}] and m["client_id"]
        assert any(o["member_id"] == m["member_id"] for o in d["offsets"]) or d["offsets"] == []
        line = one_line_error(cli("groups", "reset-offsets", group, "--topic", name, "--to-earliest",
                                  "--execute", bootstrap=b))
        assert "active member" in line
        line = one_line_error(cli("groups", "delete", group, bootstrap=b))
        assert "active members" in line or "NON_EMPTY_GROUP" in line
    finally:
        member.terminate()
        member.wait(timeout=20)
