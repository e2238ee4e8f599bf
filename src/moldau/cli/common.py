"""Shared plumbing of the operator tools (``moldau topics|produce|consume|groups|configs|offsets|perf``).

* Connection options: ``--bootstrap-server`` / ``-b`` (default ``localhost:9092``, or ``MOLDAU_BOOTSTRAP``),
  ``--command-config FILE`` (a client .properties file: security.protocol, sasl.*, ssl.*, any client key) and
  ``-X KEY=VALUE`` (one client setting, repeatable; wins over the file).
* Output: human tables (``print_table``) or ``--json`` (``print_json``).
* Errors: every command runs through ``run_command``, which turns the exceptions a user can cause (broker
  unreachable, unknown topic, bad value, missing file, Ctrl-C, a closed pipe) into one line on stderr and an
  exit code: 0 ok, 1 failed, 2 usage, 130 interrupted. ``MOLDAU_DEBUG=1`` adds the traceback.

This module defines no ``register`` function, so ``moldau.cli.main`` does not take it for a command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_BOOTSTRAP = "localhost:9092"
ENV_BOOTSTRAP = "MOLDAU_BOOTSTRAP"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Client settings that only some clients take: passed to the clients that know them, dropped for the others
# (a --command-config file is shared by the producer, consumer and admin of one command).
_PRODUCER_ONLY = ("acks", "batch.size", "linger.ms", "buffer.memory", "max.block.ms", "compression.type",
                  "compression.level", "retries", "delivery.timeout.ms",
                  "max.in.flight.requests.per.connection",
                  "enable.idempotence", "max.request.size", "partitioner.ignore.keys", "transactional.id",
                  "transaction.timeout.ms")


class CliError(Exception):
    """A failure to report as one line (``moldau CMD: error: MESSAGE``) with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


# ----------------------------------------------------------------------------------------------- parsers

def _one_line_error(self: argparse.ArgumentParser, message: str) -> None:
    """argparse's error(), as one line naming --help instead of the usage block."""
    self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.error = types.MethodType(_one_line_error, parser)  # type: ignore[method-assign]
    return parser


