"""Structure-aware request generation from moldau's message declarations (``moldau.protocol.messages``,
held against Kafka's JSON definitions by the protocol tests).

The generator walks a request's declared fields for one version and writes the bytes itself (it does not go
through moldau's encoder), so it can write what no encoder would: negative or huge array and string
lengths, strings that are not UTF-8, nulls where the schema has no null, junk in tagged-field sections,
booleans other than 0 and 1, header versions that do not go with the API version, truncated bodies.

Each value is *sane* (plausible for the field: a topic of the fuzz pool, a small partition index, a short
timeout, a valid record batch) or, with probability ``hostility``, *hostile* (the edge cases above). A
request drawn with ``hostility=0`` is a valid request, the base of the byte-mutation fuzzer.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

from moldau.protocol import messages as m
from moldau.protocol.records import build_batch
from moldau.protocol.schema import Field, Message

__all__ = ["Generator", "NamePool", "request_fields", "uvarint"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1), "uint32": (0, (1 << 32) - 1),
}
_PACK = {"int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64, "uint16": _U16, "uint32": _U32}

# Names the broker must refuse or treat with care; every one is a legal string on the wire.
HOSTILE_NAMES: tuple[str, ...] = (
    "", ".", "..", "/", "../x", "../../etc", "a/b", "a\\b", "__consumer_offsets", "__transaction_state",
    "__cluster_metadata", "x" * 249, "y" * 250, "z" * 256, "w" * 4000, "nul\x00name", " ", "tab\tname",
    "new\nline", "\u00e4\u00f6\u00fc", "\U0001f600", "CON", "-", "_", "a" * 255 + "-0", "fuzz-0-delete",
    "*", "?", "%2e%2e", "\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
)
# Byte strings that are not UTF-8 (written where a string is declared).
INVALID_UTF8: tuple[bytes, ...] = (b"\xff", b"\xc3\x28", b"a\xed\xa0\x80b", b"\xf8\x88\x80\x80\x80",
                                   b"\x80" * 7)
HOSTILE_INTS = (0, 1, -1, -2, 2, 127, 128, 255, 256, 32767, -32768, 65535, 65536, (1 << 31) - 1, -(1 << 31),
                (1 << 63) - 1, -(1 << 63), 1 << 32, 10_000, 10_001, 9_568_257)


class NamePool:
    """The names a sane value is drawn from: topics, groups, transactional ids, config keys. The fuzzer's
    janitor deletes every topic outside :attr:`topics` (and the internal ones) from time to time, so the
    broker holds a bounded number of topics however long the run."""

    def __init__(self, prefix: str = "fuzz") -> None:
        self.topics = [f"{prefix}-{i}" for i in range(6)]
        self.groups = [f"{prefix}-g{i}" for i in range(4)]
        self.txn_ids = [f"{prefix}-t{i}" for i in range(3)]
        self.topic_configs = ["cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes",
                              "min.insync.replicas", "compression.type", "message.timestamp.type",
                              "unclean.leader.election.enable", "no.such.config"]
        self.config_values = ["delete", "compact", "1", "0", "-1", "1048576", "gzip", "CreateTime", "true",
                              "x", ""]


def uvarint(n: int) -> bytes:
    """Unsigned varint of ``n`` (values beyond 64 bits keep going: the reader must bound them)."""
    out = bytearray()
    n &= (1 << 70) - 1
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def request_fields(msg: Message, version: int) -> list[Field]:
    return [f for f in msg.fields if f.present(version)]


def _contains(name: str, *parts: str) -> bool:
    low = name.lower()
    return any(p in low for p in parts)


class Generator:
    """Draws request frames for one (api key, version) at a time from a seeded ``random.Random``."""

    def __init__(self, rng: random.Random, names: NamePool | None = None, hostility: float = 0.05,
                 max_depth_items: int = 3) -> None:
        self.rng = rng
        self.names = names or NamePool()
        self.hostility = hostility
        self.max_items = max_depth_items
        self._budget = 0
        self.client_id = "fuzz"
        self._records_cache: list[bytes] = []

    # ------------------------------------------------------------------------------------------ frames
    def frame(self, api_key: int, version: int, correlation_id: int) -> bytes:
        """A size-prefixed request frame (header + body)."""
        body = self.request_bytes(api_key, version, correlation_id)
        return _I32.pack(len(body)) + body

    def request_bytes(self, api_key: int, version: int, correlation_id: int) -> bytes:
        msg = m.REQUESTS[api_key]
        self._budget = 1 << 16  # bytes of generated values per request (bounds "deep nesting")
        out = bytearray()
        out += self.header(api_key, version, correlation_id, msg)
        self.struct(out, msg.fields, version, msg.is_flexible(version), depth=0)
        if self.hostile(0.2):
            out = self.frame_damage(out)
        return bytes(out)

    def header(self, api_key: int, version: int, correlation_id: int, msg: Message) -> bytes:
        hv = msg.header_version(version)
        if self.hostile(0.5):
            hv = self.rng.choice((0, 1, 2))  # a header version that may not go with the API version
        out = bytearray(_I16.pack(api_key) + _I16.pack(version) + _I32.pack(correlation_id))
        if hv >= 1:
            if self.hostile(0.5):
                self.hostile_string(out, compact=False, nullable=True)
            else:
                cid = self.client_id.encode()
                out += _I16.pack(len(cid)) + cid
        if hv >= 2:
            self.tags(out, [], version, depth=0)
        return bytes(out)

    def frame_damage(self, body: bytearray) -> bytearray:
        """Whole-body damage: cut short, trailing junk, or a byte count that says more than there is."""
        r = self.rng.random()
        if r < 0.5 and len(body) > 8:
            return body[:self.rng.randrange(8, len(body))]
        if r < 0.8:
            return body + self.rng.randbytes(self.rng.randrange(1, 64))
        return body[:8]

    def hostile(self, scale: float = 1.0) -> bool:
        return self.hostility > 0 and self.rng.random() < self.hostility * scale

    # ------------------------------------------------------------------------------------------ structs
    def struct(self, out: bytearray, fields: list[Field], version: int, flexible: bool, depth: int) -> None:
        for f in fields:
            if not f.present(version) or (flexible and f.is_tagged(version)):
                continue
            self.field(out, f, version, flexible, depth)
        if flexible:
            self.tags(out, [f for f in fields if f.present(version) and f.is_tagged(version)], version, depth)

    def tags(self, out: bytearray, tagged: list[Field], version: int, depth: int) -> None:
        """A tagged-field section: the declared tagged fields (some of them, in order) or junk."""
        if self.hostile(0.5):
            kind = self.rng.randrange(5)
            if kind == 0:  # a count far beyond the input
                out += uvarint(self.rng.choice((1 << 31, 1 << 62, 0x7FFFFFFF, 1000)))
            elif kind == 1:  # unknown tags with junk values, maybe out of order or repeated
                n = self.rng.randrange(1, 4)
                out += uvarint(n)
                for _ in range(n):
                    data = self.rng.randbytes(self.rng.randrange(0, 16))
                    tag = self.rng.choice((0, 1, 5, 100, 1 << 20, 1 << 35))
                    out += uvarint(tag) + uvarint(len(data)) + data
            elif kind == 2:  # a size beyond the input
                out += uvarint(1) + uvarint(self.rng.randrange(0, 100)) + uvarint(1 << 30)
            elif kind == 3:  # a varint that never ends
                out += b"\xff" * self.rng.randrange(5, 12)
            else:  # a known tag whose value is junk
                if tagged:
                    f = self.rng.choice(tagged)
                    data = self.rng.randbytes(self.rng.randrange(0, 8))
                    out += uvarint(1) + uvarint(f.tag or 0) + uvarint(len(data)) + data
                else:
                    out += b"\x00"
            return
        chosen = [f for f in tagged if self.rng.random() < 0.5]
        out += uvarint(len(chosen))
        for f in sorted(chosen, key=lambda x: x.tag or 0):
            val = bytearray()
            self.field(val, f, version, True, depth + 1)
            out += uvarint(f.tag or 0) + uvarint(len(val)) + val

    def field(self, out: bytearray, f: Field, version: int, flexible: bool, depth: int) -> None:
        compact = flexible if f.flexible_spec is None else f.flexible is not None and \
            f.flexible[0] <= version <= f.flexible[1]
        nullable = f.is_nullable(version)
        if f.is_array:
            self.array(out, f, version, flexible, compact, nullable, depth)
        elif f.struct_name is not None:
            if nullable:
                if self.rng.random() < 0.1 or self.hostile():
                    out += _I8.pack(-1)
                    return
                out += _I8.pack(1)
            assert f.fields is not None
            self.struct(out, f.fields, version, flexible, depth + 1)
        else:
            self.value(out, f.elem, f.name, compact, nullable)

    def array(self, out: bytearray, f: Field, version: int, flexible: bool, compact: bool, nullable: bool,
              depth: int) -> None:
        if self.hostile():
            kind = self.rng.randrange(4)
            if kind == 0:  # null (also where the schema has none), or a negative length
                self.length(out, self.rng.choice((-1, -2, -(1 << 31))), compact, wide=True)
                return
            if kind == 1:  # a count far beyond what follows
                self.length(out, self.rng.choice(((1 << 31) - 2, 1000, 65536, 1 << 24)), compact, wide=True)
                return
            if kind == 2 and self._budget > 0:  # many items ("deep" and wide nesting), within the budget
                n = self.rng.randrange(10, 200)
            else:
                n = 0
        elif nullable and self.rng.random() < 0.1:
            self.length(out, -1, compact, wide=True)
            return
        else:
            n = self.rng.randrange(0, self.max_items + 1) if depth < 4 else self.rng.randrange(0, 2)
            if depth == 0 and n == 0 and self.rng.random() < 0.7:
                n = 1  # top-level arrays mostly carry something
        self.length(out, n, compact, wide=True)
        for _ in range(n):
            if self._budget <= 0:
                break  # the count says more than follows: truncated
            start = len(out)
            if f.struct_name is not None:
                assert f.fields is not None
                self.struct(out, f.fields, version, flexible, depth + 1)
            else:
                self.value(out, f.elem, f.name, compact, False)
            self._budget -= len(out) - start

    def length(self, out: bytearray, n: int, compact: bool, wide: bool) -> None:
        if compact:
            out += uvarint(n + 1 if n >= -1 else (n & 0xFFFFFFFF))
        elif wide:
            out += _I32.pack(max(min(n, (1 << 31) - 1), -(1 << 31)))
        else:
            out += _I16.pack(max(min(n, (1 << 15) - 1), -(1 << 15)))

    # ------------------------------------------------------------------------------------------ values
    def value(self, out: bytearray, typ: str, name: str, compact: bool, nullable: bool) -> None:
        if typ in _PACK:
            lo, hi = INT_RANGES[typ]
            if self.hostile():
                v = self.rng.choice(HOSTILE_INTS) if self.rng.random() < 0.7 else self.rng.randint(lo, hi)
                v = min(max(v, lo), hi)
            else:
                v = min(max(self.sane_int(name), lo), hi)
            out += _PACK[typ].pack(v)
        elif typ == "bool":
            flag = self.rng.choice((2, 0x7F, 0x80, 0xFF)) if self.hostile() else self.rng.randrange(2)
            out += bytes((flag,))
        elif typ == "float64":
            out += _F64.pack(self.rng.choice((float("nan"), float("inf"), -0.0, 1e308)) if self.hostile()
                             else self.rng.random())
        elif typ == "uuid":
            out += self.rng.randbytes(16) if self.rng.random() < 0.3 else bytes(16)
        elif typ == "string":
            if self.hostile():
                self.hostile_string(out, compact, nullable)
            elif nullable and self.rng.random() < 0.15:
                self.length(out, -1, compact, wide=False)
            else:
                b = self.sane_string(name).encode("utf-8", "surrogatepass")
                self.length(out, len(b), compact, wide=False)
                out += b
        elif typ == "bytes":
            if self.hostile():
                self.hostile_bytes(out, compact)
            elif nullable and self.rng.random() < 0.15:
                self.length(out, -1, compact, wide=True)
            else:
                b = self.sane_bytes(name)
                self.length(out, len(b), compact, wide=True)
                out += b
        elif typ == "records":
            if self.hostile():
                self.hostile_bytes(out, compact, records=True)
            elif nullable and self.rng.random() < 0.1:
                self.length(out, -1, compact, wide=True)
            else:
                b = self.records()
                self.length(out, len(b), compact, wide=True)
                out += b
        else:  # pragma: no cover - every declared primitive is handled above
            raise ValueError(f"unknown type {typ}")

    def sane_int(self, name: str) -> int:
        r = self.rng
        checks: list[tuple[tuple[str, ...], Callable[[], int]]] = [
            (("numpartitions",), lambda: r.choice((-1, 1, 2, 3))),
            (("replicationfactor",), lambda: r.choice((-1, 1))),
            (("timeout", "maxwait", "waitms", "interval", "delay"), lambda: r.randrange(0, 200)),
            (("partition",), lambda: r.choice((0, 0, 1, 2, -1))),
            (("acks",), lambda: r.choice((-1, 0, 1))),
            (("bytes",), lambda: r.choice((0, 1, 1024, 1 << 20))),
            (("epoch",), lambda: r.choice((-1, 0, 1))),
            (("producerid", "memberepoch"), lambda: r.choice((-1, 0, 1, 1000))),
            (("offset", "timestamp"), lambda: r.choice((-2, -1, 0, 1, 5, 1 << 40))),
            (("brokerid", "nodeid", "replicaid", "leader", "replicas"), lambda: r.choice((-1, 0, 1))),
            (("iterations",), lambda: r.choice((4096, 8192))),
            (("count",), lambda: r.randrange(1, 8)),
            (("type", "operation", "permission", "resource", "pattern", "level", "isolation", "mechanism"),
             lambda: r.randrange(-1, 8)),
        ]
        for parts, fn in checks:
            if _contains(name, *parts):
                return fn()
        return r.choice((0, 0, 1, 2, 3, -1))

    def sane_string(self, name: str) -> str:
        r, n = self.rng, self.names
        if _contains(name, "topic") or name in ("Name", "Topic", "ResourceName"):
            return r.choice(n.topics) if r.random() < 0.9 else f"fuzz-auto-{r.randrange(3)}"
        if _contains(name, "group"):
            return r.choice(n.groups)
        if _contains(name, "transactionalid"):
            return r.choice(n.txn_ids)
        if _contains(name, "configname", "key") or name == "Name":
            return r.choice(n.topic_configs)
        if _contains(name, "value"):
            return r.choice(n.config_values)
        if _contains(name, "protocoltype"):
            return "consumer"
        if _contains(name, "mechanism"):
            return r.choice(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"))
        if _contains(name, "principal"):
            return r.choice(("User:fuzz", "User:*", "User:"))
        if _contains(name, "host"):
            return r.choice(("*", "127.0.0.1"))
        if _contains(name, "memberid", "instanceid"):
            return r.choice(("", "fuzz-member"))
        if _contains(name, "dir", "path"):
            return r.choice(("", "/", "/tmp", "..", "data"))
        return r.choice(("", "fuzz", "range", "consumer", "x" * r.randrange(1, 40)))

    def sane_bytes(self, name: str) -> bytes:
        if _contains(name, "authbytes"):
            return b"\x00fuzz\x00fuzz-secret"
        return self.rng.randbytes(self.rng.randrange(0, 24))

    def records(self) -> bytes:
        if len(self._records_cache) < 16:
            r = self.rng
            magic = r.choice((2, 2, 2, 1, 0))
            recs = [(1_700_000_000_000 + i, None if r.random() < 0.5 else b"k%d" % i,
                     r.randbytes(r.randrange(0, 64)))
                    for i in range(r.randrange(1, 5))]
            b = build_batch(recs, magic=magic, compression=r.choice((0, 0, 1, 2, 3, 4)) if magic == 2
                            else r.choice((0, 1)))
            self._records_cache.append(b)
            return b
        return self.rng.choice(self._records_cache)

    def hostile_string(self, out: bytearray, compact: bool, nullable: bool) -> None:
        r = self.rng
        kind = r.randrange(6)
        if kind == 0:
            b = r.choice(HOSTILE_NAMES).encode("utf-8", "surrogatepass")
        elif kind == 1:
            b = r.choice(INVALID_UTF8)
        elif kind == 2:  # null, also where the schema has no null
            self.length(out, -1, compact, wide=False)
            return
        elif kind == 3:  # a negative or over-long length
            self.length(out, r.choice((-2, -32768, 32767, 1 << 20)), compact, wide=False)
            out += b"abc"
            return
        elif kind == 4:
            b = bytes(r.randrange(1, 256) for _ in range(r.randrange(1, 30)))
        else:
            b = ("v" * r.choice((249, 250, 1000, 32767))).encode()
        self.length(out, len(b), compact, wide=False)
        out += b

    def hostile_bytes(self, out: bytearray, compact: bool, records: bool = False) -> None:
        r = self.rng
        kind = r.randrange(5)
        if kind == 0:
            self.length(out, r.choice((-1, -2, -(1 << 31))), compact, wide=True)
        elif kind == 1:
            self.length(out, r.choice((1 << 30, (1 << 31) - 1, 100)), compact, wide=True)
            out += r.randbytes(r.randrange(0, 20))
        elif kind == 2 and records:  # a real batch with one byte changed, cut, or its count raised
            b = bytearray(self.records())
            op = r.randrange(3)
            if op == 0:
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
            elif op == 1:
                b = b[:r.randrange(len(b))]
            elif len(b) >= 61:
                b[57:61] = _I32.pack(r.choice((0, -1, 1 << 30, 0x7FFFFFFF)))  # v2 record count
            self.length(out, len(b), compact, wide=True)
            out += b
        else:
            b = bytearray(r.randbytes(r.randrange(0, 200)))
            self.length(out, len(b), compact, wide=True)
            out += b

    # ------------------------------------------------------------------------------------------ helpers
    def valid(self) -> "Generator":
        """A generator of valid requests (no hostile values) sharing this one's random state and names."""
        g = Generator(self.rng, self.names, hostility=0.0, max_depth_items=self.max_items)
        g._records_cache = self._records_cache
        return g
