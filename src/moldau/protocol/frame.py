"""Request/response headers and size-prefixed framing (sans-I/O).

Header versions (Kafka's rules):
  * request header v1 (api key, api version, correlation id, nullable client id) for non-flexible versions of
    an API, v2 (v1 + tagged fields) for its flexible versions; v0 (no client id) only for
    ControlledShutdown v0, which moldau does not declare;
  * response header v0 (correlation id) for non-flexible versions, v1 (+ tagged fields) for flexible ones,
    except ApiVersions whose response header is always v0.
"""

from __future__ import annotations

import struct

from . import messages as m
from .errors import ProtocolDecodeError
from .primitives import Buf
from .schema import Message

__all__ = [
    "request_header_version", "response_header_version", "decode_request_header", "encode_request_header",
    "encode_response_header", "decode_response_header", "encode_request", "encode_response",
    "encode_response_parts", "decode_api_versions_response", "SIZE",
]

SIZE = struct.Struct(">i")
_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_CONTROLLED_SHUTDOWN = 7


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version (0, 1 or 2) for a request of this api key and version."""
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0  # ControlledShutdown v0's header has no client id
    msg = m.REQUESTS.get(api_key)
    if msg is None:
        return 1
    return msg.header_version(api_version)


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version (0 or 1) for a response of this api key and version."""
    msg = m.RESPONSES.get(api_key)
    if msg is None:
        return 0
    return msg.header_version(api_version)


def decode_request_header(buf: Buf, offset: int = 0) -> tuple[m.RequestHeader, int]:
    """Decode a request header at ``offset`` of a frame (without its size prefix).

    Returns ``(header, body_offset)``.  ``header`` is a ``RequestHeader`` object (``api_key``,
    ``api_version``, ``correlation_id``, ``client_id``, ``_unknown_tags``).  For an unknown api key the header
    is decoded as v1 where possible; when even that fails, the client id is None and ``body_offset`` points
    after the fixed 8 bytes, so the caller can still answer or close using the correlation id.
    """
    try:
        api_key, api_version, correlation_id = _HDR.unpack_from(buf, offset)
    except struct.error:
        raise ProtocolDecodeError("request header shorter than 8 bytes") from None
    hv = request_header_version(api_key, api_version)
    hdr_msg = m.RequestHeader
    if api_key not in m.REQUESTS:
        try:
            return hdr_msg.decode(buf, hv, offset)
        except ProtocolDecodeError:
            h = hdr_msg.new(request_api_key=api_key, request_api_version=api_version,
                            correlation_id=correlation_id, client_id=None)
            return h, offset + 8
    return hdr_msg.decode(buf, hv, offset)


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    hv = request_header_version(api_key, api_version)
    h = m.RequestHeader.new(request_api_key=api_key, request_api_version=api_version,
                            correlation_id=correlation_id, client_id=client_id)
    return m.RequestHeader.encode(h, hv)


_RESP_V0 = _I32.pack


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    """Response header bytes: v0 (correlation id) or v1 (+ empty tagged fields)."""
    if response_header_version(api_key, api_version) == 0:
        return _RESP_V0(correlation_id)
    return _RESP_V0(correlation_id) + b"\x00"


def decode_response_header(
    buf: Buf, api_key: int, api_version: int, offset: int = 0
) -> tuple[m.ResponseHeader, int]:
    """Decode a response header (client side); returns ``(ResponseHeader, body_offset)``."""
    return m.ResponseHeader.decode(buf, response_header_version(api_key, api_version), offset)


def decode_api_versions_response(
    buf: Buf, version: int, offset: int = 0
) -> tuple[m.ApiVersionsResponse, int]:
    """Decode an ApiVersionsResponse (client side), following Kafka's quirk: a broker that does not support
    the requested version answers UNSUPPORTED_VERSION with a v0 body, so a body carrying a non-zero error code
    is read as v0."""
    msg = m.ApiVersionsResponse
    try:
        (error_code,) = struct.unpack_from(">h", buf, offset)
    except struct.error:
        raise ProtocolDecodeError("ApiVersionsResponse shorter than its error code") from None
    if error_code != 0 and version > 0:
        try:
            return msg.decode(buf, 0, offset)
        except ProtocolDecodeError:
            pass
    return msg.decode(buf, version, offset)


def _message(table: dict[int, Message], api_key: int) -> Message:
    msg = table.get(api_key)
    if msg is None:
        raise KeyError(f"unknown api key {api_key}")
    return msg


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, obj: object
) -> bytes:
    """A complete size-prefixed request frame (client side)."""
    msg = _message(m.REQUESTS, api_key)
    header = encode_request_header(api_key, version, correlation_id, client_id)
    body = msg.encode_parts(obj, version)
    size = len(header) + sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in body)
    return b"".join([SIZE.pack(size), header, *body])


def encode_response_parts(correlation_id: int, api_key: int, version: int, obj: object) -> list[Buf]:
    """A size-prefixed response frame as a list of bytes-like parts (records not copied)."""
    msg = _message(m.RESPONSES, api_key)
    header = encode_response_header(correlation_id, api_key, version)
    body = msg.encode_parts(obj, version)
    size = len(header) + sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in body)
    return [SIZE.pack(size) + header, *body]


def encode_response(correlation_id: int, api_key: int, version: int, obj: object) -> bytes:
    """A complete size-prefixed response frame."""
    return b"".join(encode_response_parts(correlation_id, api_key, version, obj))