def add_command(sub: Any, name: str, *, help: str, description: str, examples: str = "",
                **kw: Any) -> argparse.ArgumentParser:
    """A sub-parser with examples in its --help and one-line argument errors."""
    epilog = ("examples:\n" + examples.rstrip()) if examples else None
    p = sub.add_parser(name, help=help, description=description, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    return one_line_errors(p)


def add_subcommands(p: argparse.ArgumentParser, dest: str) -> Any:
    """Sub-sub-commands (``moldau topics list``); their parsers report errors in one line too."""
    subs = p.add_subparsers(dest=dest, metavar="SUBCOMMAND")
    orig = subs.add_parser

    def add_parser(name: str, **kw: Any) -> argparse.ArgumentParser:
        examples = kw.pop("examples", "")
        if examples:
            kw["epilog"] = "examples:\n" + examples.rstrip()
            kw["formatter_class"] = argparse.RawDescriptionHelpFormatter
        if "help" in kw and "description" not in kw:
            kw["description"] = kw["help"][:1].upper() + kw["help"][1:] + "."
        return one_line_errors(orig(name, **kw))

    subs.add_parser = add_parser  # type: ignore[method-assign]
    p.set_defaults(func=lambda args: _missing_subcommand(p))
    return subs


def _missing_subcommand(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return EXIT_USAGE


def add_connection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connection")
    g.add_argument(
        "-b",
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        default=None,
        help=f"broker(s) to connect to (default ${ENV_BOOTSTRAP} or {DEFAULT_BOOTSTRAP})",
    )
    g.add_argument("--command-config", metavar="FILE",
                   help="client properties file (security.protocol, sasl.*, ssl.*, other client settings)")
    g.add_argument("-X", dest="client_settings", metavar="KEY=VALUE", action="append", default=[],
                   help="one client setting, e.g. -X request.timeout.ms=5000 (repeatable)")


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")


# ----------------------------------------------------------------------------------------------- config

def bootstrap_of(args: argparse.Namespace) -> str:
    return (
        getattr(args, "bootstrap_server", None) or os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
    ).strip()


def parse_properties_text(text: str) -> dict[str, str]:
    """A .properties file as a dict (``key=value`` or ``key: value``; ``#``/``!`` comments)."""
    try:
        from moldau.broker.config import parse_properties

        return dict(parse_properties(text))
    except ImportError:  # pragma: no cover - the broker package is part of moldau
        out: dict[str, str] = {}
        for line in text.splitlines():
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            sep = min((i for i in (s.find("="), s.find(":")) if i >= 0), default=-1)
            if sep < 0:
                out[s] = ""
            else:
                out[s[:sep].strip()] = s[sep + 1:].strip()
        return out


def parse_kv(item: str, what: str = "-X") -> tuple[str, str]:
    if "=" not in item:
        raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
    k, v = item.split("=", 1)
    if not k.strip():
        raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
    return k.strip(), v


def client_config(args: argparse.Namespace, kind: str = "admin", **overrides: Any) -> dict[str, Any]:
    """The client config of a command: bootstrap, --command-config, -X, then the command's own settings.

    ``kind`` ("admin", "producer", "consumer") drops settings meant for the other kinds of client, so one
    command-config file serves all of them. Security settings are passed as they are (the client decides
    which it supports).
    """
    conf: dict[str, Any] = {}
    path = getattr(args, "command_config", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                conf.update(parse_properties_text(f.read()))
        except OSError as e:
            raise UsageError(f"--command-config {path}: {e.strerror or e}") from None
    for item in getattr(args, "client_settings", None) or []:
        k, v = parse_kv(item)
        conf[k] = v
    conf.pop("bootstrap.servers", None)
    conf["bootstrap.servers"] = bootstrap_of(args)
    conf.setdefault("client.id", f"moldau-cli-{getattr(args, 'command', None) or 'tool'}")
    if kind != "producer":
        for k in _PRODUCER_ONLY:
            conf.pop(k, None)
    if kind != "consumer":
        try:
            from moldau.client.config import CONSUMER

            for k in list(conf):
                if k in CONSUMER:
                    conf.pop(k)
        except ImportError:  # pragma: no cover
            pass
    for k, v in overrides.items():
        conf[k.replace("_", ".")] = v
    _check_security(conf)
    return conf


def _check_security(conf: dict[str, Any]) -> None:
    """Security settings go to the client as they are; say clearly when it cannot use them yet, and drop
    sasl.*/ssl.* keys the client does not know while the protocol is PLAINTEXT (a shared file may have
    them)."""
    try:
        from moldau.client.config import COMMON, ConfigError
    except ImportError:  # pragma: no cover
        return
    proto = conf.get("security.protocol")
    if proto is not None:
        d = COMMON.get("security.protocol")
        if d is not None:
            try:
                d.parse("security.protocol", proto)
            except ConfigError:
                raise UsageError(f"security.protocol={proto}: the moldau client does not support it yet "
                                 "(PLAINTEXT only)") from None
    if str(proto or "plaintext").lower() == "plaintext":
        for k in list(conf):
            if k.startswith(("sasl.", "ssl.")) and k not in COMMON:
                conf.pop(k)


def admin(args: argparse.Namespace) -> Any:
    from moldau.client import Admin

    return Admin(config=client_config(args, "admin"))


# ----------------------------------------------------------------------------------------------- output

def print_json(obj: Any, *, lines: bool = False) -> None:
    if lines:
        sys.stdout.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
    else:
        sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fmt_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple, set)):
        return ",".join(str(x) for x in v) or "-"
    return str(v)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, file: Any = None,
                empty: str | None = None) -> None:
    """Columns padded to their widest cell; numbers right-aligned."""
    file = file or sys.stdout
    cells = [[fmt_cell(v) for v in row] for row in rows]
    raw = [list(row) for row in cells]
    if not cells and empty is not None:
        file.write(empty + "\n")
        return
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    numeric = [all(_is_num(r[i]) for r in raw) and bool(raw) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            parts.append(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    file.write(line(list(headers)) + "\n")
    for row in cells:
        file.write(line(row) + "\n")


def _is_num(s: str) -> bool:
    return s == "-" or s.lstrip("-").replace(".", "", 1).isdigit()


def err(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ----------------------------------------------------------------------------------------------- errors

def describe_error(exc: BaseException, bootstrap: str) -> tuple[str, int]:
    """One line for an exception a user can cause, and the exit code."""
    from moldau.client import errors as cerr
    from moldau.client.config import ConfigError as ClientConfigError
    from moldau.protocol.errors import KafkaError

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, cerr.BootstrapError):
        text = str(exc)
        for prefix in ("cannot reach bootstrap server ", "cannot reach any bootstrap server: "):
            if text.startswith(prefix):
                rest = text[len(prefix):]
                if prefix.startswith("cannot reach bootstrap"):
                    return f"cannot reach the broker at {rest}", EXIT_FAILED
                return f"cannot reach any broker ({rest})", EXIT_FAILED
        return f"cannot reach the broker at {bootstrap}: {text}", EXIT_FAILED
    if isinstance(exc, ClientConfigError):
        return f"bad client setting: {exc}", EXIT_USAGE
    if isinstance(exc, KafkaError):
        base = _tidy(Exception.__str__(exc))
        name = exc.code.name if getattr(exc, "raw_code", None) == int(exc.code) else f"error {exc.raw_code}"
        return (f"{name}: {base}" if base and base != exc.code.message else
                f"{name}: {exc.code.message}"), EXIT_FAILED
    if isinstance(exc, cerr.KafkaTimeoutError):
        return f"timed out: {exc}", EXIT_FAILED
    if isinstance(exc, cerr.UnsupportedVersionError):
        return f"the broker does not support this: {exc}", EXIT_FAILED
    if isinstance(exc, cerr.KafkaConnectionError):
        return f"lost the connection to the broker ({bootstrap}): {exc}", EXIT_FAILED
    if isinstance(exc, cerr.ClientError):
        return str(exc), EXIT_FAILED
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file", EXIT_FAILED
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", EXIT_FAILED
    return f"unexpected error: {type(exc).__name__}: {exc} (MOLDAU_DEBUG=1 shows the traceback)", EXIT_FAILED


def _tidy(text: str) -> str:
    """Client messages name resources by their repr; say 'topic x' / 'broker 1' instead."""
    import re

    def res(mo: Any) -> str:
        kind = {"2": "topic", "4": "broker", "8": "broker logger", "32": "group"}.get(mo.group(1), "resource")
        return f"{kind} {mo.group(2)}".rstrip()

    return re.sub(r"ConfigResource\(resource_type=(\d+), name='([^']*)'\)", res, text)


def _configure_logging() -> None:
    """The tools report failures themselves, in one line; the client's log lines (reconnects, retries) show
    only with MOLDAU_LOG_LEVEL=DEBUG|INFO|WARNING (or MOLDAU_DEBUG=1)."""
    import logging

    level = os.environ.get("MOLDAU_LOG_LEVEL") or ("DEBUG" if os.environ.get("MOLDAU_DEBUG") else "")
    if level:
        logging.basicConfig(level=getattr(logging, level.upper(), logging.WARNING), stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        logging.getLogger("moldau").addHandler(logging.NullHandler())
        logging.getLogger("moldau").propagate = False


def run_command(fn: Callable[[argparse.Namespace], int | None]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: exceptions become one line on stderr and an exit code."""

    def wrapped(args: argparse.Namespace) -> int:
        name = getattr(args, "command", None) or "moldau"
        prog = f"moldau {name}"
        _configure_logging()
        try:
            return int(fn(args) or 0)
        except KeyboardInterrupt:
            err(f"{prog}: interrupted")
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            # stdout closed early (moldau consume ... | head): not an error
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - avoid a second error at exit
            except OSError:  # pragma: no cover
                pass
            return EXIT_OK
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure is reported in one line
            if os.environ.get("MOLDAU_DEBUG"):
                import traceback

                traceback.print_exc()
            msg, code = describe_error(exc, bootstrap_of(args))
            err(f"{prog}: error: {msg}")
            return code

    wrapped.__name__ = getattr(fn, "__name__", "command")
    wrapped.__doc__ = fn.__doc__
    return wrapped


# ----------------------------------------------------------------------------------------------- time

_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds from '90s', '15m', '1h30m', '2d', '500ms', or ISO 8601 'PT1H30M' / 'P1DT2H' (may be negative
    with a leading '-')."""
    s = text.strip()
    sign = 1.0
    if s.startswith("-"):
        sign, s = -1.0, s[1:]
    if s.upper().startswith("P"):
        import re

        mo = re.fullmatch(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?"
                          r"(?:(\d+(?:\.\d+)?)S)?)?", s.upper())
        if not mo or s.upper() in ("P", "PT"):
            raise UsageError(f"bad duration {text!r} (examples: PT1H30M, P1D, 15m, 2h)")
        d, h, mi, se = (float(x) if x else 0.0 for x in mo.groups())
        return sign * (d * 86400 + h * 3600 + mi * 60 + se)
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", s.lower())
    if not parts or "".join(f"{n}{u}" for n, u in parts) != re.sub(r"\s+", "", s.lower()):
        raise UsageError(f"bad duration {text!r} (examples: 15m, 2h, 1h30m, 500ms, PT1H)")
    total = 0.0
    for n, u in parts:
        if u not in _UNITS:
            raise UsageError(f"bad duration unit {u!r} in {text!r} (ms, s, m, h, d, w)")
        total += float(n) * _UNITS[u]
    return sign * total


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch from an integer (ms), 'now', 'now-1h', or an ISO 8601 date/time
    (local time unless it names a zone: '2024-05-01T12:00:00Z', '2024-05-01 12:00+02:00', '2024-05-01')."""
    s = text.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    low = s.lower()
    if low.startswith("now"):
        rest = low[3:].strip()
        base = time.time()
        if not rest:
            return int(base * 1000)
        if rest[0] in "+-":
            delta = parse_duration(rest[1:])
            return int((base + (delta if rest[0] == "+" else -delta)) * 1000)
        raise UsageError(f"bad time {text!r}")
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(f"bad time {text!r} (ISO 8601 like 2024-05-01T12:00:00Z, 'now-1h', or ms since "
                         "the epoch)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time
    return int(dt.timestamp() * 1000)


def fmt_time_ms(ms: int) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


_ = timedelta
