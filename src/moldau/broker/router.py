"""Request routing: frame -> header -> handler -> response parts.

* The api key, version and correlation id sit at fixed offsets in every request header version, so they
  are read before the header is decoded: an unknown api key closes the connection (as Kafka does), an
  unsupported version of ApiVersions is answered with UNSUPPORTED_VERSION (35) and ApiVersions' own range in
  a v0 body (clients then retry with a version we know; Kafka's answer, KIP-511), an unsupported version of
  any other API closes the connection.
* A request that does not decode: one log line, close.
* A handler raising KafkaError: the message's top-level error response when the response has a top-level
  error_code at that version, otherwise log + close.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import TYPE_CHECKING, Any, Literal

from moldau.protocol import frame as _frame
from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError, ProtocolEncodeError, error_code_of

from .context import RequestContext
from .registry import HANDLERS, SERVED, load_handler

if TYPE_CHECKING:
    from .connection import Connection
    from .services import BrokerServices

log = logging.getLogger(__name__)

_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
API_VERSIONS = 18


def _error_message(exc: BaseException) -> str | None:
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return None


def frame_response(correlation_id: int, api_key: int, version: int, body_parts: list[Any]) -> list[Any]:
    """[size, header, *body] ready for transport.writelines."""
    header = _frame.encode_response_header(correlation_id, api_key, version)
    size = len(header)
    for p in body_parts:
        size += p.nbytes if isinstance(p, memoryview) else len(p)
    return [_SIZE.pack(size) + header, *body_parts]


def api_versions_keys() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every served API (registry.SERVED), sorted by key."""
    return [(key, lo, hi) for key, (_module, lo, hi) in sorted(SERVED.items())]


def _has_field(msg: Any, attr: str, version: int) -> bool:
    """Whether message ``msg`` has the top-level field ``attr`` at ``version``."""
    for f in msg.fields:
        if f.attr == attr:
            return bool(f.present(version))
    return False


MAX_ERROR_MESSAGE = 1024  # characters of an error message kept when a response would not encode


def shorten_error_messages(obj: Any) -> bool:
    """Cut every ``error_message`` in a response object (and its nested structs) to MAX_ERROR_MESSAGE
    characters; whether any was cut."""
    cut = False
    for attr in getattr(type(obj), "__slots__", ()):
        value = getattr(obj, attr, None)
        if attr == "error_message" and isinstance(value, str) and len(value) > MAX_ERROR_MESSAGE:
            setattr(obj, attr, value[:MAX_ERROR_MESSAGE] + "...")
            cut = True
        elif isinstance(value, list):
            for item in value:
                cut = shorten_error_messages(item) or cut
        elif hasattr(type(value), "_fields"):
            cut = shorten_error_messages(value) or cut
    return cut


