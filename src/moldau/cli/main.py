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
from collections.abc import Sequence

from moldau import __version__

# Commands shipped with the broker; other modules in this package that define register() are added too.
_CORE = ("broker_cmd", "log_cmd")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with the one in module ``only`` (``moldau broker`` starts without
    importing the other commands)."""
    parser = argparse.ArgumentParser(
        prog="moldau", description="moldau: a Kafka-compatible broker and client"
    )
    parser.add_argument("--version", action="version", version=f"moldau {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [only] if only else list(_CORE)
    import moldau.cli as pkg

    for info in ([] if only else pkgutil.iter_modules(pkg.__path__)):
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
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser("broker_cmd" if args_list[:1] == ["broker"] else None)
    args = parser.parse_args(args_list)
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
