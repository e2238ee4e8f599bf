"""``moldau share-groups``: list, describe (state, members, start offsets and lag), delete, reset-offsets and
delete-offsets of share groups (KIP-932; as Kafka's kafka-share-groups.sh)."""

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
    err,
    parse_duration,
    parse_timestamp_ms,
    print_json,
    print_table,
    run_command,
)
from .group_args import (
    add_delete,
    add_describe,
    add_list,
    add_output_args,
    add_reset_offsets,
    assignment_text,
)

EXAMPLES = """\
  moldau share-groups list
  moldau share-groups describe workers                 # start offsets (SPSO) and lag
  moldau share-groups describe workers --members       # members and their assignments
  moldau share-groups describe workers --state
  moldau share-groups reset-offsets workers --topic jobs --to-earliest            # dry run
  moldau share-groups reset-offsets workers --topic jobs --to-earliest --execute
  moldau share-groups delete-offsets workers --topic jobs
  moldau share-groups delete workers
"""


def register(sub: Any) -> None:
    p = add_command(sub, "share-groups", help="list, describe, delete share groups and reset their offsets",
                    examples=EXAMPLES,
                    description="Share groups (KIP-932), as Kafka's kafka-share-groups.sh.")
    cmds = add_subcommands(p, "share_groups_command")

    add_list(cmds, cmd_list, help="list share groups", examples="  moldau share-groups list --json\n")
    add_describe(cmds, cmd_describe, help="start offsets and lag, members, or state",
                 examples="  moldau share-groups describe workers\n"
                          "  moldau share-groups describe workers --members --json\n",
                 views=[("--members", "the members and their assignments"),
                        ("--offsets", "the start offsets and lag (the default)"),
                        ("--state", "state, epochs, assignor, member count")])
    add_delete(cmds, cmd_delete, help="delete share groups (they must have no members)",
               examples="  moldau share-groups delete workers\n")

    do = cmds.add_parser("delete-offsets", help="forget a group's state for topics (no members)",
                         examples="  moldau share-groups delete-offsets workers --topic jobs\n")
    do.add_argument("group", metavar="GROUP")
    do.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="repeatable")
    add_output_args(do)
    do.set_defaults(func=run_command(cmd_delete_offsets))

    add_reset_offsets(
        cmds, cmd_reset, help="move the start offsets (dry run unless --execute)",
        examples="  moldau share-groups reset-offsets workers --topic jobs --to-latest --execute\n"
                 "  moldau share-groups reset-offsets workers --all-topics --by-duration 1h\n",
        topic_metavar="TOPIC", topic_help="repeatable", all_topics_help="every topic the group has state for",
        datetime_help="to the first offset at or after TIME (ISO 8601 or ms since the epoch)",
        current_and_shift=False,
    )


def _why(exc: BaseException) -> str:
    code = getattr(getattr(exc, "code", None), "name", "")
    known = {"GROUP_ID_NOT_FOUND": "no such share group", "NON_EMPTY_GROUP": "the group has active members",
             "INVALID_GROUP_ID": "not a share group"}
    if code in known:
        return known[code]
    from .common import describe_error

    return describe_error(exc, "")[0]


