"""``moldau topics``: list, describe, create, delete and alter topics (kafka-topics); move a partition's
replicas (kafka-reassign-partitions)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    CliError,
    UsageError,
    add_command,
    add_connection_args,
    add_json_arg,
    add_subcommands,
    admin,
    parse_kv,
    print_json,
    print_table,
    run_command,
)

EXAMPLES = """\
  moldau topics list
  moldau topics create events --partitions 3 --config retention.ms=86400000
  moldau topics describe events
  moldau topics alter events --partitions 6 --config cleanup.policy=compact
  moldau topics delete events
  moldau topics reassign events --partition 0 --replicas 3,2 --wait
  moldau topics list --json | jq '.[].name'
"""


def register(sub: Any) -> None:
    p = add_command(sub, "topics", help="list, describe, create, delete and alter topics",
                    description="Manage topics on any Kafka-compatible broker.", examples=EXAMPLES)
    cmds = add_subcommands(p, "topics_command")

    lst = cmds.add_parser("list", help="list topics with their partition counts",
                          examples="  moldau topics list\n  moldau topics list --internal --json\n")
    lst.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    _common(lst)
    lst.set_defaults(func=run_command(cmd_list))

    d = cmds.add_parser("describe", help="partitions, leaders, replicas, ISR, offsets and configs",
                        examples="  moldau topics describe events\n  moldau topics describe --json\n")
    d.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)")
    d.add_argument("--internal", action="store_true", help="with no TOPIC: include internal topics")
    d.add_argument("--no-offsets", action="store_true", help="skip the earliest/latest offsets")
    d.add_argument("--all-configs", action="store_true", help="show every config, not only overrides")
    d.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replicas (a cluster)")
    d.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader (a cluster)")
    _common(d)
    d.set_defaults(func=run_command(cmd_describe))

    c = cmds.add_parser("create", help="create a topic",
                        examples="  moldau topics create events --partitions 3\n"
                                 "  moldau topics create logs --config cleanup.policy=compact "
                                 "--config segment.bytes=1048576\n")
    c.add_argument("topic", metavar="TOPIC")
    c.add_argument("-p", "--partitions", type=_positive, default=None,
                   help="number of partitions (default: the broker's num.partitions)")
    c.add_argument("-r", "--replication-factor", type=_positive, default=None,
                   help="replication factor (default: the broker's default.replication.factor)")
    c.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config (repeatable)")
    c.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")
    c.add_argument("--validate-only", action="store_true", help="ask the broker to check, not create")
    _common(c)
    c.set_defaults(func=run_command(cmd_create))

    dl = cmds.add_parser("delete", help="delete topics", examples="  moldau topics delete events logs\n")
    dl.add_argument("topics", nargs="+", metavar="TOPIC")
    dl.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")
    _common(dl)
    dl.set_defaults(func=run_command(cmd_delete))

    a = cmds.add_parser("alter", help="add partitions, set or delete topic configs",
                        examples="  moldau topics alter events --partitions 6\n"
                                 "  moldau topics alter events --config retention.ms=3600000 "
                                 "--delete-config cleanup.policy\n")
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("-p", "--partitions", type=_positive, help="new total number of partitions (only grows)")
    a.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="set a topic config (repeatable)")
    a.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove a topic config override (repeatable)")
    _common(a)
    a.set_defaults(func=run_command(cmd_alter))


    r = cmds.add_parser("reassign", help="move a partition's replicas to other brokers (a cluster)",
                        examples="  moldau topics reassign events --partition 0 --replicas 3,2 --wait\n"
                                 "  moldau topics reassign events --partition 0 --cancel\n")
    r.add_argument("topic", metavar="TOPIC")
    r.add_argument("--partition", type=_non_negative, required=True, metavar="P")
    r.add_argument("--replicas", type=_broker_ids, metavar="ID,ID,...",
                   help="the new replica list, preferred leader first")
    r.add_argument("--cancel", action="store_true", help="cancel the partition's ongoing reassignment")
    r.add_argument("--wait", action="store_true", help="return once the data has moved")
    r.add_argument("--wait-timeout", type=_positive, default=600, metavar="SECONDS",
                   help="with --wait: give up after this long (default 600)")
    _common(r)
    r.set_defaults(func=run_command(cmd_reassign))

    rl = cmds.add_parser("reassignments", help="the ongoing partition reassignments",
                         examples="  moldau topics reassignments\n")
    _common(rl)
    rl.set_defaults(func=run_command(cmd_reassignments))


def _common(p: argparse.ArgumentParser) -> None:
    add_json_arg(p)
    add_connection_args(p)


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a partition number, got {text!r}")
    return v


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        ids = []
    if not ids or any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"expected broker ids separated by commas, got {text!r}")
    return ids


def _configs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        k, v = parse_kv(item, "--config")
        out[k] = v
    return out


# ---------------------------------------------------------------------------------------------- commands

def cmd_list(args: argparse.Namespace) -> int:
    with admin(args) as a:
        topics = a.list_topics(include_internal=args.internal)
    rows = sorted(topics.items())
    if args.json:
        print_json([{"name": n, "partitions": p} for n, p in rows])
    else:
        print_table(["TOPIC", "PARTITIONS"], rows, empty="(no topics)")
    return 0


def describe_topics(a: Any, names: list[str], *, offsets: bool = True, all_configs: bool = False
                    ) -> list[dict[str, Any]]:
    from moldau.client import ConfigResource, TopicPartition

    descs = a.describe_topics(names)
    out: list[dict[str, Any]] = []
    tps = [TopicPartition(n, p.partition) for n in names for p in descs[n].partitions]
    earliest: dict[Any, Any] = {}
    latest: dict[Any, Any] = {}
    if offsets and tps:
        earliest = a.list_offsets({tp: "earliest" for tp in tps})
        latest = a.list_offsets({tp: "latest" for tp in tps})
    configs: dict[Any, Any] = {}
    try:
        configs = a.describe_configs([ConfigResource.topic(n) for n in names])
    except Exception:  # noqa: BLE001 - brokers without DescribeConfigs, or not authorized: show the rest
        configs = {}
    for n in names:
        d = descs[n]
        entries = configs.get(ConfigResource.topic(n), {})
        cfg = {k: e.value for k, e in sorted(entries.items())
               if all_configs or (not e.is_default and e.source in (1, -1))}
        # source 1 = DYNAMIC_TOPIC_CONFIG (an override); -1 = unknown (old brokers): trust is_default
        if not all_configs and not cfg:
            cfg = {k: e.value for k, e in sorted(entries.items()) if e.source == 1}
        parts = []
        for p in d.partitions:
            tp = TopicPartition(n, p.partition)
            row: dict[str, Any] = {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
            }
            if p.offline_replicas:
                row["offline_replicas"] = p.offline_replicas
            if offsets:
                row["earliest_offset"] = earliest[tp].offset if tp in earliest else None
                row["latest_offset"] = latest[tp].offset if tp in latest else None
            if p.error_code:
                row["error_code"] = p.error_code
            parts.append(row)
        out.append({"name": n, "topic_id": None if d.topic_id is None else str(d.topic_id),
                    "internal": d.is_internal, "partitions": parts, "configs": cfg})
    return out


def cmd_describe(args: argparse.Namespace) -> int:
    with admin(args) as a:
        names = args.topics or sorted(a.list_topics(include_internal=args.internal))
        filtered = args.under_replicated_partitions or args.unavailable_partitions
        if filtered:
            args.no_offsets = True  # a leaderless partition has no offsets to list
        result = describe_topics(a, names, offsets=not args.no_offsets, all_configs=args.all_configs)
    if filtered:
        result = _only_partitions(result, args.under_replicated_partitions, args.unavailable_partitions)
    if args.json:
        print_json(result)
        return 0
    if not result:
        print("(no topics)")
    for i, t in enumerate(result):
        if i:
            print()
        cfg = ", ".join(f"{k}={v}" for k, v in t["configs"].items()) or "-"
        print(f"Topic: {t['name']}  TopicId: {t['topic_id'] or '-'}  Partitions: {len(t['partitions'])}"
              f"{'  Internal: yes' if t['internal'] else ''}")
        print(f"Configs: {cfg}")
        headers = ["PARTITION", "LEADER", "REPLICAS", "ISR"]
        if not args.no_offsets:
            headers += ["EARLIEST", "LATEST"]
        rows = []
        for p in t["partitions"]:
            row = [p["partition"], p["leader"], p["replicas"], p["isr"]]
            if not args.no_offsets:
                row += [p["earliest_offset"], p["latest_offset"]]
            rows.append(row)
        print_table(headers, rows)
    return 0


def _only_partitions(result: list[dict[str, Any]], under_replicated: bool, unavailable: bool
                     ) -> list[dict[str, Any]]:
    """kafka-topics' --under-replicated-partitions (ISR smaller than the replicas) and
    --unavailable-partitions (no leader); topics without such partitions are left out."""
    out = []
    for t in result:
        parts = [p for p in t["partitions"]
                 if (under_replicated and len(p["isr"]) < len(p["replicas"]))
                 or (unavailable and p["leader"] < 0)]
        if parts:
            out.append({**t, "partitions": parts})
    return out


def cmd_create(args: argparse.Namespace) -> int:
    from moldau.client import NewTopic
    from moldau.protocol.errors import KafkaError

    cfg = _configs(args.config)
    nt = NewTopic(args.topic, num_partitions=args.partitions or -1,
                  replication_factor=args.replication_factor or -1, config=cfg)
    with admin(args) as a:
        try:
            a.create_topics([nt], validate_only=args.validate_only)
        except KafkaError as e:
            if e.code.name == "TOPIC_ALREADY_EXISTS":
                if args.if_not_exists:
                    _done(args, {"topic": args.topic, "created": False, "exists": True},
                          f"topic {args.topic} exists already")
                    return 0
                raise CliError(
                    f"topic {args.topic!r} already exists (--if-not-exists accepts that)"
                ) from None
            raise
        parts = None
        if not args.validate_only:
            parts = len(a.describe_topics([args.topic])[args.topic].partitions)
    verb = "would create" if args.validate_only else "created"
    _done(
        args,
        {"topic": args.topic, "created": not args.validate_only, "partitions": parts, "configs": cfg},
        f"{verb} topic {args.topic}" + (f" ({parts} partition{'s' if parts != 1 else ''})" if parts else ""),
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with admin(args) as a:
        results = a.delete_topics(args.topics, raise_errors=False)
    failed = []
    report = []
    for name in args.topics:
        exc = results.get(name)
        code = getattr(getattr(exc, "code", None), "name", None)
        if exc is None:
            report.append({"topic": name, "deleted": True})
        elif code == "UNKNOWN_TOPIC_OR_PARTITION" and args.if_exists:
            report.append({"topic": name, "deleted": False, "exists": False})
        else:
            why = "no such topic" if code == "UNKNOWN_TOPIC_OR_PARTITION" else _short(exc)
            failed.append(f"{name}: {why}")
            report.append({"topic": name, "deleted": False, "error": why})
    if args.json:
        print_json(report)
    else:
        for r in report:
            if r["deleted"]:
                print(f"deleted topic {r['topic']}")
            elif "error" not in r:
                print(f"topic {r['topic']} does not exist")
    if failed:
        raise CliError("cannot delete " + "; ".join(failed))
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    from moldau.client import AlterConfigOp, ConfigResource

    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    cfg = _configs(args.config)
    changed: dict[str, Any] = {"topic": args.topic}
    with admin(args) as a:
        desc = a.describe_topics([args.topic])[args.topic]
        if args.partitions is not None:
            current = len(desc.partitions)
            if args.partitions < current:
                raise CliError(f"topic {args.topic} has {current} partitions; their number can only grow")
            if args.partitions > current:
                a.create_partitions({args.topic: args.partitions})
            changed["partitions"] = args.partitions
        if cfg or args.delete_config:
            ops = [AlterConfigOp(k, v, AlterConfigOp.SET) for k, v in cfg.items()]
            ops += [AlterConfigOp(k, None, AlterConfigOp.DELETE) for k in args.delete_config]
            a.incremental_alter_configs({ConfigResource.topic(args.topic): ops})
            changed["set"] = cfg
            changed["deleted"] = list(args.delete_config)
    parts = []
    if "partitions" in changed:
        parts.append(f"{changed['partitions']} partitions")
    if cfg:
        parts.append("set " + ", ".join(f"{k}={v}" for k, v in cfg.items()))
    if args.delete_config:
        parts.append("removed " + ", ".join(args.delete_config))
    _done(args, changed, f"altered topic {args.topic}: " + "; ".join(parts))
    return 0


def cmd_reassign(args: argparse.Namespace) -> int:
    import time

    from moldau.client import TopicPartition

    if args.cancel == (args.replicas is not None):
        raise UsageError("give either --replicas or --cancel")
    tp = TopicPartition(args.topic, args.partition)
    with admin(args) as a:
        exc = a.alter_partition_reassignments({tp: args.replicas}, raise_errors=False)[tp]
        if exc is not None:
            raise CliError(f"cannot reassign {args.topic}-{args.partition}: {_short(exc)}")
        if args.wait:
            deadline = time.monotonic() + args.wait_timeout
            while tp in a.list_partition_reassignments([tp]):
                if time.monotonic() > deadline:
                    raise CliError(f"{args.topic}-{args.partition} is still moving")
                time.sleep(0.5)
    what = "cancelled the reassignment of" if args.cancel else f"reassigning to {args.replicas}:"
    if args.wait and not args.cancel:
        what = f"moved to {args.replicas}:"
    _done(args, {"topic": args.topic, "partition": args.partition, "replicas": args.replicas,
                 "cancelled": bool(args.cancel), "done": bool(args.wait)},
          f"{what} {args.topic}-{args.partition}")
    return 0


def cmd_reassignments(args: argparse.Namespace) -> int:
    with admin(args) as a:
        ongoing = a.list_partition_reassignments()
    rows = [{"topic": tp.topic, "partition": tp.partition, **v}
            for tp, v in sorted(ongoing.items(), key=lambda kv: (kv[0].topic, kv[0].partition))]
    if args.json:
        print_json(rows)
    else:
        print_table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                    [(r["topic"], r["partition"], ",".join(map(str, r["replicas"])),
                      ",".join(map(str, r["adding"])), ",".join(map(str, r["removing"]))) for r in rows],
                    empty="(no reassignment in progress)")
    return 0


def _done(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    if args.json:
        print_json(obj)
    else:
        print(text)


def _short(exc: BaseException | None) -> str:
    from .common import describe_error

    if exc is None:
        return ""
    return describe_error(exc, "")[0]
