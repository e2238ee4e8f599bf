"""One client connection: size-prefixed framing on an asyncio BufferedProtocol.

* Bytes are received into a reusable buffer; a frame larger than the free space gets a buffer of its own
  once its size is known and checked (``size <= 0`` or ``> socket.request.max.bytes``: one log line, close,
  nothing allocated), and the socket reads straight into it. That buffer grows with the bytes that arrive
  (it starts at ``_BIG_FIRST`` and doubles, up to the frame's size): a size prefix alone holds no memory, so
  connections announcing 100 MB frames and sending a few bytes cost a few bytes each, not 100 MB (a buffer
  of the announced size, zero-filled at once, made the broker's RSS grow to the high-water mark of such
  announcements under the byte-mutation fuzzer). When the frame's size is at most ``_BIG_GROWTH`` times what
  has arrived, the buffer grows to it at once: a 1 MB produce request (librdkafka's batches of 1 KiB
  records) takes two buffers (256 KiB, then its size) instead of three, one copy of 256 KiB instead of
  768 KiB, and buffers of the frames' own sizes, which the heap reuses for the next frames (with the
  intermediate 512 KiB ones the leader's heap of an acks=all partition, several frames queued at a time,
  kept growing: a fresh, faulted-in page for every 4 KiB of two requests in five).
* Frames are queued and handled strictly in order by one task per connection while reading continues
  (pipelining). Responses are written in order with ``transport.writelines``.
* Back-pressure: reading pauses when too many requests are queued (or too many bytes), and request
  processing waits while the transport's write buffer is over its high-water mark.
* Idle connections (no reads, no writes, nothing in flight) close after ``connections.max.idle.ms``.
* Zero-copy fetch: on a plaintext socket (``sendfile_ok``) response parts may be ``FileRegion``s of segment
  files. While the transport has nothing buffered, the parts go straight to the socket: bytes with
  ``os.writev``, regions with ``os.sendfile``. What the socket does not take at once (a full send buffer)
  waits, with the responses after it, until the loop reports the socket writable (through a duplicate of its
  descriptor: the transport owns the original's registration); request processing waits meanwhile, as when
  the transport's buffer is full. When the transport does hold bytes, the parts go through it, the regions
  read into memory, so the order of the stream holds either way (also when ``sendfile`` is refused). A region
  whose file turned out shorter than the region (truncated since the read) closes the connection: its
  response's size was sent already. A region keeps its segment's descriptor open (``log.segment.SegmentFd``),
  so retention or compaction deleting the file meanwhile does not change what is sent.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import struct
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

from moldau._aio import wait_for
from moldau.log.errors import StorageError
from moldau.log.segment import FileRegion

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .limits import ClientLog, ConnectionLimiter, RequestMemory
    from .security import SecurityManager

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_RECV_BUFFER = 16 * 1024  # per connection; larger frames are read straight into their own buffer
_BIG_FIRST = 256 * 1024   # a large frame's own buffer starts this big (or twice what has come) and doubles
_BIG_GROWTH = 4           # ... or grows to the frame's size at once when that is at most 4x what has come
_MAX_QUEUED_BYTES = 64 * 1024 * 1024
_IOV_MAX = 1024
_NO_SENDFILE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)
# MOLDAU_SENDFILE=0 turns zero-copy fetch off (every response from memory; for comparisons)
SENDFILE = hasattr(os, "sendfile") and os.environ.get("MOLDAU_SENDFILE", "1") != "0"


class ConnectionServices(Protocol):
    """The services a connection uses (``services.BrokerServices`` is one): the config, the security manager,
    the connection limits, the request-bytes pool, the per-client log."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def security(self) -> SecurityManager | None: ...
    @property
    def limiter(self) -> ConnectionLimiter | None: ...
    @property
    def request_memory(self) -> RequestMemory | None: ...
    @property
    def client_log(self) -> ClientLog: ...


