"""Prometheus metrics of the broker: a tiny asyncio HTTP server speaking the text exposition format 0.0.4.

Enabled by ``metrics.listener=HOST:PORT`` (off by default: an unauthenticated HTTP port should be asked
for, and test brokers started side by side must not fight over one port). Endpoints:

* ``GET /metrics``: the metrics below.
* ``GET /health``: 200 ``ok`` while the process serves.
* ``GET /ready``: 200 once the listeners accept connections, 503 while starting or stopping.

Names follow Kafka's JMX metric names as the common Prometheus JMX exporter rules map them
(``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t`` ->
``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``); consumer-group lag uses kafka_exporter's
``kafka_consumergroup_lag``. Counters are updated on the hot paths by plain integer additions (the router
calls ``observe_request``, the replica manager ``record_append`` / ``record_read``); gauges (log sizes,
offsets, groups, lag, connections, purgatories, process figures) are computed when scraped.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol

from moldau._aio import wait_for

log = logging.getLogger(__name__)

CONFIG_KEY = "metrics.listener"

# request latency buckets (ms), Kafka's TotalTimeMs as a histogram
LATENCY_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                      10000.0, 30000.0)
SIZE_BUCKETS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)


def _api_names() -> dict[int, str]:
    try:
        from moldau.protocol import messages as m

        out = {}
        for key, msg in m.REQUESTS.items():
            name = getattr(msg, "name", None) or f"api{key}"
            out[key] = name.removesuffix("Request")
        return out
    except Exception:  # noqa: BLE001 - names are cosmetic
        return {}


def _esc(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, Any]]) -> str:
    items = [f'{k}="{_esc(v)}"' for k, v in pairs]
    return "{" + ",".join(items) + "}" if items else ""


def _num(v: float) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if v == float("inf"):
        return "+Inf"
    return repr(float(v))


class Histogram:
    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._declared: set[str] = set()

    def family(self, name: str, kind: str, help_text: str) -> None:
        if name not in self._declared:
            self._declared.add(name)
            self.lines.append(f"# HELP {name} {help_text}")
            self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Iterable[tuple[str, Any]], value: float) -> None:
        self.lines.append(f"{name}{_labels(labels)} {_num(value)}")

    def histogram(self, name: str, labels: list[tuple[str, Any]], h: Histogram) -> None:
        acc = 0
        for bound, c in zip(h.bounds, h.counts):
            acc += c
            self.sample(f"{name}_bucket", labels + [("le", _num(float(bound)))], acc)
        self.sample(f"{name}_bucket", labels + [("le", "+Inf")], h.count)
        self.sample(f"{name}_sum", labels, h.sum)
        self.sample(f"{name}_count", labels, h.count)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class BrokerMetrics:
    """The counters the broker updates, and the scrape that reads everything else from the broker."""

    def __init__(self, services: Any, host: MetricsHost) -> None:
        """``services``: the broker's ``services.BrokerServices`` (not imported: the replica manager, which
        the services hold, reports into this module)."""
        self.services = services
        self.host = host
        self.api_names = _api_names()
        self.requests: dict[int, int] = defaultdict(int)
        self.request_bytes: dict[int, Histogram] = {}
        self.response_bytes: dict[int, int] = defaultdict(int)
        self.latency: dict[int, Histogram] = {}
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.produce_requests: dict[str, int] = defaultdict(int)
        self.fetch_requests: dict[str, int] = defaultdict(int)
        self.isr_shrinks = 0  # a cluster's leaders (cluster.replica)
        self.isr_expands = 0
        self.started = time.time()
        self.server: asyncio.AbstractServer | None = None
        self.address: tuple[str, int] | None = None

    # ------------------------------------------------------------------------------------------ hot path
    def observe_request(self, api_key: int, request_size: int, response_parts: Any, seconds: float) -> None:
        self.requests[api_key] += 1
        h = self.latency.get(api_key)
        if h is None:
            h = self.latency[api_key] = Histogram(LATENCY_BUCKETS_MS)
        h.observe(seconds * 1000.0)
        rb = self.request_bytes.get(api_key)
        if rb is None:
            rb = self.request_bytes[api_key] = Histogram(SIZE_BUCKETS)
        rb.observe(request_size)
        if response_parts:
            n = 0
            for part in response_parts:
                n += part.nbytes if isinstance(part, memoryview) else len(part)
            self.response_bytes[api_key] += n

    def record_append(self, topic: str, nbytes: int, nrecords: int) -> None:
        """A successful append (failed ones are not counted yet)."""
        self.produce_requests[topic] += 1
        self.messages_in[topic] += nrecords
        self.bytes_in[topic] += nbytes

    def record_isr_change(self, expanded: bool) -> None:
        if expanded:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1

    def record_read(self, topic: str, nbytes: int) -> None:
        self.fetch_requests[topic] += 1
        if nbytes:
            self.bytes_out[topic] += nbytes

    # ------------------------------------------------------------------------------------------ scrape
    def render(self) -> str:
        w = _Writer()
        self._render_requests(w)
        self._render_topics(w)
        try:
            self._render_partitions(w)
        except Exception:
            log.exception("metrics: partitions")
        try:
            self._render_groups(w)
        except Exception:
            log.exception("metrics: groups")
        self._render_server(w)
        self._render_quotas(w)
        self._render_limits(w)
        self._render_process(w)
        return w.text()

    def _name(self, api_key: int) -> str:
        return self.api_names.get(api_key, f"api{api_key}")

    def _render_requests(self, w: _Writer) -> None:
        n = "kafka_network_requestmetrics_requests_total"
        w.family(n, "counter", "Requests handled, per API (RequestsPerSec).")
        for k in sorted(self.requests):
            w.sample(n, [("request", self._name(k))], self.requests[k])
        n = "kafka_network_requestmetrics_totaltimems"
        w.family(n, "histogram", "Time from reading a request to its response, in ms (TotalTimeMs).")
        for k in sorted(self.latency):
            w.histogram(n, [("request", self._name(k))], self.latency[k])
        n = "kafka_network_requestmetrics_requestbytes"
        w.family(n, "histogram", "Request sizes in bytes (RequestBytes).")
        for k in sorted(self.request_bytes):
            w.histogram(n, [("request", self._name(k))], self.request_bytes[k])
        n = "kafka_network_requestmetrics_responsebytes_total"
        w.family(n, "counter", "Response bytes sent, per API.")
        for k in sorted(self.response_bytes):
            w.sample(n, [("request", self._name(k))], self.response_bytes[k])

    def _render_topics(self, w: _Writer) -> None:
        fams = [
            ("kafka_server_brokertopicmetrics_messagesin_total", "Records appended (MessagesInPerSec).",
             self.messages_in),
            ("kafka_server_brokertopicmetrics_bytesin_total",
             "Record bytes appended by producers (BytesInPerSec).",
             self.bytes_in),
            ("kafka_server_brokertopicmetrics_bytesout_total",
             "Record bytes sent to fetchers (BytesOutPerSec).",
             self.bytes_out),
            ("kafka_server_brokertopicmetrics_totalproducerequests_total",
             "Successful partition appends (TotalProduceRequestsPerSec without the failed ones).",
             self.produce_requests),
            ("kafka_server_brokertopicmetrics_totalfetchrequests_total",
             "Partition reads for fetchers (TotalFetchRequestsPerSec).", self.fetch_requests),
        ]
        for name, help_text, data in fams:
            w.family(name, "counter", help_text)
            total = 0
            for topic in sorted(data):
                w.sample(name, [("topic", topic)], data[topic])
                total += data[topic]
            w.sample(name, [], total)  # the all-topics figure, as Kafka's MBean without a topic tag

    def _partitions(self) -> list[Any]:
        rm = self.services.replica_manager
        if rm is None:
            return []
        return list(rm.partitions.values())

    def _render_partitions(self, w: _Writer) -> None:
        parts = self._partitions()
        w.family("kafka_server_replicamanager_partitioncount", "gauge", "Partitions on this broker.")
        w.sample("kafka_server_replicamanager_partitioncount", [], len(parts))
        node = self.services.node_id
        leaders = [p for p in parts if getattr(p, "leader_id", node) == node]
        w.family("kafka_server_replicamanager_leadercount", "gauge", "Partitions this broker leads.")
        w.sample("kafka_server_replicamanager_leadercount", [], len(leaders))
        under_min = 0
        under_rep = 0
        for p in leaders:  # as Kafka: counted by the leader
            isr = len(getattr(p, "isr", [1]) or [])
            replicas = len(getattr(p, "replicas", [1]) or [1])
            min_isr = int(getattr(p.config, "min_insync_replicas", 1) or 1)
            under_min += isr < min_isr
            under_rep += isr < replicas
        w.family("kafka_server_replicamanager_underminisrpartitioncount", "gauge",
                 "Partitions whose ISR is smaller than min.insync.replicas.")
        w.sample("kafka_server_replicamanager_underminisrpartitioncount", [], under_min)
        w.family("kafka_server_replicamanager_underreplicatedpartitions", "gauge",
                 "Partitions whose ISR is smaller than their replica set.")
        w.sample("kafka_server_replicamanager_underreplicatedpartitions", [], under_rep)
        self._render_cluster(w, leaders)
        fams = (("kafka_log_log_size", "Bytes of a partition's log segments (Log Size)."),
                ("kafka_log_log_logendoffset", "Log end offset of a partition (LogEndOffset)."),
                ("kafka_log_log_logstartoffset", "Log start offset of a partition (LogStartOffset)."),
                ("kafka_log_log_numlogsegments", "Segments of a partition's log (NumLogSegments)."),
                ("kafka_cluster_partition_highwatermark", "High watermark of a partition."))
        rows = []
        for p in sorted(parts, key=lambda p: (p.topic, p.index)):
            plog = p.log
            try:
                size = plog.size_in_bytes() if callable(getattr(plog, "size_in_bytes", None)) else 0
            except Exception:  # noqa: BLE001 - a log being deleted
                continue
            segs = plog.segments
            rows.append(([("topic", p.topic), ("partition", p.index)],
                         (size, plog.log_end_offset, plog.log_start_offset, len(segs), p.high_watermark)))
        for i, (name, help_text) in enumerate(fams):
            w.family(name, "gauge", help_text)
            for labels, values in rows:
                w.sample(name, labels, values[i])

    def _render_cluster(self, w: _Writer, leaders: list[Any]) -> None:
        """ISR changes, the active controller and the followers' lag (docs/cluster.md)."""
        w.family("kafka_server_replicamanager_isrshrinks_total", "counter", "ISR shrinks by this leader.")
        w.sample("kafka_server_replicamanager_isrshrinks_total", [], self.isr_shrinks)
        w.family("kafka_server_replicamanager_isrexpands_total", "counter", "ISR expansions by this leader.")
        w.sample("kafka_server_replicamanager_isrexpands_total", [], self.isr_expands)
        cluster = self.services.cluster
        controller = getattr(cluster, "controller", None) if cluster is not None else None
        active = 1 if cluster is None or (controller is not None and controller.active) else 0
        w.family("kafka_controller_kafkacontroller_activecontrollercount", "gauge",
                 "1 on the active controller (a single-node broker is its own controller).")
        w.sample("kafka_controller_kafkacontroller_activecontrollercount", [], active)
        lagging = [(p, r, leo) for p in leaders
                   for r, leo in (getattr(p, "follower_leo", None) or {}).items()]
        if lagging:
            w.family("moldau_replica_lag_messages", "gauge",
                     "Leader's log end offset minus a follower's last fetch offset.")
            for p, r, leo in lagging:
                lag = p.log.log_end_offset - leo if leo >= 0 else p.log.log_end_offset
                w.sample("moldau_replica_lag_messages", [("topic", p.topic), ("partition", p.index),
                                                         ("replica", r)], lag)

    def _render_groups(self, w: _Writer) -> None:
        gc = self.services.group_coordinator
        groups = dict(gc.groups.items()) if gc is not None else {}
        by_state: dict[str, int] = defaultdict(int)
        for g in groups.values():
            by_state[_state(g)] += 1
        w.family("kafka_coordinator_group_groupmetadatamanager_numgroups", "gauge",
                 "Groups known (NumGroups).")
        w.sample("kafka_coordinator_group_groupmetadatamanager_numgroups", [], len(groups))
        for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"):
            name = f"kafka_coordinator_group_groupmetadatamanager_numgroups{state.lower()}"
            w.family(name, "gauge", f"Groups in state {state} (NumGroups{state}).")
            w.sample(name, [], by_state.get(state, 0))
        w.family("moldau_group_members", "gauge", "Members of a group.")
        for gid in sorted(groups):
            w.sample("moldau_group_members", [("group", gid)], len(getattr(groups[gid], "members", {}) or {}))
        # committed offsets and lag per group and partition (kafka_exporter's names)
        rm = self.services.replica_manager
        w.family("kafka_consumergroup_current_offset", "gauge",
                 "Committed offset of a group for a partition.")
        w.family("kafka_consumergroup_lag", "gauge", "Log end offset minus the committed offset.")
        w.family("kafka_consumergroup_lag_sum", "gauge", "Sum of a group's lag over a topic.")
        lag_rows = []
        sums: dict[tuple[str, str], int] = defaultdict(int)
        for gid in sorted(groups):
            offsets = dict(getattr(groups[gid], "offsets", {}) or {})
            for tp in sorted(offsets):
                topic, partition = tp[0], tp[1]
                committed = offsets[tp].offset
                p = rm.get_partition(topic, partition) if rm is not None else None
                labels = [("consumergroup", gid), ("topic", topic), ("partition", partition)]
                w.sample("kafka_consumergroup_current_offset", labels, committed)
                if p is not None and committed >= 0:
                    lag = max(p.high_watermark - committed, 0)
                    lag_rows.append((labels, lag))
                    sums[(gid, topic)] += lag
        for labels, lag in lag_rows:
            w.sample("kafka_consumergroup_lag", labels, lag)
        for (gid, topic), total in sorted(sums.items()):
            w.sample("kafka_consumergroup_lag_sum", [("consumergroup", gid), ("topic", topic)], total)

    def _render_server(self, w: _Writer) -> None:
        b = self.services
        conns = list(self.host.connections)
        w.family("kafka_server_socketservermetrics_connection_count", "gauge", "Open client connections.")
        by_listener: dict[str, int] = defaultdict(int)
        for c in conns:
            by_listener[str(getattr(c, "listener_name", "") or "")] += 1
        if not by_listener:
            w.sample("kafka_server_socketservermetrics_connection_count", [], 0)
        for name, n in sorted(by_listener.items()):
            w.sample("kafka_server_socketservermetrics_connection_count", [("listener", name)], n)
        rm = b.replica_manager
        fetch_waiting = 0
        produce_waiting = 0
        if rm is not None:
            futs: set[int] = set()
            for p in rm.partitions.values():
                for f in getattr(p, "waiters", ()) or ():
                    futs.add(id(f))
            fetch_waiting = len(futs)
            fl = getattr(rm, "flusher", None)
            produce_waiting = len(getattr(fl, "_pending", ()) or ())
        name = "kafka_server_delayedoperationpurgatory_purgatorysize"
        w.family(name, "gauge", "Requests waiting: long-polling fetches, produces waiting for an fsync.")
        w.sample(name, [("delayedOperation", "Fetch")], fetch_waiting)
        w.sample(name, [("delayedOperation", "Produce")], produce_waiting)
        w.family("moldau_broker_info", "gauge", "Broker identity (value 1).")
        try:
            from moldau import __version__ as version
        except Exception:  # noqa: BLE001
            version = "unknown"
        w.sample("moldau_broker_info", [("version", version), ("node_id", b.node_id),
                                        ("cluster_id", b.cluster_id)], 1)
        started = self.host.started_at
        w.family("moldau_broker_uptime_seconds", "gauge", "Seconds since the broker became ready.")
        w.sample("moldau_broker_uptime_seconds", [], max(time.monotonic() - started, 0.0) if started else 0.0)

    def _render_quotas(self, w: _Writer) -> None:
        """Per quota group (user, client id) and quota: the measured rate and the throttle time handed out."""
        qm = self.services.quotas
        rows = qm.metrics() if qm is not None else []
        kinds = {"producer_byte_rate": "Produce", "consumer_byte_rate": "Fetch",
                 "request_percentage": "Request"}
        rate_help = ("Bytes/s (Produce, Fetch) or request-time percentage (Request) of a client quota group "
                     "over the quota window.")
        w.family("kafka_server_quota_rate", "gauge", rate_help)
        for key, user, client, rate, _throttle, _total in rows:
            labels = [("quota", kinds.get(key, key)), ("user", user), ("client_id", client)]
            w.sample("kafka_server_quota_rate", labels, rate)
        w.family("kafka_server_quota_throttle_time_ms_total", "counter", "Throttle time handed out (ms).")
        for key, user, client, _rate, throttle, _total in rows:
            labels = [("quota", kinds.get(key, key)), ("user", user), ("client_id", client)]
            w.sample("kafka_server_quota_throttle_time_ms_total", labels, throttle)

    def _render_limits(self, w: _Writer) -> None:
        """Bad request frames and connections refused by a limit (counted even when their log lines are
        suppressed), and the bytes of requests held (queued.max.request.bytes)."""
        counts = self.services.client_log.counts
        w.family("moldau_bad_frames_total", "counter", "Request frames that could not be handled (connection "
                                                       "closed).")
        w.sample("moldau_bad_frames_total", [], counts.get("bad_frames", 0))
        w.family("moldau_connections_refused_total", "counter", "Connections closed at accept by a limit.")
        w.sample("moldau_connections_refused_total", [], counts.get("connections_refused", 0))
        pool = self.services.request_memory
        w.family("moldau_request_bytes_held", "gauge", "Bytes of requests read and not yet handled (counted "
                                                       "when queued.max.request.bytes is set).")
        w.sample("moldau_request_bytes_held", [], pool.used if pool is not None else 0)

    def _render_process(self, w: _Writer) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        w.family("process_cpu_seconds_total", "counter", "User and system CPU time, in seconds.")
        w.sample("process_cpu_seconds_total", [], ru.ru_utime + ru.ru_stime)
        rss = None
        vms = None
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                fields = f.read().split()
            page = os.sysconf("SC_PAGE_SIZE")
            vms, rss = int(fields[0]) * page, int(fields[1]) * page
        except (OSError, ValueError, IndexError):
            rss = ru.ru_maxrss * 1024
        w.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
        w.sample("process_resident_memory_bytes", [], rss)
        if vms is not None:
            w.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
            w.sample("process_virtual_memory_bytes", [], vms)
        try:
            fds = len(os.listdir("/proc/self/fd"))
            w.family("process_open_fds", "gauge", "Open file descriptors.")
            w.sample("process_open_fds", [], fds)
        except OSError:
            pass
        try:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            w.family("process_max_fds", "gauge", "Maximum open file descriptors.")
            w.sample("process_max_fds", [], soft)
        except (OSError, ValueError):
            pass
        w.family("process_start_time_seconds", "gauge", "Start time of the metrics, seconds since the epoch.")
        w.sample("process_start_time_seconds", [], self.started)

    # ------------------------------------------------------------------------------------------ http
    async def start(self, spec: str) -> None:
        host, port = parse_listener(spec)
        self.server = await asyncio.start_server(self._handle, host or None, port, reuse_address=True)
        sock = self.server.sockets[0].getsockname() if self.server.sockets else (host, port)
        self.address = (sock[0], sock[1])
        log.info("metrics on http://%s:%d/metrics", host or "0.0.0.0", self.address[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            try:
                await wait_for(self.server.wait_closed(), 1.0)
            except (TimeoutError, Exception):  # pragma: no cover
                pass
            self.server = None

    def _ready(self) -> bool:
        return self.host.ready

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            first = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, target = (first[0], first[1]) if len(first) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"only GET\n"
            elif path == "/metrics":
                status, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
                body = self.render().encode()
            elif path in ("/health", "/healthz"):
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path in ("/ready", "/readyz"):
                ok = self._ready()
                status = "200 OK" if ok else "503 Service Unavailable"
                ctype, body = "text/plain", (b"ready\n" if ok else b"not ready\n")
            elif path == "/":
                status, ctype = "200 OK", "text/html"
                body = (b"<html><body><a href='/metrics'>metrics</a> <a href='/health'>health</a> "
                        b"<a href='/ready'>ready</a></body></html>\n")
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            hdr = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                   f"Connection: close\r\n\r\n").encode()
            writer.write(hdr if method == "HEAD" else hdr + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001  # pragma: no cover
                pass


def _state(g: Any) -> str:
    try:
        return str(g.state_name())
    except Exception:  # noqa: BLE001
        return "Unknown"


def parse_listener(spec: str) -> tuple[str, int]:
    """'HOST:PORT', ':PORT', 'PORT' or 'http://HOST:PORT' -> (host, port)."""
    s = spec.strip()
    if "://" in s:
        s = s.split("://", 1)[1]
    s = s.rstrip("/")
    if s.isdigit():
        return "127.0.0.1", int(s)
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port_s = rest.lstrip(":")
    else:
        host, _, port_s = s.rpartition(":")
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"{CONFIG_KEY}: expected HOST:PORT, got {spec!r}")
    return host, int(port_s)


class MetricsHost(Protocol):
    """What the scrape reads of the broker process itself (``broker.Broker`` is one)."""

    connections: set[Any]
    started_at: float

    @property
    def ready(self) -> bool: ...


async def start_metrics(services: Any, host: MetricsHost) -> BrokerMetrics | None:
    """Start the endpoint when ``metrics.listener`` is set; the counters exist either way (None = off)."""
    try:
        spec = services.config.get(CONFIG_KEY)
    except Exception:  # noqa: BLE001 - the key is not declared in this build
        spec = None
    if not spec:
        return None
    m = BrokerMetrics(services, host)
    await m.start(str(spec))
    return m
