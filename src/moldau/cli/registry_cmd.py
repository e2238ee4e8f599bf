"""``moldau registry``: the schema registry (moldau.registry, Confluent's REST API) for a Kafka-compatible
cluster, its state in the cluster's ``_schemas`` topic."""

from __future__ import annotations

import argparse
import logging
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
    p.set_defaults(func=run_command(cmd_registry))


def cmd_registry(args: argparse.Namespace) -> int:
    from moldau.console.web import parse_listen
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
    )
    log = logging.getLogger("moldau.registry")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    run_registry(settings)
    return 0
