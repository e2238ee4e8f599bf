"""The message browser: seek (offset, timestamp, newest, earliest), filter, decode, live tail.

Each browse uses a consumer of its own with ``assign()`` and no group (nothing is committed). A browse reads
at most ``scan_limit`` records and stops at the end offsets it saw when it started, so a page never waits for
records that do not exist yet; live tail is the one that waits.

Filters: key substring, value substring, header (``name`` or ``name=value``), and a small expression over
the record (``key``, ``value``, ``offset``, ``partition``, ``timestamp``, ``headers``; ``value.field`` and
``value["field"]`` read JSON values), e.g. ``value.amount > 10 and key == "user-1"``. The expression is parsed
with Python's ``ast`` and evaluated by a walker that only knows those names, comparisons,
``and``/``or``/``not``, ``in`` and literals: nothing is executed.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from moldau.client import AsyncConsumer
from moldau.client.types import ConsumerRecord, TopicPartition

log = logging.getLogger(__name__)

DECODINGS = ("text", "json", "hex", "base64")
MODES = ("newest", "earliest", "offset", "timestamp")


# ---------------------------------------------------------------------------------------------- decoding
def decode(data: bytes | None, how: str) -> str | None:
    if data is None:
        return None
    if how == "hex":
        return data.hex(" ")
    if how == "base64":
        return base64.b64encode(data).decode("ascii")
    text = data.decode("utf-8", errors="replace")
    if how == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def as_text_or_b64(data: bytes | None) -> tuple[str | None, bool]:
    """(text, is_base64): UTF-8 text when it decodes, else base64 (for downloads)."""
    if data is None:
        return None, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def parse_bytes(text: str, how: str) -> bytes:
    """Bytes typed into the produce form: text (UTF-8), hex, or base64."""
    if how == "hex":
        try:
            return bytes.fromhex(text.replace(" ", ""))
        except ValueError:
            raise ValueError("not valid hex") from None
    if how == "base64":
        try:
            return base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not valid base64") from None
    return text.encode("utf-8")


# ---------------------------------------------------------------------------------------------- filters
class FilterError(ValueError):
    pass


_NAMES = ("key", "value", "offset", "partition", "timestamp", "headers")


def compile_expression(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise FilterError(f"expression: {e.msg} at column {e.offset}") from None
    for node in ast.walk(tree):
        if not isinstance(
            node,
            (
                ast.Expression,
                ast.BoolOp,
                ast.And,
                ast.Or,
                ast.UnaryOp,
                ast.Not,
                ast.USub,
                ast.Compare,
                ast.Eq,
                ast.NotEq,
                ast.Lt,
                ast.LtE,
                ast.Gt,
                ast.GtE,
                ast.In,
                ast.NotIn,
                ast.Name,
                ast.Load,
                ast.Attribute,
                ast.Subscript,
                ast.Constant,
                ast.List,
                ast.Tuple,
            ),
        ):
            raise FilterError(
                f"expression: {type(node).__name__} is not allowed (use comparisons, and/or/not, "
                "in, value.field, literals)"
            )
        if isinstance(node, ast.Name) and node.id not in _NAMES and node.id not in ("true", "false", "null"):
            raise FilterError(f"expression: unknown name {node.id!r} (known: {', '.join(_NAMES)})")
    return tree.body


_MISSING = object()


def _eval(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return {"true": True, "false": False, "null": None}.get(node.id, env.get(node.id))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Attribute):
        base = _eval(node.value, env)
        return base.get(node.attr, _MISSING) if isinstance(base, dict) else _MISSING
    if isinstance(node, ast.Subscript):
        base = _eval(node.value, env)
        idx = _eval(node.slice, env)
        try:
            return base[idx]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not v or v is _MISSING
        return -v if isinstance(v, (int, float)) else _MISSING
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_truthy(_eval(v, env)) for v in node.values)
        return any(_truthy(_eval(v, env)) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if left is _MISSING or right is _MISSING or not _compare(op, left, right):
                return False
            left = right
        return True
    raise FilterError(f"expression: {type(node).__name__} is not allowed")


def _truthy(v: Any) -> bool:
    return v is not _MISSING and bool(v)


def _compare(op: ast.cmpop, a: Any, b: Any) -> bool:
    try:
        if isinstance(op, ast.Eq):
            return bool(a == b)
        if isinstance(op, ast.NotEq):
            return bool(a != b)
        if isinstance(op, ast.Lt):
            return bool(a < b)
        if isinstance(op, ast.LtE):
            return bool(a <= b)
        if isinstance(op, ast.Gt):
            return bool(a > b)
        if isinstance(op, ast.GtE):
            return bool(a >= b)
        if isinstance(op, ast.In):
            return a in b if b is not None else False
        if isinstance(op, ast.NotIn):
            return a not in b if b is not None else True
    except TypeError:
        return False
    return False


def _loose(data: bytes | None) -> Any:
    if data is None:
        return None
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(slots=True)
class RecordFilter:
    key: str = ""
    value: str = ""
    header: str = ""
    expression: str = ""
    _expr: ast.expr | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.expression.strip():
            self._expr = compile_expression(self.expression)

    @property
    def active(self) -> bool:
        return bool(self.key or self.value or self.header or self._expr is not None)

    def matches(self, r: ConsumerRecord) -> bool:
        if self.key and (r.key is None or self.key.encode() not in r.key):
            return False
        if self.value and (r.value is None or self.value.encode() not in r.value):
            return False
        if self.header:
            name, sep, want = self.header.partition("=")
            found = False
            for hk, hv in r.headers or []:
                if hk == name and (not sep or (hv is not None and hv == want.encode())):
                    found = True
                    break
            if not found:
                return False
        if self._expr is not None:
            env = {
                "key": _loose(r.key),
                "value": _loose(r.value),
                "offset": r.offset,
                "partition": r.partition,
                "timestamp": r.timestamp,
                "headers": {
                    k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in r.headers or []
                },
            }
            if not _truthy(_eval(self._expr, env)):
                return False
        return True


# ---------------------------------------------------------------------------------------------- browsing
@dataclass(slots=True)
class BrowseRequest:
    topic: str
    partitions: list[int] | None = None  # None: every partition
    mode: str = "newest"
    offset: int = 0
    timestamp_ms: int = 0
    limit: int = 50
    filter: RecordFilter = field(default_factory=RecordFilter)
    scan_limit: int = 10_000
    time_budget: float = 8.0


@dataclass(slots=True)
class BrowseResult:
    records: list[ConsumerRecord]
    scanned: int
    ranges: dict[int, tuple[int, int]]  # partition -> (start offset read from, end offset)
    truncated: bool  # stopped by scan_limit or time_budget before the end


def record_json(r: ConsumerRecord) -> dict[str, Any]:
    key, kb64 = as_text_or_b64(r.key)
    value, vb64 = as_text_or_b64(r.value)
    out: dict[str, Any] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
        "key": key,
        "value": value,
    }
    if kb64:
        out["key_encoding"] = "base64"
    if vb64:
        out["value_encoding"] = "base64"
    hs = []
    for hk, hv in r.headers or []:
        text, b64 = as_text_or_b64(hv)
        hs.append({"key": hk, "value": text, **({"encoding": "base64"} if b64 else {})})
    out["headers"] = hs
    return out


async def browse(
    consumer_conf: dict[str, Any], all_partitions: list[int], req: BrowseRequest
) -> BrowseResult:
    parts = [
        p for p in (req.partitions if req.partitions is not None else all_partitions) if p in all_partitions
    ]
    tps = [TopicPartition(req.topic, p) for p in parts]
    if not tps:
        return BrowseResult([], 0, {}, False)
    c = AsyncConsumer(config=consumer_conf)
    await c.start()
    try:
        starts = await c.beginning_offsets(tps)
        ends = await c.end_offsets(tps)
        begin: dict[TopicPartition, int] = {}
        if req.mode == "earliest":
            begin = dict(starts)
        elif req.mode == "offset":
            begin = {tp: min(max(req.offset, starts[tp]), ends[tp]) for tp in tps}
        elif req.mode == "timestamp":
            found = await c.offsets_for_times({tp: req.timestamp_ms for tp in tps})
            begin = {}
            for tp in tps:
                hit = found.get(tp)
                begin[tp] = hit.offset if hit is not None else ends[tp]
        else:  # newest: the last `limit` records of each partition (more when a filter is set: scan back)
            back = req.limit if not req.filter.active else req.scan_limit
            begin = {tp: max(ends[tp] - max(back, 1), starts[tp]) for tp in tps}
        todo = [tp for tp in tps if begin[tp] < ends[tp]]
        ranges = {tp.partition: (begin[tp], ends[tp]) for tp in tps}
        if not todo:
            return BrowseResult([], 0, ranges, False)
        c.assign(todo)
        for tp in todo:
            c.seek(tp, begin[tp])
        matched: list[ConsumerRecord] = []
        scanned = 0
        pending = set(todo)
        deadline = time.monotonic() + req.time_budget
        newest = req.mode == "newest"
        truncated = False
        while pending:
            if time.monotonic() > deadline or scanned >= req.scan_limit:
                truncated = True
                break
            batch = await c.poll(timeout=0.5)
            for r in batch:
                tp = TopicPartition(r.topic, r.partition)
                if tp not in pending or r.offset >= ends[tp]:
                    continue
                scanned += 1
                if req.filter.matches(r):
                    matched.append(r)
            for tp in list(pending):
                if tp in pending and await c.position(tp) >= ends[tp]:
                    pending.discard(tp)
                    c.pause(tp)
            if not newest and len(matched) >= req.limit:
                truncated = bool(pending)
                break
        if newest:
            matched.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
        elif len(tps) > 1:
            matched.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
        return BrowseResult(matched[: req.limit], scanned, ranges, truncated)
    finally:
        await c.close(autocommit=False)


async def tail(
    consumer_conf: dict[str, Any], topic: str, partitions: list[int], flt: RecordFilter
) -> AsyncGenerator[list[ConsumerRecord] | None, None]:
    """Yields None once positioned at the end of every partition, then batches of new matching records
    (possibly empty, about every second, so the caller can notice a closed client)."""
    tps = [TopicPartition(topic, p) for p in partitions]
    c = AsyncConsumer(config=consumer_conf)
    await c.start()
    try:
        ends = await c.end_offsets(tps)
        c.assign(tps)
        for tp in tps:
            c.seek(tp, ends[tp])
        yield None
        while True:
            batch = await c.poll(timeout=1.0)
            yield [r for r in batch if flt.matches(r)]
    finally:
        await c.close(autocommit=False)
