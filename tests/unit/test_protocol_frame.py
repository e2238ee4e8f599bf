"""Request/response headers and framing, checked against kafka-python's header encoder where possible."""

from __future__ import annotations

import struct

import pytest

from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.errors import ProtocolDecodeError


def test_header_versions() -> None:
    assert frame.request_header_version(0, 8) == 1 and frame.request_header_version(0, 9) == 2
    assert frame.request_header_version(18, 2) == 1 and frame.request_header_version(18, 3) == 2
    assert frame.request_header_version(7, 0) == 0  # ControlledShutdown v0 (not declared)
    assert frame.response_header_version(0, 8) == 0 and frame.response_header_version(0, 9) == 1
    assert frame.response_header_version(18, 3) == 0 and frame.response_header_version(18, 4) == 0
    assert frame.response_header_version(68, 0) == 1


def test_encode_response_header() -> None:
    assert frame.encode_response_header(7, 3, 8) == struct.pack(">i", 7)
    assert frame.encode_response_header(7, 3, 9) == struct.pack(">i", 7) + b"\x00"
    assert frame.encode_response_header(7, 18, 4) == struct.pack(">i", 7)  # ApiVersions: always v0


@pytest.mark.parametrize(
    "api_key,version", [(18, 0), (18, 3), (3, 8), (3, 12), (0, 3), (0, 11), (1, 4), (1, 13)]
)
def test_request_roundtrip_and_kafka_python_header(api_key: int, version: int) -> None:
    pytest.importorskip("kafka")
    from kafka.protocol.api_header import RequestHeader as KpHeader

    req = m.REQUESTS[api_key].new()
    data = frame.encode_request(api_key, version, 42, "client-ü", req)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    hdr, off = frame.decode_request_header(data[4:])
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (
        api_key,
        version,
        42,
        "client-ü",
    )
    assert (hdr.request_api_key, hdr.request_api_version) == (api_key, version)
    body, end = m.REQUESTS[api_key].decode(data[4:], version, off)
    assert end == len(data) - 4 and body == req
    flexible = m.REQUESTS[api_key].is_flexible(version)
    kp = KpHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=42, client_id="client-ü"
    )
    assert bytes(kp.encode(flexible=flexible)) == data[4:off + 4]


def test_request_header_unknown_tags_and_null_client() -> None:
    raw = struct.pack(">hhih", 3, 12, 9, -1) + bytes([1, 5, 1, 0xAA])
    hdr, off = frame.decode_request_header(raw)
    assert hdr.client_id is None and hdr._unknown_tags == {5: b"\xaa"} and off == len(raw)


def test_unknown_api_key_still_yields_ids() -> None:
    hdr, off = frame.decode_request_header(struct.pack(">hhi", 999, 3, 77) + b"\x00")
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id) == (999, 3, 77)
    assert off == 8
    hdr, off = frame.decode_request_header(struct.pack(">hhih", 999, 3, 77, 1) + b"x" + b"rest")
    assert hdr.client_id == "x" and off == 11
    with pytest.raises(ProtocolDecodeError):
        frame.decode_request_header(b"\x00\x01\x00")


def test_truncated_header_of_known_api() -> None:
    with pytest.raises(ProtocolDecodeError):
        frame.decode_request_header(struct.pack(">hhih", 3, 1, 1, 10) + b"abc")


def test_response_frames() -> None:
    R = m.ProduceResponse
    resp = R.new(responses=[R.TopicProduceResponse(name="t", partition_responses=[
        R.PartitionProduceResponse(index=0, base_offset=5)])])
    for version in (3, 9):
        data = frame.encode_response(11, 0, version, resp)
        assert b"".join(bytes(p) for p in frame.encode_response_parts(11, 0, version, resp)) == data
        (size,) = struct.unpack_from(">i", data)
        assert size == len(data) - 4
        hdr, off = frame.decode_response_header(data, 0, version, 4)
        assert hdr.correlation_id == 11
        body, end = R.decode(data, version, off)
        assert end == len(data) and body.responses[0].partition_responses[0].base_offset == 5
    # ApiVersions: v0 header even for the flexible v3 body
    av = frame.encode_response(5, 18, 3, m.ApiVersionsResponse.new())
    assert av[4:8] == struct.pack(">i", 5)
    assert m.ApiVersionsResponse.decode(av, 3, 8)[1] == len(av)


def test_api_versions_error_body_is_v0() -> None:
    R = m.ApiVersionsResponse
    err = R.new(error_code=35, api_keys=[R.ApiVersion(api_key=18, min_version=0, max_version=3)])
    v0 = R.encode(err, 0)
    back, end = frame.decode_api_versions_response(v0, 3)  # client asked v3, broker answered v0
    assert end == len(v0) and back.api_keys[0].max_version == 3
    ok = R.new(api_keys=[R.ApiVersion(api_key=0, min_version=0, max_version=11)], throttle_time_ms=5)
    back, _ = frame.decode_api_versions_response(R.encode(ok, 3), 3)
    assert back.throttle_time_ms == 5
