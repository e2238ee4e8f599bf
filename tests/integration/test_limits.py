"""Connection and memory limits against a real broker: max.connections(.per.ip) refuse the excess and keep
serving the others, one log line per client, bad frames counted and logged with rate limiting, the bytes of
queued requests bounded by queued.max.request.bytes (RSS read from /proc), a data dir in use."""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
import urllib.request
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from harness.brokerproc import free_port, moldau_command
from harness.rawkafka import RawConnection, produce_request

pytestmark = [
    pytest.mark.moldau_only("moldau's connection and memory limits"),
    pytest.mark.single_broker("one process's connection and memory limits, raw connections to its one "
                              "address"),
    pytest.mark.kafka_differs("moldau's own limits and their log lines, its RSS bound on queued requests and "
                              "its data-dir lock (docs/compat.md lists what Kafka answers instead)"),
]


def api_versions_ok(c: RawConnection) -> bool:
    try:
        return c.call(ApiVersionsRequest(), ApiVersionsResponse, 0).error_code == 0
    except (OSError, AssertionError):
        return False


def closed_by_broker(c: RawConnection, timeout: float = 5.0) -> bool:
    c.sock.settimeout(timeout)
    try:
        return c.sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


def test_max_connections_per_ip_refuses_excess_logs_once_and_keeps_serving(broker_factory: Any) -> None:
    mport = free_port()
    b = broker_factory({"max.connections.per.ip": "3", "metrics.listener": f"127.0.0.1:{mport}"})
    kept = [RawConnection.to(b.bootstrap) for _ in range(3)]
    assert all(api_versions_ok(c) for c in kept)
    excess = [RawConnection.to(b.bootstrap) for _ in range(20)]
    assert all(closed_by_broker(c) for c in excess)
    assert all(api_versions_ok(c) for c in kept)  # the others are still served
    kept.pop().close()
    time.sleep(0.3)
    again = RawConnection.to(b.bootstrap)  # room again after one closed
    assert api_versions_ok(again)
    for c in kept + excess + [again]:
        c.close()
    assert b.output().count("refusing connections from 127.0.0.1") == 1
    assert metric(mport, "moldau_connections_refused_total") == 20

    # bad frames: each closes its connection, all are counted, the log gets one line for this client
    for i in range(60):
        with RawConnection.to(b.bootstrap) as c:
            c.sock.sendall(struct.pack(">ihhi", 8, 999, 0, i))  # unknown api key
            assert closed_by_broker(c)
        time.sleep(0.005)
    assert metric(mport, "moldau_bad_frames_total") == 60
    assert b.output().count("unknown api key 999") == 1
    assert b.output().count("closing connection from 127.0.0.1") == 1


def test_max_connections_with_per_ip_override(broker_factory: Any) -> None:
    b = broker_factory(
        {
            "max.connections.per.ip": "1",
            "max.connections.per.ip.overrides": "127.0.0.1:10",
            "max.connections": "4",
        }
    )
    conns = [RawConnection.to(b.bootstrap) for _ in range(4)]  # the override lifts the per-ip limit of 1
    assert all(api_versions_ok(c) for c in conns)
    extra = RawConnection.to(b.bootstrap)
    assert closed_by_broker(extra)  # max.connections
    assert all(api_versions_ok(c) for c in conns)
    assert "max.connections (4) reached" in b.output()
    for c in conns + [extra]:
        c.close()


def _rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


BOUND = 32 * 1024 * 1024
MARGIN = 32 * 1024 * 1024


def test_queued_request_bytes_bound_rss_under_a_flood_of_large_produces(broker_factory: Any) -> None:
    """Four connections try to send 250 produce requests of 10 MiB each without reading a response. Their
    client id has a 1 MB/s quota, so each connection is muted after its first request and would otherwise
    queue up to 64 MiB; queued.max.request.bytes holds the whole broker to 32 MiB of requests."""
    b = broker_factory({"queued.max.request.bytes": str(BOUND), "auto.create.topics.enable": "false"})
    r = subprocess.run(
        moldau_command()
        + [
            "quotas",
            "alter",
            "--bootstrap-server",
            b.bootstrap,
            "--client-id",
            "flood",
            "--set",
            "producer_byte_rate=1000000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    pid = b.pid
    time.sleep(1.0)
    base_rss, _ = _rss_kib(pid)
    batch = bytearray(10 * 1024 * 1024)  # opaque: the topic does not exist, nothing is written
    req = produce_request("no-such-topic", 0, batch, acks=1)
    req.with_header(correlation_id=1, client_id="flood")
    payload = bytes(req.encode(version=7, header=True, framed=True))
    sent = [0] * 4
    stop = threading.Event()

    def flood(i: int) -> None:
        s = socket.create_connection(("127.0.0.1", b.port))
        s.settimeout(0.5)
        try:
            for _ in range(250):
                view = memoryview(payload)
                while view and not stop.is_set():
                    try:
                        n = s.send(view)
                    except TimeoutError:
                        continue
                    view = view[n:]
                if stop.is_set():
                    break
                sent[i] += 1
        except OSError:
            pass
        finally:
            s.close()

    threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    peak = 0
    deadline = time.monotonic() + 6.0
    while time.monotonic() < deadline:
        peak = max(peak, _rss_kib(pid)[0])
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(10)
    hwm = _rss_kib(pid)[1]
    print(
        f"RSS before {base_rss / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, VmHWM {hwm / 1024:.0f} MiB; "
        f"requests sent {sum(sent)}"
    )
    assert sum(sent) >= 4  # the flood did start
    assert peak * 1024 <= base_rss * 1024 + BOUND + MARGIN
    assert hwm * 1024 <= base_rss * 1024 + BOUND + MARGIN
    assert b.alive()
    with RawConnection.to(b.bootstrap) as c:  # and it still serves
        assert api_versions_ok(c)


def test_data_dir_in_use_is_one_line_and_an_exit_code(fresh_broker: Any) -> None:
    port = free_port()
    r = subprocess.run(
        moldau_command() + ["broker", "--port", str(port), "--data-dir", str(fresh_broker.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr + r.stdout
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"moldau broker: error: log directory {fresh_broker.data_dir} is in use by another process"
    ]
