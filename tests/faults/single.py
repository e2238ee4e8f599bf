"""Single node under kill -9: one ``moldau broker`` (no ZooKeeper), an idempotent acks=all producer sending
all the time, and ``cycles`` rounds of: run for a while, kill -9, start again on the same data dir and port.
At the end every acknowledged record must be in the log exactly once, at the offset it was acknowledged with.

With ``log.flush.interval.messages=1`` the broker fsyncs before it acknowledges, so an acknowledged record
survives even a power loss. Without it the record is in the page cache when acknowledged: a kill -9 of the
process does not lose it (the kernel still writes it out), only a crash of the machine could; this bench
cannot crash the machine, so both variants must show zero loss here, and the difference is in what they
promise beyond a process kill (see docs/faults.md).
"""

from __future__ import annotations

import logging
import os
import time

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.cluster.local import free_port, moldau_command

from .checker import Result, compare_acks
from .harness import Proc
from .workload import Producers, read_all

log = logging.getLogger(__name__)


def kill_cycles(
    folder: str, *, cycles: int = 20, fsync: bool = True, run_s: float = 1.5, rate: float = 200.0
) -> Result:
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    data = os.path.join(folder, "data")
    cmd = [*moldau_command(), "broker", "--host", "127.0.0.1", "--port", str(port), "--data-dir", data]
    if fsync:
        cmd += ["--set", "log.flush.interval.messages=1"]
    broker = Proc("broker", "127.0.0.1", port, cmd, os.path.join(folder, "broker.log"))
    name = f"single node, {cycles} x kill -9, " + ("fsync per message" if fsync else "no per-message fsync")
    result = Result(name)
    t0 = time.monotonic()
    prod: Producers | None = None
    try:
        broker.start()
        broker.wait_listening(60)
        bs = broker.address
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 2})  # alive until the result is in
        fs = admin.create_topics([NewTopic("single", 3, 1)], operation_timeout=20, request_timeout=30)
        fs["single"].result(30)
        prod = Producers(bs, "single", 3, count=1, rate=rate, message_timeout_ms=120000)
        prod.start()
        for i in range(cycles):
            time.sleep(run_s)
            acked_before = len(prod.acks)
            broker.kill()
            result.faults.append(f"cycle {i + 1}: kill -9 after {acked_before} acknowledged")
            broker.start()
            broker.wait_listening(60)
        time.sleep(run_s)
        prod.stop()
        prod.join(150)
        result.seconds = time.monotonic() - t0
        result.acked, result.failed = len(prod.acks), len(prod.failed)
        compare_acks(result, prod.acks, read_all(bs, "single", 3))
        if prod.errors:
            result.notes.append(f"producer: {len(prod.errors)} errors, first: {prod.errors[0]}")
        return result
    finally:
        if prod is not None and prod.is_alive():
            prod.stop()
        broker.kill()
