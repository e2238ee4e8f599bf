"""``moldau offsets TOPIC``: earliest and latest offsets per partition, and the offset at a time
(kafka-get-offsets)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    CliError,
    add_command,
    add_connection_args,
    add_json_arg,
    admin,
    fmt_time_ms,
    parse_timestamp_ms,
    print_json,
    print_table,
    run_command,
)

EXAMPLES = """\
  moldau offsets events                              # earliest / latest per partition
  moldau offsets events --time 2024-05-01T00:00:00Z  # + first offset at or after that time
  moldau offsets events --time now-1h -p 0 --json
  moldau offsets events --time max                   # offset of the record with the largest timestamp
"""


def register(sub: Any) -> None:
    p = add_command(sub, "offsets", help="earliest, latest and by-time offsets of a topic",
                    description="Offsets of a topic's partitions (ListOffsets).", examples=EXAMPLES)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-p", "--partition", type=int, action="append", metavar="N", help="only this partition")
    p.add_argument("-t", "--time", metavar="TIME",
                   help="also the first offset at or after TIME: ISO 8601, ms since the epoch, now-1h, "
                        "or 'max' (the record with the largest timestamp)")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted", help="read_committed: latest = last stable offset")
    add_json_arg(p)
    add_connection_args(p)
    p.set_defaults(func=run_command(cmd_offsets))


def cmd_offsets(args: argparse.Namespace) -> int:
    from moldau.client import TopicPartition

    spec: str | int | None = None
    if args.time is not None:
        t = args.time.strip().lower()
        if t in ("earliest", "latest"):
            spec = None  # already shown
        elif t in ("max", "max_timestamp"):
            spec = "max_timestamp"
        else:
            spec = parse_timestamp_ms(args.time)
    with admin(args) as a:
        desc = a.describe_topics([args.topic])[args.topic]
        have = [p.partition for p in desc.partitions]
        parts = args.partition or have
        bad = [p for p in parts if p not in have]
        if bad:
            raise CliError(f"topic {args.topic} has no partition {bad[0]} (it has {len(have)})")
        tps = [TopicPartition(args.topic, p) for p in sorted(set(parts))]
        iso = args.isolation_level
        earliest = a.list_offsets({tp: "earliest" for tp in tps}, isolation_level=iso)
        latest = a.list_offsets({tp: "latest" for tp in tps}, isolation_level=iso)
        at: dict[Any, Any] = {}
        if spec is not None:
            at = a.list_offsets({tp: spec for tp in tps}, isolation_level=iso)
    rows = []
    for tp in tps:
        row: dict[str, Any] = {
            "partition": tp.partition,
            "earliest": earliest[tp].offset,
            "latest": latest[tp].offset,
            "records": latest[tp].offset - earliest[tp].offset,
        }
        if spec is not None:
            r = at[tp]
            row["offset_at_time"] = r.offset if r.offset >= 0 else None
            row["timestamp"] = r.timestamp if r.timestamp >= 0 else None
        rows.append(row)
    if args.json:
        print_json({"topic": args.topic, "time": spec, "partitions": rows})
        return 0
    headers = ["PARTITION", "EARLIEST", "LATEST", "RECORDS"]
    if spec is not None:
        headers += ["OFFSET-AT-TIME", "TIMESTAMP"]
    table = []
    for r in rows:
        line = [r["partition"], r["earliest"], r["latest"], r["records"]]
        if spec is not None:
            line += [r["offset_at_time"], fmt_time_ms(r["timestamp"]) if r["timestamp"] is not None else None]
        table.append(line)
    print_table(headers, table)
    return 0