class ConnectionHost(Protocol):
    """What a connection needs of its broker (``broker.Broker`` is one): its services, and the set of open
    connections (to drain them at stop)."""

    @property
    def services(self) -> ConnectionServices: ...
    def connection_opened(self, conn: Connection) -> None: ...
    def connection_closed(self, conn: Connection) -> None: ...


class Dispatcher(Protocol):
    """Handles one request frame (``router.Router``): response parts, None (no response) or False (close)."""

    async def dispatch(self, conn: Connection, frame: bytearray) -> list[Any] | Literal[False] | None: ...


class Connection(asyncio.BufferedProtocol):
    __slots__ = (
        "host", "router", "listener_name", "principal", "peer", "transport", "_buf", "_view", "_start",
        "_end", "_big", "_big_view", "_big_pos", "_big_size", "_queue", "_queued_bytes", "_task", "_closed",
        "_reading_paused", "_write_ok", "_last_activity", "_idle_ms", "_idle_handle", "_max_request",
        "_max_queued", "_loop", "client_id", "client_software", "_eof", "_out", "_flush_scheduled", "auth",
        "_muted_until", "_mute_wake", "_refused", "_pool", "_reserved", "_mem_wait",
        "sendfile_ok", "_sock_fd", "_pending_out", "_wfd", "sent_from_files",
    )

    def __init__(self, host: ConnectionHost, router: Dispatcher, listener_name: str) -> None:
        self.host = host
        self.router = router
        self.listener_name = listener_name
        self.principal = "User:ANONYMOUS"
        self.auth: Any = None  # security.sasl.AuthSession on SASL listeners (set by the SecurityManager)
        self.peer: tuple[str, int] = ("?", 0)
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray(_RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte in _buf
        self._end = 0    # end of received bytes in _buf
        self._big: bytearray | None = None  # dedicated buffer of a frame too large for _buf
        self._big_view: memoryview | None = None
        self._big_pos = 0
        self._big_size = 0  # the size of the frame being read into _big (_big grows up to it)
        self._queue: collections.deque[bytearray] = collections.deque()
        self._queued_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._reading_paused = False
        self._write_ok: asyncio.Event | None = None
        self._last_activity = time.monotonic()
        cfg = host.services.config
        self._idle_ms = int(cfg.get("connections.max.idle.ms"))
        self._idle_handle: asyncio.TimerHandle | None = None
        self._max_request = int(cfg.get("socket.request.max.bytes"))
        self._max_queued = int(cfg.get("queued.max.requests"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self.client_id: str | None = None
        self.client_software: tuple[str, str] | None = None
        self._eof = False
        self._out: list[Any] = []          # response parts not yet handed to the transport
        self._flush_scheduled = False
        self._muted_until = 0.0  # loop time until which no further request is handled (quota throttling)
        self._mute_wake: asyncio.Future[None] | None = None
        self._refused = False    # closed at accept by a connection limit
        pool = host.services.request_memory
        self._pool = pool if pool is not None and pool.bounded else None  # queued.max.request.bytes
        self._reserved = 0       # bytes of this connection's requests counted in the pool
        self._mem_wait = False   # reading paused until the pool has room
        self.sendfile_ok = False  # a plaintext socket: responses may carry FileRegions (zero-copy fetch)
        self._sock_fd = -1
        self._pending_out: list[Any] | None = None  # parts waiting for the socket to take more (sendfile)
        self._wfd = -1  # a duplicate of the socket's descriptor, watched while _pending_out waits
        self.sent_from_files = 0  # bytes sent with sendfile

    # ------------------------------------------------------------------------------ protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        limiter = self.host.services.limiter
        if limiter is not None and limiter.admit(self.peer[0]) is not None:
            self._refused = self._closed = True
            transport.close()
            return
        security = self.host.services.security
        if security is not None:
            security.connection_made(self, transport)  # TLS principal, SASL session
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("ssl_object") is None and SENDFILE:
            try:
                self._sock_fd = sock.fileno()
            except (OSError, AttributeError):  # pragma: no cover
                self._sock_fd = -1
            self.sendfile_ok = self._sock_fd >= 0
        self.host.connection_opened(self)
        if self._idle_ms > 0:
            self._idle_handle = self._loop.call_later(self._idle_ms / 1000.0, self._check_idle)
        log.debug("connection from %s:%d on %s", self.peer[0], self.peer[1], self.listener_name)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._closed = True
        limiter = self.host.services.limiter
        if limiter is not None:
            limiter.release(self.peer[0])
        self._big = self._big_view = None  # a frame cut short: its buffer goes with the connection
        if self._pool is not None:
            self._release(self._reserved)
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        self._queue.clear()
        self._stop_watching()
        if self._wfd >= 0:
            os.close(self._wfd)
            self._wfd = -1
        if self._write_ok is not None:
            self._write_ok.set()
        self.host.connection_closed(self)
        log.debug("connection from %s:%d closed%s", self.peer[0], self.peer[1], f" ({exc})" if exc else "")

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            if self._big_pos == len(self._big):
                self._grow_big()
            return self._big_view[self._big_pos:]  # type: ignore[index]
        if self._end == len(self._buf):
            self._compact()
            if self._end == len(self._buf):  # pragma: no cover - cannot happen: larger frames go to _big
                self._buf = self._buf + bytearray(len(self._buf))
                self._view = memoryview(self._buf)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._last_activity = time.monotonic()
        if self._big is not None:
            self._big_pos += nbytes
            if self._big_pos == self._big_size:
                frame = self._big
                self._big = None
                self._big_view = None
                self._enqueue(frame)
            return
        self._end += nbytes
        self._parse()

    def eof_received(self) -> bool | None:
        # The peer closed its side: finish what is queued, then close. Returning False closes the
        # transport now; True keeps it half-open so queued responses can still be written.
        self._eof = True
        if not self._queue and self._task is None:
            return False
        return True

    def pause_writing(self) -> None:
        if self._write_ok is None:
            self._write_ok = asyncio.Event()
        self._write_ok.clear()

    def resume_writing(self) -> None:
        if self._write_ok is not None:
            self._write_ok.set()

    # ------------------------------------------------------------------------------ framing
    def _compact(self) -> None:
        start, end = self._start, self._end
        if start == 0:
            # a full buffer without a complete frame never happens: larger frames go to _big
            return
        n = end - start
        if n:
            self._buf[0:n] = self._view[start:end]
        self._start = 0
        self._end = n

    def _grow_big(self) -> None:
        """Grow the large frame's full buffer, keeping what has arrived: to the frame's size when that is at
        most four times what has arrived, else to twice the buffer (module doc)."""
        old = self._big
        assert old is not None and self._big_view is not None
        size = self._big_size
        new = bytearray(size if size <= _BIG_GROWTH * len(old) else 2 * len(old))
        new[0:self._big_pos] = self._big_view[0:self._big_pos]
        self._big_view.release()
        self._big = new
        self._big_view = memoryview(new)

    def _parse(self) -> None:
        view = self._view
        while not self._closed:
            avail = self._end - self._start
            if avail < 4:
                break
            size = _SIZE.unpack_from(view, self._start)[0]
            if size <= 0 or size > self._max_request:
                self.host.services.client_log.event(
                    "bad_frames", self.peer[0], "closing connection from %s:%d: request size %d is %s",
                    self.peer[0], self.peer[1], size, "not positive" if size <= 0 else
                    f"larger than socket.request.max.bytes ({self._max_request})")
                self.close()
                return
            if self._pool is not None and not self._reserve(size):
                break  # reading resumes when the pool has room (memory_available)
            body_start = self._start + 4
            if avail - 4 >= size:
                frame = bytearray(view[body_start:body_start + size])
                self._start = body_start + size
                self._enqueue(frame)
                continue
            if size > len(self._buf) - body_start:
                # Does not fit behind its header: give it its own buffer, read the rest straight into it;
                # the buffer grows as the bytes come (_grow_big), never beyond the frame's size.
                have = avail - 4
                big = bytearray(min(size, max(_BIG_FIRST, 2 * have)))
                big[0:have] = view[body_start:self._end]
                self._start = self._end = 0
                if have == size:  # pragma: no cover - handled above
                    self._enqueue(big)
                    continue
                self._big = big
                self._big_view = memoryview(big)
                self._big_pos = have
                self._big_size = size
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > len(self._buf) // 2:
            self._compact()

    # ------------------------------------------------------------------------------ request memory
    def _reserve(self, size: int) -> bool:
        """Count the next frame in the broker-wide pool, or stop reading until there is room."""
        if self._pool.try_reserve(size):  # type: ignore[union-attr]
            self._reserved += size
            return True
        if not self._mem_wait:
            self._mem_wait = True
            self._pool.wait(self)  # type: ignore[union-attr]
            try:
                self.transport.pause_reading()  # type: ignore[union-attr]
            except RuntimeError:  # pragma: no cover
                pass
        return False

    def _release(self, n: int) -> None:
        n = min(n, self._reserved)
        if n > 0:
            self._reserved -= n
            self._pool.release(n)  # type: ignore[union-attr]

    def memory_available(self) -> None:
        """Called by the pool: try the waiting frame again, read on if it fits."""
        self._mem_wait = False
        if self._closed:
            return
        self._parse()
        if not self._mem_wait and not self._reading_paused and not self._closed:
            try:
                self.transport.resume_reading()  # type: ignore[union-attr]
            except RuntimeError:  # pragma: no cover
                pass

    # ------------------------------------------------------------------------------ processing
    def _enqueue(self, frame: bytearray) -> None:
        if self._closed:
            return
        self._queue.append(frame)
        self._queued_bytes += len(frame)
        if not self._reading_paused and (len(self._queue) >= self._max_queued
                                         or self._queued_bytes >= _MAX_QUEUED_BYTES):
            self._reading_paused = True
            try:
                self.transport.pause_reading()  # type: ignore[union-attr]
            except RuntimeError:  # pragma: no cover
                pass
        if self._task is None:
            self._task = self._loop.create_task(self._process())  # type: ignore[union-attr]

    async def _process(self) -> None:
        queue = self._queue
        router = self.router
        try:
            while queue and not self._closed:
                if self._muted_until:
                    delay = self._muted_until - self._loop.time()  # type: ignore[union-attr]
                    if delay > 0:  # the throttled response is flushed meanwhile; a clean stop wakes us
                        self._mute_wake = self._loop.create_future()  # type: ignore[union-attr]
                        await asyncio.wait((self._mute_wake,), timeout=delay)
                        self._mute_wake = None
                    self._muted_until = 0.0
                    if self._closed:
                        break
                if self._write_ok is not None and not self._write_ok.is_set():
                    await self._write_ok.wait()
                    if self._closed:
                        break
                frame = queue.popleft()
                self._queued_bytes -= len(frame)
                if self._reading_paused and len(queue) <= self._max_queued // 2 \
                        and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
                    self._reading_paused = False
                    if not self._mem_wait:
                        try:
                            self.transport.resume_reading()  # type: ignore[union-attr]
                        except RuntimeError:  # pragma: no cover
                            pass
                try:
                    parts = await router.dispatch(self, frame)
                except Exception:  # never let a request kill the server
                    log.exception("unexpected error handling a request from %s:%d; closing connection",
                                  self.peer[0], self.peer[1])
                    self.close()
                    break
                finally:
                    if self._pool is not None:
                        self._release(len(frame))
                if parts is None:
                    continue
                if parts is False:
                    self.close()
                    break
                if not self._closed:
                    # Corked: responses of pipelined requests handled in one go leave in one writelines
                    # call, as soon as this task yields (queue empty or a handler waiting).
                    self._out.extend(parts)
                    if not self._flush_scheduled:
                        self._flush_scheduled = True
                        self._loop.call_soon(self._flush_out)  # type: ignore[union-attr]
        finally:
            self._task = None
            if self._closed:
                queue.clear()
            elif queue:
                # something was enqueued while the last handler finished; keep going
                self._task = self._loop.create_task(self._process())  # type: ignore[union-attr]
            elif self._eof:
                self.close()

    def mute(self, ms: int) -> None:
        """Handle no further request of this connection for ``ms`` (a client over its quota, KIP-219)."""
        until = self._loop.time() + ms / 1000.0  # type: ignore[union-attr]
        self._muted_until = max(self._muted_until, until)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._queue) + (1 if self._task is not None else 0)

    # ------------------------------------------------------------------------------ lifecycle
    def _flush_out(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if out:
            self._out = []
            if self._pending_out is not None:  # behind the response the socket is taking
                self._pending_out.extend(out)
                return
            if not self._closed:
                if self._sock_fd >= 0:  # a plain socket: answers may hold FileRegions
                    for part in out:
                        if type(part) is FileRegion:
                            if self.sendfile_ok:
                                self._send_direct(out)
                            else:  # sendfile was refused since these answers were made
                                self._write_copied(out)
                            break
                    else:
                        self.transport.writelines(out)  # type: ignore[union-attr]
                else:
                    self.transport.writelines(out)  # type: ignore[union-attr]
                self._last_activity = time.monotonic()

    def _send_direct(self, out: list[Any]) -> None:
        """Parts with FileRegions: straight to the socket while the transport holds nothing, else through the
        transport as bytes (module doc)."""
        transport = self.transport
        assert transport is not None
        if transport.is_closing():
            return
        if transport.get_write_buffer_size() == 0:
            try:
                i = self._write_socket(out)
            except OSError as e:
                log.info("closing connection from %s:%d: sending a response failed: %s", self.peer[0],
                         self.peer[1], e)
                self.close()
                return
            if i == len(out):
                return
            out = out[i:]
            if self.sendfile_ok:
                self._wait_writable(out)  # the transport holds nothing: the socket's next bytes are ours
                return
        self._write_copied(out)

    def _write_copied(self, out: list[Any]) -> None:
        """``out`` through the transport, regions read into memory (behind what the transport holds)."""
        try:
            rest = [p.read() if type(p) is FileRegion else p for p in out]
        except (OSError, StorageError) as e:
            log.warning("closing connection from %s:%d: %s", self.peer[0], self.peer[1], e)
            self.close()
            return
        self.transport.writelines(rest)  # type: ignore[union-attr]

    def _wait_writable(self, rest: list[Any]) -> None:
        """Keep ``rest`` until the socket takes more. The transport owns the socket's registration with the
        loop, so the connection watches a duplicate of its descriptor (made once per connection)."""
        try:
            if self._wfd < 0:
                self._wfd = os.dup(self._sock_fd)
            self._loop.add_writer(self._wfd, self._on_writable)  # type: ignore[union-attr]
        except (OSError, RuntimeError) as e:  # no descriptor left: through the transport, copied
            log.warning("connection from %s:%d: cannot watch the socket (%s); sending from memory",
                        self.peer[0], self.peer[1], e)
            self.sendfile_ok = False
            self._write_copied(rest)
            return
        self._pending_out = rest
        if self._write_ok is None:
            self._write_ok = asyncio.Event()
        self._write_ok.clear()  # no further request is handled until the socket took this

    def _on_writable(self) -> None:
        rest = self._pending_out
        if rest is None or self._closed:
            self._stop_watching()
            return
        try:
            i = self._write_socket(rest)
        except OSError as e:
            self._stop_watching()
            log.info("closing connection from %s:%d: sending a response failed: %s", self.peer[0],
                     self.peer[1], e)
            self.close()
            return
        if i < len(rest) and self.sendfile_ok:
            del rest[:i]  # still full: keep watching
            return
        self._stop_watching()
        if i < len(rest):  # sendfile refused: the rest through the transport, read into memory
            self._write_copied(rest[i:])

    def _stop_watching(self) -> None:
        if self._pending_out is not None:
            self._pending_out = None
            if self._write_ok is not None:
                self._write_ok.set()
        if self._wfd >= 0 and self._loop is not None:
            self._loop.remove_writer(self._wfd)

    def _write_socket(self, out: list[Any]) -> int:
        """Write ``out`` to the socket until it would block; returns the index of the first part not (fully)
        sent, whose unsent rest replaces it in ``out``."""
        fd = self._sock_fd
        n = len(out)
        i = 0
        while i < n:
            part = out[i]
            if type(part) is FileRegion:
                off, left = part.offset, part.size
                src = part.file.fd
                while left:
                    try:
                        k = os.sendfile(fd, src, off, left)
                    except BlockingIOError:
                        break
                    except OSError as e:
                        if e.errno not in _NO_SENDFILE:
                            raise
                        self.sendfile_ok = False  # this file system or socket cannot: copy from now on
                        break
                    if k == 0:
                        raise OSError(errno.EIO, f"segment region {part.offset}+{part.size} was truncated")
                    off += k
                    left -= k
                self.sent_from_files += part.size - left
                if left:
                    out[i] = part.rest(part.size - left)
                    return i
                i += 1
                continue
            j = i + 1
            while j < n and j - i < _IOV_MAX and type(out[j]) is not FileRegion:
                j += 1
            try:
                k = os.writev(fd, out[i:j])
            except BlockingIOError:
                return i
            while i < j:
                part = out[i]
                size = part.nbytes if type(part) is memoryview else len(part)
                if k < size:
                    if k:
                        out[i] = memoryview(part).cast("B")[k:]
                    return i
                k -= size
                i += 1
        return n

    def _check_idle(self) -> None:
        self._idle_handle = None
        if self._closed:
            return
        idle_for = time.monotonic() - self._last_activity
        remaining = self._idle_ms / 1000.0 - idle_for
        if remaining <= 0 and self.in_flight == 0:
            log.info("closing idle connection from %s:%d (idle for %d ms)", self.peer[0], self.peer[1],
                     int(idle_for * 1000))
            self.close()
            return
        delay = max(remaining, 0.05) if remaining > 0 else self._idle_ms / 1000.0
        self._idle_handle = self._loop.call_later(delay, self._check_idle)  # type: ignore[union-attr]

    def local_address(self) -> tuple[str, int] | None:
        """The (host, port) of this broker's end of the connection (None once closed)."""
        if self.transport is None:
            return None
        name = self.transport.get_extra_info("sockname")
        return (str(name[0]), int(name[1])) if name else None

    def close(self) -> None:
        if self._closed:
            return
        if self._out and self.transport is not None:
            self._flush_out()  # answers already computed still go out
        rest = self._pending_out
        if rest is not None and self.transport is not None:
            self._stop_watching()  # what waits for the socket goes through the transport, which flushes
            self._write_copied(rest)  # its buffer before closing
            if self._closed:
                return
        self._closed = True
        self._queue.clear()
        if self.transport is not None:
            self.transport.close()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until queued requests are handled (used by a clean shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._task is not None and not self._closed:
            t = self._task
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            try:
                await wait_for(asyncio.shield(t), remaining)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                return
            except Exception:  # pragma: no cover
                return

    def stop_reading(self) -> None:
        if self._mute_wake is not None and not self._mute_wake.done():
            self._mute_wake.set_result(None)  # stopping: no more waiting out a quota
        if self.transport is not None and not self._closed:
            try:
                self.transport.pause_reading()
            except RuntimeError:  # pragma: no cover
                pass
            self._reading_paused = True

    def __repr__(self) -> str:
        return f"<Connection {self.peer[0]}:{self.peer[1]} on {self.listener_name}>"
