"""The 0.6-era Node.js client ``kafka`` 0.2.3 (magic-0 messages, no attributes byte) and franz-kafka 0.7.5
(magic 1) on the same partition of the legacy listener: each gets its own messages back exactly, in order, at
the byte offsets it computed, reads the other's, and confluent-kafka reads both on the modern listener; the
same after a restart, a kill -9, segment rolls and a retention pass."""

from __future__ import annotations

import json
import shutil
import subprocess
import zlib
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from moldau.protocol import kafka07 as k07

from .conftest import NODE_DIR, Broker07, franz_consume, franz_produce, wait_for, walk, walk_all


def kafka06(*args: str, stdin: str | None = None, timeout: float = 60) -> list[dict[str, Any]]:
    """Run tests/kafka07/node/kafka06.js; its JSON lines."""
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh --test installs it"
    assert (NODE_DIR / "node_modules" / "kafka").is_dir(), \
        "the npm package kafka is missing: scripts/setup.sh --test installs tests/kafka07/node"
    r = subprocess.run([node, "kafka06.js", *args], cwd=NODE_DIR, input=stdin, capture_output=True, text=True,
                       timeout=timeout, check=False)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    errors = [x["error"] for x in lines if "error" in x]
    assert r.returncode == 0 and not errors, \
        f"kafka06.js {args} failed ({r.returncode}): {errors} {r.stderr[-2000:]}"
    return lines


def produce06(port: int, topic: str, requests: list[list[str]]) -> None:
    kafka06("produce", "127.0.0.1", str(port), topic, "0", stdin=json.dumps(requests))


def consume06(port: int, topic: str, count: int, offset: int = 0) -> list[tuple[str, int]]:
    """(payload, byte offset after it as the client computed it) per message."""
    lines = kafka06("consume", "127.0.0.1", str(port), topic, "0", str(offset), str(count))
    return [(x["data"], x["next"]) for x in lines if "data" in x]


def _franz_payloads(tag: str, n: int) -> list[bytes]:
    """ASCII payloads whose CRC's last byte is ASCII too (what the 0.6 client misreads as the first payload
    byte of a magic-1 message, see ``test_each_client_reads_its_own_and_the_other``)."""
    out: list[bytes] = []
    i = 0
    while len(out) < n:
        p = f"{tag}-franz-{i}".encode()
        if zlib.crc32(p) & 0xFF < 0x80 and chr(zlib.crc32(p) & 0xFF).isprintable():
            out.append(p)
        i += 1
    return out


def _modern(b: Broker07, topic: str, count: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}-{count}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        for _ in range(300):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) >= count:
                break
    finally:
        c.close()
    return got


class _Scene:
    """0.6 messages, then franz's, then 0.6 again, on partition 0 of ``topic``."""

    def __init__(self, b: Broker07, topic: str, tag: str) -> None:
        self.topic = topic
        self.p06a = [f"{tag}-old-{i}" for i in range(7)]
        self.p07 = _franz_payloads(tag, 5)
        self.p06b = [f"{tag}-older-{i}-" + "x" * i for i in range(6)]
        produce06(b.legacy_port, topic, [self.p06a[:3], self.p06a[3:4], self.p06a[4:]])
        with b.client07() as c:
            walk_all(c, topic, 0, len(self.p06a))
        franz_produce(b.legacy_port, topic, self.p07, "none", batch_size=5)
        with b.client07() as c:
            walk_all(c, topic, 0, len(self.p06a) + len(self.p07))
        produce06(b.legacy_port, topic, [self.p06b])
        with b.client07() as c:
            self.msgs = walk_all(c, topic, 0, self.count)

    @property
    def count(self) -> int:
        return len(self.p06a) + len(self.p07) + len(self.p06b)

    @property
    def payloads(self) -> list[bytes]:
        return [p.encode() for p in self.p06a] + self.p07 + [p.encode() for p in self.p06b]

    @property
    def magics(self) -> list[int]:
        return [0] * len(self.p06a) + [1] * len(self.p07) + [0] * len(self.p06b)

    def check(self, b: Broker07, start: int = 0) -> None:
        """Both clients, from byte ``start`` (a boundary), get the messages from there as in ``msgs``."""
        keep = [i for i, (o, _m) in enumerate(self.msgs) if o >= start]
        ends = [self.msgs[i][0] + self.msgs[i][1].size for i in keep]
        with b.client07() as c:
            assert walk(c, self.topic, 0, start) == [self.msgs[i] for i in keep]
        got06 = consume06(b.legacy_port, self.topic, len(keep), start)
        expect06 = [(self.payloads[i].decode() if self.magics[i] == 0
                     else chr(self.msgs[i][1].crc & 0xFF) + self.payloads[i].decode()) for i in keep]
        assert got06 == list(zip(expect06, ends))
        got7, fetches = franz_consume(b.legacy_port, self.topic, len(keep), offset=start, max_fetch_size=100)
        # franz-kafka 0.7.5's Message.parse takes the payload from byte 10 whatever the magic: of a magic-0
        # message it drops the first payload byte (and logs "Mismatched checksum"); the sizes, and so the
        # byte offsets it computes, are right
        assert got7 == [self.payloads[i][1 - self.magics[i]:] for i in keep]
        assert fetches[0] == start and set(fetches) <= {o for o, _m in self.msgs} | {ends[-1]}


def test_each_client_reads_its_own_and_the_other(broker07: Broker07, topic07: str) -> None:
    s = _Scene(broker07, topic07, "a")
    # stored as written: magic 0 stays magic 0 (16 bytes for "hello-0"-sized payloads), magic 1 stays 1
    assert [m.magic for _o, m in s.msgs] == s.magics
    assert [m.payload for _o, m in s.msgs] == s.payloads and all(m.valid for _o, m in s.msgs)
    assert [m.size for _o, m in s.msgs][:7] == [9 + len(p) for p in s.p06a]
    # the 0.6 client: its own messages exact, at the offsets it computed; franz's magic-1 messages as a
    # 0.7 broker gave them to it (it takes the attributes byte for the CRC's first byte, so the CRC's last
    # byte leads the payload), at the right offsets; franz-kafka: its own exact, the magic-0 ones with the
    # first byte missing (its parser's bug), at the right offsets, in 100-byte fetches
    s.check(broker07)
    # from the middle: a byte offset the 0.6 client computed
    s.check(broker07, s.msgs[len(s.p06a) + 2][0])
    # modern consumers see every record, magic or not
    assert _modern(broker07, topic07, s.count) == s.payloads


def test_magic0_survives_restart_kill9_roll_and_retention(broker07_factory, topic07: str) -> None:
    b: Broker07 = broker07_factory({"log.segment.bytes": "300", "log.retention.check.interval.ms": "200"})
    s = _Scene(b, topic07, "d")
    assert len(list((b.data_dir / f"{topic07}-0").glob("*.log"))) >= 2  # segment rolls
    s.check(b)
    b.restart()
    s.check(b)
    b.kill9()
    b.start()
    s.check(b)
    assert _modern(b, topic07, s.count) == s.payloads
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic07, incremental_configs=[
        ConfigEntry("retention.bytes", "1", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)
    del admin
    with b.client07() as c:
        def earliest_moved() -> int | None:
            _err, offs = c.offsets(topic07, 0, k07.EARLIEST_TIME, 1)
            return offs[0] if offs and offs[0] > 0 else None

        first = wait_for(earliest_moved, what="a retention pass")
    s.check(b, first)
