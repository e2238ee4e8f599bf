"""``moldau tls init``: a local CA, a broker certificate and client certificates for TLS listeners.

    moldau tls init [--dir ./moldau-tls] [--hostname NAME ...] [--client NAME ...] [--days 825] [--new-ca]

Writes ca.pem / ca.key (kept and reused unless --new-ca), broker.pem / broker.key (subject CN=<first
hostname>, subject alternative names = the hostnames; default localhost, 127.0.0.1, ::1 and this host's name)
and <NAME>.pem / <NAME>.key per client (subject CN=<NAME>; its principal is User:CN=<NAME>). Keys are EC
P-256, mode 0600. Uses the ``cryptography`` package when installed, else the ``openssl`` command. Prints the
broker and client settings to use. For local development and tests only: keep the CA key private.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("tls", help="TLS helpers (local CA and certificates)",
                       description="TLS helpers for moldau listeners.")
    cmds = p.add_subparsers(dest="tls_command", metavar="SUBCOMMAND")
    init = cmds.add_parser("init", help="create a local CA, a broker certificate and client certificates")
    init.add_argument("--dir", default="./moldau-tls", help="output directory (./moldau-tls)")
    init.add_argument("--hostname", action="append", default=None,
                      help="broker host name or IP for the certificate (repeatable; default: localhost, "
                           "127.0.0.1, ::1, this host)")
    init.add_argument("--client", action="append", default=[], metavar="NAME",
                      help="also make a client certificate CN=NAME (repeatable)")
    init.add_argument("--days", type=int, default=825, help="validity in days (825)")
    init.add_argument("--new-ca", action="store_true", help="make a new CA even if DIR/ca.pem exists")
    init.add_argument("--backend", choices=("auto", "cryptography", "openssl"), default="auto",
                      help=argparse.SUPPRESS)
    init.set_defaults(func=cmd_init)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_init(args: argparse.Namespace) -> int:
    from moldau.broker.security.tls import generate

    try:
        files = generate(args.dir, hostnames=args.hostname, clients=args.client, days=args.days,
                         reuse_ca=not args.new_ca, backend=args.backend)
    except (RuntimeError, OSError) as e:
        print(f"moldau tls: error: {e}", file=sys.stderr)
        return 1
    d = os.path.abspath(args.dir)
    print(f"wrote {files.ca_cert}, {files.broker_cert}, {files.broker_key}"
          + "".join(f", {c}, {k}" for c, k in files.clients.values()))
    print("\nbroker settings (server.properties or --set):")
    print("  listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094")
    print(f"  ssl.certificate.location={d}/broker.pem")
    print(f"  ssl.key.location={d}/broker.key")
    print(f"  ssl.ca.location={d}/ca.pem")
    print("  ssl.client.auth=requested      # or required / none")
    print("\nclient settings (librdkafka names):")
    print("  security.protocol=SSL          # or SASL_SSL")
    print(f"  ssl.ca.location={d}/ca.pem")
    for name, (c, k) in files.clients.items():
        print(f"  ssl.certificate.location={c}    # principal User:CN={name}")
        print(f"  ssl.key.location={k}")
    return 0
