#!/usr/bin/env python3
"""Codec throughput: decode/encode ops/s of a 100-partition FetchRequest and ProduceResponse.

Compares moldau's generated codecs with kafka-python's JSON-driven codec (when installed) in the same run.
Prints a table and a JSON line.  Not a test: nothing is asserted.

    python bench/protocol_codec.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from moldau.protocol import messages as m


def fetch_request() -> Any:
    R = m.FetchRequest
    topics = [R.FetchTopic(topic=f"topic-{t}", partitions=[
        R.FetchPartition(partition=p, current_leader_epoch=3, fetch_offset=123456 + p, log_start_offset=-1,
                         partition_max_bytes=1048576) for p in range(25)]) for t in range(4)]
    return R.new(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1,
                 session_id=0, session_epoch=-1, topics=topics, rack_id="")


def produce_response() -> Any:
    R = m.ProduceResponse
    responses = [R.TopicProduceResponse(name=f"topic-{t}", partition_responses=[
        R.PartitionProduceResponse(index=p, error_code=0, base_offset=1000 * p, log_append_time_ms=-1,
                                   log_start_offset=0) for p in range(25)]) for t in range(4)]
    return R.new(responses=responses, throttle_time_ms=0)


def rate(fn: Callable[[], Any], seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            fn()
        n += 20
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def kafka_python_codecs(name: str, obj_bytes: bytes, version: int) -> tuple[Callable[[], Any], Callable[[], Any]] | None:
    try:
        from kafka.protocol.consumer import FetchRequest
        from kafka.protocol.producer import ProduceResponse
    except ImportError:
        return None
    cls = {"FetchRequest": FetchRequest, "ProduceResponse": ProduceResponse}[name]
    decoded = cls.decode(obj_bytes, version=version)
    decoded._header = None

    def dec() -> Any:
        return cls.decode(obj_bytes, version=version)

    def enc() -> Any:
        return decoded.encode(version=version)

    return dec, enc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args()
    cases = [("FetchRequest", m.FetchRequest, fetch_request(), 11), ("FetchRequest", m.FetchRequest, fetch_request(), 15),
             ("ProduceResponse", m.ProduceResponse, produce_response(), 8),
             ("ProduceResponse", m.ProduceResponse, produce_response(), 11)]
    rows = []
    for name, msg, obj, version in cases:
        data = msg.encode(obj, version)
        row: dict[str, Any] = {"message": name, "version": version, "partitions": 100, "bytes": len(data),
                               "moldau_decode_ops": rate(lambda: msg.decode(data, version), args.seconds),
                               "moldau_encode_ops": rate(lambda: msg.encode(obj, version), args.seconds)}
        kp = kafka_python_codecs(name, data, version)
        if kp is not None:
            row["kafka_python_decode_ops"] = rate(kp[0], args.seconds)
            row["kafka_python_encode_ops"] = rate(kp[1], args.seconds)
        rows.append(row)
    print(f"{'message':<18}{'v':>3}{'bytes':>7}{'decode/s':>12}{'encode/s':>12}{'kp dec/s':>12}{'kp enc/s':>12}")
    for r in rows:
        print(f"{r['message']:<18}{r['version']:>3}{r['bytes']:>7}{r['moldau_decode_ops']:>12.0f}"
              f"{r['moldau_encode_ops']:>12.0f}{r.get('kafka_python_decode_ops', 0):>12.0f}"
              f"{r.get('kafka_python_encode_ops', 0):>12.0f}")
    print(json.dumps({"bench": "protocol_codec", "results": rows}))


if __name__ == "__main__":
    main()
