"""``moldau`` command line: ``moldau <command> ...``.

Commands live in modules of this package that define ``register(subparsers)``; each registers a sub-parser
whose ``func(args) -> int`` runs the command. Heavy imports happen inside the commands so that starting is
fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Sequence

from moldau import __version__

# Commands shipped with the broker; other modules in this package that define register() are added too.
_CORE = ("broker_cmd", "log_cmd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moldau", description="moldau: a Kafka-compatible broker and client"
    )
    parser.add_argument("--version", action="version", version=f"moldau {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = list(_CORE)
    import moldau.cli as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in names and info.name not in ("main", "__main__") and not info.name.startswith("_"):
            names.append(info.name)
    for name in names:
        try:
            mod = importlib.import_module(f"moldau.cli.{name}")
        except ImportError as e:  # pragma: no cover - a broken optional command must not break the others
            print(f"moldau: warning: command module {name} not loaded: {e}", file=sys.stderr)
            continue
        reg = getattr(mod, "register", None)
        if callable(reg):
            reg(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
