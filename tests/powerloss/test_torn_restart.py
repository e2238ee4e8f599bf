"""A broker restarted over a data dir in which every file is torn at once (no FUSE needed): each small state
file truncated at a random byte, a partial batch at the tail of every active segment (a torn write can only be
the last one: the older segments were fsynced whole before they were rolled). The broker must start, recover
(torn segment tails truncated, indexes rebuilt, unreadable checkpoints ignored and rebuilt from the logs),
serve every record it had acknowledged with an fsync per message, no garbage, and no aborted transaction's
records read_committed. The single node's topic metadata, torn, stops the start with a clear error instead."""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from moldau.broker.cluster.local import free_port, moldau_command
from moldau.broker.metadata import METADATA_FILE
from tests.faults.harness import Proc
from tests.faults.workload import read_all

pytestmark = pytest.mark.timeout(240)


def _broker(folder: Path) -> Proc:
    port = free_port()
    cmd = [*moldau_command(), "broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir",
           str(folder / "data"), "--set", "log.flush.interval.messages=1", "--set", "log.segment.bytes=16384",
           "--set", "log.index.interval.bytes=256", "--set", "log.flush.offset.checkpoint.interval.ms=500",
           "--set", "log.flush.start.offset.checkpoint.interval.ms=500"]
    return Proc("broker", "127.0.0.1", port, cmd, str(folder / "broker.log"))


def _fill(b: Proc) -> tuple[set[bytes], set[bytes], set[bytes]]:
    """Acknowledged records, committed and aborted transactional records, a SCRAM user."""
    admin = AdminClient({"bootstrap.servers": b.address, "log_level": 2})
    admin.create_topics([NewTopic("t", 3, 1)], operation_timeout=20)["t"].result(30)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", info, b"secret")]).values():
        fut.result(30)
    acked: set[bytes] = set()

    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.add(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": b.address, "enable.idempotence": True, "log_level": 2, "linger.ms": 0,
                  "batch.size": 2048})
    for i in range(600):  # about 40 KB per partition: three segments each, with index entries and snapshots
        p.produce("t", value=b"v%d-" % i + b"x" * 200, partition=i % 3, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    tp = Producer({"bootstrap.servers": b.address, "transactional.id": "tx", "log_level": 2})
    tp.init_transactions(30)
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    for n in range(6):
        values = [b"a%d-%d" % (n, k) for k in range(3)]
        tp.begin_transaction()
        for k, v in enumerate(values):
            tp.produce("t", value=v, partition=k)
        if n % 2:
            tp.flush(10)
            tp.abort_transaction(30)
            aborted.update(values)
        else:
            tp.commit_transaction(30)
            committed.update(values)
    return acked, committed, aborted


def _tear_everything(data: Path, seed: int) -> list[str]:
    rng = random.Random(seed)
    torn = []
    for root, _dirs, files in os.walk(data):
        segments = sorted(f for f in files if f.endswith(".log"))
        for f in sorted(files):
            path = os.path.join(root, f)
            if f == METADATA_FILE:
                continue
            if f.endswith(".log"):
                if f == segments[-1]:  # the active segment: part of a batch that never completed
                    with open(path, "ab") as fh:
                        fh.write(rng.randbytes(37))
                continue
            size = os.path.getsize(path)
            if size:
                os.truncate(path, rng.randrange(size))
                torn.append(os.path.relpath(path, data))
    return torn


def test_every_file_torn_at_once_the_broker_recovers_everything_acknowledged(tmp_path: Path) -> None:
    b = _broker(tmp_path)
    try:
        b.start()
        b.wait_listening(60)
        acked, committed, aborted = _fill(b)
        assert len(acked) == 600
        time.sleep(2)  # the checkpoints are written
        b.kill()
        torn = _tear_everything(tmp_path / "data", seed=5)
        names = {os.path.basename(t) for t in torn}
        kinds = {n.rsplit(".", 1)[-1] if "." in n else n for n in names}
        assert {"index", "timeindex", "snapshot", "txnindex", "metadata", "leader-epoch-checkpoint",
                "recovery-point-offset-checkpoint", "__moldau_credentials.json"} <= kinds | names, kinds
        b.start()
        b.wait_listening(90)
        values = [v for recs in read_all(b.address, "t", 3, committed=True).values() for _, v in recs]
        assert len(values) == len(set(values))
        assert acked - set(values) == set()
        assert committed - set(values) == set()
        assert set(values) & aborted == set()
        assert set(values) <= acked | committed  # nothing else: no garbage
        assert "Traceback" not in Path(b.log_path).read_text(errors="replace")
    finally:
        b.kill()
    # the single node's topic metadata, torn: no start, a clear error
    path = tmp_path / "data" / METADATA_FILE
    os.truncate(path, path.stat().st_size // 2)
    done = subprocess.run(b.cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "cannot read the topic metadata" in done.stderr and METADATA_FILE in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
