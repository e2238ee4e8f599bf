"""``moldau registry``: the schema registry (moldau.registry, Confluent's REST API) for a Kafka-compatible
cluster, its state in the cluster's ``_schemas`` topic."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from .common import UsageError, add_command, add_connection_args, client_config, run_command


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "registry",
        help="schema registry with Confluent's REST API, state in the _schemas topic",
        description="Serve a schema registry (Confluent's REST API: subjects, versions, schemas by id, "
        "compatibility, config, mode) for a Kafka-compatible cluster. Its whole state is the compacted "
        "topic _schemas, in Confluent's record format, created when missing.",
        examples="  moldau registry -b localhost:9092\n"
        "  moldau registry -b kafka:9093 --command-config client.properties --listen 0.0.0.0:8081\n",
    )
    add_connection_args(p)
    g = p.add_argument_group("registry")
    g.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8081",
        help="address to serve on (default 127.0.0.1:8081)",
    )
    g.add_argument(
        "--topic", metavar="NAME", default="_schemas", help="the topic holding the state (default _schemas)"
    )
    g.add_argument(
        "--replication-factor",
        metavar="N",
        type=int,
        default=-1,
        help="of the topic when the registry creates it (default: the cluster's)",
    )
    g.add_argument(
        "--group-id",
        metavar="GROUP",
        default="schema-registry",
        help="the group the instances elect their leader in (default schema-registry); "
        "instances sharing a topic share it; '' for none (one instance, no election)",
    )
    g.add_argument(
        "--advertised-url",
        metavar="URL",
        default=None,
        help="where the other instances forward writes when this one leads (default http://HOST:PORT)",
    )
    g.add_argument(
        "--session-timeout-ms",
        metavar="MS",
        type=int,
        default=10000,
        help="of the election group: how soon a dead leader is replaced (default 10000)",
    )
    g = p.add_argument_group("security")
    g.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="USER:PASSWORD[:ROLE]",
        help="require HTTP basic auth; ROLE admin (default: everything) or readonly (reads, lookups, "
        f"compatibility checks); repeatable; also ${ENV_USERS} (comma-separated)",
    )
    g.add_argument(
        "--tls-cert", metavar="PEM", default=None, help="serve HTTPS with this certificate (chain)"
    )
    g.add_argument("--tls-key", metavar="PEM", default=None, help="the certificate's private key")
    g.add_argument(
        "--tls-ca",
        metavar="PEM",
        default=None,
        help="CA the instances trust when forwarding writes to an HTTPS leader",
    )
    p.set_defaults(func=run_command(cmd_registry))


ENV_USERS = "MOLDAU_REGISTRY_USERS"


def parse_users(items: list[str]) -> dict[str, tuple[str, str]]:
    users: dict[str, tuple[str, str]] = {}
    for item in items:
        user, sep, rest = item.partition(":")
        password, _, role = (
            rest.rpartition(":") if rest.endswith((":admin", ":readonly")) else (rest, "", "admin")
        )
        if not sep or not user or not password:
            raise UsageError(f"--user {item.split(':')[0]}:...: expected USER:PASSWORD[:admin|readonly]")
        users[user] = (password, role)
    return users


def cmd_registry(args: argparse.Namespace) -> int:
    from moldau._serve import parse_listen
    from moldau.registry import RegistrySettings, run_registry

    try:
        host, port = parse_listen(args.listen)
    except ValueError as e:
        raise UsageError(str(e)) from None
    settings = RegistrySettings(
        client_config(args, "admin"),
        host=host,
        port=port,
        topic=args.topic,
        replication_factor=args.replication_factor,
        group_id=args.group_id,
        advertised_url=args.advertised_url,
        session_timeout_ms=args.session_timeout_ms,
        users=parse_users(args.user + [u for u in os.environ.get(ENV_USERS, "").split(",") if u]),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_ca=args.tls_ca,
    )
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    log = logging.getLogger("moldau.registry")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    run_registry(settings)
    return 0
