"""Fetch long polling: an empty fetch waits up to max_wait_ms, and returns as soon as data arrives."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness.kafkautil import produce_confluent
from harness.rawkafka import RawConnection, fetch_request

FETCH_V = 11  # non-flexible, topics by name; KIP-392 fields present


def _records_in(resp) -> tuple[int, int, bytes]:
    (t,) = resp.responses
    (p,) = t.partitions
    raw = p.records
    if raw is not None and not isinstance(raw, (bytes, bytearray, memoryview)):
        raw = raw.buffer if hasattr(raw, "buffer") else bytes(raw)
    return p.error_code, p.high_watermark, bytes(raw or b"")


def _fetch_in_background(bootstrap: str, topic: str, max_wait_ms: int, result: dict) -> threading.Thread:
    from kafka.protocol.consumer import FetchResponse

    conn = RawConnection.to_leader(bootstrap, topic, 0, timeout=max_wait_ms / 1000 + 10)

    def run() -> None:
        try:
            t0 = time.monotonic()
            result["resp"] = conn.call(fetch_request(topic, 0, 0, max_wait_ms), FetchResponse, FETCH_V)
            result["returned_at"] = time.monotonic()
            result["elapsed"] = result["returned_at"] - t0
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            result["error"] = e
        finally:
            conn.close()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


WAKE_GAP = pytest.mark.tansu_gap("tansu does not wake a parked fetch when a record arrives")


@WAKE_GAP
def test_fetch_returns_as_soon_as_a_record_is_produced(broker, make_topic):
    topic = make_topic(1)
    result: dict = {}
    th = _fetch_in_background(broker.bootstrap, topic, 5000, result)
    time.sleep(0.8)  # the fetch is parked at the broker
    assert "resp" not in result and "error" not in result, (
        f"fetch on an empty partition returned early: {result}"
    )
    produced_at = time.monotonic()
    produce_confluent(broker.bootstrap, topic, [dict(value=b"wake-up", partition=0)], conf={"linger.ms": 0})
    th.join(10)
    assert "error" not in result, result.get("error")
    latency = result["returned_at"] - produced_at
    assert latency < 1.0, f"fetch returned {latency:.2f}s after the produce (max_wait 5 s)"
    err, hw, records = _records_in(result["resp"])
    assert err == 0 and hw == 1
    assert b"wake-up" in records


@pytest.mark.parametrize("max_wait_ms", [300, 2000])
def test_empty_fetch_returns_after_max_wait(broker, make_topic, max_wait_ms):
    topic = make_topic(1)
    result: dict = {}
    th = _fetch_in_background(broker.bootstrap, topic, max_wait_ms, result)
    th.join(max_wait_ms / 1000 + 10)
    assert "error" not in result, result.get("error")
    elapsed = result["elapsed"]
    assert max_wait_ms / 1000 * 0.9 <= elapsed <= max_wait_ms / 1000 + 1.0, (
        f"empty fetch with max_wait {max_wait_ms} ms returned after {elapsed:.2f}s"
    )
    err, hw, records = _records_in(result["resp"])
    assert (err, hw, records) == (0, 0, b"")


def test_fetch_with_data_does_not_wait(broker, make_topic):
    topic = make_topic(1)
    produce_confluent(broker.bootstrap, topic, [dict(value=b"ready", partition=0)])
    result: dict = {}
    th = _fetch_in_background(broker.bootstrap, topic, 5000, result)
    th.join(10)
    assert "error" not in result, result.get("error")
    assert result["elapsed"] < 0.5, f"fetch with data available took {result['elapsed']:.2f}s"
    assert b"ready" in _records_in(result["resp"])[2]


@WAKE_GAP
def test_consumer_latency_with_long_fetch_wait(broker, make_topic):
    """A confluent-kafka consumer with fetch.wait.max.ms=5000 sees a new record within a second."""
    topic = make_topic(1)
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "lp-" + topic, "fetch.wait.max.ms": 5000}
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:  # connected, first fetch parked at the broker
            assert c.poll(0.1) is None
        produced_at = time.monotonic()
        produce_confluent(broker.bootstrap, topic, [dict(value=b"fresh", partition=0)], conf={"linger.ms": 0})
        while True:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                break
            assert time.monotonic() - produced_at < 6, "record not consumed"
        latency = time.monotonic() - produced_at
        assert m.value() == b"fresh"
        assert latency < 1.0, f"consumer saw the record {latency:.2f}s after it was produced"
    finally:
        c.close()
