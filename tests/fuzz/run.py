"""The fuzz loop: several connections at once, each sending one request and waiting for its answer (or the
broker closing the connection), with per-(api key, version) counts and the findings: a response that does
not decode or carries the wrong correlation id, a connection closed on a valid request, no answer within
the deadline, and a broker that stops answering a fresh connection.

Sources of frames:

* ``structure``: :class:`gen.Generator` over every advertised (api key, version), round robin;
* ``mutation``: a valid request of every (api key, version) in turn, byte-mutated (:func:`mutate.mutate`);
* ``legacy``: Kafka 0.7 requests (structure-aware and mutated) on the KAFKA07 listener.

Creation bound: by default a frame that decodes as a CreateTopics or CreatePartitions making more than
``FuzzBroker.max_partitions`` (64) partitions is not sent (counted as ``guarded``), so that a run's time goes
to fuzzing rather than to making directories. With ``FuzzBroker(guarded=False)`` (``--unguarded``) every
frame is sent and the broker's own bounds are held instead: a CreateTopics asking for more than 10,000
partitions in all (counted as Kafka's ``validateTotalNumberOfPartitions``) must have no topic answered with
error 0 (a finding ``beyond-bound`` otherwise; counted as ``over_cap``), and after the run no topic may have
more than ``max.topic.partitions`` nor the broker more than ``max.broker.partitions``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol import frame as _frame
from moldau.protocol import kafka07 as k07
from moldau.protocol import messages as m
from moldau.protocol.sasl_mechanisms import plain_message

from .gen import HOSTILE_NAMES, INVALID_UTF8, Generator, NamePool
from .harness import SASL_PASSWORD, SASL_USER, FuzzBroker
from .mutate import mutate

log = logging.getLogger(__name__)

STOP = threading.Event()  # set (SIGTERM to ``python -m tests.fuzz``): the runs end, the checks still run

_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")
PRODUCE, CREATE_TOPICS, CREATE_PARTITIONS, API_VERSIONS = 0, 19, 37, 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# The broker answers, then closes the connection (SaslHandshake where SASL is not enabled or after a failed
# exchange, SaslAuthenticate that failed, after connection.failed.authentication.delay.ms): a fresh one next.
CLOSE_AFTER_ANSWER = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})
_PROBE_CORRELATION_ID = 0x7FFF0000
_PROBE = _frame.encode_request(API_VERSIONS, 0, _PROBE_CORRELATION_ID, "fuzz", m.ApiVersionsRequest.new())
# Requests that may legitimately wait longer than the deadline: a long poll (Fetch), a rebalance (JoinGroup,
# SyncGroup) whose timeouts a request sets itself.
MAY_WAIT = frozenset({1, 11, 14, 78})  # Fetch, JoinGroup, SyncGroup, ShareFetch: long polls
# A CreateTopics / CreatePartitions with timeout_ms > 0 is answered once its partitions exist (Kafka's
# DelayedCreatePartitions), after those of the creations before it: its answer is awaited for its timeout (at
# most CREATION_WAIT_MAX_S) plus the deadline; beyond that only one asking for more partitions than the broker
# makes in that time (about 200 a second on a loaded 2-core machine, docs/limits.md) may still wait.
CREATION_RATE_FLOOR = 200
CREATION_WAIT_MAX_S = 120.0


@dataclass
class Finding:
    kind: str
    api_key: int
    version: int
    detail: str
    frame: bytes

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "api_key": self.api_key, "version": self.version, "detail": self.detail,
                "frame": self.frame[:512].hex()}


@dataclass
class Stats:
    sent: int = 0
    answered: int = 0
    closed: int = 0
    waited: int = 0          # no answer within the deadline on a request that may wait (MAY_WAIT)
    guarded: int = 0
    over_cap: int = 0        # CreateTopics beyond 10,000 partitions sent (unguarded runs): each refused whole
    created_max: int = 0     # the most partitions a CreateTopics answered without error asked for
    connections: int = 0
    per_pair: collections.Counter[tuple[int, int]] = field(default_factory=collections.Counter)
    closed_per_key: collections.Counter[int] = field(default_factory=collections.Counter)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    pings: list[float] = field(default_factory=list)

    def add_finding(self, f: Finding, limit: int = 200) -> None:
        if len(self.findings) < limit:
            self.findings.append(f)
        log.warning("finding: %s %d v%d: %s", f.kind, f.api_key, f.version, f.detail)

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "answered": self.answered, "closed": self.closed, "waited": self.waited,
                "guarded": self.guarded, "over_cap": self.over_cap, "created_max": self.created_max,
                "connections": self.connections, "seconds": round(self.seconds, 1),
                "requests_per_s": round(self.sent / self.seconds, 1) if self.seconds else 0.0,
                "pairs_covered": len(self.per_pair), "max_ping_s": round(max(self.pings, default=0.0), 3),
                "closed_by_key": dict(self.closed_per_key.most_common(12)),
                "findings": [f.as_dict() for f in self.findings]}


# ----------------------------------------------------------------------------------------- creation bound
def creation_size(frame: bytes) -> int:
    """Partitions a CreateTopics / CreatePartitions frame asks for (0 for any other frame or one that does
    not decode: the broker closes the connection on those)."""
    if len(frame) < 12:
        return 0
    body = memoryview(frame)[4:]
    key, ver, _ = _PEEK.unpack_from(body, 0)
    if key not in (CREATE_TOPICS, CREATE_PARTITIONS):
        return 0
    try:
        _hdr, off = _frame.decode_request_header(body)
        req, _ = m.REQUESTS[key].decode(body, ver, off)
    except Exception:  # noqa: BLE001 - whatever does not decode creates nothing
        return 0
    total = 0
    for t in req.topics or []:
        if key == CREATE_TOPICS:
            total += max(t.num_partitions, len(t.assignments or []), 1)
        else:
            total += max(t.count, len(t.assignments or []), 1)
    return total


KAFKA_MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH


def create_topics_total(frame: bytes, default_partitions: int = 1) -> int:
    """Partitions a CreateTopics frame asks for, as Kafka counts them (``validateTotalNumberOfPartitions``,
    after ``ControllerApis`` took out topics named twice): the assignments when given, else
    ``num_partitions`` (the default for -1, nothing for other values below 1); -1 for a frame that is not a
    CreateTopics or does not decode."""
    if len(frame) < 12 or _PEEK.unpack_from(frame, 4)[0] != CREATE_TOPICS:
        return -1
    body = memoryview(frame)[4:]
    try:
        _hdr, off = _frame.decode_request_header(body)
        req, _ = m.CreateTopicsRequest.decode(body, _PEEK.unpack_from(body, 0)[1], off)
    except Exception:  # noqa: BLE001 - not a CreateTopics the broker can read
        return -1
    names = collections.Counter(t.name for t in req.topics or [])
    total = 0
    for t in req.topics or []:
        if names[t.name] > 1:
            continue
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += default_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def created_topics(body: bytes, version: int) -> int:
    """Topics a CreateTopics response answered without error (validate_only included: the broker said it
    would create them)."""
    _hdr, off = _frame.decode_response_header(body, CREATE_TOPICS, version)
    resp, _ = m.CreateTopicsResponse.decode(body, version, off)
    return sum(1 for t in resp.topics or [] if t.error_code == 0)


# ----------------------------------------------------------------------------------------- sources
Source = Callable[[random.Random, int], "tuple[int, int, bytes, bool]"]


def structure_source(pairs: list[tuple[int, int]], names: NamePool, hostility: float) -> Source:
    """Frames from the schemas, every pair in turn; ``valid`` is True when no hostile value was drawn."""
    counter = [0]
    gens: dict[int, Generator] = {}

    def next_frame(rng: random.Random, corr: int) -> tuple[int, int, bytes, bool]:
        g = gens.get(id(rng))
        if g is None:
            g = gens[id(rng)] = Generator(rng, names, hostility)
        key, ver = pairs[counter[0] % len(pairs)]
        counter[0] += 1
        sane = rng.random() < 0.3
        if sane:
            v = gens.get(-id(rng))
            if v is None:
                v = gens[-id(rng)] = g.valid()
            return key, ver, v.frame(key, ver, corr), True
        return key, ver, g.frame(key, ver, corr), False

    return next_frame


def mutation_source(pairs: list[tuple[int, int]], names: NamePool, pool: int = 8) -> Source:
    """Mutated valid frames, every pair in turn; each pair's valid frames come from a small pool renewed
    now and then (making a valid frame costs more than mutating one)."""
    counter = [0]
    gens: dict[int, Generator] = {}
    bases: dict[tuple[int, int], list[bytes]] = {}

    def next_frame(rng: random.Random, corr: int) -> tuple[int, int, bytes, bool]:
        key, ver = pairs[counter[0] % len(pairs)]
        counter[0] += 1
        g = gens.get(id(rng))
        if g is None:
            g = gens[id(rng)] = Generator(rng, names, hostility=0.0)
        frames = bases.setdefault((key, ver), [])
        if len(frames) < pool:
            frames.append(g.frame(key, ver, corr))
        elif rng.random() < 0.05:
            frames[rng.randrange(pool)] = g.frame(key, ver, corr)
        return key, ver, mutate(rng.choice(frames), rng), False

    return next_frame


# ----------------------------------------------------------------------------------------- the loop
class Fuzzer:
    def __init__(self, broker: FuzzBroker, *, port: int, source: Source, requests: int, connections: int,
                 seed: int, deadline_s: float = 5.0, sasl: bool = False, janitor_every: int = 20000,
                 keep_topics: list[str] | None = None, validate_responses: bool = True,
                 closes_expected: bool = False, duration_s: float | None = None) -> None:
        self.broker = broker
        self.port = port
        self.source = source
        self.requests = requests
        self.connections = connections
        self.seed = seed
        self.deadline_s = deadline_s
        self.sasl = sasl
        self.janitor_every = janitor_every
        self.keep_topics = keep_topics or []
        self.validate = validate_responses
        self.closes_expected = closes_expected  # SASL before authentication: the gate closes on most frames
        self.duration_s = duration_s
        self._until = float("inf")
        self.stats = Stats()
        self._issued = 0
        self._next_janitor = janitor_every

    async def run(self) -> Stats:
        t0 = time.monotonic()
        if self.duration_s is not None:
            self._until = t0 + self.duration_s
        await asyncio.gather(*(self._worker(i) for i in range(self.connections)))
        self.stats.seconds = time.monotonic() - t0
        return self.stats

    def _take(self) -> bool:
        if self._issued >= self.requests or STOP.is_set() or time.monotonic() > self._until:
            return False
        self._issued += 1
        return True

    async def _upkeep(self) -> None:
        """Every ``janitor_every`` requests: the broker answers a fresh connection, and the topics the
        fuzzers made are deleted."""
        if self._issued < self._next_janitor:
            return
        self._next_janitor += self.janitor_every
        loop = asyncio.get_running_loop()
        try:
            self.stats.pings.append(await loop.run_in_executor(None, self.broker.ping))
            await loop.run_in_executor(None, self.broker.janitor, self.keep_topics)
        except Exception as e:  # noqa: BLE001 - a finding
            self.stats.add_finding(Finding("unavailable", -1, -1, f"fresh connection not served: {e!r}", b""))
        log.info("%d requests: %s", self._issued, {k: v for k, v in self.stats.as_dict().items()
                                                    if k != "findings"})

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        self.stats.connections += 1
        if self.sasl:
            await self._authenticate(reader, writer)
        return reader, writer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for key, ver, obj in ((SASL_HANDSHAKE, 1, m.SaslHandshakeRequest.new(mechanism="PLAIN")),
                              (SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest.new(
                                  auth_bytes=plain_message(SASL_USER, SASL_PASSWORD)))):
            writer.write(_frame.encode_request(key, ver, 1, "fuzz", obj))
            body = await _within(_read_frame(reader), self.deadline_s)
            hdr, off = _frame.decode_response_header(body, key, ver)
            resp, _ = m.RESPONSES[key].decode(body, ver, off)
            if resp.error_code:
                raise RuntimeError(f"SASL step {key} failed: {resp}")

    async def _worker(self, wid: int) -> None:
        rng = random.Random(self.seed * 1000 + wid)
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        corr = 0
        try:
            while self._take():
                await self._upkeep()
                corr = (corr + 1) & 0x7FFFFFFF
                key, ver, frame, valid = self.source(rng, corr)
                asked = -1
                if self.broker.guarded:
                    if creation_size(frame) > self.broker.max_partitions:
                        self.stats.guarded += 1
                        self._issued -= 1  # not sent: another frame takes its place
                        continue
                else:
                    asked = create_topics_total(frame)
                if conn is None:
                    try:
                        conn = await self._connect()
                    except (OSError, asyncio.TimeoutError, RuntimeError) as e:
                        self.stats.add_finding(Finding("connect", key, ver, repr(e), b""))
                        await asyncio.sleep(0.5)
                        continue
                conn = await self._one(conn, key, ver, frame, valid, asked)
        finally:
            if conn is not None:
                conn[1].close()

    async def _one(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], key: int, ver: int,
                   frame: bytes, valid: bool,
                   asked: int = -1) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        reader, writer = conn
        st = self.stats
        st.sent += 1
        st.per_pair[(key, ver)] += 1
        hkey, hver, hcorr = _PEEK.unpack_from(frame, 4) if len(frame) >= 12 else (key, ver, -1)
        if _SIZE.unpack_from(frame, 0)[0] != len(frame) - 4:
            await self._unframed(conn, frame)
            return None
        acks0 = hkey == PRODUCE and _acks(frame) == 0
        wait_s = self._answer_within(hkey, frame)
        try:
            writer.write(frame)
            if acks0:  # no answer to an acks=0 produce: a probe's answer shows the connection still reads
                writer.write(_PROBE)
            body = await _within(_read_frame(reader), wait_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            if acks0:  # Kafka closes the connection after an acks=0 produce that failed
                st.closed += 1
                st.closed_per_key[hkey] += 1
                writer.close()
                return None
            st.closed += 1
            st.closed_per_key[hkey] += 1
            if valid and not self.closes_expected:
                st.add_finding(Finding("closed-on-valid", key, ver, "connection closed on a valid request",
                                       frame))
            writer.close()
            return None
        except asyncio.TimeoutError:
            if hkey in MAY_WAIT or creation_size(frame) >= CREATION_RATE_FLOOR * wait_s:
                st.waited += 1
            else:
                st.add_finding(Finding("no-answer", hkey, hver, f"no answer within {wait_s:.1f} s", frame))
            writer.close()
            return None
        st.answered += 1
        if acks0:
            hkey, hver, hcorr = API_VERSIONS, 0, _PROBE_CORRELATION_ID
        if self.validate:
            problem = _check_response(body, hkey, hver, hcorr)
            if problem:
                st.add_finding(Finding("bad-response", hkey, hver, problem, frame))
            elif asked > 0 and hkey == CREATE_TOPICS:
                self._bound_held(body, hver, asked, frame)
        if hkey in CLOSE_AFTER_ANSWER:
            writer.close()
            return None
        return conn

    def _answer_within(self, key: int, frame: bytes) -> float:
        """Seconds the answer to ``frame`` is awaited: the deadline, and for a creation with a timeout that
        timeout too (see CREATION_WAIT_MAX_S)."""
        if key not in (CREATE_TOPICS, CREATE_PARTITIONS):
            return self.deadline_s
        body = memoryview(frame)[4:]
        try:
            _hdr, off = _frame.decode_request_header(body)
            req, _ = m.REQUESTS[key].decode(body, _PEEK.unpack_from(body, 0)[1], off)
        except Exception:  # noqa: BLE001 - not one the broker can read: it closes the connection
            return self.deadline_s
        return self.deadline_s + min(max(int(req.timeout_ms), 0) / 1000.0, CREATION_WAIT_MAX_S)

    def _bound_held(self, body: bytes, version: int, asked: int, frame: bytes) -> None:
        """An unguarded run's CreateTopics answer: beyond 10,000 partitions nothing may be created."""
        created = created_topics(body, version)
        st = self.stats
        if asked > KAFKA_MAX_PARTITIONS_PER_REQUEST:
            st.over_cap += 1
            if created:
                st.add_finding(Finding("beyond-bound", CREATE_TOPICS, version,
                                       f"{created} topic(s) created by a request of {asked} partitions",
                                       frame))
        elif created:
            st.created_max = max(st.created_max, asked)

    async def _unframed(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], frame: bytes) -> None:
        """A frame whose size prefix is not its length: the broker waits for bytes that never come, or reads
        the rest as the start of another frame. Whatever comes back in a moment, the stream is out of step:
        close it."""
        reader, writer = conn
        st = self.stats
        try:
            writer.write(frame)
            await _within(_read_frame(reader), 0.5)
            st.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            st.closed += 1
        except asyncio.TimeoutError:
            st.waited += 1
        writer.close()
        return None


