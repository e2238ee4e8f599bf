"""``moldau produce TOPIC``: records from stdin or a file, one per line (kafka-console-producer, kcat -P).

Input is read as bytes: a record is what lies between delimiters (``-D``, default newline), kept byte for
byte. ``-K SEP`` splits each record into key and value at the first SEP (kcat's -K); ``-F FORMAT`` parses
each record with a kcat-like format string instead (``%k`` key, ``%s`` value, ``%h`` headers as
``k=v,k2=v2``, ``%p`` partition, ``%T`` timestamp in ms; anything else is literal text between fields).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

from .common import (
    CliError,
    UsageError,
    add_command,
    add_connection_args,
    add_json_arg,
    client_config,
    err,
    print_json,
    run_command,
)

EXAMPLES = """\
  echo hello | moldau produce events
  moldau produce events --file data.txt                 # progress bar on a terminal
  moldau produce events -K : <<< 'user-1:{"clicks": 3}' # key:value
  moldau produce events -F '%k\\t%h\\t%s' --file tsv.txt  # key, headers (a=1,b=2), value
  moldau produce events -H source=cli -p 0 --acks 1 --compression zstd --file data.txt
"""

_CHUNK = 1 << 20


def register(sub: Any) -> None:
    p = add_command(sub, "produce", help="produce records from stdin or a file",
                    description="Produce one record per line (or per -D delimiter) from stdin or --file. "
                                "Exits non-zero if any record failed.", examples=EXAMPLES)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument(
        "-f", "--file", metavar="FILE", help="read records from FILE instead of stdin ('-' = stdin)"
    )
    p.add_argument("-K", "--key-separator", metavar="SEP",
                   help="split each record at the first SEP into key and value (escapes like \\t work)")
    p.add_argument("-F", "--format", metavar="FORMAT",
                   help="parse each record with a format: %%k key, %%s value, %%h headers (k=v,k2=v2), "
                        "%%p partition, %%T timestamp ms, other text literal")
    p.add_argument("-D", "--delimiter", metavar="DELIM", default="\\n",
                   help="record delimiter (default newline; escapes work)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="header added to every record (repeatable)")
    p.add_argument("-p", "--partition", type=int, help="send every record to this partition")
    p.add_argument("-z", "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default=None,
                   help="compression codec (default none)")
    p.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all",
                   help="acknowledgements to wait for (default all)")
    p.add_argument("--linger-ms", type=int, default=None, help="producer linger.ms (default 5)")
    p.add_argument("--skip-empty", action="store_true", help="do not send empty records (empty lines)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    add_json_arg(p)
    add_connection_args(p)
    p.set_defaults(func=run_command(cmd_produce))


def unescape(text: str) -> bytes:
    """'\\t' -> tab etc.; the text stays UTF-8 otherwise."""
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if nxt == "x" and i + 4 <= len(text) and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
                continue
        out += ch.encode()
        i += 1
    return bytes(out)


class InputFormat:
    """A kcat-like input format compiled to a bytes regex: ``%k|%s`` -> key, '|', value."""

    FIELDS = {"k": "key", "s": "value", "h": "headers", "p": "partition", "T": "timestamp"}

    def __init__(self, fmt: str) -> None:
        parts: list[tuple[str, Any]] = []
        i = 0
        lit = bytearray()
        while i < len(fmt):
            if fmt[i] == "%" and i + 1 < len(fmt):
                c = fmt[i + 1]
                if c == "%":
                    lit += b"%"
                elif c in self.FIELDS:
                    if lit:
                        parts.append(("lit", bytes(lit)))
                        lit = bytearray()
                    parts.append(("field", self.FIELDS[c]))
                else:
                    raise UsageError(f"--format: unknown field %{c} (use %k, %s, %h, %p, %T, %%)")
                i += 2
                continue
            j = fmt.find("%", i + 1) if fmt[i] != "%" else i + 1
            j = len(fmt) if j < 0 else j
            lit += unescape(fmt[i:j])
            i = j
        if lit:
            parts.append(("lit", bytes(lit)))
        names = [v for k, v in parts if k == "field"]
        if len(set(names)) != len(names):
            raise UsageError("--format: a field appears twice")
        if "value" not in names and "key" not in names:
            raise UsageError("--format needs %s (value) or %k (key)")
        pattern = b"^"
        fields = [i for i, (k, _) in enumerate(parts) if k == "field"]
        for idx, (kind, val) in enumerate(parts):
            if kind == "lit":
                pattern += re.escape(val)
            else:
                greedy = idx == fields[-1]
                body = b"-?[0-9]+" if val in ("partition", "timestamp") else (b".*" if greedy else b".*?")
                pattern += b"(?P<" + val.encode() + b">" + body + b")"
        pattern += b"$"
        self.regex = re.compile(pattern, re.DOTALL)
        self.names = names

    def parse(self, rec: bytes) -> dict[str, bytes] | None:
        mo = self.regex.match(rec)
        return None if mo is None else mo.groupdict()


def parse_headers(raw: bytes) -> list[tuple[str, bytes]]:
    out = []
    for item in raw.split(b","):
        if not item:
            continue
        k, _, v = item.partition(b"=")
        out.append((k.decode("utf-8", "replace"), v))
    return out


def read_records(stream: BinaryIO, delim: bytes, on_bytes: Any = None) -> Iterator[bytes]:
    """Records between delimiters, as bytes; a last record without a trailing delimiter counts too."""
    buf = b""
    read = getattr(stream, "read1", None) or stream.read
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        if on_bytes is not None:
            on_bytes(len(chunk))
        buf = buf + chunk if buf else chunk
        parts = buf.split(delim)
        buf = parts.pop()
        yield from parts
    if buf:
        yield buf


class Progress:
    """A progress bar with rate on stderr: ``[####    ] 45%  12.0/26.7 MB  104,000 rec  88,000 rec/s``."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.bytes = 0
        self.records = 0
        self.start = time.monotonic()
        self._last = 0.0

    def add_bytes(self, n: int) -> None:
        self.bytes += n

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        frac = min(self.bytes / self.total, 1.0)
        width = 28
        fill = int(frac * width)
        rate = self.records / max(now - self.start, 1e-6)
        line = (f"\r[{'#' * fill}{' ' * (width - fill)}] {frac * 100:5.1f}%  {self.bytes / 1e6:.1f}/"
                f"{self.total / 1e6:.1f} MB  {self.records:,} rec  {rate:,.0f} rec/s")
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        self.tick(force=True)
        self.stream.write("\n")
        self.stream.flush()


def cmd_produce(args: argparse.Namespace) -> int:
    from moldau.client import Producer
    from moldau.client.errors import KafkaTimeoutError

    if args.key_separator is not None and args.format is not None:
        raise UsageError("-K and -F cannot be combined (use %k in the format)")
    delim = unescape(args.delimiter)
    if not delim:
        raise UsageError("--delimiter must not be empty")
    sep = unescape(args.key_separator) if args.key_separator is not None else None
    if sep == b"":
        raise UsageError("--key-separator must not be empty")
    fmt = InputFormat(args.format) if args.format is not None else None
    headers: list[tuple[str, bytes]] = []
    for h in args.header:
        if "=" not in h:
            raise UsageError(f"--header expects KEY=VALUE, got {h!r}")
        k, v = h.split("=", 1)
        headers.append((k, v.encode()))

    path = args.file if args.file not in (None, "-") else None
    if path is not None:
        try:
            stream: BinaryIO = open(path, "rb")  # noqa: SIM115
        except OSError as e:
            raise CliError(f"{path}: {e.strerror or e}") from None
    else:
        stream = sys.stdin.buffer

    acks = "all" if args.acks in ("all", "-1") else args.acks
    extra: dict[str, Any] = {"acks": acks}  # idempotence follows (off for acks 0/1 unless set), as in Java
    conf = client_config(args, "producer")
    if args.compression:
        extra["compression.type"] = args.compression
    if args.linger_ms is not None:
        extra["linger.ms"] = args.linger_ms
    conf.setdefault("max.block.ms", 15000)
    conf.update(extra)

    progress: Progress | None = None
    if path is not None and not args.no_progress and sys.stderr.isatty():
        try:
            progress = Progress(os.fstat(stream.fileno()).st_size)
        except OSError:
            progress = None

    sent = failed = nbytes = unsent = 0  # unsent: records refused before sending (counted in failed)
    first_error: list[str] = []
    pending: collections.deque[Any] = collections.deque()
    t0 = time.monotonic()

    def settle(block: bool) -> None:
        nonlocal failed
        while pending and (block or pending[0].done()):
            f = pending.popleft()
            exc = f.exception()
            if exc is not None:
                failed += 1
                if not first_error:
                    from .common import describe_error

                    first_error.append(describe_error(exc, "")[0])

    try:
        with Producer(config=conf) as producer:
            try:
                parts = producer.partitions_for(args.topic)
            except KafkaTimeoutError:
                raise CliError(f"topic {args.topic!r} does not exist (or has no leader)") from None
            if args.partition is not None and args.partition not in parts:
                raise CliError(f"topic {args.topic} has no partition {args.partition} "
                               f"(it has {len(parts)})")
            for rec in read_records(stream, delim, progress.add_bytes if progress else None):
                if args.skip_empty and not rec:
                    continue
                key: bytes | None = None
                value: bytes | None = rec
                hdrs = list(headers)
                partition = args.partition
                ts = None
                if sep is not None:
                    k, found, v = rec.partition(sep)
                    if found:
                        key, value = k, v
                elif fmt is not None:
                    fields = fmt.parse(rec)
                    if fields is None:
                        failed += 1
                        unsent += 1
                        if not first_error:
                            first_error.append(f"record {sent + unsent} does not match --format")
                        continue
                    key = fields.get("key")
                    value = fields.get("value")
                    if fields.get("headers"):
                        hdrs += parse_headers(fields["headers"])
                    if fields.get("partition") is not None:
                        partition = int(fields["partition"])
                    if fields.get("timestamp") is not None:
                        ts = int(fields["timestamp"])
                try:
                    fut = producer.send(args.topic, value, key=key, partition=partition, timestamp=ts,
                                        headers=hdrs or None)
                except (ValueError, KeyError) as e:  # a bad partition from %p, a record too large...
                    failed += 1
                    unsent += 1
                    if not first_error:
                        first_error.append(str(e))
                    continue
                except Exception as e:
                    from moldau.client.errors import ClientError

                    if not isinstance(e, ClientError) or isinstance(e, KafkaTimeoutError):
                        raise
                    failed += 1
                    unsent += 1
                    if not first_error:
                        from .common import describe_error

                        first_error.append(describe_error(e, "")[0])
                    continue
                pending.append(fut)
                sent += 1
                nbytes += len(rec)
                if progress is not None:
                    progress.records = sent
                    progress.tick()
                if len(pending) > 20000:
                    settle(False)
            producer.flush()
            settle(True)
    finally:
        if progress is not None:
            progress.close()
        if path is not None:
            stream.close()
    elapsed = time.monotonic() - t0
    total = sent + unsent
    delivered = total - failed
    if args.json:
        print_json({"topic": args.topic, "records": total, "delivered": delivered, "failed": failed,
                    "bytes": nbytes, "seconds": round(elapsed, 3)})
    elif not args.quiet:
        rate = delivered / elapsed if elapsed > 0 else 0.0
        err(f"produced {delivered:,} record{'s' if delivered != 1 else ''} ({_size(nbytes)}) to "
            f"{args.topic} in {elapsed:.2f} s ({rate:,.0f} records/s)")
    if failed:
        raise CliError(f"{failed} of {total} record{'s' if total != 1 else ''} failed; first error: "
                       f"{first_error[0]}")
    return 0


def _size(n: int) -> str:
    if n < 10_000:
        return f"{n} bytes"
    if n < 10_000_000:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB"
