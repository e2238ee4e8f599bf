"""The console's pieces without a browser: the filter expressions, decoders, paging, and the cluster
snapshot's caching against a real broker."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from moldau.client.types import ConsumerRecord
from moldau.console.cluster import ClusterView, parse_time_ms
from moldau.console.records import FilterError, RecordFilter, decode, parse_bytes, record_json

from harness.kafkautil import create_topic, unique_topic


def rec(
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None = None,
    offset: int = 5,
) -> ConsumerRecord:
    return ConsumerRecord("t", 1, offset, 1_700_000_000_000, 0, key, value, headers or [])


@pytest.mark.parametrize(
    "expr, want",
    [
        ('value.amount > 10 and key == "user-1"', True),
        ("value.amount > 50", False),
        ('value["tags"][0] == "a"', True),
        ('"b" in value.tags', True),
        ("not value.missing", True),
        ("value.missing > 1", False),  # a missing field never compares true
        ("offset >= 5 and partition == 1", True),
        ('headers.trace == "x1"', True),
        ("value.nested.deep == null", True),
        ("value.amount == -3 or value.amount == 42", True),
    ],
)
def test_expressions(expr: str, want: bool) -> None:
    r = rec(b'"user-1"', b'{"amount": 42, "tags": ["a", "b"], "nested": {"deep": null}}', [("trace", b"x1")])
    assert RecordFilter(expression=expr).matches(r) is want


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "value.__class__.__mro__",  # attribute access is a dict lookup: parses, matches nothing
        "(lambda: 1)()",
        "[x for x in value]",
        "value + 1",
        "open",
    ],
)
def test_expressions_run_nothing(expr: str) -> None:
    try:
        flt = RecordFilter(expression=expr)
    except FilterError:
        return
    assert not flt.matches(rec(b"k", b'{"a": 1}'))


def test_plain_filters() -> None:
    r = rec(b"user-7", b"hello world", [("trace", b"abc"), ("empty", None)])
    assert RecordFilter(key="user").matches(r) and not RecordFilter(key="nobody").matches(r)
    assert RecordFilter(value="lo wo").matches(r)
    assert RecordFilter(header="trace").matches(r) and RecordFilter(header="trace=abc").matches(r)
    assert not RecordFilter(header="trace=abd").matches(r)
    assert RecordFilter(header="empty").matches(r) and not RecordFilter(header="empty=").matches(r)
    assert not RecordFilter(key="x").matches(rec(None, b"v"))


def test_decoders_and_downloads() -> None:
    assert decode(b'{"a":[1,2]}', "json") == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert decode(b"not json", "json") == "not json"
    assert decode(b"\x00\xff", "hex") == "00 ff"
    assert decode(b"\x00\xff", "base64") == "AP8="
    assert decode(b"\xff<b>", "text") == "\ufffd<b>"
    assert decode(None, "text") is None
    assert parse_bytes("00 ff", "hex") == b"\x00\xff" and parse_bytes("AP8=", "base64") == b"\x00\xff"
    with pytest.raises(ValueError):
        parse_bytes("zz", "hex")
    j = record_json(rec(b"\xff\x00", b"text", [("h", b"\xfe")]))
    assert j["key"] == "/wA=" and j["key_encoding"] == "base64" and j["value"] == "text"
    assert j["headers"] == [{"key": "h", "value": "/g==", "encoding": "base64"}]
    assert "value_encoding" not in j


def test_parse_time() -> None:
    assert parse_time_ms("1700000000000") == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(ValueError):
        parse_time_ms("yesterday")


def test_stale_snapshot_is_served_while_a_fresh_one_is_taken(broker: Any) -> None:
    async def main() -> None:
        view = ClusterView({"bootstrap.servers": broker.bootstrap}, cache_ttl=0.0, stale_ttl=30.0)
        await view.start()
        try:
            first = await view.snapshot()
            name = unique_topic("stale")
            await asyncio.to_thread(create_topic, broker.bootstrap, name, 2)
            t0 = time.monotonic()
            again = await view.snapshot()  # stale but young enough: at once, refresh behind it
            assert again is first and name not in again.topics
            assert time.monotonic() - t0 < 0.05
            deadline = time.monotonic() + 20
            while name not in (await view.snapshot()).topics:
                assert time.monotonic() < deadline, "the background refresh never landed"
                await asyncio.sleep(0.05)
            assert len((await view.snapshot()).topics[name].partitions) == 2
            # an explicit max_age (the sampler's) always waits for a fresh one
            other = unique_topic("stale")
            await asyncio.to_thread(create_topic, broker.bootstrap, other, 1)
            assert other in (await view.snapshot(max_age=0)).topics
            # a change made through the console drops the snapshot: the next read is fresh
            third = unique_topic("stale")
            await view.create_topic(third, 1, -1, {})
            assert third in (await view.snapshot()).topics
        finally:
            await view.close()

    asyncio.run(main())
