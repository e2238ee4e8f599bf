"""One TCP connection to one broker: size-prefixed frames, correlation ids, pipelining, ApiVersions.

``Connection`` is an ``asyncio.BufferedProtocol``. Requests are written as soon as they are sent (many in
flight); each response is matched to its request by correlation id and decoded with the request's api key
and version. Small responses are parsed out of one reusable receive buffer; a response larger than half of
it is received straight into a buffer of its own, so records in a fetch response stay a memoryview of the
bytes read from the socket (no copy). With ``reuse_receive_buffer`` (a caller with one request in flight
that is done with each answer before it sends the next request: the replica fetcher) that buffer is kept
and reused for the next large response instead of allocating (and page-faulting in) a new one each time.

A request without a response within its timeout fails with ``RequestTimedOutError`` and closes the
connection, as the Java client does (later responses on it could not be trusted to arrive).

Security: TLS when opened with an ``ssl.SSLContext`` (the broker's host name is the TLS server name); SASL
when given ``SaslCredentials``: after ApiVersions, SaslHandshake v1 and SaslAuthenticate rounds driven by the
sans-I/O mechanisms of ``moldau.protocol.sasl_mechanisms``. A refusal is a fatal ``AuthenticationError``.
When the broker limits the session (SaslAuthenticate v1+ ``session_lifetime_ms``, KIP-368), the connection
re-authenticates at a random point between 85 % and 95 % of it; requests sent meanwhile are held and written
once the re-authentication is done (the broker accepts nothing else during it).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import socket
import ssl
import struct
import time
from typing import TYPE_CHECKING, Callable, Literal, TypeAlias, TypedDict, TypeVar, Unpack, overload

from moldau._aio import wait_for
from moldau._version import __version__
from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.sasl_mechanisms import SaslError, client_mechanism

from .errors import (
    AuthenticationError,
    Codes,
    KafkaConnectionError,
    RequestTimedOutError,
    SaslAuthenticationError,
    SaslMechanismError,
    UnsupportedVersionError,
    broker_error,
    error_name,
)
from .security import SaslCredentials

if TYPE_CHECKING:  # the message stubs' base classes (no run-time module)
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

_Resp = TypeVar("_Resp", bound="ApiMessage")
# a request sent while re-authenticating: (future, api key, request, version, expect response, timeout)
_Held: TypeAlias = "tuple[asyncio.Future, int, ApiRequest[ApiMessage], int, bool, int | None]"

log = logging.getLogger(__name__)

__all__ = ["Connection", "ConnectionOptions", "CLIENT_API_VERSIONS", "describe_os_error"]

# API key -> (min, max) versions the client's code speaks. Negotiation takes the highest version inside both
# this range, the message declarations' range, and what the broker advertises.
CLIENT_API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 11),  # Produce: v3 is the first carrying RecordBatch v2; v13 would need topic ids
    1: (4, 12),  # Fetch: v4+ has last_stable_offset/aborted txns; v13+ uses topic ids
    2: (1, 9),  # ListOffsets
    3: (4, 12),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 7),  # OffsetFetch (v8+ batches groups)
    10: (0, 3),  # FindCoordinator (v4+ batches keys)
    11: (2, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups (v4: states filter, v5: types filter and group type)
    17: (1, 1),  # SaslHandshake (v0 would send bare tokens; v1 wraps them in SaslAuthenticate)
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics (v6 by topic id)
    21: (0, 2),  # DeleteRecords
    22: (0, 4),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn (v4+ is the brokers' batched form)
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn (v5 = transactions V2, KIP-890)
    28: (0, 4),  # TxnOffsetCommit (v5 = transactions V2)
    32: (1, 4),  # DescribeConfigs
    36: (0, 2),  # SaslAuthenticate (v1+: session_lifetime_ms)
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    60: (0, 1),  # DescribeCluster
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; v1: the member makes its id, regex subscriptions)
    69: (0, 1),  # ConsumerGroupDescribe
    76: (1, 1),  # ShareGroupHeartbeat (KIP-932)
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch (v2: acquire modes, renew acknowledgements)
    79: (1, 2),  # ShareAcknowledge (v2: renew acknowledgements)
    90: (0, 1),  # DescribeShareGroupOffsets (v1: lag)
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_SCRATCH = 1 << 17  # receive buffer for small responses
_BIG = _SCRATCH // 2  # responses larger than this get a buffer of their own
_API_VERSIONS = 18
_SASL_HANDSHAKE = 17
_SASL_AUTHENTICATE = 36


def describe_os_error(exc: BaseException) -> str:
    """A short cause for a failed connect: 'connection refused', 'timed out', 'cannot resolve host'..."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message or exc.reason or exc}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the peer"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in (errno.ECONNREFUSED,):
            return "connection refused"
        if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "host unreachable"
        return exc.strerror or str(exc)
    if isinstance(exc, KafkaConnectionError) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__


