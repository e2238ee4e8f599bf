"""The CI version of the fault bench: a three-broker cluster (each broker in its own network namespace where
possible) under the workloads of :mod:`tests.faults.workload`, one fault per run, the checker after each:
nothing acknowledged lost, no duplicates (idempotent producers), no offset moved or reused, no aborted read,
consume-transform-produce exactly once, committed offsets never backwards.

The long runs are ``python -m tests.faults`` (docs/faults.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .checker import table
from .net import unavailable_reason
from .run import Plan, run

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("need_zookeeper")]


def _run(tmp_path: Path, name: str, fault: str) -> None:
    result = run(Plan(name, [fault], rest_s=2.0), str(tmp_path / "bench"))
    print(table([result]))
    print(result.to_json())
    assert len(result.faults) == 1, result.notes  # the fault was applied
    assert result.acked > 500, result.notes  # the workload ran through it
    assert result.lost == 0, result.examples
    assert result.duplicates == 0, result.examples
    assert result.moved == 0 and result.reused == 0, result.examples
    assert result.ok, (result.examples, result.notes)
    assert result.txn_committed > 0 and result.eos_in > 0, result.notes


def test_kill_leader(tmp_path):
    _run(tmp_path, "kill -9 of the leader", "kill-leader")


def test_pause_follower(tmp_path):
    _run(tmp_path, "SIGSTOP of a follower", "pause-follower")


def test_partition_isolates_leader(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"network partitions need namespaces: {reason}")
    _run(tmp_path, "partition isolating the leader", "partition-leader")


def test_kill_controller(tmp_path):
    _run(tmp_path, "kill -9 of the controller", "kill-controller")
