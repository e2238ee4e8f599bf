"""The checker: reads every partition at the end of a run and compares it with what the workloads were told.

Per run it reports:

* ``lost`` - acknowledged (acks=all) records that are not in the log at the end;
* ``duplicates`` - records in the log more than once (idempotent producers must write each once);
* ``moved`` - acknowledged records found at another offset than the one acknowledged, and ``reused`` - offsets
  that a consumer read (or a producer was acknowledged) with one value and that hold another at the end;
* ``out_of_order`` - records of one producer out of their send order within a partition;
* ``aborted_read`` - records of aborted transactions seen by a read_committed reader (during the run or at the
  end); ``txn_lost`` - records of committed transactions missing at the end;
* ``eos_duplicates`` / ``eos_missing`` / ``eos_uncommitted`` - the consume-transform-produce output against
  its input up to the processor's committed offsets: each input exactly once;
* ``offsets_backwards`` - a group's committed offset that went down;
* ``unavailable_s`` - whole seconds of the run in which no acks=all produce was acknowledged.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from .workload import Ack, Workloads, read_all

_W = re.compile(rb"w(\d+)-(\d+)$")


@dataclass(slots=True)
class Result:
    name: str
    seconds: float = 0.0
    acked: int = 0
    failed: int = 0
    in_log: int = 0
    lost: int = 0
    duplicates: int = 0
    moved: int = 0
    reused: int = 0
    out_of_order: int = 0
    group_read: int = 0
    txn_committed: int = 0
    txn_aborted: int = 0
    aborted_read: int = 0
    txn_lost: int = 0
    eos_in: int = 0
    eos_duplicates: int = 0
    eos_missing: int = 0
    eos_uncommitted: int = 0
    offsets_backwards: int = 0
    unavailable_s: int = 0
    faults: list[str] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing acknowledged lost, nothing duplicated, no offset moved or reused, exactly once kept."""
        return not (
            self.lost
            or self.duplicates
            or self.moved
            or self.reused
            or self.out_of_order
            or self.aborted_read
            or self.txn_lost
            or self.eos_duplicates
            or self.eos_missing
            or self.eos_uncommitted
            or self.offsets_backwards
        )

    def example(self, kind: str, text: str) -> None:
        ex = self.examples.setdefault(kind, [])
        if len(ex) < 5:
            ex.append(text)

    def to_json(self) -> str:
        d = asdict(self)
        d["ok"] = self.ok
        return json.dumps(d, indent=1, sort_keys=True)


COLUMNS = [
    ("lost", "lost"),
    ("duplicates", "dup"),
    ("moved", "moved"),
    ("reused", "reused"),
    ("out_of_order", "order"),
    ("aborted_read", "aborted read"),
    ("eos_duplicates", "eos dup"),
    ("eos_missing", "eos miss"),
    ("offsets_backwards", "offs back"),
    ("unavailable_s", "unavail s"),
]


def table(results: list[Result]) -> str:
    """A markdown table, one row per run."""
    head = ["run", "s", "acked", "failed", *[c[1] for c in COLUMNS], "ok"]
    rows = [
        [
            r.name,
            f"{r.seconds:.0f}",
            str(r.acked),
            str(r.failed),
            *[str(getattr(r, c[0])) for c in COLUMNS],
            "yes" if r.ok else "NO",
        ]
        for r in results
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = "| " + " | ".join(f"{{:{w}}}" for w in widths) + " |"
    lines = [fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt.format(*row) for row in rows]
    return "\n".join(lines)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 2}
    )
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: max(tp.offset, 0) for tp in tps}


def compare_acks(
    r: Result, acks: list[Ack], log_: dict[int, list[tuple[int, bytes]]]
) -> dict[tuple[int, int], bytes]:
    """Lost, duplicated, moved and reused records of the log against the acknowledgements, into ``r``;
    returns the log as {(partition, offset): value}."""
    at: dict[tuple[int, int], bytes] = {}
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p, recs in log_.items():
        for off, v in recs:
            at[(p, off)] = v
            where.setdefault(v, []).append((p, off))
    r.in_log = len(at)
    for v, places in where.items():
        if len(places) > 1:
            r.duplicates += len(places) - 1
            r.example("duplicates", f"{v.decode()} at {places}")
    for a in acks:
        places = where.get(a.value, [])
        if not places:
            r.lost += 1
            r.example(
                "lost", f"{a.value.decode()} acknowledged at {a.partition}@{a.offset}, {_clock(a.acked)}"
            )
        elif (a.partition, a.offset) not in places:
            r.moved += 1
            r.example(
                "moved", f"{a.value.decode()} acknowledged at {a.partition}@{a.offset}, found at {places}"
            )
        held = at.get((a.partition, a.offset))
        if held is not None and held != a.value:
            r.reused += 1
            r.example(
                "reused", f"{a.partition}@{a.offset} acknowledged {a.value.decode()}, holds {held.decode()}"
            )
    return at


