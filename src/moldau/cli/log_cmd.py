"""``moldau log dump PATH [--json] [--no-records]``: print the contents of log segments / index files."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("log", help="inspect log files")
    lsub = p.add_subparsers(dest="log_command", metavar="SUBCOMMAND")
    d = lsub.add_parser("dump", help="dump a .log/.index/.timeindex file or a partition directory")
    d.add_argument("path", metavar="PATH")
    d.add_argument("--json", action="store_true", help="one JSON object per line")
    d.add_argument("--no-records", action="store_true", help="batch headers only, no records")
    d.set_defaults(func=run_dump)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_dump(args: argparse.Namespace) -> int:
    from moldau.log import dump as dump_mod

    fn = getattr(dump_mod, "main", None)
    if fn is not None and callable(fn) and not hasattr(dump_mod, "dump"):
        argv = [args.path] + (["--json"] if args.json else []) + (["--no-records"] if args.no_records else [])
        return int(fn(argv) or 0)
    try:
        r = dump_mod.dump(args.path, json=args.json, records=not args.no_records, out=sys.stdout)
    except FileNotFoundError as e:
        print(f"moldau log dump: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # pragma: no cover
        return 0
    return int(r or 0) if isinstance(r, int) else 0
