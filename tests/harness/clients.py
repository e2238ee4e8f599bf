"""Uniform produce/consume adapters over the third-party clients the integration tests use.

Each adapter states what its client (in the chosen mode) can carry, so one record generator and one
comparison serve every client:

* ``headers``: record headers (RecordBatch v2 only)
* ``null_header_values``: headers whose value is null
* ``timestamps``: a create timestamp set by the producer and exposed by the consumer
* ``null_values`` / ``null_keys`` / ``empty_keys``: tombstones, missing keys, empty keys
* ``groups``: the consumer can use group membership (subscribe) instead of assign()

Records are plain :class:`Spec` values; consumers return :class:`kafkautil.Rec`.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time
import uuid
from dataclasses import dataclass, field

from harness.kafkautil import DEFAULT_TIMEOUT, Rec


@dataclass(slots=True)
class Spec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


@dataclass(slots=True, frozen=True)
class Caps:
    headers: bool = True
    null_header_values: bool = True
    timestamps: bool = True
    null_values: bool = True
    null_keys: bool = True
    empty_keys: bool = True
    empty_values: bool = True
    binary: bool = True  # arbitrary bytes incl. \n, delimiters
    per_record_headers: bool = True
    groups: bool = True


# ----------------------------------------------------------------------------------------------------
# record generation and comparison


def make_records(partitions: int, per_partition: int, caps: Caps, seed: int = 1) -> list[Spec]:
    """Records with awkward keys/values/headers, interleaved over partitions (round robin)."""
    rnd = random.Random(seed)
    now = int(time.time() * 1000)
    base_ts = now - 60_000  # a minute ago: recent enough for any retention/timestamp checks

    def blob(n: int, forbid: bytes = b"") -> bytes:
        out = bytes(rnd.getrandbits(8) for _ in range(n))
        if not caps.binary:
            forbid = forbid + b"\n"
        for ch in forbid:
            out = out.replace(bytes([ch]), b"x")
        return out

    specs: list[Spec] = []
    total = partitions * per_partition
    for i in range(total):
        p = i % partitions
        j = i // partitions
        kind = j % 8
        key: bytes | None = b"key-%d-%d" % (p, j)
        value: bytes | None = b"value-%d-%d-" % (p, j) + blob(rnd.randint(0, 40), b":")
        if kind == 1 and caps.null_keys:
            key = None
        elif kind == 2 and caps.null_values:
            value = None
        elif kind == 3 and caps.empty_keys:
            key = b""
        elif kind == 4 and caps.empty_values:
            value = b""
        elif kind == 5:
            key = blob(16, b":") or b"k"
            if not caps.binary:
                key = key.replace(b"\x00", b"z")  # keep kcat keys printable-ish but still high bytes
        elif kind == 6:
            value = b"big-" + blob(70_000 if caps.binary else 5_000)
        elif kind == 7:
            value = (b"\x00\xff\r\n" if caps.binary else b"\x00\xff\r") + blob(10)
        headers: list[tuple[str, bytes | None]] = []
        if caps.headers and caps.per_record_headers:
            headers = [("h", b"%d" % i)]
            if kind in (0, 5):
                headers += [("dup", b"a"), ("dup", b"b"), ("empty", b""), ("bin", blob(8))]
            if kind == 6 and caps.null_header_values:
                headers.append(("null", None))
            if kind == 7:
                headers.append(("\u00fcnicode-\u00e9", "\u2713".encode()))
        ts = base_ts + i * 7 if caps.timestamps else None
        specs.append(Spec(p, key, value, headers, ts))
    return specs


def assert_same(written: list[Spec], read: list[Rec], *, check_headers: bool, check_timestamps: bool) -> None:
    """Per partition, the records read are exactly the ones written, in order, at offsets 0..n-1."""
    exp: dict[int, list[Spec]] = {}
    for s in written:
        exp.setdefault(s.partition, []).append(s)
    got: dict[int, list[Rec]] = {}
    for r in read:
        got.setdefault(r.partition, []).append(r)
    for lst in got.values():
        lst.sort(key=lambda r: r.offset)
    assert sorted(got) == sorted(exp), f"partitions read {sorted(got)} != written {sorted(exp)}"
    for p, specs in exp.items():
        recs = got[p]
        assert [r.offset for r in recs] == list(range(len(specs))), (
            f"partition {p}: offsets {[r.offset for r in recs][:30]} not 0..{len(specs) - 1}"
        )
        for s, r in zip(specs, recs):
            where = f"partition {p} offset {r.offset}"
            assert r.key == s.key, f"{where}: key {r.key!r} != {s.key!r}"
            assert r.value == s.value, f"{where}: value {_short(r.value)} != {_short(s.value)}"
            if check_headers:
                assert list(r.headers) == list(s.headers), f"{where}: headers {r.headers!r} != {s.headers!r}"
            if check_timestamps and s.timestamp is not None:
                assert r.timestamp == s.timestamp, f"{where}: timestamp {r.timestamp} != {s.timestamp}"


def _short(v: bytes | None) -> str:
    if v is None:
        return "None"
    return repr(v[:40]) + (f"...({len(v)} bytes)" if len(v) > 40 else "")


# ----------------------------------------------------------------------------------------------------
# adapters


class Client:
    name = "?"
    caps = Caps()

    def produce(self, bootstrap: str, topic: str, specs: list[Spec], compression: str | None = None) -> None:
        raise NotImplementedError

    def consume(
        self, bootstrap: str, topic: str, partitions: int, expected: int, *, group: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> list[Rec]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class Confluent(Client):
    name = "confluent-kafka"
    caps = Caps()

    def __init__(self, **conf: object) -> None:
        self.conf = conf

    def produce(self, bootstrap, topic, specs, compression=None):
        from harness.kafkautil import produce_confluent

        conf: dict = {"acks": "all", **self.conf}
        if compression:
            conf["compression.type"] = compression
        produce_confluent(
            bootstrap, topic,
            (
                dict(partition=s.partition, key=s.key, value=s.value, headers=s.headers or None,
                     **({"timestamp": s.timestamp} if s.timestamp is not None else {}))
                for s in specs
            ),
            conf=conf,
        )

    def consume(self, bootstrap, topic, partitions, expected, *, group=True, timeout=DEFAULT_TIMEOUT):
        from confluent_kafka import Consumer, KafkaException

        from harness.kafkautil import consume_confluent

        if not group:
            return consume_confluent(bootstrap, topic, partitions, expected, timeout=timeout)
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "g-" + uuid.uuid4().hex[:10],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            # some brokers hold a new group's first JoinGroup for ~session.timeout.ms/2 (tansu does);
            # the prompt-join behaviour is tested on its own in test_group_join_is_prompt
            "session.timeout.ms": 6000,
        })
        out: list[Rec] = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for m in c.consume(num_messages=1000, timeout=0.5):
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    out.append(Rec(m.partition(), m.offset(), m.key(), m.value(),
                                   list(m.headers() or []), m.timestamp()[1]))
            assert len(out) == expected, f"{self.name}: read {len(out)} of {expected}"
            c.commit(asynchronous=False)
            assert c.assignment(), "group consumer had no assignment"
            return out
        finally:
            c.close()


class KafkaPython(Client):
    """kafka-python; ``api_version`` pins an old protocol (and so an old message format)."""

    def __init__(self, api_version: tuple[int, ...] | None = None) -> None:
        self.api_version = api_version
        self.name = "kafka-python" + ("" if api_version is None else "-" + ".".join(map(str, api_version)))
        magic = 2 if api_version is None or api_version >= (0, 11) else (1 if api_version >= (0, 10) else 0)
        self.magic = magic
        self.caps = Caps(
            headers=magic >= 2,
            null_header_values=False,  # KafkaProducer.send() accepts only (str, bytes) headers
            timestamps=magic >= 1,
            groups=api_version is None or api_version >= (0, 9),
        )

    def _common(self, bootstrap: str) -> dict:
        kw: dict = {"bootstrap_servers": bootstrap, "request_timeout_ms": 15000}
        if self.api_version is not None:
            kw["api_version"] = self.api_version
        return kw

    def produce(self, bootstrap, topic, specs, compression=None):
        from kafka import KafkaProducer

        kw = self._common(bootstrap)
        kw.update(linger_ms=5, max_block_ms=15000)
        if self.api_version is not None and self.api_version < (0, 11):
            kw.update(enable_idempotence=False, acks=1)
        if compression:
            kw["compression_type"] = compression
        p = KafkaProducer(**kw)
        try:
            futures = []
            for s in specs:
                extra: dict = {}
                if self.caps.headers and s.headers:
                    extra["headers"] = s.headers
                if self.caps.timestamps and s.timestamp is not None:
                    extra["timestamp_ms"] = s.timestamp
                futures.append(p.send(topic, value=s.value, key=s.key, partition=s.partition, **extra))
            p.flush(timeout=DEFAULT_TIMEOUT)
            for f in futures:
                md = f.get(timeout=DEFAULT_TIMEOUT)
                assert md.offset >= 0
        finally:
            p.close(timeout=5)

    def consume(self, bootstrap, topic, partitions, expected, *, group=True, timeout=DEFAULT_TIMEOUT):
        from kafka import KafkaConsumer, TopicPartition

        group = group and self.caps.groups
        kw = self._common(bootstrap)
        kw.update(
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=("g-" + uuid.uuid4().hex[:10]) if group else None,
            fetch_max_wait_ms=200,
        )
        if group:
            # see Confluent.consume: keep a slow first JoinGroup (half the session timeout) short
            kw.update(session_timeout_ms=6000, heartbeat_interval_ms=2000)
        c = KafkaConsumer(**kw)
        out: list[Rec] = []
        try:
            if group:
                c.subscribe([topic])
            else:
                tps = [TopicPartition(topic, p) for p in range(partitions)]
                c.assign(tps)
                c.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for tp, msgs in c.poll(timeout_ms=300, max_records=2000).items():
                    for m in msgs:
                        ts = m.timestamp if (m.timestamp is not None and m.timestamp >= 0) else None
                        out.append(Rec(m.partition, m.offset, m.key, m.value, list(m.headers or []), ts))
            assert len(out) == expected, f"{self.name}: read {len(out)} of {expected}"
            if group:
                c.commit()
            return out
        finally:
            c.close(autocommit=False)


class AioKafka(Client):
    name = "aiokafka"
    caps = Caps()

    def __init__(self, **producer_kw: object) -> None:
        self.producer_kw = producer_kw

    def produce(self, bootstrap, topic, specs, compression=None):
        asyncio.run(self._produce(bootstrap, topic, specs, compression))

    async def _produce(self, bootstrap, topic, specs, compression):
        from aiokafka import AIOKafkaProducer

        kw: dict = {"bootstrap_servers": bootstrap, "linger_ms": 5, "acks": "all",
                    "request_timeout_ms": 15000, **self.producer_kw}
        if compression:
            kw["compression_type"] = compression
        p = AIOKafkaProducer(**kw)
        await p.start()
        try:
            futs = []
            for s in specs:
                futs.append(await p.send(
                    topic, value=s.value, key=s.key, partition=s.partition,
                    timestamp_ms=s.timestamp, headers=s.headers or None,
                ))
            results = await asyncio.wait_for(asyncio.gather(*futs), DEFAULT_TIMEOUT)
            assert all(md.offset >= 0 for md in results)
        finally:
            await p.stop()

    def consume(self, bootstrap, topic, partitions, expected, *, group=True, timeout=DEFAULT_TIMEOUT):
        return asyncio.run(self._consume(bootstrap, topic, partitions, expected, group, timeout))

    async def _consume(self, bootstrap, topic, partitions, expected, group, timeout):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=("g-" + uuid.uuid4().hex[:10]) if group else None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=200,
            request_timeout_ms=15000,
            session_timeout_ms=6000,
            heartbeat_interval_ms=2000,
        )
        await c.start()
        out: list[Rec] = []
        try:
            if group:
                c.subscribe([topic])
            else:
                tps = [TopicPartition(topic, p) for p in range(partitions)]
                c.assign(tps)
                await c.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=300, max_records=2000)
                for tp, msgs in batches.items():
                    for m in msgs:
                        out.append(Rec(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                       m.timestamp))
            assert len(out) == expected, f"{self.name}: read {len(out)} of {expected}"
            if group:
                await c.commit()
            return out
        finally:
            await c.stop()


KCAT_HEADERS: list[tuple[str, bytes | None]] = [
    ("h1", b"v1"), ("dup", b"a"), ("dup", b"b"), ("empty", b""), ("nullh", None),
]


class Kcat(Client):
    """kcat as a subprocess. -K: keys, -Z nulls, -H headers (same for every record of one run)."""

    name = "kcat"
    # -Z maps an empty key/value to NULL, so kcat can write no empty keys/values; lines end at \n and
    # keys at the first ':'; headers come from -H, identical for all records of one invocation;
    # the producer cannot set timestamps (they are read back with %T).
    caps = Caps(empty_keys=False, empty_values=False, binary=False, per_record_headers=False,
                timestamps=False, null_header_values=True)
    FORMAT = "%p|%o|%T|%K|%S|%k%s|%h\\n"

    def __init__(self, path: str = "kcat", extra: list[str] | None = None) -> None:
        self.path = path
        self.extra = list(extra or [])

    def _base(self, bootstrap: str) -> list[str]:
        return [self.path, "-b", bootstrap, "-m", "15", *self.extra]

    def headers_for(self, specs: list[Spec]) -> list[Spec]:
        """kcat adds the same -H headers to every record: reflect that in the specs."""
        return [Spec(s.partition, s.key, s.value, list(KCAT_HEADERS), None) for s in specs]

    def produce(self, bootstrap, topic, specs, compression=None):
        by_p: dict[int, list[Spec]] = {}
        for s in specs:
            by_p.setdefault(s.partition, []).append(s)
        for p, recs in by_p.items():
            lines = []
            for s in recs:
                assert s.value is None or (b"\n" not in s.value and s.value != b""), s.value
                assert s.key is None or (s.key and b":" not in s.key and b"\n" not in s.key), s.key
                if s.key is None:
                    # empty key before the first ':' -> NULL key with -Z (values may contain ':');
                    # a NULL value with a NULL key is written as ':' (both empty -> NULL)
                    line = b":" if s.value is None else (b":" + s.value)
                else:
                    line = s.key + b":" + (s.value or b"")
                lines.append(line)
            cmd = self._base(bootstrap) + ["-P", "-t", topic, "-p", str(p), "-K:", "-Z"]
            for hk, hv in KCAT_HEADERS:
                cmd += ["-H", hk if hv is None else f"{hk}={hv.decode()}"]
            if compression:
                cmd += ["-X", f"compression.codec={compression}"]
            run(cmd, input=b"\n".join(lines) + b"\n")

    def consume(self, bootstrap, topic, partitions, expected, *, group=False, timeout=DEFAULT_TIMEOUT):
        # no -Z here: with it kcat prints NULL keys/values as the text "NULL"; %K/%S say -1 instead
        cmd = self._base(bootstrap) + ["-C", "-t", topic, "-o", "beginning", "-e", "-f", self.FORMAT]
        out = run(cmd, timeout=timeout).stdout
        recs = parse_kcat(out)
        assert len(recs) == expected, f"kcat read {len(recs)} of {expected}"
        return recs


def parse_kcat(out: bytes) -> list[Rec]:
    """Parse Kcat.FORMAT output: lengths first, so binary keys/values are taken exactly."""
    recs: list[Rec] = []
    pos = 0
    while pos < len(out):
        fields = []
        for _ in range(5):
            bar = out.index(b"|", pos)
            fields.append(out[pos:bar])
            pos = bar + 1
        p, o, ts, klen, vlen = (int(f) for f in fields)
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        assert out[pos : pos + 1] == b"|", (
            f"kcat output not in the expected format at {pos}: {out[pos - 20 : pos + 20]!r}"
        )
        nl = out.index(b"\n", pos)
        hdr_text = out[pos + 1:nl].decode("utf-8", "replace")
        pos = nl + 1
        # headers: kcat's %h text kept raw under the pseudo name "%h" (checked by the kcat tests)
        recs.append(Rec(p, o, key, value, [("%h", hdr_text.encode())], ts if ts >= 0 else None))
    return recs


def run(cmd: list[str], input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    proc = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise AssertionError(
            f"{cmd[0]} failed (rc={proc.returncode}): {' '.join(cmd)}\n"
            f"stderr:\n{proc.stderr.decode(errors='replace')[-3000:]}"
        )
    return proc
