"""The bounded power-loss runs of the default suite (docs/faults.md, "Power loss"; longer runs:
``python -m tests.powerloss``).

* one broker with ``log.flush.interval.messages=1``, small segments, an idempotent producer and a
  transactional one: the power lost during a write (torn) to a segment, then to a ``.txnindex``: every
  acknowledged record is there after each restart, every committed transaction, no aborted record
  read_committed (snapshots and checkpoints: ``test_state_files.py``, ``test_torn_restart.py``; every kind
  of file: ``python -m tests.powerloss files``);
* three brokers with Kafka's default flush settings (no fsync per message), replication factor 3,
  ``min.insync.replicas=2``, acks=all: one broker loses power: nothing acknowledged is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.cluster.local import zookeeper_installed
from tests.faults.checker import table

from .scenarios import PowerLossResult, cluster, file_kinds

pytestmark = pytest.mark.timeout(300)


def _report(r: PowerLossResult) -> None:
    print(table([r.result]))
    for loss in r.losses:
        print(loss)


def _assert_nothing_acknowledged_lost(r: PowerLossResult) -> None:
    res = r.result
    assert res.lost == 0 and res.moved == 0 and res.reused == 0, res.examples
    assert res.duplicates == 0 and res.out_of_order == 0, res.examples
    assert r.recovered == res.acked


def test_single_node_power_loss_while_writing_each_kind_of_file(tmp_path: Path, require_fuse: None) -> None:
    kinds = (".log", ".txnindex")
    r = file_kinds(tmp_path, kinds, seed=11)
    _report(r)
    assert [loss["kind"] for loss in r.losses if loss["written"]] == list(kinds), r.losses
    assert all(kind in loss["during_write_to"] for kind, loss in zip(kinds, r.losses)), r.losses
    assert r.result.acked > 500, r.result.notes
    _assert_nothing_acknowledged_lost(r)
    assert r.result.txn_committed >= 1 and r.result.txn_aborted >= 1, r.result.notes
    assert r.result.aborted_read == 0 and r.result.txn_lost == 0, r.result.examples


def test_cluster_one_broker_power_loss_loses_nothing_acked(tmp_path: Path, require_fuse: None) -> None:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (scripts/setup.sh --test installs Debian's zookeeper)")
    r = cluster(tmp_path, victims=1, cycles=1, run_s=4.0, settle_s=3.0, seed=3)
    _report(r)
    (loss,) = r.losses
    victim = loss["brokers"][0]
    assert loss[f"broker {victim}"]["unsynced_pages"] > 0  # acknowledged data was only in its page cache
    assert r.result.acked > 500, r.result.notes
    _assert_nothing_acknowledged_lost(r)
