"""Talking to the brokers for the data source.

Driver side (``OffsetClient``): partitions of the subscription and offsets (earliest, latest, by time)
through the public synchronous ``moldau.client.Consumer`` (assign-mode, no group).

Executor side (``fetch_range``): the records of one fixed offset range ``[start, end)`` of one partition,
as the raw record batches the broker sent. The moldau client has no public call for "fetch this range as
raw batches" yet, so this module sends Fetch requests itself (``moldau.protocol.messages``) over the
client's ``Cluster`` connections (metadata, leaders, reconnects). One ``Cluster`` per client config lives
on a background event loop per Python worker process and is reused by later tasks (Python workers are
reused across tasks), so a micro-batch does not pay for a bootstrap. The next Fetch is sent as soon as a
response's batch headers are read, before its records are decoded, so network and decoding overlap.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures as cf
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from moldau.client import Consumer, TopicPartition
from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig, ConfigError, resolve_config
from moldau.client.errors import Codes, broker_error
from moldau.client.sync import LoopThread
from moldau.protocol import messages as m
from moldau.protocol.records import parse_batch_header

from .options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

log = logging.getLogger(__name__)

__all__ = [
    "DataLossError",
    "FetchedChunk",
    "OffsetClient",
    "check_client_config",
    "fetch_range",
    "resolve_offsets",
]

TP = tuple[str, int]

_FETCH = 1
_LIST_OFFSETS = 2
_OFFSET_OUT_OF_RANGE = 1
_RETRIABLE_FETCH = frozenset({
    Codes.NOT_LEADER_OR_FOLLOWER, Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.LEADER_NOT_AVAILABLE,
    Codes.FENCED_LEADER_EPOCH, Codes.UNKNOWN_LEADER_EPOCH, Codes.KAFKA_STORAGE_ERROR,
    Codes.REPLICA_NOT_AVAILABLE, Codes.BROKER_NOT_AVAILABLE, Codes.OFFSET_NOT_AVAILABLE,
    Codes.UNKNOWN_TOPIC_ID, Codes.INCONSISTENT_TOPIC_ID, Codes.NOT_COORDINATOR,
})


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic/partition) and failOnDataLoss is true."""


def data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(
            message + ". Some data may have been lost because it is no longer available in the topic "
            "(deleted by retention, or the topic/partition was deleted). If you want the query to go on "
            "in this case, set the source option 'failOnDataLoss' to 'false'.")
    log.warning("%s. Some data may have been lost (failOnDataLoss=false: going on).", message)


def check_client_config(client: dict[str, str], kind: Literal["producer", "consumer"]) -> ClientConfig:
    """The moldau client's parsed config for these kafka.* settings; OptionError naming a bad one."""
    try:
        return resolve_config(kind, client, {})
    except ConfigError as exc:
        raise OptionError(f"kafka.* option refused by the moldau {kind}: {exc}") from None


# ----------------------------------------------------------------------------------------------------
# driver: partitions and offsets