def _acks(frame: bytes) -> int | None:
    """The acks of a Produce frame (None when it does not decode)."""
    body = memoryview(frame)[4:]
    try:
        _hdr, off = _frame.decode_request_header(body)
        req, _ = m.ProduceRequest.decode(body, _PEEK.unpack_from(body, 0)[1], off)
    except Exception:  # noqa: BLE001 - not a Produce the broker can read: it closes the connection
        return None
    return int(req.acks)


def _check_response(body: bytes, key: int, ver: int, corr: int) -> str | None:
    """What is wrong with a response to a request with this header (None: nothing)."""
    if len(body) < 4:
        return f"response of {len(body)} bytes"
    (got,) = struct.unpack_from(">i", body, 0)
    if got != corr:
        return f"correlation id {got}, expected {corr}"
    msg = m.RESPONSES.get(key)
    if msg is None:
        return f"an answer to unknown api key {key}"
    try:
        if key == API_VERSIONS:
            supported = msg.min_version <= ver <= msg.max_version
            _frame.decode_api_versions_response(body, ver if supported else 0, 4)
        else:
            _hdr, off = _frame.decode_response_header(body, key, ver)
            msg.decode(body, ver, off)
    except Exception as e:  # noqa: BLE001 - a finding
        return f"response does not decode: {e}"
    return None


