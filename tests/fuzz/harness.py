"""The fuzzers' broker and the checks made after every run.

One ``moldau broker`` process with three listeners: PLAINTEXT, SASL_PLAINTEXT (PLAIN and SCRAM, one user in
the broker's credential file) and KAFKA07 (the legacy 0.7 protocol, docs/kafka07.md), started in a
directory of its own (its working directory too), so that a file it writes outside its data dir is seen.

After a run, :meth:`FuzzBroker.check` asserts what the issue asks of every run: the broker still serves a
normal client (a confluent-kafka produce and group consume round trip), its RSS is within 2x of what it was
at the start, its log has no traceback, no file appeared outside its data dir, every topic in Metadata has
all its partitions present and readable (and every partition directory belongs to such a topic), and no
topic holds more partitions than the run allowed: 64 in a guarded run (the fuzzers do not send larger
creations), the broker's own ``max.topic.partitions`` in an unguarded one, which also checks the broker's
total against ``max.broker.partitions``.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.broker.security.credentials import CredentialStore
from moldau.protocol import frame as _frame
from moldau.protocol import messages as m
from moldau.protocol.sasl_mechanisms import plain_message

try:  # under pytest, tests/ is on sys.path; as ``python -m tests.fuzz``, the repository root is
    from harness.brokerproc import BrokerProcess, free_port
except ImportError:  # pragma: no cover - depends on how the fuzzer was started
    from tests.harness.brokerproc import BrokerProcess, free_port

log = logging.getLogger(__name__)

SASL_USER, SASL_PASSWORD = "fuzz", "fuzz-secret"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_SIZE = struct.Struct(">i")


def rss_kb(pid: int) -> int:
    """The process's resident set size (VmRSS, kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Raw:
    """A blocking connection speaking moldau's own codec: enough for the checks and the janitor."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0

    def call(self, api_key: int, version: int, obj: Any) -> Any:
        self.corr += 1
        self.sock.sendall(_frame.encode_request(api_key, version, self.corr, "fuzz-check", obj))
        body = self.recv_frame()
        hdr, off = _frame.decode_response_header(body, api_key, version)
        assert hdr.correlation_id == self.corr, (hdr.correlation_id, self.corr)
        return m.RESPONSES[api_key].decode(body, version, off)[0]

    def recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._exact(4))
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def sasl_plain(self, user: str = SASL_USER, password: str = SASL_PASSWORD) -> None:
        hs = self.call(17, 1, m.SaslHandshakeRequest.new(mechanism="PLAIN"))
        assert hs.error_code == 0, hs
        resp = self.call(36, 2, m.SaslAuthenticateRequest.new(auth_bytes=plain_message(user, password)))
        assert resp.error_code == 0, resp

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class CheckReport:
    rss_start_kb: int
    rss_end_kb: int
    topics: int
    partitions: int
    roundtrip_s: float
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"rss_start_kb": self.rss_start_kb, "rss_end_kb": self.rss_end_kb, "topics": self.topics,
                "partitions": self.partitions, "roundtrip_s": round(self.roundtrip_s, 3),
                "problems": self.problems}


class FuzzBroker:
    """A broker process for the fuzzers (see the module's docstring)."""

    def __init__(self, root: Path, settings: dict[str, str] | None = None, max_partitions: int = 64,
                 guarded: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.data = self.root / "data"
        self.data.mkdir(exist_ok=True)
        CredentialStore(self.data).add_password(SASL_USER, SASL_PASSWORD)
        self.port = free_port()
        self.sasl_port = free_port()
        self.legacy_port = free_port()
        self.guarded = guarded  # creations beyond max_partitions are not sent (run.Fuzzer)
        self.guard_partitions = max_partitions
        self.max_partitions = max_partitions  # no topic may end up with more (the run's creation bound)
        self.max_broker_partitions: int | None = None
        if not guarded:  # the broker's own bounds (moldau's defaults unless set)
            self.max_partitions = int((settings or {}).get("max.topic.partitions", 50_000))
            self.max_broker_partitions = int((settings or {}).get("max.broker.partitions", 100_000))
        merged = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                         f"KAFKA07://127.0.0.1:{self.legacy_port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            "connection.failed.authentication.delay.ms": "0",
            **(settings or {}),
        }
        self.proc = BrokerProcess("moldau", self.data, port=self.port, settings=merged, log_dir=self.root)
        self.rss_start_kb = 0
        self._outside: set[str] = set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FuzzBroker:
        cwd = os.getcwd()
        os.chdir(self.root)  # the broker's working directory: relative paths it might write land here
        try:
            self.proc.start()
        finally:
            os.chdir(cwd)
        self._outside = self._outside_files()
        return self

    def stop(self) -> None:
        if self.proc.alive():
            try:
                self.proc.stop()
            except Exception:  # noqa: BLE001 - stop() kills what does not exit and says so
                log.exception("broker did not stop cleanly")

    def __enter__(self) -> FuzzBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def rss(self) -> int:
        assert self.proc.pid is not None
        return rss_kb(self.proc.pid)

    def mark_rss(self) -> int:
        """Take the RSS the end of a run is compared with."""
        self.rss_start_kb = self.rss()
        return self.rss_start_kb

    def _outside_files(self) -> set[str]:
        out = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            if rel == "data" or rel.startswith("data" + os.sep):
                dirnames[:] = []
                continue
            for name in filenames + dirnames:
                p = os.path.normpath(os.path.join(rel, name))
                if p != "data" and not (name.endswith(".log") and rel == "."):
                    out.add(p)
        return out

    # --------------------------------------------------------------------------------------- upkeep
    def ping(self, timeout: float = 10.0) -> float:
        """Seconds an ApiVersions v3 takes on a fresh connection (raises when the broker does not answer)."""
        t0 = time.monotonic()
        with Raw(self.port, timeout) as r:
            resp = r.call(18, 3, m.ApiVersionsRequest.new(client_software_name="fuzz",
                                                         client_software_version="1"))
            assert resp.error_code == 0, resp
        return time.monotonic() - t0

    def api_versions(self) -> list[tuple[int, int]]:
        """Every (api key, version) the broker advertises."""
        with Raw(self.port) as r:
            resp = r.call(18, 0, m.ApiVersionsRequest.new())
        return [(k.api_key, v) for k in resp.api_keys for v in range(k.min_version, k.max_version + 1)]

    def metadata(self, r: Raw) -> Any:
        return r.call(3, 12, m.MetadataRequest.new(topics=None, allow_auto_topic_creation=False))

    def janitor(self, keep: list[str]) -> int:
        """Delete every topic the fuzzers made outside ``keep`` and the internal topics (a bounded broker
        over a long run), in an unguarded run also a topic of ``keep`` grown beyond the guard's partitions
        (CreatePartitions of up to 10,000; a valid CreateTopics in the stream makes it again); also remove
        every client quota a fuzzer set. Returns the topics deleted."""
        with Raw(self.port, 30.0) as r:
            md = self.metadata(r)
            grown = 1 << 62 if self.guarded else self.guard_partitions
            extra = [t.name for t in md.topics
                     if t.name is not None and t.name not in INTERNAL_TOPICS
                     and (t.name not in keep or len(t.partitions) > grown)]
            for i in range(0, len(extra), 100):
                chunk = extra[i:i + 100]
                r.call(20, 6, m.DeleteTopicsRequest.new(
                    topics=[m.DeleteTopicsRequest.DeleteTopicState(name=n) for n in chunk], timeout_ms=30000))
            self._clear_quotas(r)
        return len(extra)

    def _clear_quotas(self, r: Raw) -> None:
        q = r.call(48, 1, m.DescribeClientQuotasRequest.new(components=[], strict=False))
        if q.error_code or not q.entries:
            return
        E = m.AlterClientQuotasRequest
        entries = [E.EntryData(
            entity=[E.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in x.entity],
            ops=[E.OpData(key=v.key, value=0.0, remove=True) for v in x.values]) for x in q.entries]
        r.call(49, 1, E.new(entries=entries, validate_only=False))

    # --------------------------------------------------------------------------------------- checks
    def check(self, roundtrip_records: int = 200) -> CheckReport:
        """Every after-run check; the report lists what failed (empty ``problems``: all held)."""
        problems: list[str] = []
        if not self.proc.alive():
            return CheckReport(self.rss_start_kb, 0, 0, 0, 0.0,
                               [f"broker exited ({self.proc.proc.returncode if self.proc.proc else '?'})"])
        t0 = time.monotonic()
        try:
            self.roundtrip(roundtrip_records)
        except Exception as e:  # noqa: BLE001 - reported
            problems.append(f"confluent-kafka round trip failed: {e!r}")
        roundtrip_s = time.monotonic() - t0
        rss_end = self.rss()
        if self.rss_start_kb and rss_end > 2 * self.rss_start_kb:
            problems.append(f"RSS {rss_end} kB is more than twice the start's {self.rss_start_kb} kB")
        text = self.proc.output(limit=1 << 30)
        if "Traceback" in text:
            i = text.index("Traceback")
            problems.append("traceback in the broker's log:\n" + text[max(0, i - 300):i + 3000])
        outside = self._outside_files() - self._outside
        if outside:
            problems.append(f"files outside the data dir: {sorted(outside)[:20]}")
        topics, partitions = self._check_topics(problems)
        if self.max_broker_partitions is not None and partitions > self.max_broker_partitions:
            problems.append(f"{partitions} partitions, beyond max.broker.partitions "
                            f"{self.max_broker_partitions}")
        return CheckReport(self.rss_start_kb, rss_end, topics, partitions, roundtrip_s, problems)

    def _check_topics(self, problems: list[str]) -> tuple[int, int]:
        deadline = time.monotonic() + 30
        while True:  # deletions finish in the background: wait until disk and Metadata agree
            found: list[str] = []
            n_topics, n_parts = self._topics_once(found)
            if not found or time.monotonic() > deadline:
                problems.extend(found)
                return n_topics, n_parts
            time.sleep(0.5)

    def _topics_once(self, problems: list[str]) -> tuple[int, int]:
        with Raw(self.port, 30.0) as r:
            md = self.metadata(r)
            known: dict[str, int] = {}
            for t in md.topics:
                if t.error_code:
                    problems.append(f"topic {t.name!r}: Metadata error {t.error_code}")
                    continue
                idx = sorted(p.partition_index for p in t.partitions)
                if idx != list(range(len(idx))) or not idx:
                    problems.append(f"topic {t.name!r}: partitions {idx[:10]}... not 0..n-1")
                if len(idx) > self.max_partitions and t.name not in INTERNAL_TOPICS:
                    problems.append(f"topic {t.name!r}: {len(idx)} partitions, beyond the run's bound "
                                    f"{self.max_partitions}")
                for p in t.partitions:
                    if p.error_code or p.leader_id < 0:
                        problems.append(f"{t.name}-{p.partition_index}: error {p.error_code}, leader "
                                        f"{p.leader_id}")
                known[t.name] = len(idx)
            self._readable(r, md, problems)
        for entry in os.listdir(self.data):
            path = self.data / entry
            if not path.is_dir() or entry.endswith("-delete") or entry.endswith("-future"):
                continue
            topic, _, part = entry.rpartition("-")
            if not part.isdigit():
                continue
            if topic not in known or int(part) >= known[topic]:
                problems.append(f"partition directory {entry!r} belongs to no partition in Metadata")
        return len(known), sum(known.values())

    def _readable(self, r: Raw, md: Any, problems: list[str]) -> None:
        """ListOffsets (earliest and latest) of every partition, then a Fetch from the earliest offset."""
        L = m.ListOffsetsRequest
        topics = [t for t in md.topics if not t.error_code]
        for ts in (-2, -1):
            for i in range(0, len(topics), 50):
                chunk = topics[i:i + 50]
                resp = r.call(2, 7, L.new(replica_id=-1, isolation_level=0, topics=[
                    L.ListOffsetsTopic(name=t.name, partitions=[
                        L.ListOffsetsPartition(partition_index=p.partition_index, timestamp=ts,
                                               current_leader_epoch=-1) for p in t.partitions])
                    for t in chunk]))
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            problems.append(f"ListOffsets {t.name}-{p.partition_index} ({ts}): error "
                                            f"{p.error_code}")
        F = m.FetchRequest
        for i in range(0, len(topics), 50):
            chunk = topics[i:i + 50]
            resp = r.call(1, 12, F.new(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                F.FetchTopic(topic=t.name, partitions=[
                    F.FetchPartition(partition=p.partition_index, current_leader_epoch=-1, fetch_offset=0,
                                     log_start_offset=-1, partition_max_bytes=1024)
                    for p in t.partitions]) for t in chunk]))
            for t in resp.responses:
                for p in t.partitions:
                    # OFFSET_OUT_OF_RANGE (1) is an answer: records before the log start were deleted
                    if p.error_code not in (0, 1):
                        problems.append(f"Fetch {t.topic}-{p.partition_index}: error {p.error_code}")

    def roundtrip(self, n: int) -> None:
        """A confluent-kafka producer writes ``n`` records to a new topic of two partitions (acks=all), and a
        group consumer reads every one of them back."""
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"fuzz-health-{uuid.uuid4().hex[:8]}"
        quiet = logging.getLogger("fuzz.rdkafka")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet})  # type: ignore[dict-item]
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "logger": quiet,
                      "message.timeout.ms": 30000})
        errors: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for i in range(n):
            p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, on_delivery=delivered)
        assert p.flush(30) == 0, "records still unsent after 30 s"
        assert not errors, errors[:3]
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"fuzz-health-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "earliest", "logger": quiet, "session.timeout.ms": 10000})
        got: set[bytes] = set()
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                for msg in c.consume(num_messages=1000, timeout=0.5):
                    assert msg.error() is None, msg.error()
                    got.add(msg.value() or b"")
        finally:
            c.close()
        assert got == {b"v%d" % i for i in range(n)}, f"read {len(got)} of {n} records back"
        admin.delete_topics([topic])[topic].result(30)
