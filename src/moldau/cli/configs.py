"""``moldau configs``: describe / alter the configs of a topic or a broker (kafka-configs)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
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
  moldau configs describe --topic events            # the topic's overrides
  moldau configs describe --topic events --all      # every config with its source
  moldau configs describe --broker                  # the broker's non-default configs
  moldau configs alter --topic events --set retention.ms=3600000 --delete cleanup.policy
  moldau configs alter --broker --set log.retention.ms=604800000
  moldau configs alter --topic events --add-config retention.ms=1000,segment.bytes=1048576  # kafka-configs
"""

SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG", -1: "UNKNOWN"}


def register(sub: Any) -> None:
    p = add_command(sub, "configs", help="describe or alter topic and broker configs",
                    description="Topic and broker configs (DescribeConfigs / IncrementalAlterConfigs).",
                    examples=EXAMPLES)
    cmds = add_subcommands(p, "configs_command")
    d = cmds.add_parser("describe", help="show configs (overrides; --all for every one)",
                        examples="  moldau configs describe --topic events --all --json\n")
    _entity(d)
    d.add_argument("--all", action="store_true", help="every config, defaults included, with its source")
    d.add_argument("--synonyms", action="store_true", help="with --all --json: include synonyms")
    _common(d)
    d.set_defaults(func=run_command(cmd_describe))

    a = cmds.add_parser("alter", help="set or delete configs",
                        examples="  moldau configs alter --topic events --set retention.ms=3600000\n"
                                 "  moldau configs alter --broker --delete log.retention.ms\n")
    _entity(a)
    a.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="set a config (repeatable)"
    )
    a.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                   help="kafka-configs style: comma-separated KEY=VALUE pairs")
    a.add_argument("--delete", "--delete-config", dest="delete", action="append", default=[], metavar="KEY",
                   help="remove an override (repeatable; commas allowed)")
    a.add_argument("--validate-only", action="store_true", help="ask the broker to check, not apply")
    _common(a)
    a.set_defaults(func=run_command(cmd_alter))


def _entity(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--topic", metavar="TOPIC", help="a topic")
    g.add_argument("--broker", nargs="?", const="", metavar="ID",
                   help="a broker (default: the one answering)")
    g.add_argument("--broker-defaults", action="store_true", help="the cluster-wide broker defaults")


def _common(p: argparse.ArgumentParser) -> None:
    add_json_arg(p)
    add_connection_args(p)


def _resource(a: Any, args: argparse.Namespace) -> Any:
    from moldau.client import ConfigResource

    if args.topic is not None:
        return ConfigResource.topic(args.topic)
    if args.broker_defaults:
        return ConfigResource.broker("")
    bid = args.broker
    if bid == "":
        cluster = a.describe_cluster()
        if not cluster.brokers:
            raise UsageError("the cluster named no broker; give --broker ID")
        bid = str(min(b.node_id for b in cluster.brokers))
    elif not str(bid).lstrip("-").isdigit():
        raise UsageError(f"--broker expects a broker id (a number), got {bid!r}")
    return ConfigResource.broker(bid)


def _label(res: Any) -> str:
    from moldau.client import ConfigResource

    if res.resource_type == ConfigResource.TOPIC:
        return f"topic {res.name}"
    return f"broker {res.name}" if res.name else "broker defaults"


def _override(res: Any, e: Any) -> bool:
    from moldau.client import ConfigResource

    if res.resource_type == ConfigResource.TOPIC:
        return e.source == 1 or (e.source in (-1, 0) and not e.is_default)
    return e.source in (2, 3, 4) or (e.source in (-1, 0) and not e.is_default)


def cmd_describe(args: argparse.Namespace) -> int:
    with admin(args) as a:
        res = _resource(a, args)
        entries = a.describe_configs([res], include_synonyms=args.synonyms)[res]
    rows = [e for _, e in sorted(entries.items()) if args.all or _override(res, e)]
    if args.json:
        out = []
        for e in rows:
            item: dict[str, Any] = {
                "name": e.name,
                "value": None if e.is_sensitive else e.value,
                "source": SOURCES.get(e.source, str(e.source)),
                "is_default": e.is_default,
                "read_only": e.read_only,
                "sensitive": e.is_sensitive,
            }
            if args.synonyms:
                item["synonyms"] = [{"name": n, "value": v, "source": SOURCES.get(s, str(s))}
                                    for n, v, s in e.synonyms]
            out.append(item)
        print_json({"resource": _label(res), "configs": out})
        return 0
    print(f"Configs of {_label(res)}" + ("" if args.all else " (overrides; --all shows every config)") + ":")
    if args.all:
        print_table(["NAME", "VALUE", "SOURCE", "READ-ONLY"],
                    [(e.name, "(sensitive)" if e.is_sensitive else e.value, SOURCES.get(e.source, e.source),
                      e.read_only) for e in rows], empty="(none)")
    else:
        print_table(["NAME", "VALUE", "SOURCE"],
                    [(e.name, "(sensitive)" if e.is_sensitive else e.value, SOURCES.get(e.source, e.source))
                     for e in rows], empty="(none)")
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    from moldau.client import AlterConfigOp

    sets: dict[str, str] = {}
    for item in args.set:
        k, v = parse_kv(item, "--set")
        sets[k] = v
    for group in args.add_config:
        for item in _split_pairs(group):
            k, v = parse_kv(item, "--add-config")
            sets[k] = v
    deletes = [k.strip() for item in args.delete for k in item.split(",") if k.strip()]
    if not sets and not deletes:
        raise UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    both = set(sets) & set(deletes)
    if both:
        raise UsageError(f"{min(both)} is both set and deleted")
    ops = [AlterConfigOp(k, v, AlterConfigOp.SET) for k, v in sets.items()]
    ops += [AlterConfigOp(k, None, AlterConfigOp.DELETE) for k in deletes]
    with admin(args) as a:
        res = _resource(a, args)
        a.incremental_alter_configs({res: ops}, validate_only=args.validate_only)
    if args.json:
        print_json(
            {"resource": _label(res), "set": sets, "deleted": deletes, "applied": not args.validate_only}
        )
    else:
        what = []
        if sets:
            what.append("set " + ", ".join(f"{k}={v}" for k, v in sets.items()))
        if deletes:
            what.append("removed " + ", ".join(deletes))
        verb = "validated" if args.validate_only else "altered"
        print(f"{verb} {_label(res)}: " + "; ".join(what))
    return 0


def _split_pairs(text: str) -> list[str]:
    """'a=1,b=[x,y],c=2' -> ['a=1', 'b=x,y', 'c=2'] (kafka-configs brackets for list values)."""
    out: list[str] = []
    cur = ""
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
            continue
        if ch == "]":
            depth = max(depth - 1, 0)
            continue
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out
