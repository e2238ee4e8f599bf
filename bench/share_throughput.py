"""Share-group consume throughput (KIP-932) against a ``moldau broker`` process, in one run: confluent-kafka's
ShareConsumer with 1, 2 and 4 members (threads, implicit acknowledgement) on ONE partition, against a classic
confluent-kafka Consumer reading the same records.

    .venv/bin/python bench/share_throughput.py [--records 20000] [--size 100] [--out result.json]

Each share run uses a new group (share.auto.offset.reset=earliest) and ends when every record was received
once across the members; records/s is from the first poll to the last record.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test harness: the package harness (tests/harness)
sys.path.insert(0, str(ROOT / "bench"))

from throughput import create_topic, produce, start_broker  # noqa: E402


def classic(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, t0 = 0, None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                t0 = t0 or time.monotonic()
                got += 1
    dt = time.monotonic() - (t0 or time.monotonic())
    c.close()
    assert got == n, got
    return n / dt


def share(bootstrap: str, topic: str, n: int, members: int) -> dict[str, Any]:
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AdminClient
    from integration.test_share_groups import alter_group

    group = f"share-{members}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    alter_group(admin, group, **{"share.auto.offset.reset": "earliest"})
    counts = [0] * members
    seen: set[int] = set()
    lock = threading.Lock()
    first: list[float] = []
    last = [0.0]
    done = threading.Event()

    def member(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        try:
            while not done.is_set():
                for m in c.poll(0.5):
                    if m.error() is not None:
                        continue
                    with lock:
                        if not first:
                            first.append(time.monotonic())
                        counts[i] += 1
                        seen.add(m.offset())
                        last[0] = time.monotonic()
                        if len(seen) >= n:
                            done.set()
            c.commit_sync(30)  # implicit mode: the last poll's records accepted (close alone releases them)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    done.wait(300)
    done.set()
    for t in threads:
        t.join(60)
    assert len(seen) == n, len(seen)
    return {"members": members, "records_per_s": round(n / (last[0] - first[0])), "per_member": counts,
            "redelivered": sum(counts) - n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b = start_broker("moldau", Path(tmp))
        try:
            topic = f"share-bench-{uuid.uuid4().hex[:6]}"
            create_topic(b.bootstrap, topic)
            produce(b.bootstrap, topic, a.records, a.size)
            result: dict[str, Any] = {"records": a.records, "size": a.size,
                                      "classic_records_per_s": round(classic(b.bootstrap, topic, a.records))}
            result["share"] = [share(b.bootstrap, topic, a.records, k) for k in (1, 2, 4)]
        finally:
            b.close()
    print(f"{'consumer':<22}{'records/s':>12}  per member")
    print(f"{'classic (1 member)':<22}{result['classic_records_per_s']:>12}")
    for r in result["share"]:
        print(f"{'share, %d member(s)' % r['members']:<22}{r['records_per_s']:>12}  {r['per_member']}")
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