class ConnectionOptions(TypedDict, total=False):
    """The keyword arguments of ``Connection(host, port, ...)``, as ``Connection.open`` passes them on."""

    node_id: int
    client_id: str | None
    request_timeout_ms: int
    software_name: str
    software_version: str | None
    send_buffer_bytes: int
    receive_buffer_bytes: int
    ssl_context: ssl.SSLContext | None
    sasl: SaslCredentials | None
    loop: asyncio.AbstractEventLoop | None
    reuse_receive_buffer: bool


class _Pending:
    __slots__ = ("future", "api_key", "version", "timer", "sent_at")

    def __init__(self, future: asyncio.Future, api_key: int, version: int, timer: asyncio.TimerHandle,
                 sent_at: float):
        self.future = future
        self.api_key = api_key
        self.version = version
        self.timer = timer
        self.sent_at = sent_at


class Connection(asyncio.BufferedProtocol):
    """A connection to one broker. Create with ``await Connection.open(...)``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str | None = "moldau",
        request_timeout_ms: int = 30000,
        software_name: str = "moldau",
        software_version: str | None = None,
        send_buffer_bytes: int = 0,
        receive_buffer_bytes: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        reuse_receive_buffer: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.software_name = software_name
        self.software_version = software_version or __version__
        self._sndbuf = send_buffer_bytes
        self._rcvbuf = receive_buffer_bytes
        self._loop = loop or asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_corr = 0
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_view: memoryview | None = None
        self._big_pos = 0
        self._big_size = 0
        self._reuse = reuse_receive_buffer
        self._kept: bytearray | None = None  # the reused buffer for large responses
        self._closed_exc: BaseException | None = None
        self._close_waiters: list[asyncio.Future] = []
        self._close_callbacks: list[Callable[[Connection], object]] = []
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._versions: dict[int, int] = {}
        self.last_activity = time.monotonic()
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.session_lifetime_ms = 0  # from the last SaslAuthenticate (0: the session does not expire)
        self.reauthentications = 0
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task | None = None
        self._held: list[_Held] | None = None

    # ------------------------------------------------------------------------------------------------
    # opening

    @classmethod
    async def open(
        cls, host: str, port: int, *, connect_timeout_ms: int = 10000, **options: Unpack[ConnectionOptions]
    ) -> "Connection":
        """Connect and negotiate API versions. Raises KafkaConnectionError naming the address and cause."""
        conn = cls(host, port, **options)
        ctx = conn.ssl_context
        try:
            await wait_for(
                conn._loop.create_connection(lambda: conn, host, port, ssl=ctx,
                                             server_hostname=host if ctx is not None else None),
                connect_timeout_ms / 1000.0,
            )
        except ssl.SSLCertVerificationError as exc:
            raise AuthenticationError(f"cannot connect to {host}:{port}: {describe_os_error(exc)}") from exc
        except (OSError, asyncio.TimeoutError) as exc:
            hint = (
                " (is it a TLS listener?)"
                if ctx is not None and isinstance(exc, (ssl.SSLError, ConnectionResetError))
                else ""
            )
            err = KafkaConnectionError(f"cannot connect to {host}:{port}: {describe_os_error(exc)}{hint}")
            err.reason = f"{describe_os_error(exc)}{hint}"  # type: ignore[attr-defined]
            raise err from exc
        try:
            try:
                await conn._negotiate_versions()
            except KafkaConnectionError as exc:
                if "lost" in str(exc):
                    hint = (
                        "if it is a TLS listener, set security.protocol=SSL or SASL_SSL"
                        if ctx is None
                        else "a listener requiring client certificates closes TLS connections without a "
                        "valid one: ssl.certificate.location / ssl.key.location"
                    )
                    err = KafkaConnectionError(f"{exc} ({hint})")
                    err.reason = f"connection closed during ApiVersions ({hint})"  # type: ignore[attr-defined]
                    raise err from exc
                raise
            if conn.sasl is not None:
                await conn._authenticate()
        except BaseException:
            conn.close()
            raise
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._sndbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
                if self._rcvbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcvbuf)
            except OSError:  # pragma: no cover - platform dependent
                pass
        # let writes queue in user space rather than pausing on every produce burst
        try:
            transport.set_write_buffer_limits(high=4 << 20)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - transports without limits
            pass

    async def _negotiate_versions(self) -> None:
        version = min(3, m.ApiVersionsRequest.max_version)
        while True:
            req = m.ApiVersionsRequest.new(
                client_software_name=self.software_name, client_software_version=self.software_version
            )
            resp = await self.send(_API_VERSIONS, req, version=version)
            if resp.error_code == Codes.UNSUPPORTED_VERSION and version > 0:
                # The broker cannot parse this version: it answered with a v0 body listing its ranges.
                theirs = {a.api_key: a.max_version for a in resp.api_keys}
                nxt = theirs.get(_API_VERSIONS, 0)
                version = nxt if 0 <= nxt < version else 0
                log.debug("%s: ApiVersions v%s unsupported, retrying with v%s", self, version, version)
                continue
            if resp.error_code:
                raise broker_error(resp.error_code, "ApiVersions")
            break
        self.broker_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        self._versions.clear()

    # ------------------------------------------------------------------------------------------------
    # SASL

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds until the mechanism completes (also used for a
        KIP-368 re-authentication). Raises AuthenticationError (fatal) when the broker refuses."""
        sasl = self.sasl
        assert sasl is not None
        where = f"{self.host}:{self.port}"
        if _SASL_AUTHENTICATE not in self.broker_versions:
            raise UnsupportedVersionError(
                f"broker {where} does not offer SaslAuthenticate (Kafka < 1.0); the "
                "moldau client needs it for SASL"
            )
        hs = await self._send_now(_SASL_HANDSHAKE, m.SaslHandshakeRequest.new(mechanism=sasl.mechanism))
        if hs.error_code == Codes.UNSUPPORTED_SASL_MECHANISM:
            raise SaslMechanismError(f"broker {where} does not enable SASL mechanism {sasl.mechanism} "
                                     f"(enabled: {', '.join(hs.mechanisms or []) or 'none'})")
        if hs.error_code == Codes.ILLEGAL_SASL_STATE and not self.reauthenticating:
            raise AuthenticationError(
                f"SaslHandshake to {where} refused ({error_name(hs.error_code)}): is it a "
                "SASL listener? (security.protocol)"
            )
        if hs.error_code:
            raise AuthenticationError(f"SaslHandshake to {where} refused ({error_name(hs.error_code)})")
        mech = client_mechanism(sasl.mechanism, sasl.username, sasl.password)
        try:
            token = mech.step(None)
            while True:
                resp = await self._send_now(_SASL_AUTHENTICATE,
                                            m.SaslAuthenticateRequest.new(auth_bytes=token or b""))
                if resp.error_code == Codes.SASL_AUTHENTICATION_FAILED:
                    raise SaslAuthenticationError(
                        f"authentication of {sasl.username!r} ({sasl.mechanism}) at {where} failed: "
                        f"{resp.error_message or 'SASL authentication failed'}")
                if resp.error_code:
                    raise AuthenticationError(
                        f"SaslAuthenticate at {where} failed ({error_name(resp.error_code)}): "
                        f"{resp.error_message or ''}".rstrip(": ")
                    )
                if mech.complete:
                    break
                token = mech.step(bytes(resp.auth_bytes or b""))
                if mech.complete:
                    break
        except SaslError as exc:
            raise AuthenticationError(f"SASL {sasl.mechanism} exchange with {where} failed: {exc}") from exc
        self.session_lifetime_ms = int(getattr(resp, "session_lifetime_ms", 0) or 0)
        log.debug("%s: authenticated as %r with %s (session lifetime %d ms)", self, sasl.username,
                  sasl.mechanism, self.session_lifetime_ms)
        if self.session_lifetime_ms > 0 and self._closed_exc is None:
            delay = self.session_lifetime_ms * random.uniform(0.85, 0.95) / 1000.0
            self._reauth_timer = self._loop.call_later(delay, self._start_reauthentication)

    @property
    def reauthenticating(self) -> bool:
        return self._held is not None

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._closed_exc is not None or self._held is not None:
            return
        self._held = []  # the broker accepts only SASL requests until the new session is established
        self._reauth_task = self._loop.create_task(self._reauthenticate(), name="moldau-reauthenticate")

    async def _reauthenticate(self) -> None:
        try:
            await self._authenticate()
            self.reauthentications += 1
        except BaseException as exc:  # noqa: BLE001 - the connection is unusable; its users reconnect
            log.warning("%s: SASL re-authentication failed: %s", self, exc)
            self.close(KafkaConnectionError(f"{self}: SASL re-authentication failed: {exc}"))
            if not isinstance(exc, Exception):
                raise
        finally:
            held, self._held = self._held or [], None
            for fut, api_key, request, version, expect_response, timeout_ms in held:
                if fut.done():
                    continue
                if self._closed_exc is not None:
                    fut.set_exception(self._closed_exc)
                else:
                    self._write(fut, api_key, request, version, expect_response, timeout_ms)

    # ------------------------------------------------------------------------------------------------
    # versions

    def api_version(self, api_key: int) -> int:
        """Highest version of ``api_key`` both sides speak; UnsupportedVersionError if none."""
        v = self._versions.get(api_key)
        if v is not None:
            return v
        lo, hi = CLIENT_API_VERSIONS.get(api_key, (0, 0))
        msg = m.REQUESTS.get(api_key)
        if msg is None:
            raise UnsupportedVersionError(f"api key {api_key} is not declared")
        lo, hi = max(lo, msg.min_version), min(hi, msg.max_version)
        theirs = self.broker_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support {msg.name.removesuffix('Request')} "
                f"(api key {api_key})"
            )
        lo, hi = max(lo, theirs[0]), min(hi, theirs[1])
        if lo > hi:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} offers {msg.name.removesuffix('Request')} "
                f"v{theirs[0]}-{theirs[1]}, the client speaks v{CLIENT_API_VERSIONS.get(api_key)}"
            )
        self._versions[api_key] = hi
        return hi

    def supports(self, api_key: int) -> bool:
        try:
            self.api_version(api_key)
            return True
        except UnsupportedVersionError:
            return False

    # ------------------------------------------------------------------------------------------------
    # sending

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._closed_exc is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @overload
    def send(
        self,
        api_key: int,
        request: ApiRequest[_Resp],
        *,
        version: int | None = None,
        expect_response: Literal[True] = True,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[_Resp]: ...

    @overload
    def send(
        self,
        api_key: int,
        request: ApiRequest[_Resp],
        *,
        version: int | None = None,
        expect_response: bool,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[_Resp | None]: ...

    def send(
        self,
        api_key: int,
        request: ApiRequest[_Resp],
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[_Resp] | asyncio.Future[_Resp | None]:
        """Write one request now; the returned future resolves to the decoded response object.

        ``expect_response=False`` (Produce with acks=0) resolves the future with None once written.
        """
        fut = self._loop.create_future()
        if self._closed_exc is not None or self._transport is None:
            fut.set_exception(self._closed_exc or KafkaConnectionError(f"{self}: not connected"))
            return fut
        if version is None:
            version = self.api_version(api_key)
        if self._held is not None:  # re-authenticating: written when it is done
            self._held.append((fut, api_key, request, version, expect_response, timeout_ms))
            return fut
        self._write(fut, api_key, request, version, expect_response, timeout_ms)
        return fut

    def _send_now(self, api_key: int, request: ApiRequest[_Resp]) -> asyncio.Future[_Resp]:
        """Write a request even while others are held (the SASL exchange)."""
        fut = self._loop.create_future()
        if self._closed_exc is not None or self._transport is None:
            fut.set_exception(self._closed_exc or KafkaConnectionError(f"{self}: not connected"))
            return fut
        self._write(fut, api_key, request, self.api_version(api_key), True, None)
        return fut

    def _write(self, fut: asyncio.Future, api_key: int, request: ApiRequest[ApiMessage], version: int,
               expect_response: bool,
               timeout_ms: int | None) -> None:
        corr = self._next_corr
        self._next_corr = (corr + 1) & 0x7FFFFFFF
        header = frame.encode_request_header(api_key, version, corr, self.client_id)
        parts = m.REQUESTS[api_key].encode_parts(request, version)
        size = len(header)
        for p in parts:
            size += p.nbytes if isinstance(p, memoryview) else len(p)
        self.last_activity = time.monotonic()
        if expect_response:
            timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000.0
            timer = self._loop.call_later(timeout, self._on_timeout, corr)
            self._pending[corr] = _Pending(fut, api_key, version, timer, self.last_activity)
        else:
            fut.set_result(None)
        transport = self._transport
        assert transport is not None
        if len(parts) == 1:
            transport.write(_I32.pack(size) + header + parts[0])
        else:
            transport.writelines([_I32.pack(size) + header, *parts])

    async def request(self, api_key: int, request: ApiRequest[_Resp], *, version: int | None = None,
                      timeout_ms: int | None = None) -> _Resp:
        return await self.send(api_key, request, version=version, timeout_ms=timeout_ms)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if not self._write_paused:
            return
        fut = self._loop.create_future()
        self._drain_waiters.append(fut)
        await fut

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _on_timeout(self, corr: int) -> None:
        p = self._pending.get(corr)
        if p is None:
            return
        name = m.REQUESTS[p.api_key].name
        exc = RequestTimedOutError(
            f"{name} v{p.version} to {self.host}:{self.port} (node {self.node_id}) got no response within "
            f"{self.request_timeout * 1000:.0f} ms"
        )
        del self._pending[corr]
        if not p.future.done():
            p.future.set_exception(exc)
        self.close(KafkaConnectionError(f"{self}: closed after a request timed out"))

    # ------------------------------------------------------------------------------------------------
    # receiving

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big_view is not None:
            return self._big_view[self._big_pos :]
        if self._end >= _SCRATCH - 4096:
            # compact: move the partial frame to the front
            n = self._end - self._start
            self._scratch[:n] = self._scratch[self._start : self._end]
            self._start, self._end = 0, n
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big_view is not None:
            self._big_pos += nbytes
            if self._big_pos >= self._big_size:
                data: bytes | bytearray | memoryview = self._big if self._big is not None else self._big_view
                self._big = None
                self._big_view = None
                self._handle_frame(data)
            return
        self._end += nbytes
        buf = self._scratch
        view = self._view
        pos = self._start
        end = self._end
        unpack = _I32.unpack_from
        while end - pos >= 4:
            (size,) = unpack(buf, pos)
            if size < 4:
                self.close(KafkaConnectionError(f"{self}: bad response size {size}"))
                return
            if end - pos - 4 >= size:
                data = view[pos + 4 : pos + 4 + size].tobytes()
                pos += 4 + size
                self._handle_frame(data)
                if self._closed_exc is not None:
                    return
                continue
            if size > _BIG:
                have = end - pos - 4
                if self._reuse:
                    kept = self._kept
                    if kept is None or len(kept) < size:
                        kept = self._kept = bytearray(size)
                    self._big = None
                    self._big_view = memoryview(kept)[:size]
                else:
                    big = bytearray(size)
                    self._big = big
                    self._big_view = memoryview(big)
                self._big_view[:have] = view[pos + 4 : end]
                self._big_size = size
                self._big_pos = have
                pos = end
            break
        if pos >= end:
            self._start = self._end = 0
        else:
            self._start = pos

    def _handle_frame(self, data: bytes | bytearray | memoryview) -> None:
        self.last_activity = time.monotonic()
        (corr,) = _I32.unpack_from(data, 0)
        p = self._pending.pop(corr, None)
        if p is None:
            log.warning(
                "%s: response with unknown correlation id %d (%d bytes) dropped", self, corr, len(data)
            )
            return
        p.timer.cancel()
        fut = p.future
        if fut.done():
            return
        api_key = p.api_key
        version = p.version
        resp_msg = m.RESPONSES[api_key]
        try:
            if resp_msg.header_version(version) == 0:
                offset = 4
            else:
                _hdr, offset = frame.decode_response_header(data, api_key, version)
            buf: bytes | memoryview = data if type(data) is bytes else memoryview(data)
            if api_key == _API_VERSIONS and version > 0:
                (code,) = _I16.unpack_from(data, offset)
                if code == Codes.UNSUPPORTED_VERSION:
                    version = 0  # error answers carry a v0 body
            obj, _end = resp_msg.decode(buf, version, offset)
        except Exception as exc:  # noqa: BLE001 - a malformed response fails its request only
            log.warning("%s: cannot decode %s v%d response: %s", self, resp_msg.name, version, exc)
            fut.set_exception(KafkaConnectionError(f"cannot decode {resp_msg.name} v{version}: {exc}"))
            return
        fut.set_result(obj)

    # ------------------------------------------------------------------------------------------------
    # closing

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        cause = describe_os_error(exc) if exc is not None else "closed by the broker"
        self._fail_all(
            KafkaConnectionError(f"connection to {self.host}:{self.port} (node {self.node_id}) lost: {cause}")
        )
        self._transport = None

    def close(self, exc: BaseException | None = None) -> None:
        if self._transport is not None:
            self._transport.close()
        self._fail_all(exc or KafkaConnectionError(f"connection to {self.host}:{self.port} closed"))

    def add_close_callback(self, fn: Callable[[Connection], object]) -> None:
        self._close_callbacks.append(fn)

    def _fail_all(self, exc: BaseException) -> None:
        if self._closed_exc is None:
            self._closed_exc = exc
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        held, self._held = self._held, ([] if self._held is not None else None)
        for h in held or ():
            if not h[0].done():
                h[0].set_exception(exc)
        pending, self._pending = self._pending, {}
        for p in pending.values():
            p.timer.cancel()
            if not p.future.done():
                p.future.set_exception(exc)
        self.resume_writing()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for cb in callbacks:
            try:
                cb(self)
            except Exception:  # noqa: BLE001
                log.exception("connection close callback failed")

    def __repr__(self) -> str:
        return f"<Connection node={self.node_id} {self.host}:{self.port}>"