async def _within(aw: Any, seconds: float) -> Any:
    """``await aw`` or TimeoutError after ``seconds`` (cheaper than wait_for: no task per request)."""
    async with asyncio.timeout(seconds):
        return await aw


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    (size,) = _SIZE.unpack(head)
    if size < 0 or size > 256 << 20:
        raise ConnectionError(f"response size {size}")
    return await reader.readexactly(size)


# ----------------------------------------------------------------------------------------- the 0.7 listener
def legacy_frame(rng: random.Random, names: NamePool, hostility: float,
                 mutated: bool) -> tuple[int, bytes, bool]:
    """A Kafka 0.7 request frame: (request type as sent, frame, whether it is a valid request)."""
    topic = rng.choice(names.topics)
    kind = rng.randrange(5)
    payload = k07.encode_message(rng.randbytes(rng.randrange(0, 40)))
    codec = rng.choice((0, 0, 1, 2))
    if codec:  # a wrapper message holding the compressed inner message set
        payload = k07.encode_message(k07.gzip_stored(payload) if codec == 1 else k07.snappy_literal(payload),
                                     codec=codec)
    msgs = payload * rng.randrange(1, 3)
    part = rng.choice((0, -1))  # -1: a random partition; a partition the topic lacks closes (0.7)
    req: Any
    if kind == k07.PRODUCE:
        req = k07.ProduceRequest(topic, part, msgs)
    elif kind == k07.FETCH:
        req = k07.FetchRequest(topic, part, rng.choice((0, 0, 10, -1)), rng.choice((1024, 1 << 20)))
    elif kind == k07.MULTIFETCH:
        req = k07.MultiFetchRequest([k07.FetchRequest(topic, 0, 0, 1024) for _ in range(rng.randrange(0, 3))])
    elif kind == k07.MULTIPRODUCE:
        req = k07.MultiProduceRequest([k07.ProduceRequest(topic, 0, msgs)
                                       for _ in range(rng.randrange(0, 3))])
    else:
        req = k07.OffsetsRequest(topic, part, rng.choice((-1, -2, 0)), rng.choice((1, 10)))
    frame = k07.encode_request(req)
    # OFFSETS for a partition the topic lacks is not answered: 0.7's handler let LogManager.getOffsets'
    # InvalidPartitionException close the connection, and moldau does the same (docs/kafka07.md)
    valid = not mutated and not (kind == k07.OFFSETS and part < 0)
    if rng.random() < hostility:
        valid = False  # hostile topics and numbers, written over the valid frame
        hostile_topic = rng.choice(HOSTILE_NAMES).encode("utf-8", "surrogatepass") if rng.random() < 0.7 \
            else rng.choice(INVALID_UTF8)
        t = topic.encode()
        frame = frame.replace(struct.pack(">h", len(t)) + t,
                              struct.pack(">h", len(hostile_topic)) + hostile_topic, 1)
        tail = bytearray(frame)
        if len(tail) >= 12 and rng.random() < 0.5:
            pos = rng.randrange(6, len(tail) - 3)
            value = rng.choice((0x7FFFFFFF, -1, -(1 << 31), 1 << 30))
            tail[pos:pos + 4] = value.to_bytes(4, "big", signed=True)
        frame = _SIZE.pack(len(tail) - 4) + bytes(tail[4:])
    if mutated:
        frame = mutate(frame, rng)
    kind_sent = struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else -1
    return kind_sent, frame, valid