class Router:
    def __init__(self, services: BrokerServices) -> None:
        self.services = services

    async def dispatch(self, conn: "Connection", frame: bytearray) -> list[Any] | Literal[False] | None:
        """Handle one request frame. Returns response parts, None (no response) or False (close)."""
        auth = conn.auth
        if auth is not None and not auth.open:
            # SASL listener, not (or no longer) authenticated: only ApiVersions and the SASL requests pass;
            # after SaslHandshake v0 the frames are bare SASL tokens, answered here
            verdict = await auth.gate(conn, frame)
            if verdict is not None:
                return verdict
        if len(frame) < 8:
            self.services.client_log.event(
                "bad_frames", conn.peer[0], "closing connection from %s:%d: request of %d bytes is too short "
                "for a header", conn.peer[0], conn.peer[1], len(frame))
            return False
        api_key, version, correlation_id = _PEEK.unpack_from(frame, 0)
        spec = HANDLERS.get(api_key)
        if spec is None:
            spec = load_handler(api_key)  # the first request of this API imports its handler module
        if spec is None:
            self.services.client_log.event(
                "bad_frames", conn.peer[0], "closing connection from %s:%d: unknown api key %d (version %d)",
                conn.peer[0], conn.peer[1], api_key, version)
            return False
        if not spec.min_version <= version <= spec.max_version:
            if api_key == API_VERSIONS:
                return self._api_versions_unsupported(correlation_id)
            self.services.client_log.event(
                "bad_frames", conn.peer[0], "closing connection from %s:%d: %s v%d is not supported (%d-%d)",
                conn.peer[0], conn.peer[1], spec.name, version, spec.min_version, spec.max_version)
            return False
        metrics = self.services.metrics
        t0 = time.perf_counter()  # also the request time charged to request_percentage quotas
        view = memoryview(frame)
        try:
            header, offset = _frame.decode_request_header(view)
            req_msg = m.REQUESTS[api_key]
            req, _end = req_msg.decode(view, version, offset)
        except Exception as e:
            self.services.client_log.event(
                "bad_frames", conn.peer[0], "closing connection from %s:%d: cannot decode %s v%d request: %s",
                conn.peer[0], conn.peer[1], spec.name, version, e)
            return False
        client_id = getattr(header, "client_id", None)
        if client_id is not None:
            conn.client_id = client_id
        ctx = RequestContext(self.services, api_key, version, correlation_id, client_id, conn, header)
        try:
            resp = await spec.fn(ctx, req)
        except KafkaError as e:
            resp_msg = m.RESPONSES[api_key]
            if not _has_field(resp_msg, "error_code", version):
                log.warning("closing connection from %s:%d: %s v%d failed: %s", conn.peer[0], conn.peer[1],
                            spec.name, version, e)
                return False
            resp = resp_msg.new()
            resp.error_code = error_code_of(e)
            if _has_field(resp_msg, "error_message", version):
                resp.error_message = _error_message(e)
        quotas = self.services.quotas
        if resp is None:
            if quotas is not None and not quotas.empty:
                ms = quotas.request_throttle(conn.principal, client_id, api_key, len(frame), 0,
                                             time.perf_counter() - t0)
                if ms > 0:
                    conn.mute(ms)
            if metrics is not None:
                metrics.observe_request(api_key, len(frame), None, time.perf_counter() - t0)
            return None
        try:
            body = m.RESPONSES[api_key].encode_parts(resp, version)
        except ProtocolEncodeError:
            # an error message echoing a client's string of up to 32,767 bytes ("Topic name ... is illegal")
            # can outgrow a non-compact string: cut the messages, answer, rather than close the connection
            if not shorten_error_messages(resp):
                raise
            body = m.RESPONSES[api_key].encode_parts(resp, version)
        parts = frame_response(correlation_id, api_key, version, body)
        if quotas is not None and not quotas.empty:
            parts = self._throttle(conn, quotas, resp, api_key, version, correlation_id, client_id,
                                   len(frame), parts, time.perf_counter() - t0)
        if metrics is not None:
            metrics.observe_request(api_key, len(frame), parts, time.perf_counter() - t0)
        return parts

    @staticmethod
    def _throttle(conn: Connection, quotas: Any, resp: Any, api_key: int, version: int, correlation_id: int,
                  client_id: str | None, request_bytes: int, parts: list[Any], seconds: float) -> list[Any]:
        """Client quotas (KIP-219): the throttle time goes into the response's ``throttle_time_ms`` and the
        connection reads no further request for that long; the response itself leaves at once."""
        response_bytes = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
        ms = quotas.request_throttle(conn.principal, client_id, api_key, request_bytes, response_bytes,
                                     seconds)
        if ms <= 0:
            return parts
        conn.mute(ms)
        resp_msg = m.RESPONSES[api_key]
        if not _has_field(resp_msg, "throttle_time_ms", version):
            return parts
        # the larger of this and a throttle the handler set (controller mutations, KIP-599), as Kafka
        resp.throttle_time_ms = min(max(ms, getattr(resp, "throttle_time_ms", 0) or 0), 2**31 - 1)
        return frame_response(correlation_id, api_key, version, resp_msg.encode_parts(resp, version))

    def _api_versions_unsupported(self, correlation_id: int) -> list[Any]:
        # ApiVersions' own range only, as Kafka (KIP-511: ApiVersionsRequest.getErrorResponse)
        msg = m.RESPONSES[API_VERSIONS]
        resp = msg.new(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
            msg.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in api_versions_keys()
            if k == API_VERSIONS])
        body = msg.encode_parts(resp, 0)
        return frame_response(correlation_id, API_VERSIONS, 0, body)
