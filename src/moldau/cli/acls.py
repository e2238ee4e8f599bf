"""``moldau acls``: ACL bindings, Kafka's kafka-acls options as subcommands.

    moldau acls add    --allow-principal User:alice [--deny-principal ...] --operation Read [--operation ...]
                       (--topic T | --group G | --cluster | --transactional-id X) [--resource-pattern-type
                       literal|prefixed] [--host H]                     (--data-dir D | --bootstrap-server B)
    moldau acls list   [--topic T | --group G | --cluster | --transactional-id X] [--principal P]
                       [--resource-pattern-type any|match|literal|prefixed]
    moldau acls remove (same filters as list; --operation / --principal narrow it)

Offline (``--data-dir``) edits the broker's ACL file (a running broker picks the change up within a second);
online (``--bootstrap-server``) uses CreateAcls / DescribeAcls / DeleteAcls (needs Alter / Describe on the
cluster). Client security settings: ``--command-config FILE`` and ``-X key=value``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _az() -> Any:
    from moldau.broker.security import authorizer

    return authorizer


def register(sub: Any) -> None:
    p = sub.add_parser(
        "acls",
        help="manage ACLs",
        description="Manage ACL bindings (authorizer.class.name "
        "must be set on the broker for them to apply).",
    )
    cmds = p.add_subparsers(dest="acls_command", metavar="SUBCOMMAND")

    def common(sp: argparse.ArgumentParser, *, add: bool) -> None:
        g = sp.add_mutually_exclusive_group(required=True)
        g.add_argument("--data-dir", help="the broker's data directory (offline)")
        g.add_argument("--bootstrap-server", help="HOST:PORT of a running broker (online)")
        sp.add_argument("--command-config", metavar="FILE", help="client properties for --bootstrap-server")
        sp.add_argument("-X", dest="client_settings", metavar="KEY=VALUE", action="append", default=[],
                        help="client setting for --bootstrap-server (repeatable)")
        r = sp.add_mutually_exclusive_group(required=add)
        r.add_argument("--topic")
        r.add_argument("--group")
        r.add_argument("--cluster", action="store_true")
        r.add_argument("--transactional-id")
        sp.add_argument("--resource-pattern-type", type=str.upper, default="LITERAL" if add else "ANY",
                        choices=("LITERAL", "PREFIXED") if add else ("ANY", "MATCH", "LITERAL", "PREFIXED"))
        sp.add_argument("--operation", action="append", type=_op, default=[],
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All (repeatable)")
        if add:
            sp.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
            sp.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
            sp.add_argument("--host", default="*", help="host the ACL applies to (default *)")
        else:
            sp.add_argument("--principal", help="only bindings of this principal")

    add = cmds.add_parser("add", help="add ACL bindings")
    common(add, add=True)
    add.set_defaults(func=cmd_add)
    lst = cmds.add_parser("list", help="list ACL bindings")
    common(lst, add=False)
    lst.set_defaults(func=cmd_list)
    rm = cmds.add_parser("remove", help="remove the ACL bindings matching the filter")
    common(rm, add=False)
    rm.set_defaults(func=cmd_remove)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _op(text: str) -> int:
    az = _az()
    key = "".join(ch for ch in text.upper() if ch.isalpha())
    for name, code in az.OPERATIONS.items():
        if name.replace("_", "") == key:
            return code
    raise argparse.ArgumentTypeError(f"unknown operation {text!r}")


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    az = _az()
    if args.topic is not None:
        return az.TOPIC, args.topic
    if args.group is not None:
        return az.GROUP, args.group
    if args.cluster:
        return az.CLUSTER, az.CLUSTER_NAME
    if args.transactional_id is not None:
        return az.TRANSACTIONAL_ID, args.transactional_id
    return az.ANY, None


def _err(msg: str) -> int:
    print(f"moldau acls: error: {msg}", file=sys.stderr)
    return 1


def _conn(args: argparse.Namespace) -> Any:
    from ._admin_conn import AdminConn, load_client_config

    return AdminConn(args.bootstrap_server, load_client_config(args.command_config, args.client_settings))


def _filter(args: argparse.Namespace) -> Any:
    az = _az()
    rt, name = _resource(args)
    ops = args.operation
    if len(ops) > 1:
        raise ValueError("list/remove take at most one --operation")
    return az.AclFilter(
        resource_type=rt,
        name=name,
        pattern_type=az.PATTERN_TYPES[args.resource_pattern_type],
        principal=args.principal,
        operation=ops[0] if ops else az.ANY,
    )


def _print(bindings: list[Any]) -> None:
    az = _az()
    for b in bindings:
        print(f"{az.NAMES_RESOURCE.get(b.resource_type)}:{az.NAMES_PATTERN.get(b.pattern_type)}:{b.name}\t"
              f"{b.principal}\t{az.NAMES_PERMISSION.get(b.permission)}\t{az.NAMES_OPERATION.get(b.operation)}\t"
              f"host={b.host}")


def cmd_add(args: argparse.Namespace) -> int:
    az = _az()
    rt, name = _resource(args)
    if not args.operation:
        return _err("give at least one --operation")
    if not (args.allow_principal or args.deny_principal):
        return _err("give --allow-principal and/or --deny-principal")
    pattern = az.PATTERN_TYPES[args.resource_pattern_type]
    bindings = [az.AclBinding(rt, name or "", pattern, p, args.host, op, perm)
                for perm, principals in ((az.ALLOW, args.allow_principal), (az.DENY, args.deny_principal))
                for p in principals for op in args.operation]
    if args.data_dir:
        errors = az.AclAuthorizer(args.data_dir).create(bindings)
    else:
        from moldau.protocol import messages as m

        from ._admin_conn import AdminConnError

        req = m.CreateAclsRequest
        try:
            with _conn(args) as c:
                resp = c.request(30, req.new(creations=[
                    req.AclCreation(resource_type=b.resource_type, resource_name=b.name,
                                    resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                    operation=b.operation, permission_type=b.permission) for b in bindings]))
        except AdminConnError as exc:
            return _err(str(exc))
        errors = [
            (r.error_message or f"error {r.error_code}") if r.error_code else None for r in resp.results
        ]
    failed = [(b, e) for b, e in zip(bindings, errors) if e]
    for b, e in failed:
        print(f"moldau acls: {b}: {e}", file=sys.stderr)
    _print([b for b, e in zip(bindings, errors) if not e])
    return 1 if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    az = _az()
    try:
        flt = _filter(args)
    except ValueError as e:
        return _err(str(e))
    if args.data_dir:
        _print(az.AclAuthorizer(args.data_dir).describe(flt))
        return 0
    from moldau.protocol import messages as m

    from ._admin_conn import AdminConnError

    try:
        with _conn(args) as c:
            resp = c.request(29, m.DescribeAclsRequest.new(
                resource_type_filter=flt.resource_type, resource_name_filter=flt.name,
                pattern_type_filter=flt.pattern_type, principal_filter=flt.principal, host_filter=None,
                operation=flt.operation, permission_type=az.ANY))
    except AdminConnError as e:
        return _err(str(e))
    if resp.error_code:
        return _err(f"{resp.error_message or 'error'} (code {resp.error_code})")
    _print([az.AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                          a.permission_type) for r in resp.resources for a in r.acls])
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    az = _az()
    try:
        flt = _filter(args)
    except ValueError as e:
        return _err(str(e))
    if args.data_dir:
        removed = az.AclAuthorizer(args.data_dir).delete([flt])[0]
    else:
        from moldau.protocol import messages as m

        from ._admin_conn import AdminConnError

        req = m.DeleteAclsRequest
        try:
            with _conn(args) as c:
                resp = c.request(31, req.new(filters=[req.DeleteAclsFilter(
                    resource_type_filter=flt.resource_type, resource_name_filter=flt.name,
                    pattern_type_filter=flt.pattern_type, principal_filter=flt.principal, host_filter=None,
                    operation=flt.operation, permission_type=az.ANY)]))
        except AdminConnError as e:
            return _err(str(e))
        r = resp.filter_results[0]
        if r.error_code:
            return _err(f"{r.error_message or 'error'} (code {r.error_code})")
        removed = [az.AclBinding(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                                 a.operation, a.permission_type) for a in r.matching_acls]
    _print(removed)
    print(f"removed {len(removed)} binding(s)", file=sys.stderr)
    return 0