class OffsetClient:
    """Partitions and offsets for the driver (planning), through the public sync Consumer."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        cfg: dict[str, Any] = dict(opts.client)
        cfg["isolation.level"] = "read_committed" if opts.read_committed else "read_uncommitted"
        cfg.setdefault("client.id", "moldau-spark-driver")
        cfg["enable.auto.commit"] = "false"
        check_client_config(cfg, "consumer")
        self._consumer = Consumer(config=cfg)
        self._retries = opts.fetch_offset_retries
        self._interval = opts.fetch_offset_retry_interval_ms / 1000.0

    def close(self) -> None:
        try:
            self._consumer.close(autocommit=False)
        except Exception:
            log.debug("closing the offset consumer failed", exc_info=True)

    def _retry(self, what: str, fn: Any, *args: Any) -> Any:
        attempt = 0
        while True:
            try:
                return fn(*args)
            except Exception as exc:
                if attempt >= self._retries:
                    raise
                attempt += 1
                log.warning("%s failed (%s); retry %d of %d", what, exc, attempt, self._retries)
                time.sleep(self._interval)

    def partitions(self) -> list[TP]:
        """The topic-partitions of the subscription now, sorted by topic then partition."""
        o = self.opts
        if o.strategy == "assign":
            return sorted((t, p) for t, ps in o.assign.items() for p in ps)
        topics = self._retry("listing topics", self._consumer.topics)
        if o.strategy == "subscribe":
            wanted = [t for t in o.topics if t in topics]
        else:
            rx = re.compile(o.pattern or "")
            wanted = [t for t in topics if rx.fullmatch(t)]
        return sorted((t, p) for t in wanted for p in topics[t])

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        if not tps:
            return {}
        res = self._retry("listing earliest offsets", self._consumer.beginning_offsets,
                          [TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): int(v) for tp, v in res.items()}

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        """End offsets: the high watermark (read_uncommitted) or the last stable offset (read_committed)."""
        if not tps:
            return {}
        res = self._retry("listing latest offsets", self._consumer.end_offsets,
                          [TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): int(v) for tp, v in res.items()}

    def for_times(self, times: dict[TP, int]) -> dict[TP, int | None]:
        if not times:
            return {}
        res = self._retry("looking up offsets by timestamp", self._consumer.offsets_for_times,
                          {TopicPartition(t, p): ts for (t, p), ts in times.items()})
        return {(tp.topic, tp.partition): (None if v is None else int(v.offset)) for tp, v in res.items()}


def resolve_offsets(spec: OffsetSpec, tps: list[TP], client: OffsetClient, *, starting: bool,
                    option: str) -> dict[TP, int]:
    """Concrete offsets for ``tps`` from a starting/ending spec (Spark's rules)."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return client.earliest(tps)
    if spec.kind == "latest":
        return client.latest(tps)
    if spec.kind == "offsets":
        given = set(spec.offsets)
        if given != set(tps):
            raise OptionError(
                f"option '{option}' names specific offsets, so it must name every partition of the query "
                f"(use -1 for latest, -2 for earliest). Named: {_fmt(given)}; the query has: {_fmt(set(tps))}"
            )
        out = dict(spec.offsets)
        need_e = [tp for tp, o in out.items() if o == EARLIEST]
        need_l = [tp for tp, o in out.items() if o == LATEST]
        out.update(client.earliest(need_e))
        out.update(client.latest(need_l))
        return {tp: out[tp] for tp in tps}
    if spec.kind == "timestamp":
        times = {tp: spec.timestamp for tp in tps}
    else:
        given = set(spec.offsets)
        if given != set(tps):
            raise OptionError(
                f"option '{option}' must name every partition of the query. Named: {_fmt(given)}; "
                f"the query has: {_fmt(set(tps))}")
        times = dict(spec.offsets)
    found = client.for_times(times)
    missing = [tp for tp in tps if found.get(tp) is None]
    out2: dict[TP, int] = {tp: o for tp, o in found.items() if o is not None}
    if missing:
        if starting and spec.strategy == "error":
            raise OptionError(
                f"option '{option}': no offset has a timestamp at or after the given time in "
                f"{_fmt(set(missing))} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the end of those partitions)"
            )
        out2.update(client.latest(missing))
    return {tp: out2[tp] for tp in tps}


def _fmt(tps: set[TP]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"


# ----------------------------------------------------------------------------------------------------
# executors: raw fetches of a fixed range


@dataclass(slots=True)
class FetchedChunk:
    """The record batches of one Fetch response for one partition."""

    data: Any                       # the records bytes (memoryview of the response)
    batches: list                   # [(pos, BatchHeader)]: complete batches only
    aborted: dict[int, list[int]] | None  # read_committed: producer id -> first offsets of aborted txns


class _Session:
    """A Cluster on a private event loop, shared by every read in this process with the same config."""

    def __init__(self, client: dict[str, str]) -> None:
        cfg = dict(client)
        cfg.setdefault("client.id", "moldau-spark")
        self.config = resolve_config("consumer", cfg, {})
        self.lt = LoopThread("moldau-spark-fetch", bool(self.config.get("use.uvloop", True)))
        self.cluster: Cluster | None = None
        self.request_timeout_ms = self.config["request.timeout.ms"]
        self.max_wait_ms = min(self.config["fetch.max.wait.ms"], 500)
        self.lock = threading.Lock()

        async def start() -> Cluster:
            c = Cluster(self.config, allow_auto_topic_creation=False)
            await c.start()
            return c

        self.cluster = self.lt.run(start())

    def close(self) -> None:
        try:
            if self.cluster is not None:
                self.lt.run(self.cluster.close(), 10)
        except Exception:  # noqa: BLE001
            pass
        self.lt.stop()

    async def _leader(self, topic: str, partition: int, deadline: float) -> int:
        c = self.cluster
        assert c is not None
        while True:
            node = c.leader(topic, partition)
            if node >= 0:
                return node
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no leader known for {topic}-{partition}")
            await c.wait_for_topic(topic, int(remaining * 1000))
            if c.leader(topic, partition) < 0:
                await c.refresh([topic], int(max(remaining, 0.1) * 1000))
                await asyncio.sleep(0.05)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, isolation: int,
                    timeout_ms: int) -> Any:
        """One Fetch of one partition from ``offset``; returns the partition's response data."""
        c = self.cluster
        assert c is not None
        deadline = time.monotonic() + timeout_ms / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        R = m.FetchRequest
        while True:
            node = await self._leader(topic, partition, deadline)
            try:
                conn = await c.connection(node)
                req = R.new(
                    replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                    isolation_level=isolation, session_id=0, session_epoch=-1,
                    topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                        partition=partition, current_leader_epoch=c.leader_epoch(topic, partition),
                        fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                        partition_max_bytes=max_bytes)])],
                    forgotten_topics_data=[], rack_id="")
                resp = await conn.send(_FETCH, req, timeout_ms=self.request_timeout_ms + self.max_wait_ms)
            except (TimeoutError, OSError, ConnectionError) as exc:
                err: Any = exc
            except Exception as exc:
                if not getattr(exc, "retriable", False) and "Connection" not in type(exc).__name__:
                    raise
                err = exc
            else:
                pd = None
                if not getattr(resp, "error_code", 0):
                    for t in resp.responses:
                        for p in t.partitions:
                            if p.partition_index == partition:
                                pd = p
                    if pd is not None and pd.error_code not in _RETRIABLE_FETCH:
                        return pd
                err = broker_error(pd.error_code if pd is not None else resp.error_code,
                                   f"fetch {topic}-{partition} at {offset}")
            if time.monotonic() + backoff > deadline:
                raise TimeoutError(f"fetching {topic}-{partition} at offset {offset} failed until "
                                   f"kafkaConsumer.pollTimeoutMs: {err}")
            log.info("fetch %s-%d at %d: %s; retrying", topic, partition, offset, err)
            c.request_update()
            await asyncio.sleep(backoff)

    async def list_offset(self, topic: str, partition: int, ts: int, isolation: int, timeout_ms: int) -> int:
        c = self.cluster
        assert c is not None
        deadline = time.monotonic() + timeout_ms / 1000.0
        R = m.ListOffsetsRequest
        while True:
            node = await self._leader(topic, partition, deadline)
            req = R.new(replica_id=-1, isolation_level=isolation, timeout_ms=self.request_timeout_ms,
                        topics=[R.ListOffsetsTopic(name=topic, partitions=[R.ListOffsetsPartition(
                            partition_index=partition, current_leader_epoch=-1, timestamp=ts,
                            max_num_offsets=1)])])
            try:
                resp = await c.send(node, _LIST_OFFSETS, req)
                p = resp.topics[0].partitions[0]
                if p.error_code == 0:
                    return (
                        int(p.old_style_offsets[0])
                        if getattr(p, "old_style_offsets", None)
                        else int(p.offset)
                    )
                err: Any = broker_error(p.error_code, f"ListOffsets {topic}-{partition}")
                if not getattr(err, "retriable", False) and p.error_code not in _RETRIABLE_FETCH:
                    raise err
            except (TimeoutError, OSError, ConnectionError) as exc:
                err = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"ListOffsets {topic}-{partition} failed: {err}")
            c.request_update()
            await asyncio.sleep(0.1)