def describe_share_group(a: Any, gid: str) -> dict[str, Any]:
    desc = a.describe_share_groups([gid])[gid]
    offsets = a.list_share_group_offsets(gid)
    return {
        "group": gid, "state": desc.state, "group_epoch": desc.group_epoch,
        "assignment_epoch": desc.assignment_epoch, "assignor": desc.assignor,
        "members": [{"member_id": mem.member_id, "client_id": mem.client_id, "host": mem.client_host,
                     "member_epoch": mem.member_epoch,
                     "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in mem.assignment]}
                    for mem in desc.members],
        "offsets": [{"topic": tp.topic, "partition": tp.partition,
                     "start_offset": o.start_offset if o.start_offset >= 0 else None,
                     "leader_epoch": o.leader_epoch, "lag": o.lag if o.lag >= 0 else None}
                    for tp, o in sorted(offsets.items())],
    }


# ---------------------------------------------------------------------------------------------- commands

def cmd_list(args: argparse.Namespace) -> int:
    with admin(args) as a:
        groups = a.list_share_groups(states=args.state or None)
    wanted = {s.lower() for s in args.state}
    rows = [g for g in groups if not wanted or (g.state or "").lower() in wanted]
    if args.json:
        print_json([{"group": g.group_id, "state": g.state} for g in rows])
    else:
        print_table(["GROUP", "STATE"], [(g.group_id, g.state or "-") for g in rows],
                    empty="(no share groups)")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    infos = []
    missing = []
    with admin(args) as a:
        for gid in args.groups:
            try:
                infos.append(describe_share_group(a, gid))
            except Exception as exc:  # noqa: BLE001 - reported per group
                code = getattr(getattr(exc, "code", None), "name", "")
                if code in ("GROUP_ID_NOT_FOUND", "INVALID_GROUP_ID"):
                    missing.append(gid)
                    continue
                raise
    if args.json:
        print_json(infos if len(args.groups) > 1 else (infos[0] if infos else None))
    else:
        for i, info in enumerate(infos):
            if i:
                print()
            if args.state:
                print_table(["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "#MEMBERS"],
                            [(info["group"], info["state"], info["group_epoch"], info["assignment_epoch"],
                              info["assignor"], len(info["members"]))])
            elif args.members:
                print_table(["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "ASSIGNMENT"],
                            [(info["group"], m["member_id"], m["client_id"], m["host"], m["member_epoch"],
                              assignment_text(m["assignment"])) for m in info["members"]],
                            empty=f"share group {info['group']} has no active members")
            else:
                print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                            [(info["group"], o["topic"], o["partition"], _dash(o["start_offset"]),
                              _dash(o["lag"])) for o in info["offsets"]],
                            empty=f"share group {info['group']} has no offsets")
    if missing:
        raise CliError(f"share group {missing[0]!r} does not exist" if len(missing) == 1 else
                       "share groups do not exist: " + ", ".join(missing))
    return 0


def _dash(v: Any) -> Any:
    return "-" if v is None else v


def _report(results: dict[str, BaseException | None], names: list[str], what: str, json_out: bool) -> int:
    report = []
    failed = []
    for name in names:
        exc = results.get(name)
        if exc is None:
            report.append({"name": name, "deleted": True})
        else:
            why = _why(exc)
            report.append({"name": name, "deleted": False, "error": why})
            failed.append(f"{name}: {why}")
    if json_out:
        print_json(report)
    else:
        for r in report:
            if r["deleted"]:
                print(f"deleted {what} {r['name']}")
    if failed:
        raise CliError(f"cannot delete {what} " + "; ".join(failed))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with admin(args) as a:
        results = a.delete_share_groups(args.groups, raise_errors=False)
    return _report(results, args.groups, "share group", args.json)


def cmd_delete_offsets(args: argparse.Namespace) -> int:
    with admin(args) as a:
        results = a.delete_share_group_offsets(args.group, args.topic, raise_errors=False)
    return _report(results, args.topic, f"the offsets of share group {args.group} for topic", args.json)


def cmd_reset(args: argparse.Namespace) -> int:
    from moldau.client import TopicPartition

    if bool(args.topic) == bool(args.all_topics):
        raise UsageError("say which offsets to reset: --topic TOPIC (repeatable) or --all-topics")
    ts_ms: int | None = None
    if args.to_datetime is not None:
        ts_ms = parse_timestamp_ms(args.to_datetime)
    elif args.by_duration is not None:
        ts_ms = int((time.time() - abs(parse_duration(args.by_duration))) * 1000)
    gid = args.group
    with admin(args) as a:
        try:
            desc = a.describe_share_groups([gid])[gid]
        except Exception as exc:  # noqa: BLE001
            if getattr(getattr(exc, "code", None), "name", "") != "GROUP_ID_NOT_FOUND":
                raise
            desc = None  # a group not made yet: alter makes it
        if desc is not None and desc.members:
            raise CliError(f"share group {gid!r} has {len(desc.members)} active member"
                           f"{'s' if len(desc.members) != 1 else ''}; offsets can only be reset while it has "
                           "none (stop its consumers first)")
        current = a.list_share_group_offsets(gid) if desc is not None else {}
        if args.all_topics:
            tps = sorted(current)
            if not tps:
                raise CliError(f"share group {gid!r} has no offsets (name the topics with --topic)")
        else:
            descs = a.describe_topics(args.topic)
            tps = sorted({TopicPartition(t, p.partition) for t in args.topic for p in descs[t].partitions})
        earliest = a.list_offsets({tp: "earliest" for tp in tps})
        latest = a.list_offsets({tp: "latest" for tp in tps})
        at_time = a.list_offsets({tp: ts_ms for tp in tps}) if ts_ms is not None else {}
        plan = []
        for tp in tps:
            lo, hi = earliest[tp].offset, latest[tp].offset
            cur = current[tp].start_offset if tp in current and current[tp].start_offset >= 0 else None
            if args.to_earliest:
                new = lo
            elif args.to_latest:
                new = hi
            elif args.to_offset is not None:
                new = args.to_offset
            else:
                off = at_time[tp].offset
                new = hi if off is None or off < 0 else off
            new = min(max(new, lo), hi)
            plan.append({"topic": tp.topic, "partition": tp.partition, "start_offset": cur,
                         "new_offset": new})
        if args.execute:
            a.alter_share_group_offsets(gid, {TopicPartition(p["topic"], p["partition"]): p["new_offset"]
                                              for p in plan})
    if args.json:
        print_json({"group": gid, "executed": bool(args.execute), "offsets": plan})
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"],
                    [(gid, p["topic"], p["partition"], _dash(p["start_offset"]), p["new_offset"])
                     for p in plan])
        if args.execute:
            err(f"reset {len(plan)} start offset{'s' if len(plan) != 1 else ''} of share group {gid}")
        else:
            err("dry run: nothing changed (add --execute to apply)")
    return 0
