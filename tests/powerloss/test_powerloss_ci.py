"""The bounded power-loss runs of the default suite (docs/faults.md, "Power loss"; longer runs:
``python -m tests.powerloss``).

* one broker with ``log.flush.interval.messages=1`` and small segments, the power lost during a write picked
  at random (that write torn), three times: every acknowledged record is there after each restart;
* three brokers with Kafka's default flush settings (no fsync per message), replication factor 3,
  ``min.insync.replicas=2``, acks=all: one broker loses power: nothing acknowledged is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.cluster.local import zookeeper_installed
from tests.faults.checker import table

from .scenarios import PowerLossResult, cluster, single_node

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


def test_single_node_fsync_per_message_power_loss_during_writes(tmp_path: Path, require_fuse: None) -> None:
    # small segments: rolls happen between the losses (a new segment's name must be durable with its records)
    r = single_node(tmp_path, cycles=3, fsync=True, tear=True, during_write=True, run_s=2.5, seed=11,
                    settings={"log.segment.bytes": "16384"})
    _report(r)
    assert len(r.losses) == 3
    assert all(loss["during_write_to"] for loss in r.losses), r.losses  # each loss hit a write in flight
    assert r.result.acked > 500, r.result.notes
    _assert_nothing_acknowledged_lost(r)


def test_cluster_one_broker_power_loss_loses_nothing_acked(tmp_path: Path, require_fuse: None) -> None:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (scripts/setup.sh --test installs Debian's zookeeper)")
    r = cluster(tmp_path, victims=1, cycles=1, run_s=5.0, seed=3)
    _report(r)
    (loss,) = r.losses
    victim = loss["brokers"][0]
    assert loss[f"broker {victim}"]["unsynced_pages"] > 0  # acknowledged data was only in its page cache
    assert r.result.acked > 500, r.result.notes
    _assert_nothing_acknowledged_lost(r)
