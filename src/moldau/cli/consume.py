"""``moldau consume TOPIC``: print records (kafka-console-consumer, kcat -C).

Without ``--group`` the tool reads the partitions directly (nothing is committed); with ``--group`` it joins
the group (or, with ``--partition``, commits for it without joining) and commits what it printed, also on
Ctrl-C. Output: values one per line (default), a kcat-like ``--format``, or ``--json`` lines.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from .common import (
    CliError,
    UsageError,
    add_command,
    add_connection_args,
    client_config,
    err,
    run_command,
)
from .produce import unescape

EXAMPLES = """\
  moldau consume events --from-beginning
  moldau consume events -g my-app --max-messages 10          # joins my-app, commits what it printed
  moldau consume events -p 0 --offset 42 -e                  # partition 0 from offset 42 to the end
  moldau consume events --offset -5 -e                       # the last 5 records of each partition
  moldau consume events --from-beginning -e -f '%p:%o %k=%s\\n'
  moldau consume events --from-beginning -e --json | jq .value
"""

FORMAT_HELP = ("output format: %%t topic, %%p partition, %%o offset, %%k key, %%s value, %%K key length, "
               "%%S value length, %%T timestamp ms, %%h headers (k=v,...), %%%%; escapes \\n \\t "
               "(default '%%s\\n')")


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "consume",
        help="print records of a topic",
        description="Print records of a topic: values one per line, a kcat-like --format, or JSON "
        "lines (--json; keys/values that are not UTF-8 are base64). Ctrl-C stops "
        "cleanly and, in a group, commits what was printed.",
        examples=EXAMPLES,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-g", "--group", help="consumer group: join it (or commit for it with --partition)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest offset (with --group: where it has no committed offset)")
    start.add_argument("-o", "--offset", metavar="OFFSET",
                       help="start offset: N, -N (N before the end), earliest/beginning or latest/end")
    p.add_argument("-p", "--partition", type=int, action="append", metavar="N",
                   help="only this partition (repeatable)")
    p.add_argument("-n", "--max-messages", type=int, metavar="N", help="exit after N records")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="exit when no record arrives for SECONDS")
    p.add_argument("-e", "--exit-at-end", action="store_true",
                   help="exit once every partition is read up to its end")
    p.add_argument("-f", "--format", metavar="FORMAT", help=FORMAT_HELP)
    p.add_argument("-K", "--key-separator", metavar="SEP",
                   help="print key SEP value (same as -f '%%k<SEP>%%s\\n')")
    p.add_argument("--json", action="store_true",
                   help="JSON lines: topic, partition, offset, timestamp, key, value, headers (base64 + "
                        "key_encoding/value_encoding where not UTF-8)")
    p.add_argument("--base64", action="store_true", help="with --json: always base64 keys and values")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted", help="read_committed skips aborted transactions")
    p.add_argument("--no-commit", action="store_true", help="with --group: do not commit")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    add_connection_args(p)
    p.set_defaults(func=run_command(cmd_consume))


# ---------------------------------------------------------------------------------------------- formats

def compile_format(fmt: str) -> Callable[[Any], bytes]:
    """A kcat-like output format as a function record -> bytes."""
    pieces: list[Callable[[Any], bytes] | bytes] = []
    i = 0
    lit = bytearray()

    def flush_lit() -> None:
        if lit:
            pieces.append(bytes(lit))
            lit.clear()

    getters: dict[str, Callable[[Any], bytes]] = {
        "t": lambda r: r.topic.encode(),
        "p": lambda r: str(r.partition).encode(),
        "o": lambda r: str(r.offset).encode(),
        "k": lambda r: _b(r.key),
        "s": lambda r: _b(r.value),
        "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
        "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
        "T": lambda r: str(r.timestamp).encode(),
        "h": lambda r: b",".join(k.encode() + b"=" + _b(v) for k, v in (r.headers or [])),
    }
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            c = fmt[i + 1]
            if c == "%":
                lit += b"%"
            elif c in getters:
                flush_lit()
                pieces.append(getters[c])
            else:
                raise UsageError(f"--format: unknown field %{c} (use %t %p %o %k %s %K %S %T %h %%)")
            i += 2
            continue
        j = fmt.find("%", i + 1)
        j = len(fmt) if j < 0 else j
        lit += unescape(fmt[i:j])
        i = j
    flush_lit()

    def render(r: Any) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(r) for p in pieces)

    return render


def _b(v: Any) -> bytes:
    if v is None:
        return b""
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


def _text(v: Any, force_b64: bool) -> tuple[str | None, bool]:
    """(text, is_base64)."""
    if v is None:
        return None, False
    b = bytes(v)
    if not force_b64:
        try:
            return b.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(b).decode("ascii"), True


def record_json(r: Any, force_b64: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                           "timestamp": r.timestamp,
                           "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"}
    key, kb = _text(r.key, force_b64)
    value, vb = _text(r.value, force_b64)
    out["key"] = key
    if kb:
        out["key_encoding"] = "base64"
    out["value"] = value
    if vb:
        out["value_encoding"] = "base64"
    hdrs = []
    for k, v in r.headers or []:
        hv, hb = _text(v, force_b64)
        hdrs.append({"key": k, "value": hv, **({"encoding": "base64"} if hb else {})})
    out["headers"] = hdrs
    return out


# ---------------------------------------------------------------------------------------------- command

def _start_offset(text: str) -> str | int:
    s = text.strip().lower()
    if s in ("earliest", "beginning", "first"):
        return "earliest"
    if s in ("latest", "end", "last"):
        return "latest"
    try:
        return int(s)
    except ValueError:
        raise UsageError(f"--offset: expected N, -N, earliest or latest, got {text!r}") from None


class _Stop:
    def __init__(self) -> None:
        self.requested = False
        self.previous: Any = None

    def handler(self, signum: int, frame: Any) -> None:
        if self.requested:  # a second Ctrl-C: give up at once
            raise KeyboardInterrupt
        self.requested = True


def cmd_consume(args: argparse.Namespace) -> int:
    from moldau.client import Consumer, TopicPartition

    if args.offset is not None and args.group and not args.partition:
        raise UsageError("--offset with --group needs --partition (to move a group, use "
                         "'moldau groups reset-offsets')")
    if args.format is not None and args.key_separator is not None:
        raise UsageError("-f and -K cannot be combined (use %k in the format)")
    if args.json and (args.format is not None or args.key_separator is not None):
        raise UsageError("--json cannot be combined with -f/-K")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    start = _start_offset(args.offset) if args.offset is not None else None
    if args.format is not None:
        render = compile_format(args.format)
    elif args.key_separator is not None:
        render = compile_format("%k" + args.key_separator.replace("%", "%%") + "%s\\n")
    else:
        render = compile_format("%s\\n")

    reset = "earliest" if args.from_beginning else "latest"
    conf = client_config(args, "consumer", **{
        "auto.offset.reset": reset,
        "enable.auto.commit": "false",
        "isolation.level": args.isolation_level,
        "allow.auto.create.topics": "false",
    })
    if args.group:
        conf["group.id"] = args.group
    else:
        conf.pop("group.id", None)
    out = sys.stdout.buffer
    interactive = sys.stdout.isatty()
    stop = _Stop()
    stop.previous = signal.signal(signal.SIGINT, stop.handler)
    prev_term = signal.signal(signal.SIGTERM, stop.handler)  # stop cleanly (commit, leave) on SIGTERM too
    count = 0
    consumed: dict[Any, int] = {}  # tp -> next offset after the last record printed
    committed_at = time.monotonic()
    with Consumer(config=conf) as c:
        try:
            if not args.topic.startswith("__") and args.topic not in c.topics(timeout=10.0):
                raise CliError(f"topic {args.topic!r} does not exist")
            try:
                parts = c.partitions_for(args.topic, timeout=10.0)
            except Exception as e:
                from moldau.client.errors import KafkaTimeoutError

                if isinstance(e, KafkaTimeoutError):
                    raise CliError(f"topic {args.topic!r} does not exist") from None
                raise
            if args.partition:
                missing = [p for p in args.partition if p not in parts]
                if missing:
                    raise CliError(f"topic {args.topic} has no partition {missing[0]} (it has {len(parts)})")
                tps = [TopicPartition(args.topic, p) for p in args.partition]
            else:
                tps = [TopicPartition(args.topic, p) for p in parts]
            subscribed = bool(args.group) and not args.partition
            if subscribed:
                c.subscribe([args.topic])
            else:
                c.assign(tps)
                _seek(c, tps, start, reset if not args.group else None)
            ends: dict[Any, int] = {}
            if args.exit_at_end and not subscribed:
                ends = c.end_offsets(tps)
            last_record = time.monotonic()
            while not stop.requested:
                wait = 0.2
                if args.timeout is not None:
                    left = args.timeout - (time.monotonic() - last_record)
                    if left <= 0:
                        break
                    wait = min(wait, left)
                want = None if args.max_messages is None else args.max_messages - count
                records = c.poll(timeout=wait, max_records=want)
                if records:
                    last_record = time.monotonic()
                    chunks = []
                    for r in records:
                        if args.json:
                            chunks.append(json.dumps(record_json(r, args.base64), separators=(",", ":"))
                                          .encode() + b"\n")
                        else:
                            chunks.append(render(r))
                        consumed[TopicPartition(r.topic, r.partition)] = r.offset + 1
                        count += 1
                        if args.max_messages is not None and count >= args.max_messages:
                            break
                    out.write(b"".join(chunks))
                    if interactive:
                        out.flush()
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                if args.group and not args.no_commit and time.monotonic() - committed_at > 5.0:
                    committed_at = time.monotonic()
                    try:
                        _commit(c, consumed)
                    except Exception as e:  # noqa: BLE001 - a rebalance under the commit: the next one
                        err(f"moldau consume: warning: commit failed: {e}")
                if args.exit_at_end and _at_end(c, ends, subscribed):
                    break
            out.flush()
        finally:
            signal.signal(signal.SIGINT, stop.previous or signal.SIG_DFL)
            signal.signal(signal.SIGTERM, prev_term or signal.SIG_DFL)
            if args.group and not args.no_commit:
                try:
                    _commit(c, consumed)
                except Exception as e:  # noqa: BLE001 - report, still close
                    err(f"moldau consume: warning: commit failed: {e}")
    if not args.quiet:
        err(f"consumed {count} record{'s' if count != 1 else ''} from {args.topic}"
            + (f" (group {args.group})" if args.group else ""))
    return 0


def _seek(c: Any, tps: list[Any], start: str | int | None, reset: str | None) -> None:
    if start is None:
        if reset is None:
            return  # the group's committed offsets (or auto.offset.reset)
        start = reset
    if start == "earliest":
        c.seek_to_beginning(*tps)
    elif start == "latest":
        c.seek_to_end(*tps)
    elif isinstance(start, int) and start >= 0:
        for tp in tps:
            c.seek(tp, start)
    else:
        assert isinstance(start, int)
        begins = c.beginning_offsets(tps)
        ends = c.end_offsets(tps)
        for tp in tps:
            c.seek(tp, max(begins[tp], ends[tp] + start))


def _at_end(c: Any, ends: dict[Any, int], subscribed: bool) -> bool:
    assigned = c.assignment()
    if not assigned:
        return False
    if subscribed:
        new = [tp for tp in assigned if tp not in ends]
        if new:
            ends.update(c.end_offsets(new))
    for tp in assigned:
        end = ends.get(tp)
        if end is None:
            return False
        if c.position(tp) < end:
            return False
    return True


def _commit(c: Any, consumed: dict[Any, int]) -> None:
    """Commit the positions of every assigned partition: poll() is asked for no more records than are
    printed, so a position is exactly what was printed (also for partitions that had none: their reset
    position, as the Java console consumer commits it)."""
    if c.assignment():
        c.commit()
    elif consumed:
        c.commit(dict(consumed))
