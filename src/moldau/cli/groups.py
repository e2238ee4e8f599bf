"""``moldau groups``: list, describe (members, assignments, committed offsets, end offsets, lag), delete and
reset-offsets (kafka-consumer-groups)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import (
    CliError,
    UsageError,
    add_command,
    add_subcommands,
    admin,
    client_config,
    err,
    parse_duration,
    parse_timestamp_ms,
    print_json,
    print_table,
)
from .group_args import (
    add_delete,
    add_describe,
    add_list,
    add_reset_offsets,
    assignment_text,
)

EXAMPLES = """\
  moldau groups list
  moldau groups describe my-app                    # members, offsets, lag
  moldau groups reset-offsets my-app --topic events --to-earliest            # dry run: shows the plan
  moldau groups reset-offsets my-app --topic events --to-earliest --execute  # applies it
  moldau groups reset-offsets my-app --all-topics --by-duration 1h --execute
  moldau groups delete my-app
"""

_INACTIVE = ("Empty", "Dead", "")


def register(sub: Any) -> None:
    p = add_command(sub, "groups", help="list, describe, delete consumer groups and reset their offsets",
                    description="Consumer groups on any Kafka-compatible broker.", examples=EXAMPLES)
    cmds = add_subcommands(p, "groups_command")

    add_list(cmds, cmd_list, help="list groups", examples="  moldau groups list --json\n")
    add_describe(cmds, cmd_describe, help="members, assignments, committed offsets, end offsets and lag",
                 examples="  moldau groups describe my-app\n  moldau groups describe my-app --json\n",
                 views=[("--members", "only the members and their assignments"),
                        ("--offsets", "only the offsets and lag")])
    add_delete(cmds, cmd_delete, help="delete groups (they must have no members)",
               examples="  moldau groups delete my-app old-app\n")
    add_reset_offsets(
        cmds, cmd_reset,
        help="move a group's committed offsets (dry run unless --execute)",
        examples="  moldau groups reset-offsets my-app --topic events --to-latest\n"
        "  moldau groups reset-offsets my-app --topic events:0,1 --to-offset 100 "
        "--execute\n"
        "  moldau groups reset-offsets my-app --all-topics --to-datetime "
        "2024-05-01T00:00:00Z --execute\n"
        "  moldau groups reset-offsets my-app --topic events --shift-by -10 --execute\n",
        topic_metavar="TOPIC[:P,P]", topic_help="topic, optionally with partitions (repeatable)",
        all_topics_help="every topic the group has offsets for",
        datetime_help="to the first offset at or after TIME (ISO 8601, e.g. 2024-05-01T12:00:00Z, "
                      "or ms since the epoch)",
        current_and_shift=True,
    )


# ---------------------------------------------------------------------------------------------- helpers

def _end_offsets(a: Any, tps: list[Any], spec: str | int = "latest") -> dict[Any, int | None]:
    """List offsets topic by topic, so a deleted topic does not hide the others (None there)."""
    out: dict[Any, int | None] = {}
    by_topic: dict[str, list[Any]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp)
    for items in by_topic.values():
        try:
            res = a.list_offsets({tp: spec for tp in items})
            for tp in items:
                out[tp] = res[tp].offset
        except Exception:  # noqa: BLE001 - unknown topic etc.
            for tp in items:
                out[tp] = None
    return out


def describe_group(a: Any, gid: str) -> dict[str, Any]:
    from moldau.client import TopicPartition

    desc = a.describe_consumer_groups([gid])[gid]
    committed = group_offsets(a, gid)
    owner: dict[Any, Any] = {}
    members = []
    for mem in desc.members:
        for tp in mem.assignment:
            owner[TopicPartition(tp.topic, tp.partition)] = mem
        members.append({"member_id": mem.member_id, "group_instance_id": mem.group_instance_id,
                        "client_id": mem.client_id, "host": mem.client_host,
                        "assignment": [{"topic": tp.topic, "partition": tp.partition}
                                       for tp in sorted(mem.assignment)]})
    tps = sorted(set(committed) | set(owner))
    ends = _end_offsets(a, tps)
    offsets = []
    for tp in tps:
        c = committed.get(tp)
        end = ends.get(tp)
        cur = c.offset if c is not None else None
        lag = (end - cur) if (end is not None and cur is not None) else None
        mem = owner.get(tp)
        offsets.append({"topic": tp.topic, "partition": tp.partition, "committed_offset": cur,
                        "log_end_offset": end, "lag": lag,
                        "member_id": mem.member_id if mem else None,
                        "client_id": mem.client_id if mem else None,
                        "host": mem.client_host if mem else None})
    return {"group": gid, "state": desc.state, "protocol_type": desc.protocol_type,
            "protocol": desc.protocol, "members": members, "offsets": offsets,
            "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None)}


def group_offsets(a: Any, gid: str) -> dict[Any, Any]:
    """A group's committed offsets. Brokers that cannot answer OffsetFetch for all topics (tansu) are asked
    for the partitions of every topic instead."""
    from moldau.client import TopicPartition
    from moldau.protocol.errors import KafkaError

    try:
        return a.list_consumer_group_offsets(gid)
    except KafkaError:
        raise
    except Exception:  # noqa: BLE001 - an answer the client cannot decode: ask topic by topic
        topics = a.list_topics()
        if not topics:
            return {}
        tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        return a.list_consumer_group_offsets(gid, tps)


def _exists(info: dict[str, Any]) -> bool:
    return not (info["state"] in ("Dead", "") and not info["members"] and not info["offsets"])


# ---------------------------------------------------------------------------------------------- commands

def cmd_list(args: argparse.Namespace) -> int:
    with admin(args) as a:
        groups = a.list_consumer_groups(states=args.state or None)
    wanted = {s.lower() for s in args.state}
    rows = [g for g in groups if not wanted or (g.state or "").lower() in wanted]
    if args.json:
        print_json([{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
                     "type": g.group_type} for g in rows])
    else:
        print_table(["GROUP", "STATE", "PROTOCOL-TYPE"],
                    [(g.group_id, g.state, g.protocol_type or "-") for g in rows], empty="(no groups)")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    infos = []
    missing = []
    with admin(args) as a:
        for gid in args.groups:
            info = describe_group(a, gid)
            if not _exists(info):
                missing.append(gid)
                continue
            infos.append(info)
    if args.json:
        print_json(infos if len(args.groups) > 1 else (infos[0] if infos else None))
    else:
        for i, info in enumerate(infos):
            if i:
                print()
            print(f"Group: {info['group']}  State: {info['state']}  Protocol: {info['protocol'] or '-'}  "
                  f"Members: {len(info['members'])}  Total lag: {info['total_lag']}")
            if not args.offsets:
                if info["members"]:
                    print_table(["MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                                [(m["member_id"], m["client_id"], m["host"],
                                  assignment_text(m["assignment"])) for m in info["members"]])
                elif args.members:
                    print("(no active members)")
            if not args.members:
                if info["members"]:
                    print()
                print_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"],
                            [(o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"],
                              o["lag"], o["member_id"]) for o in info["offsets"]],
                            empty="(no committed offsets)")
    if missing:
        raise CliError(f"group {missing[0]!r} does not exist" if len(missing) == 1 else
                       "groups do not exist: " + ", ".join(missing))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with admin(args) as a:
        results = a.delete_consumer_groups(args.groups, raise_errors=False)
    report = []
    failed = []
    for gid in args.groups:
        exc = results.get(gid)
        if exc is None:
            report.append({"group": gid, "deleted": True})
            continue
        code = getattr(getattr(exc, "code", None), "name", "")
        why = {"GROUP_ID_NOT_FOUND": "no such group",
               "NON_EMPTY_GROUP": "the group has active members"}.get(code)
        if why is None:
            from .common import describe_error

            why = describe_error(exc, "")[0]
        report.append({"group": gid, "deleted": False, "error": why})
        failed.append(f"{gid}: {why}")
    if args.json:
        print_json(report)
    else:
        for r in report:
            if r["deleted"]:
                print(f"deleted group {r['group']}")
    if failed:
        raise CliError("cannot delete " + "; ".join(failed))
    return 0


def _parse_topic_arg(text: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = text.partition(":")
    if not topic:
        raise UsageError(f"--topic {text!r}: expected TOPIC or TOPIC:P,P")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--topic {text!r}: partitions must be numbers, e.g. events:0,1") from None


def cmd_reset(args: argparse.Namespace) -> int:
    from moldau.client import TopicPartition

    if not args.topic and not args.all_topics:
        raise UsageError("say which offsets to reset: --topic TOPIC[:P,P] or --all-topics")
    if args.topic and args.all_topics:
        raise UsageError("--topic and --all-topics cannot be combined")
    ts_ms: int | None = None
    if args.to_datetime is not None:
        ts_ms = parse_timestamp_ms(args.to_datetime)
    elif args.by_duration is not None:
        ts_ms = int((time.time() - abs(parse_duration(args.by_duration))) * 1000)
    gid = args.group
    with admin(args) as a:
        desc = a.describe_consumer_groups([gid])[gid]
        if desc.members or desc.state not in _INACTIVE:
            raise CliError(f"group {gid!r} is {desc.state} with {len(desc.members)} active member"
                           f"{'s' if len(desc.members) != 1 else ''}; offsets can only be reset while it has "
                           "none (stop its consumers first)")
        committed = group_offsets(a, gid)
        if args.all_topics:
            tps = sorted(committed)
            if not tps:
                raise CliError(f"group {gid!r} has no committed offsets (name the topics with --topic)")
        else:
            tps = []
            for item in args.topic:
                topic, parts = _parse_topic_arg(item)
                descs = a.describe_topics([topic])
                have = [p.partition for p in descs[topic].partitions]
                if parts is None:
                    parts = have
                bad = [p for p in parts if p not in have]
                if bad:
                    raise CliError(f"topic {topic} has no partition {bad[0]} (it has {len(have)})")
                tps += [TopicPartition(topic, p) for p in parts]
            tps = sorted(set(tps))
        earliest = a.list_offsets({tp: "earliest" for tp in tps})
        latest = a.list_offsets({tp: "latest" for tp in tps})
        at_time = a.list_offsets({tp: ts_ms for tp in tps}) if ts_ms is not None else {}
    plan = []
    for tp in tps:
        lo, hi = earliest[tp].offset, latest[tp].offset
        cur = committed[tp].offset if tp in committed else None
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif args.to_current:
            new = cur if cur is not None else hi
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            base = cur if cur is not None else hi
            new = base + args.shift_by
        else:
            off = at_time[tp].offset
            new = hi if off is None or off < 0 else off
        new = min(max(new, lo), hi)
        plan.append({"topic": tp.topic, "partition": tp.partition, "current_offset": cur, "new_offset": new,
                     "earliest_offset": lo, "latest_offset": hi})
    if args.execute:
        from moldau.client import Consumer

        conf = client_config(args, "consumer", **{"group.id": gid, "enable.auto.commit": "false"})
        with Consumer(config=conf) as c:
            c.assign(tps)
            c.commit({TopicPartition(p["topic"], p["partition"]): p["new_offset"] for p in plan})
            c.close(autocommit=False)
    if args.json:
        print_json({"group": gid, "executed": bool(args.execute), "offsets": plan})
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                    [(gid, p["topic"], p["partition"], p["current_offset"], p["new_offset"]) for p in plan])
        if args.execute:
            err(f"reset {len(plan)} offset{'s' if len(plan) != 1 else ''} of group {gid}")
        else:
            err("dry run: nothing changed (add --execute to apply)")
    return 0
