"""``moldau users``: SASL users and their credentials.

    moldau users add NAME [--password P] [--mechanism M ...] [--iterations N]  (--data-dir D |
    --bootstrap-server B) moldau users list
    (--data-dir D |
    --bootstrap-server B) moldau users delete NAME [--mechanism M ...]
    (--data-dir D |
    --bootstrap-server B)

Offline (``--data-dir``, the broker's data directory; a running broker sees the change at the next
authentication): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; without ``--mechanism`` all three.

Online (``--bootstrap-server``, through AlterUserScramCredentials / DescribeUserScramCredentials; needs Alter
/ Describe on the cluster when ACLs are on): SCRAM only -- the Kafka protocol has no request for PLAIN
credentials. The password never leaves this process: only the salt and the salted password are sent. Client
security settings: ``--command-config FILE`` and ``-X key=value`` (security.protocol, sasl.mechanism,
sasl.username, sasl.password, ssl.ca.location, ...).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(sub: Any) -> None:
    p = sub.add_parser("users", help="manage SASL users (PLAIN, SCRAM-SHA-256/512)",
                       description="Manage SASL users, offline in a broker's data directory or online "
                                   "through a running broker.")
    cmds = p.add_subparsers(dest="users_command", metavar="SUBCOMMAND")

    def target(sp: argparse.ArgumentParser) -> None:
        g = sp.add_mutually_exclusive_group(required=True)
        g.add_argument("--data-dir", help="the broker's data directory (offline)")
        g.add_argument("--bootstrap-server", help="HOST:PORT of a running broker (online, SCRAM only)")
        sp.add_argument("--command-config", metavar="FILE", help="client properties for --bootstrap-server")
        sp.add_argument("-X", dest="client_settings", metavar="KEY=VALUE", action="append", default=[],
                        help="client setting for --bootstrap-server (repeatable)")

    add = cmds.add_parser("add", help="add a user or change its password")
    add.add_argument("name")
    add.add_argument("--password", help="the password (prompted when omitted)")
    add.add_argument("--mechanism", action="append", type=str.upper, choices=MECHANISMS,
                     help="mechanism (repeatable; default: all three offline, both SCRAM online)")
    add.add_argument("--iterations", type=int, default=4096, help="SCRAM iterations, 4096..16384 (4096)")
    target(add)
    add.set_defaults(func=cmd_add)

    lst = cmds.add_parser("list", help="list users and their mechanisms")
    target(lst)
    lst.set_defaults(func=cmd_list)

    rm = cmds.add_parser("delete", help="delete a user (or one mechanism's credential)")
    rm.add_argument("name")
    rm.add_argument("--mechanism", action="append", type=str.upper, choices=MECHANISMS,
                    help="only this mechanism (repeatable; default: all)")
    target(rm)
    rm.set_defaults(func=cmd_delete)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _err(msg: str) -> int:
    print(f"moldau users: error: {msg}", file=sys.stderr)
    return 1


def _conn(args: argparse.Namespace) -> Any:
    from ._admin_conn import AdminConn, load_client_config

    return AdminConn(args.bootstrap_server, load_client_config(args.command_config, args.client_settings))


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    pw = getpass.getpass(f"password for {args.name}: ")
    if pw != getpass.getpass("again: "):
        raise ValueError("the passwords differ")
    return pw


def cmd_add(args: argparse.Namespace) -> int:
    from moldau.broker.security.credentials import CredentialError, CredentialStore
    from moldau.protocol.sasl_mechanisms import MAX_ITERATIONS, MIN_ITERATIONS

    try:
        password = _password(args)
    except (ValueError, EOFError) as e:
        return _err(str(e))
    if not password:
        return _err("the password must not be empty")
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        return _err(f"--iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    if args.data_dir:
        if not os.path.isdir(args.data_dir):
            os.makedirs(args.data_dir, exist_ok=True)
        try:
            mechs = CredentialStore(args.data_dir).add_password(args.name, password, args.mechanism,
                                                                iterations=args.iterations)
        except CredentialError as e:
            return _err(str(e))
        print(f"user {args.name}: {', '.join(mechs)}")
        return 0
    wanted = args.mechanism or list(SCRAM)
    if "PLAIN" in wanted:
        return _err(
            "PLAIN credentials can only be set offline (--data-dir): the Kafka protocol has no request "
            "for them"
        )
    from moldau.protocol import messages as m
    from moldau.protocol.sasl_mechanisms import SCRAM_MECHANISMS, salted_password

    from ._admin_conn import AdminConnError

    req = m.AlterUserScramCredentialsRequest
    ups = []
    for mech in wanted:
        sm = SCRAM_MECHANISMS[mech]
        salt = os.urandom(32)
        ups.append(
            req.ScramCredentialUpsertion(
                name=args.name,
                mechanism=sm.code,
                iterations=args.iterations,
                salt=salt,
                salted_password=salted_password(sm, password, salt, args.iterations),
            )
        )
    try:
        with _conn(args) as c:
            resp = c.request(51, req.new(deletions=[], upsertions=ups))
    except AdminConnError as e:
        return _err(str(e))
    for r in resp.results:
        if r.error_code:
            return _err(
                f"user {r.user}: {r.error_message or 'error ' + str(r.error_code)} (code {r.error_code})"
            )
    print(f"user {args.name}: {', '.join(wanted)}")
    if not args.mechanism:
        print(
            "note: PLAIN credentials can only be set offline (moldau users add --data-dir)", file=sys.stderr
        )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.data_dir:
        from moldau.broker.security.credentials import CredentialStore

        users = CredentialStore(args.data_dir).users()
    else:
        from moldau.protocol import messages as m
        from moldau.protocol.sasl_mechanisms import scram_mechanism_name

        from ._admin_conn import AdminConnError

        try:
            with _conn(args) as c:
                resp = c.request(50, m.DescribeUserScramCredentialsRequest.new(users=None))
        except AdminConnError as e:
            return _err(str(e))
        if resp.error_code:
            return _err(f"{resp.error_message or 'error'} (code {resp.error_code})")
        users = {r.user: {scram_mechanism_name(ci.mechanism) or str(ci.mechanism): ci.iterations
                          for ci in r.credential_infos} for r in resp.results if not r.error_code}
    for name, creds in users.items():
        parts = [f"{mech}" + (f" ({it} iterations)" if mech != "PLAIN" else "") for mech, it in creds.items()]
        print(f"{name}\t{', '.join(parts)}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    if args.data_dir:
        from moldau.broker.security.credentials import CredentialStore

        store = CredentialStore(args.data_dir)
        if not store.has_user(args.name):
            return _err(f"no user {args.name}")
        if args.mechanism:
            missing = [mech for mech in args.mechanism if not store.delete(args.name, mech)]
            if missing:
                return _err(f"user {args.name} has no {', '.join(missing)} credential")
        else:
            store.delete(args.name)
        print(f"deleted {args.name}" + (f" ({', '.join(args.mechanism)})" if args.mechanism else ""))
        return 0
    if args.mechanism and "PLAIN" in args.mechanism:
        return _err("PLAIN credentials can only be deleted offline (--data-dir)")
    from moldau.protocol import messages as m
    from moldau.protocol.sasl_mechanisms import scram_mechanism_code, scram_mechanism_name

    from ._admin_conn import AdminConnError

    try:
        with _conn(args) as c:
            mechs = args.mechanism
            if not mechs:
                d = c.request(50, m.DescribeUserScramCredentialsRequest.new(
                    users=[m.DescribeUserScramCredentialsRequest.UserName(name=args.name)]))
                if d.error_code:
                    return _err(f"{d.error_message or 'error'} (code {d.error_code})")
                r = d.results[0]
                if r.error_code:
                    return _err(f"{r.error_message or 'error'} (code {r.error_code})")
                mechs = [scram_mechanism_name(ci.mechanism) for ci in r.credential_infos]
            req = m.AlterUserScramCredentialsRequest
            resp = c.request(
                51,
                req.new(
                    upsertions=[],
                    deletions=[
                        req.ScramCredentialDeletion(name=args.name, mechanism=scram_mechanism_code(mech))
                        for mech in mechs
                    ],
                ),
            )
    except AdminConnError as e:
        return _err(str(e))
    for r in resp.results:
        if r.error_code:
            return _err(f"user {r.user}: {r.error_message or 'error'} (code {r.error_code})")
    print(f"deleted {args.name} ({', '.join(mechs)})")
    return 0