def check(
    name: str,
    bootstrap: str,
    w: Workloads,
    *,
    topic: str,
    out_topic: str,
    partitions: int,
    seconds: float,
    faults: list[str],
) -> Result:
    r = Result(name, seconds=seconds, faults=list(faults))
    for worker in w.all():
        if worker.failure is not None:
            r.notes.append(f"{worker.name} failed: {worker.failure!r}")
    prod = w.producers
    r.acked, r.failed = len(prod.acks), len(prod.failed)
    log_ = read_all(bootstrap, topic, partitions)
    at = compare_acks(r, prod.acks, log_)
    for p, recs in log_.items():
        last: dict[int, int] = {}
        for off, v in recs:
            m = _W.match(v)
            if m is None:
                continue
            wid, seq = int(m.group(1)), int(m.group(2))
            if seq <= last.get(wid, -1):
                r.out_of_order += 1
                r.example("out_of_order", f"partition {p}: w{wid}-{seq} at {off} after w{wid}-{last[wid]}")
            last[wid] = max(seq, last.get(wid, -1))
    # what the group consumer read during the run must still be there at the same offset
    r.group_read = len(w.group.seen)
    for (p, off), v in w.group.seen.items():
        held = at.get((p, off))
        if held != v:
            r.reused += 1
            r.example(
                "reused",
                f"group read {v.decode()} at {p}@{off}; the log holds "
                f"{held.decode() if held is not None else 'nothing'} there",
            )
    for p, off, old, new in w.group.conflicts:
        r.reused += 1
        r.example("reused", f"group read {p}@{off} as {old.decode()} and as {new.decode()}")
    r.offsets_backwards = len(w.offsets.backwards)
    for p, prev, now in w.offsets.backwards[:5]:
        r.example("offsets_backwards", f"group {w.offsets.group} partition {p}: {prev} -> {now}")
    # transactions: the output topic read_committed
    out = read_all(bootstrap, out_topic, partitions, committed=True)
    out_values = [v for recs in out.values() for _o, v in recs]
    tx = w.transactions
    r.txn_committed, r.txn_aborted = len(tx.committed), len(tx.aborted)
    seen_committed = set(out_values) | w.reader.seen
    for v in sorted(seen_committed & tx.aborted):
        r.aborted_read += 1
        r.example("aborted_read", v.decode())
    out_set = set(out_values)
    for v in sorted(tx.committed - out_set):
        r.txn_lost += 1
        r.example("txn_lost", v.decode())
    # consume-transform-produce: every input below the committed offsets exactly once, nothing beyond them
    committed = committed_offsets(bootstrap, w.processor.group, topic, partitions)
    counts = Counter(v for v in out_values if v.startswith(b"x:"))
    for p, recs in log_.items():
        upto = committed.get(p, 0)
        for off, v in recs:
            n = counts.get(b"x:" + v, 0)
            if off < upto:
                r.eos_in += 1
                if n == 0:
                    r.eos_missing += 1
                    r.example("eos_missing", f"{v.decode()} at {p}@{off} (committed offset {upto})")
            elif n:
                r.eos_uncommitted += 1
                r.example(
                    "eos_uncommitted", f"x:{v.decode()} in the output, input {p}@{off} >= committed {upto}"
                )
            if n > 1:
                r.eos_duplicates += n - 1
                r.example("eos_duplicates", f"x:{v.decode()} {n} times")
    r.unavailable_s = unavailable_seconds(w)
    return r


def _clock(mono: float) -> str:
    """A monotonic time as wall-clock time of day (to find it in the server logs)."""
    t = time.time() - (time.monotonic() - mono)
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def unavailable_seconds(w: Workloads) -> int:
    """Whole seconds between the producers' start and stop without any acknowledgement."""
    prod = w.producers
    if not prod.started:
        return 0
    end = prod.finished or max((a.acked for a in prod.acks), default=prod.started)
    buckets = {int(a.acked - prod.started) for a in prod.acks}
    return sum(1 for s in range(int(end - prod.started)) if s not in buckets)


def summary(r: Result) -> dict[str, Any]:
    return json.loads(r.to_json())
