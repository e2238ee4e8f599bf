"""``moldau console``: the web console (moldau.console) for a Kafka-compatible cluster."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import UsageError, add_command, add_connection_args, client_config, run_command

ENV_TOKEN = "MOLDAU_CONSOLE_TOKEN"
ENV_BASIC = "MOLDAU_CONSOLE_BASIC_AUTH"


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "console",
        help="web console: topics, messages, groups, transactions, cluster",
        description="Serve the moldau web console for a Kafka-compatible cluster (moldau, Apache Kafka, "
        "Redpanda, ...). It speaks only the Kafka protocol. It binds to loopback unless told "
        "otherwise; use --token or --basic-auth when it listens elsewhere.",
        examples="  moldau console -b localhost:9092\n"
        "  moldau console -b kafka:9093 --command-config client.properties --read-only\n"
        '  moldau console --listen 0.0.0.0:8080 --token "$(openssl rand -hex 16)"\n',
    )
    add_connection_args(p)
    g = p.add_argument_group("console")
    g.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8080",
        help="address to serve on (default 127.0.0.1:8080)",
    )
    g.add_argument(
        "--read-only", action="store_true", help="refuse every change (create, delete, produce, reset...)"
    )
    g.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help=f"require this token (Authorization: Bearer, or ?token= once); default ${ENV_TOKEN}",
    )
    g.add_argument(
        "--basic-auth",
        metavar="USER:PASSWORD",
        default=None,
        help=f"require HTTP basic auth; default ${ENV_BASIC}",
    )
    g.add_argument(
        "--sample-interval",
        metavar="SECONDS",
        type=float,
        default=5.0,
        help="how often throughput and lag are sampled (default 5)",
    )
    g.add_argument(
        "--history",
        metavar="SECONDS",
        type=float,
        default=3600.0,
        help="how long samples are kept for the plots (default 3600)",
    )
    g.add_argument(
        "--max-sampled-groups",
        metavar="N",
        type=int,
        default=100,
        help="consumer groups sampled per round, recently viewed first (default 100)",
    )
    g.add_argument(
        "--schema-registry",
        metavar="URL",
        default=None,
        help="a schema registry (Confluent's REST API, e.g. the broker's schema.registry.listener): the "
        "Schemas pages and the 'registry' decoding of messages",
    )
    p.set_defaults(func=run_command(cmd_console))


def settings_from_args(args: argparse.Namespace) -> Any:
    from moldau._serve import parse_listen
    from moldau.console.web import ConsoleSettings

    try:
        host, port = parse_listen(args.listen)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.sample_interval <= 0:
        raise UsageError(f"--sample-interval {args.sample_interval}: must be > 0")
    if args.history < args.sample_interval:
        raise UsageError(f"--history {args.history}: must be at least --sample-interval")
    if args.max_sampled_groups < 0:
        raise UsageError(f"--max-sampled-groups {args.max_sampled_groups}: must be >= 0")
    token = args.token or os.environ.get(ENV_TOKEN) or None
    basic = args.basic_auth or os.environ.get(ENV_BASIC) or None
    if basic is not None and ":" not in basic:
        raise UsageError("--basic-auth expects USER:PASSWORD")
    return ConsoleSettings(
        client_config(args, "admin"),
        host=host,
        port=port,
        read_only=args.read_only,
        token=token,
        basic_auth=basic,
        sample_interval=args.sample_interval,
        history_seconds=args.history,
        max_sampled_groups=args.max_sampled_groups,
        schema_registry=args.schema_registry or None,
    )


def cmd_console(args: argparse.Namespace) -> int:
    import logging

    settings = settings_from_args(args)
    from moldau.console import run_console

    if not (settings.host.startswith("127.") or settings.host in ("localhost", "::1")) and not (
        settings.token or settings.basic_auth
    ):
        print(
            f"moldau console: warning: listening on {settings.host} without --token or --basic-auth: "
            "anyone who can reach it can change the cluster",
            file=sys.stderr,
        )
    log = logging.getLogger("moldau.console")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    run_console(settings)
    return 0
