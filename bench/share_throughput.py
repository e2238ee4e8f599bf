"""Share-group consume throughput (KIP-932) against a ``moldau broker`` process, in one run: confluent-kafka's
ShareConsumer with 1, 2 and 4 members (threads, implicit acknowledgement) on ONE partition, against a classic
confluent-kafka Consumer reading the records of the first share run's topic afterwards.

    .venv/bin/python bench/share_throughput.py [--records 20000] [--size 100] [--batch 200] [--out FILE]
        [--max-poll-records 500]

Each share run has its own topic and group (share.auto.offset.reset=earliest, share.isolation.level=
read_committed). Its records are written in one open transaction, in producer batches of ``--batch`` records;
the members join and poll, and once every member holds its assignment the transaction commits: the whole
backlog becomes readable at once to members already fetching, which share it fetch by fetch (a ShareFetch
acquires whole batches up to its record limit, as in Kafka). The run ends when every record was received
once across the members; records/s is from the first record received to the last, and each member's count is
printed.
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

from throughput import create_topic, start_broker  # noqa: E402


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


def hidden_backlog(bootstrap: str, topic: str, n: int, size: int, batch: int) -> Any:
    """``n`` records of ``size`` bytes written in batches of ``batch`` records in a transaction left open
    (read_committed readers see none of them until the returned producer commits)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5,
                  "batch.num.messages": batch})
    p.init_transactions(30)
    p.begin_transaction()
    value = b"x" * size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    assert p.flush(120) == 0
    return p


def share(bootstrap: str, n: int, size: int, batch: int, members: int, max_poll: int) -> dict[str, Any]:
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AdminClient
    from integration.test_share_groups import alter_group

    import moldau
    from moldau.protocol.errors import GroupIdNotFoundError

    topic = f"share-bench-{members}-{uuid.uuid4().hex[:6]}"
    group = f"share-{members}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    alter_group(admin, group,
                **{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
    producer = hidden_backlog(bootstrap, topic, n, size, batch)
    counts = [0] * members
    seen: set[int] = set()
    lock = threading.Lock()
    first: list[float] = []
    last = [0.0]
    done = threading.Event()

    def member(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": max_poll})
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
    with moldau.Admin(bootstrap_servers=bootstrap) as a:  # every member joined and holds the partition
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                d = a.describe_share_groups([group]).get(group)
            except GroupIdNotFoundError:  # no member has joined yet
                d = None
            if d is not None and len(d.members) == members and all(m.assignment for m in d.members):
                break
            time.sleep(0.1)
    time.sleep(1.0)  # their first fetches are waiting
    producer.commit_transaction(30)
    done.wait(300)
    done.set()
    for t in threads:
        t.join(60)
    assert len(seen) == n, len(seen)
    return {"members": members, "topic": topic, "records_per_s": round(n / (last[0] - first[0])),
            "per_member": counts, "redelivered": sum(counts) - n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=200, help="records per producer batch of the share runs")
    ap.add_argument("--max-poll-records", type=int, default=500, help="the share members' max.poll.records")
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b = start_broker("moldau", Path(tmp))
        try:
            result: dict[str, Any] = {"records": a.records, "size": a.size, "batch": a.batch,
                                      "max_poll_records": a.max_poll_records}
            result["share"] = [share(b.bootstrap, a.records, a.size, a.batch, k, a.max_poll_records)
                               for k in (1, 2, 4)]
            first_topic = result["share"][0]["topic"]
            result["classic_records_per_s"] = round(classic(b.bootstrap, first_topic, a.records))
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