class LegacyFuzzer:
    """The same loop on the KAFKA07 listener: a PRODUCE / MULTIPRODUCE has no answer in 0.7, so those are
    followed by an OFFSETS request whose answer shows the connection still reads."""

    def __init__(self, broker: FuzzBroker, names: NamePool, *, requests: int, connections: int, seed: int,
                 hostility: float = 0.3, mutated_share: float = 0.5, deadline_s: float = 5.0,
                 duration_s: float | None = None) -> None:
        self.broker, self.names = broker, names
        self.requests, self.connections, self.seed = requests, connections, seed
        self.hostility, self.mutated_share, self.deadline_s = hostility, mutated_share, deadline_s
        self.stats = Stats()
        self._issued = 0
        self.duration_s = duration_s
        self._until = float("inf")

    async def run(self) -> Stats:
        t0 = time.monotonic()
        if self.duration_s is not None:
            self._until = t0 + self.duration_s
        await asyncio.gather(*(self._worker(i) for i in range(self.connections)))
        self.stats.seconds = time.monotonic() - t0
        return self.stats

    async def _worker(self, wid: int) -> None:
        rng = random.Random(self.seed * 1000 + 500 + wid)
        st = self.stats
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        probe = k07.encode_request(k07.OffsetsRequest(self.names.topics[0], 0, -1, 1))
        while self._issued < self.requests and not STOP.is_set() and time.monotonic() < self._until:
            self._issued += 1
            mutated = rng.random() < self.mutated_share
            kind, frame, valid = legacy_frame(rng, self.names, self.hostility, mutated)
            if conn is None:
                conn = await asyncio.open_connection("127.0.0.1", self.broker.legacy_port)
                st.connections += 1
            reader, writer = conn
            st.sent += 1
            st.per_pair[(kind if 0 <= kind <= 4 else -1, 0)] += 1
            unframed = len(frame) < 4 or _SIZE.unpack_from(frame, 0)[0] != len(frame) - 4
            try:
                writer.write(frame)
                if unframed:  # out of step from here on (see Fuzzer._unframed): whatever comes, then close
                    await _within(_read_frame(reader), 0.5)
                    raise ConnectionResetError("closed by the fuzzer")
                if kind in (k07.PRODUCE, k07.MULTIPRODUCE):
                    writer.write(probe)  # no answer to a produce: the probe's answer follows it
                await _within(_read_frame(reader), self.deadline_s)
                st.answered += 1
            except (asyncio.IncompleteReadError, ConnectionError):
                st.closed += 1
                if valid and not unframed:
                    st.add_finding(Finding("closed-on-valid", kind, 0, "connection closed on a valid request",
                                           frame))
                writer.close()
                conn = None
            except asyncio.TimeoutError:
                if unframed:  # a frame whose size says more than was sent waits for the rest, as in 0.7
                    st.waited += 1
                else:
                    st.add_finding(Finding("no-answer", kind, 0, f"no answer within {self.deadline_s} s",
                                           frame))
                writer.close()
                conn = None
        if conn is not None:
            conn[1].close()