_SESSIONS: dict[tuple, _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(client: dict[str, str]) -> _Session:
    key = tuple(sorted(client.items()))
    with _SESSIONS_LOCK:
        s = _SESSIONS.get(key)
        if s is None or not s.lt.thread.is_alive():
            s = _SESSIONS[key] = _Session(client)
        return s


@atexit.register
def _close_sessions() -> None:
    with _SESSIONS_LOCK:
        for s in _SESSIONS.values():
            s.close()
        _SESSIONS.clear()


def fetch_range(client: dict[str, str], topic: str, partition: int, start: int, end: int, *,
                read_committed: bool, fail_on_data_loss: bool, timeout_ms: int,
                max_bytes: int | None = None) -> Iterator[tuple[FetchedChunk, int, int]]:
    """Yield ``(chunk, lo, hi)`` until every offset of ``[start, end)`` has been seen.

    ``lo``/``hi`` bound the offsets of the chunk that belong to the range. Offsets below the log start
    (deleted by retention) and a log that ends before ``end`` are data loss (raised or logged per
    ``fail_on_data_loss``); gaps inside the log (compaction, transaction markers, aborted records) are
    not.
    """
    if start >= end:
        return
    s = _session(client)
    isolation = 1 if read_committed else 0
    part_max = max_bytes or max(s.config["max.partition.fetch.bytes"], 4 << 20)
    lt = s.lt

    def submit(offset: int) -> cf.Future:
        return lt.submit(s.fetch(topic, partition, offset, part_max, isolation, timeout_ms))

    offset = start
    fut = submit(offset)
    empty_since: float | None = None
    while offset < end:
        pd = fut.result()
        code = pd.error_code
        if code == _OFFSET_OUT_OF_RANGE:
            earliest = lt.run(s.list_offset(topic, partition, EARLIEST, isolation, timeout_ms))
            latest = lt.run(s.list_offset(topic, partition, LATEST, isolation, timeout_ms))
            if offset < earliest:
                data_loss(
                    fail_on_data_loss,
                    f"offsets [{offset}, {min(earliest, end)}) of {topic}-{partition} "
                    f"were deleted (the log now starts at {earliest})",
                )
                offset = earliest
            elif offset >= latest:
                data_loss(fail_on_data_loss, f"{topic}-{partition} now ends at offset {latest}, before the "
                          f"planned end {end} (the partition was truncated or recreated)")
                return
            if offset >= end:
                return
            fut = submit(offset)
            continue
        if code:
            raise broker_error(code, f"fetch {topic}-{partition} at offset {offset}")
        data = pd.records
        batches = _split(data)
        if not batches:
            hw = pd.last_stable_offset if read_committed and pd.last_stable_offset >= 0 else pd.high_watermark
            if hw <= offset:
                if hw < end and pd.log_start_offset <= offset:
                    # the partition ends before the planned end: truncated, or waiting on an open txn
                    now = time.monotonic()
                    empty_since = empty_since or now
                    if now - empty_since > timeout_ms / 1000.0:
                        data_loss(fail_on_data_loss, f"{topic}-{partition} ends at offset {hw}, before the "
                                  f"planned end {end}")
                        return
            if data is not None and len(data) >= part_max:
                part_max *= 2  # one batch larger than the fetch size: ask for more
            elif pd.log_start_offset > offset:
                data_loss(fail_on_data_loss, f"offsets [{offset}, {min(pd.log_start_offset, end)}) of "
                          f"{topic}-{partition} were deleted (the log now starts at {pd.log_start_offset})")
                offset = pd.log_start_offset
                if offset >= end:
                    return
            else:
                time.sleep(0.01)
            fut = submit(offset)
            continue
        empty_since = None
        last = batches[-1][1]
        first_offset = batches[0][1].base_offset
        if first_offset > offset and pd.log_start_offset > offset:
            data_loss(
                fail_on_data_loss,
                f"offsets [{offset}, {min(first_offset, end)}) of {topic}-{partition} "
                f"were deleted (the log now starts at {pd.log_start_offset})",
            )
        nxt = last.base_offset + last.last_offset_delta + 1
        if nxt <= offset:
            raise broker_error(
                Codes.CORRUPT_MESSAGE,
                f"fetch of {topic}-{partition} at offset {offset} returned "
                f"only batches before it (up to {nxt - 1})",
            )
        lo = offset
        offset = nxt
        if offset < end:
            fut = submit(offset)  # in flight while this chunk is decoded
        aborted: dict[int, list[int]] | None = None
        if read_committed and pd.aborted_transactions:
            aborted = {}
            for a in pd.aborted_transactions:
                aborted.setdefault(a.producer_id, []).append(a.first_offset)
            for v in aborted.values():
                v.sort()
        yield FetchedChunk(data, batches, aborted), lo, end


def _split(data: Any) -> list:
    """Complete batches of a records blob: [(pos, header)]; legacy entries get header None."""
    out: list = []
    if data is None:
        return out
    n = len(data)
    pos = 0
    while n - pos >= 17:
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        end = pos + 12 + length
        if length <= 0 or end > n:
            break
        magic = data[pos + 16]
        if magic == 2:
            out.append((pos, parse_batch_header(data, pos)))
        elif magic in (0, 1):
            out.append((pos, _LegacyEntry(int.from_bytes(data[pos : pos + 8], "big", signed=True), end)))
        else:
            raise broker_error(Codes.CORRUPT_MESSAGE, f"record batch with magic {magic}")
        pos = end
    return out


@dataclass(slots=True)
class _LegacyEntry:
    """A magic 0/1 message in a fetched blob: its (last) offset and where it ends."""

    base_offset: int
    end: int

    @property
    def last_offset_delta(self) -> int:
        return 0

    attributes = 0
