"""``moldau quotas``: client quotas (producer/consumer byte rates, request percentage, connection rates).

    moldau quotas alter  ENTITY --set KEY=VALUE [--set ...] [--remove KEY ...] [--validate-only]
    moldau quotas describe [ENTITY] [--strict] [--json]

ENTITY is ``--user NAME`` and/or ``--client-id NAME`` (``--user-default`` / ``--client-default`` for the
defaults), or ``--ip ADDR`` / ``--ip-default``. Keys: producer_byte_rate, consumer_byte_rate,
request_percentage, controller_mutation_rate (users and clients), connection_creation_rate (ips).

Online (``--bootstrap-server``) through AlterClientQuotas / DescribeClientQuotas (needs AlterConfigs /
DescribeConfigs on the cluster when ACLs are on); offline (``--data-dir``) in the broker's quota file, read
when the broker starts. ``describe`` without an entity lists every quota.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._admin_conn import add_target_args

KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "quotas",
        help="manage client quotas",
        description="Manage client quotas, online through a running broker or offline in its data directory.",
    )
    cmds = p.add_subparsers(dest="quotas_command", metavar="SUBCOMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        add_target_args(sp, "the broker's data directory (offline; read at the next start)",
                        "HOST:PORT of a running broker (online)")
        u = sp.add_mutually_exclusive_group()
        u.add_argument("--user", help="a user (principal name)")
        u.add_argument("--user-default", action="store_true", help="the default user entity")
        c = sp.add_mutually_exclusive_group()
        c.add_argument("--client-id", help="a client id")
        c.add_argument("--client-default", action="store_true", help="the default client-id entity")
        i = sp.add_mutually_exclusive_group()
        i.add_argument("--ip", help="a client IP address (connection_creation_rate)")
        i.add_argument("--ip-default", action="store_true", help="the default ip entity")

    alter = cmds.add_parser("alter", help="set or remove quotas of one entity")
    common(alter)
    alter.add_argument(
        "--set",
        dest="set_",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"set a quota ({', '.join(KEYS)}; repeatable)",
    )
    alter.add_argument(
        "--remove", action="append", default=[], metavar="KEY", help="remove a quota (repeatable)"
    )
    alter.add_argument("--validate-only", action="store_true", help="check only, change nothing")
    alter.set_defaults(func=cmd_alter)

    desc = cmds.add_parser("describe", help="show quotas (all, or those of the given entity)")
    common(desc)
    desc.add_argument("--strict", action="store_true", help="only entities made of exactly the given types")
    desc.add_argument("--json", action="store_true", help="print JSON")
    desc.set_defaults(func=cmd_describe)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _err(msg: str) -> int:
    print(f"moldau quotas: error: {msg}", file=sys.stderr)
    return 1


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    parts: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        parts.append(("user", None if args.user_default else args.user))
    if args.client_id is not None or args.client_default:
        parts.append(("client-id", None if args.client_default else args.client_id))
    if args.ip is not None or args.ip_default:
        parts.append(("ip", None if args.ip_default else args.ip))
    return parts


def _show(entity: list[tuple[str, str | None]] | tuple[tuple[str, str | None], ...]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def _conn(args: argparse.Namespace) -> Any:
    from ._admin_conn import AdminConn, load_client_config

    return AdminConn(args.bootstrap_server, load_client_config(args.command_config, args.client_settings))


def cmd_alter(args: argparse.Namespace) -> int:
    from moldau.broker.quotas import QuotaError, make_entity, validate_quota

    parts = _entity(args)
    if not parts:
        return _err(
            "give an entity: --user/--user-default and/or --client-id/--client-default, or --ip/--ip-default"
        )
    ops: dict[str, float | None] = {}
    for item in args.set_:
        key, sep, raw = item.partition("=")
        if not sep:
            return _err(f"--set expects KEY=VALUE, got {item!r}")
        try:
            ops[key.strip()] = float(raw)
        except ValueError:
            return _err(f"--set {key}: {raw!r} is not a number")
    for key in args.remove:
        ops[key] = None
    if not ops:
        return _err("nothing to change: give --set KEY=VALUE or --remove KEY")
    try:
        entity = make_entity(parts)
        for k, v in ops.items():
            validate_quota(entity, k, 1.0 if v is None else v)
    except QuotaError as e:
        return _err(str(e))
    if args.data_dir:
        from moldau.broker.quotas import FileQuotaStore

        if not args.validate_only:
            try:
                FileQuotaStore(args.data_dir).alter([(entity, ops)])
            except OSError as e:
                return _err(f"{args.data_dir}: {e.strerror or e}")
    else:
        from moldau.protocol import messages as m

        from ._admin_conn import AdminConnError

        req = m.AlterClientQuotasRequest
        entry = req.EntryData(
            entity=[req.EntityData(entity_type=t, entity_name=n) for t, n in parts],
            ops=[req.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()],
        )
        try:
            with _conn(args) as c:
                resp = c.request(49, req.new(entries=[entry], validate_only=args.validate_only))
        except AdminConnError as e:
            return _err(str(e))
        for r in resp.entries:
            if r.error_code:
                return _err(f"{r.error_message or 'error'} (code {r.error_code})")
    done = ", ".join(f"{k}={v:g}" if v is not None else f"{k} removed" for k, v in ops.items())
    print(f"{_show(parts)}: {done}" + (" (validated only)" if args.validate_only else ""))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    parts = _entity(args)
    # filter components: exact name (0), the default (1)
    components = [(t, 1 if n is None else 0, n) for t, n in parts]
    if args.data_dir:
        from moldau.broker.quotas import FileQuotaStore, MemoryQuotaStore, QuotaError, QuotaManager

        mgr = QuotaManager(MemoryQuotaStore())
        mgr.alter(list(FileQuotaStore(args.data_dir).all().items()))  # type: ignore[arg-type]
        try:
            found = [(list(e), v) for e, v in mgr.describe(components, args.strict).items()]
        except QuotaError as e:
            return _err(str(e))
    else:
        from moldau.protocol import messages as m

        from ._admin_conn import AdminConnError

        req = m.DescribeClientQuotasRequest
        try:
            with _conn(args) as c:
                resp = c.request(
                    48,
                    req.new(
                        components=[
                            req.ComponentData(entity_type=t, match_type=mt, match=n)
                            for t, mt, n in components
                        ],
                        strict=args.strict,
                    ),
                )
        except AdminConnError as exc:
            return _err(str(exc))
        if resp.error_code:
            return _err(f"{resp.error_message or 'error'} (code {resp.error_code})")
        found = [
            ([(ent.entity_type, ent.entity_name) for ent in entry.entity],
             {v.key: v.value for v in entry.values})
            for entry in resp.entries or []
        ]
    if args.json:
        print(json.dumps([{"entity": dict(entity), "quotas": vals} for entity, vals in found]))
        return 0
    for entity, vals in found:
        print(f"{_show(entity)}\t" + ", ".join(f"{k}={val:g}" for k, val in sorted(vals.items())))
    return 0
