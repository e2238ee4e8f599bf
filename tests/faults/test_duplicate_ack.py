"""Found by the fault bench: a retried idempotent batch was acknowledged before it was replicated.

A leader answered a duplicate (a batch whose producer id and sequence it already had) at once with success,
while the original was still waiting for the ISR: a producer whose first attempt timed out and that retried
got acks=all success for a record held by the leader alone, which a failover then lost (the bench's
``unclean-loss`` scenario with unclean election off lost four acknowledged records this way). A duplicate now
waits like the original: REQUEST_TIMED_OUT while the followers are stopped, success with the original offset
once they are back, and the record is in the log once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from .harness import FaultCluster
from .run import _wait_formed
from harness.rawkafka import RawConnection, produce_request

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("need_zookeeper")]

NONE, REQUEST_TIMED_OUT = 0, 7


def _produce(address: str, batch: bytes) -> tuple[int, int]:
    from kafka.protocol.producer import ProduceResponse

    with RawConnection.to(address, timeout=30) as conn:
        resp = conn.call(produce_request("dup", 0, batch, acks=-1), ProduceResponse, 8)
    pr = resp.responses[0].partition_responses[0]
    return pr.error_code, pr.base_offset


def test_a_retried_batch_is_acknowledged_only_once_replicated(tmp_path: Path) -> None:
    from moldau.protocol.records import BatchBuilder

    # sessions outlast the stop, and followers stay in the ISR: the high watermark simply cannot move
    c = FaultCluster(str(tmp_path), 3, netns=False, zk_session_ms=40000,
                     configs=["replica.lag.time.max.ms=60000", "replica.fetch.wait.max.ms=200"])
    try:
        c.start()
        _wait_formed(c.bootstrap, 3)
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 2})
        admin.create_topics([NewTopic("dup", 1, 3)], operation_timeout=20)["dup"].result(30)
        deadline = time.monotonic() + 30
        while True:
            p0 = admin.list_topics("dup", timeout=10).topics["dup"].partitions[0]
            if p0.leader > 0 and len(p0.isrs) == 3:
                break
            assert time.monotonic() < deadline, p0
            time.sleep(0.3)
        leader = c.broker(p0.leader)
        followers = [c.broker(r) for r in p0.replicas if r != p0.leader]
        bb = BatchBuilder(producer_id=4242, producer_epoch=0, base_sequence=0)
        bb.append(int(time.time() * 1000), None, b"only-once", [])
        batch = bytes(bb.build(0))

        for f in followers:
            f.signal(signal.SIGSTOP)
        try:
            assert _produce(leader.address, batch)[0] == REQUEST_TIMED_OUT   # the original waits for the ISR
            assert _produce(leader.address, batch)[0] == REQUEST_TIMED_OUT   # and so does its retry
        finally:
            for f in followers:
                f.signal(signal.SIGCONT)
        assert _produce(leader.address, batch) == (NONE, 0)                  # replicated: the original offset
        from confluent_kafka import Consumer, TopicPartition

        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "dup-check", "log_level": 2})
        low, high = cons.get_watermark_offsets(TopicPartition("dup", 0), timeout=10, cached=False)
        cons.close()
        assert (low, high) == (0, 1)                                          # written once
    finally:
        c.stop()
