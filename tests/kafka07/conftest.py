"""Harness of the Kafka 0.7 listener tests: broker processes with a PLAINTEXT and a KAFKA07 listener on
loopback ports, a minimal 0.7 client over a socket (frames made by ``moldau.protocol.kafka07``), and the
real 0.7-era Node.js client franz-kafka (``node/``, installed by ``scripts/setup.sh --test``)."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

import pytest

from moldau.protocol import kafka07 as k07

from harness.brokerproc import BrokerProcess, free_port

NODE_DIR = Path(__file__).resolve().parent / "node"


class Broker07(BrokerProcess):
    """A moldau broker with ``listeners=PLAINTEXT://...:port,KAFKA07://...:legacy_port``."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None) -> None:
        port = free_port()
        self.legacy_port = free_port()
        merged = {"listeners": f"PLAINTEXT://127.0.0.1:{port},KAFKA07://127.0.0.1:{self.legacy_port}",
                  "group.initial.rebalance.delay.ms": "0", **(settings or {})}
        super().__init__("moldau", data_dir, port=port, settings=merged)

    def client07(self) -> Client07:
        return Client07("127.0.0.1", self.legacy_port)


class Client07:
    """One 0.7 connection: requests are ``moldau.protocol.kafka07`` dataclasses; answers are whole frames."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, req: Any) -> None:
        self.sock.sendall(k07.encode_request(req))

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def receive(self) -> bytes:
        head = self._read(4)
        (size,) = struct.unpack(">i", head)
        return head + self._read(size)

    def call(self, req: Any) -> bytes:
        self.send(req)
        return self.receive()

    def fetch(self, topic: str, partition: int, offset: int, max_size: int = 1 << 20) -> tuple[int, bytes]:
        return k07.decode_fetch_response(self.call(k07.FetchRequest(topic, partition, offset, max_size)))

    def offsets(self, topic: str, partition: int, time_ms: int, max_number: int = 100
                ) -> tuple[int, list[int]]:
        frame = self.call(k07.OffsetsRequest(topic, partition, time_ms, max_number))
        return k07.decode_offsets_response(frame)

    def produce(self, topic: str, partition: int, messages: bytes) -> None:
        self.send(k07.ProduceRequest(topic, partition, messages))

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (reads EOF)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


def walk(c: Client07, topic: str, partition: int, start: int = 0, max_size: int = 1 << 20
         ) -> list[tuple[int, k07.Message07]]:
    """Every message from byte ``start`` to the end, with its byte offset, computed the 0.7 way: next =
    offset + 4 + length. Fetches whole messages only (a partial one at the end of a response is fetched
    again from its own offset)."""
    out: list[tuple[int, k07.Message07]] = []
    offset = start
    while True:
        err, data = c.fetch(topic, partition, offset, max_size)
        assert err == k07.NO_ERROR, f"fetch at {offset}: error {err}"
        msgs = k07.parse_message_set(data, strict=False)
        if not msgs:
            assert not data, f"{len(data)} bytes at {offset} hold no whole message (fetch size too small)"
            return out
        for m in msgs:
            out.append((offset, m))
            offset += m.size


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def walk_all(c: Client07, topic: str, partition: int, count: int) -> list[tuple[int, k07.Message07]]:
    """``walk`` once ``count`` payloads are there (0.7 PRODUCE has no acknowledgement to wait for)."""
    def ready() -> list[tuple[int, k07.Message07]] | None:
        msgs = walk(c, topic, partition)
        return msgs if len(message_payloads(msgs)) >= count else None

    return wait_for(ready, what=f"{count} messages in {topic}-{partition}")


def message_payloads(msgs: list[tuple[int, k07.Message07]]) -> list[bytes]:
    """Payloads as a consumer sees them: compressed messages opened."""
    out: list[bytes] = []
    for _o, m in msgs:
        if m.codec == k07.NONE:
            out.append(m.payload)
        else:
            out.extend(p for _c, ps, _m in k07.validate_message_set(k07.encode_message(m.payload, m.codec),
                                                                  max_message_bytes=1 << 30) for p in ps)
    return out


# ------------------------------------------------------------------------------------------------ node
def franz(*args: str, stdin: str | None = None, timeout: float = 60) -> list[dict[str, Any]]:
    """Run tests/kafka07/node/franz.js; its JSON lines."""
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh --test installs it"
    assert (NODE_DIR / "node_modules" / "franz-kafka").is_dir(), \
        "franz-kafka is missing: scripts/setup.sh --test installs tests/kafka07/node"
    r = subprocess.run([node, "franz.js", *args], cwd=NODE_DIR, input=stdin, capture_output=True, text=True,
                       timeout=timeout, check=False)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    errors = [x["error"] for x in lines if "error" in x]
    assert r.returncode == 0 and not errors, \
        f"franz.js {args} failed ({r.returncode}): {errors} {r.stderr[-2000:]}"
    return lines


def franz_produce(port: int, topic: str, payloads: list[bytes], compression: str, batch_size: int) -> None:
    data = json.dumps([base64.b64encode(p).decode() for p in payloads])
    franz("produce", "127.0.0.1", str(port), topic, compression, str(batch_size), stdin=data)


def franz_consume(port: int, topic: str, count: int, *, partition: int = 0, offset: int = 0,
                  max_fetch_size: int = 300 * 1024) -> tuple[list[bytes], list[int]]:
    """(payloads, byte offsets of the client's FETCH requests)."""
    lines = franz("consume", "127.0.0.1", str(port), topic, str(partition), str(offset), str(count),
                  str(max_fetch_size))
    return ([base64.b64decode(x["data"]) for x in lines if "data" in x],
            [x["fetch"] for x in lines if "fetch" in x])


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def broker07_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Broker07]]:
    """``make(settings=None, start=True)``: brokers of one module, all closed after it."""
    with ExitStack() as stack:
        def make(settings: dict[str, str] | None = None, start: bool = True) -> Broker07:
            b = Broker07(tmp_path_factory.mktemp("broker07") / "data", settings)
            stack.callback(b.close)
            if start:
                b.start()
            return b

        yield make


@pytest.fixture(scope="module")
def broker07(broker07_factory: Callable[..., Broker07]) -> Broker07:
    """A broker shared by one module."""
    return broker07_factory()


_counter = [0]


@pytest.fixture
def topic07(request: pytest.FixtureRequest) -> str:
    _counter[0] += 1
    name = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:60]
    return f"k07-{name}-{_counter[0]}"
