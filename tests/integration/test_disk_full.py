"""A log dir on a small tmpfs filled by a producer: a real ENOSPC. The producer gets KAFKA_STORAGE_ERROR, the
dir goes offline (DescribeLogDirs says so) while the other log dir keeps working, the broker logs one error
and stays up, and after the filesystem grows and the broker restarts every acknowledged record is there.

Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka.protocol.admin.cluster import DescribeLogDirsRequest, DescribeLogDirsResponse

from harness.brokerproc import BrokerProcess
from harness.kafkautil import create_topic
from harness.rawkafka import RawConnection

pytestmark = [
    pytest.mark.moldau_only("log dirs on disk, restarts"),
    pytest.mark.single_broker("fills one broker's log dir and restarts that process"),
]

STORAGE_ERROR = KafkaError.KAFKA_STORAGE_ERROR


class TwoDirBroker(BrokerProcess):
    """A moldau broker with log.dirs = first,second."""

    def __init__(self, first: Path, second: Path) -> None:
        super().__init__("moldau", first)
        self.second = second

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--data-dir") + 1] = f"{self.data_dir},{self.second}"
        return cmd


@pytest.fixture
def small_fs(tmp_path: Path) -> Any:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def read_partition(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, partition, 0)])
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while len(out) < end and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None or msg.error():
                continue
            out[msg.offset()] = msg.value()
    finally:
        c.close()
    return out


def log_dirs(bootstrap: str) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    with RawConnection.to(bootstrap) as c:
        resp = c.call(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 1)
    return {
        r.log_dir: (r.error_code, {(t.name, p.partition_index) for t in r.topics for p in t.partitions})
        for r in resp.results
    }


def test_disk_full_takes_the_dir_offline_and_loses_nothing_acknowledged(
    tmp_path: Path, small_fs: Path
) -> None:
    big = tmp_path / "big"
    small = small_fs / "data"
    b = TwoDirBroker(big, small)
    b.settings["log.segment.bytes"] = "1048576"
    try:
        b.start()
        topic = create_topic(b.bootstrap, "fill", partitions=2)
        dirs = log_dirs(b.bootstrap)
        on_small = [p for _t, p in dirs[str(small)][1]]
        on_big = [p for _t, p in dirs[str(big)][1]]
        assert len(on_small) == 1 and len(on_big) == 1
        ps, pb = on_small[0], on_big[0]

        acked: dict[int, bytes] = {}
        errors: list[Any] = []

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[msg.offset()] = msg.value()

        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "retries": 0,
                "message.timeout.ms": 10000,
            }
        )
        seq = 0
        deadline = time.monotonic() + 60
        while not errors and time.monotonic() < deadline:
            try:
                p.produce(topic, b"%08d:" % seq + b"v" * 2000, partition=ps, on_delivery=done)
                seq += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(30)
        assert errors, "the small filesystem never filled"
        assert {e.code() for e in errors} == {STORAGE_ERROR}
        assert len(acked) > 1000
        assert b.alive()

        # the small dir is offline, the other one keeps working
        dirs = log_dirs(b.bootstrap)
        assert dirs[str(small)][0] == STORAGE_ERROR
        assert dirs[str(big)][0] == 0
        ok: list[Any] = []
        p2 = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0})
        for i in range(100):
            p2.produce(topic, b"other-%d" % i, partition=pb, on_delivery=lambda err, msg: ok.append(err))
        p2.flush(30)
        assert ok == [None] * 100
        assert b.output().count("is offline after a storage error") == 1

        b.stop()
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_fs)], check=True)
        b.start()
        got = read_partition(b.bootstrap, topic, ps, max(acked) + 1)
        missing = [o for o in acked if got.get(o) != acked[o]]
        assert not missing, f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"
        assert log_dirs(b.bootstrap)[str(small)][0] == 0
        # and the partition takes writes again
        p3 = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0})
        again: list[Any] = []
        p3.produce(topic, b"after", partition=ps, on_delivery=lambda err, msg: again.append(err))
        p3.flush(30)
        assert again == [None]
    finally:
        b.close()
