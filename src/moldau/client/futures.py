"""Per-record futures that cost almost nothing until someone waits on them.

One ``BatchResult`` per produced batch carries the outcome (base offset, log-append time or an error).
``send()`` returns a ``RecordFuture``: a 3-tuple (the batch result, the record's index in the batch, its
timestamp) made with ``tuple.__new__``, about 0.1 µs. It is a ``concurrent.futures.Future``
(``result(timeout)``, ``add_done_callback``, ``concurrent.futures.wait``/``as_completed`` work; the
condition and waiter list those helpers use are made only when they ask for them) and it is awaitable on the
producer's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import threading
import time
from concurrent.futures._base import FINISHED, PENDING
from typing import TYPE_CHECKING, Callable, Generator, NoReturn, TypeAlias, TypeVar

from .types import RecordMetadata

if TYPE_CHECKING:
    from concurrent.futures._base import _Waiter

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# a done-callback of a RecordFuture: called with the future (any concurrent.futures callback fits)
RecordCallback: TypeAlias = "Callable[[RecordFuture], object]"

__all__ = ["BatchResult", "BulkResult", "RecordFuture", "record_fields", "new_record_future",
           "completed_future", "failed_future"]

_LOCK = threading.Lock()  # guards lazy creation of events/waiter lists across threads


class BatchResult:
    """The outcome of one batch, shared by the futures of its records."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "done", "_event", "_aio",
                 "_callbacks", "_cf_futures")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self._event: threading.Event | None = None
        self._aio: asyncio.Future[None] | None = None
        self._callbacks: list[tuple[RecordFuture, RecordCallback]] | None = None
        self._cf_futures: list[RecordFuture] | None = None

    def complete(
        self, base_offset: int, log_append_time: int = -1, error: BaseException | None = None
    ) -> None:
        """Record the outcome (called once, on the producer's loop) and wake every waiter."""
        with _LOCK:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            event, callbacks, cfs = self._event, self._callbacks, self._cf_futures
            self._callbacks = None
            self._cf_futures = None
        if event is not None:
            event.set()
        aio = self._aio
        if aio is not None and not aio.done():
            aio.set_result(None)
        if cfs:
            for f in cfs:
                f._notify()
        if callbacks:
            for fut, fn in callbacks:
                try:
                    fn(fut)
                except Exception:  # noqa: BLE001 - a user callback must not break the producer
                    log.exception("exception calling callback for %r", fut)

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        with _LOCK:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def aio_future(self) -> asyncio.Future[None]:
        """An asyncio future on the running loop resolved with the batch (for ``await``)."""
        fut = self._aio
        if fut is None:
            fut = self._aio = asyncio.get_running_loop().create_future()
            if self.done:
                fut.set_result(None)
        return fut

    def add_callback(self, fut: RecordFuture, fn: RecordCallback) -> bool:
        """Register fn(fut) for completion; False when already done (the caller runs it)."""
        with _LOCK:
            if self.done:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append((fut, fn))
            return True

    def _register_cf(self, fut: "RecordFuture") -> bool:
        """Notify ``fut``'s concurrent.futures waiters on completion; False when already done."""
        with _LOCK:
            if self.done:
                return False
            if self._cf_futures is None:
                self._cf_futures = []
            self._cf_futures.append(fut)
            return True


class RecordFuture(tuple[BatchResult, int, int], cf.Future[RecordMetadata]):
    """Future of one record's RecordMetadata (also awaitable on the producer's loop).

    A ``concurrent.futures.Future`` whose state is a 3-tuple (batch result, index in the batch, timestamp):
    the producer makes one per record with ``tuple.__new__`` (``new_record_future``), no ``__init__`` and no
    ``Condition``; the ``Condition`` and waiter list ``concurrent.futures.wait``/``as_completed`` use are made
    in the instance ``__dict__`` only when they ask for them. Equality and hashing are by identity, as for
    any future.
    """

    __slots__ = ()

    def __new__(cls, batch: BatchResult, index: int, timestamp: int) -> "RecordFuture":
        return tuple.__new__(cls, (batch, index, timestamp))

    def __init__(self, *args: object) -> None:  # noqa: D107 - state is the tuple; cf.Future.__init__ not called
        pass

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __bool__(self) -> bool:
        return True

    @property
    def _batch(self) -> BatchResult:
        return self[0]

    @property
    def _index(self) -> int:
        return self[1]

    @property
    def _timestamp(self) -> int:
        return self[2]

    # -- the outcome ------------------------------------------------------------------------------
    def _metadata(self) -> RecordMetadata:
        b, index, ts = self
        offset = b.base_offset + index if b.base_offset >= 0 else -1
        if b.log_append_time >= 0:
            ts = b.log_append_time
        return RecordMetadata(b.topic, b.partition, offset, ts)

    def done(self) -> bool:
        return self[0].done

    def running(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        b = self[0]
        if not b.done and not b.wait(timeout):
            raise cf.TimeoutError()
        if b.error is not None:
            raise b.error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        b = self[0]
        if not b.done and not b.wait(timeout):
            raise cf.TimeoutError()
        return b.error

    def add_done_callback(self, fn: RecordCallback) -> None:
        if not self[0].add_callback(self, fn):
            try:
                fn(self)
            except Exception:  # noqa: BLE001
                log.exception("exception calling callback for %r", self)

    def __await__(self) -> Generator[object, None, RecordMetadata]:
        b = self[0]
        if not b.done:
            yield from b.aio_future().__await__()
        if b.error is not None:
            raise b.error
        return self._metadata()

    def set_result(self, result: RecordMetadata) -> None:  # pragma: no cover - producer-owned
        raise RuntimeError("RecordFuture is completed by the producer")

    def set_exception(self, exception: BaseException | None) -> None:  # pragma: no cover
        raise RuntimeError("RecordFuture is completed by the producer")

    def set_running_or_notify_cancel(self) -> bool:  # pragma: no cover
        return True

    # -- what concurrent.futures.wait / as_completed touch ------------------------------------------
    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        c = self.__dict__.get("_cond")
        if c is None:
            with _LOCK:
                c = self.__dict__.get("_cond")
                if c is None:
                    c = self.__dict__["_cond"] = threading.Condition()
        return c

    @property
    def _state(self) -> str:  # type: ignore[override]
        return FINISHED if self[0].done else PENDING

    @property
    def _waiters(self) -> list:  # type: ignore[override]
        w = self.__dict__.get("_wl")
        if w is None:
            w = self.__dict__["_wl"] = _WaiterList(self)
            if not self[0]._register_cf(self):
                w.immediate = True  # completed meanwhile: waiters added from now on are told at once
        return w

    @property
    def _result(self) -> RecordMetadata | None:  # type: ignore[override]
        b = self[0]
        return self._metadata() if b.done and b.error is None else None

    @property
    def _exception(self) -> BaseException | None:  # type: ignore[override]
        return self[0].error

    def _notify(self) -> None:
        with self._condition:
            for waiter in self.__dict__.get("_wl") or ():
                if self[0].error is not None:
                    waiter.add_exception(self)
                else:
                    waiter.add_result(self)
            self._condition.notify_all()

    def __repr__(self) -> str:
        b = self[0]
        state = "pending" if not b.done else ("error" if b.error else "finished")
        return f"<RecordFuture {b.topic}-{b.partition} #{self[1]} {state}>"

    def __reduce__(self) -> NoReturn:  # pragma: no cover - futures are not picklable
        raise TypeError("cannot pickle a RecordFuture")


def new_record_future(batch: BatchResult, index: int, timestamp: int) -> RecordFuture:  # pragma: no cover
    """``RecordFuture(batch, index, timestamp)``; the producer's hot path calls
    ``tuple.__new__(RecordFuture, (batch, index, timestamp))`` itself."""
    return tuple.__new__(RecordFuture, (batch, index, timestamp))


class _WaiterList(list["_Waiter"]):
    """concurrent.futures waiters of one RecordFuture."""

    def __init__(self, fut: RecordFuture) -> None:
        super().__init__()
        self.fut = fut
        self.immediate = False

    def append(self, waiter: _Waiter) -> None:
        super().append(waiter)
        if self.immediate:
            if self.fut._batch.error is not None:
                waiter.add_exception(self.fut)
            else:
                waiter.add_result(self.fut)



def completed_future(value: _T) -> cf.Future[_T]:
    f: cf.Future[_T] = cf.Future()
    f.set_result(value)
    return f


def failed_future(exc: BaseException) -> cf.Future[NoReturn]:
    f: cf.Future[NoReturn] = cf.Future()
    f.set_exception(exc)
    return f


class BulkResult:
    """The outcome of ``send_many`` / ``send_arrow``: done when every batch holding one of its records is.

    ``result(timeout)`` (any thread) and ``await`` (the producer's loop) return the number of records and
    raise the first batch's error, if any; ``errors()`` lists every failed batch's (topic, partition, error).
    No future is made per record: it holds the results of the batches the records went to.
    """

    __slots__ = ("_batches", "count")

    def __init__(self, batches: list[BatchResult], count: int) -> None:
        # consecutive duplicates are dropped while appending; records spread over partitions interleave
        self._batches = list(dict.fromkeys(batches)) if len(batches) > 1 else batches
        self.count = count

    def done(self) -> bool:
        return all(b.done for b in self._batches)

    def result(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        for b in self._batches:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not b.wait(remaining):
                raise cf.TimeoutError(f"records not acknowledged within {timeout} s")
        return self._outcome()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except cf.TimeoutError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the batch's error is the answer
            return exc
        return None

    def errors(self) -> list[tuple[str, int, BaseException]]:
        """(topic, partition, error) of every failed batch so far."""
        return [(b.topic, b.partition, b.error) for b in self._batches if b.done and b.error is not None]

    def _outcome(self) -> int:
        for b in self._batches:
            if b.error is not None:
                raise b.error
        return self.count

    def __await__(self) -> Generator[object, None, int]:
        for b in self._batches:
            if not b.done:
                yield from asyncio.shield(b.aio_future()).__await__()
        return self._outcome()

    def __repr__(self) -> str:
        return f"<BulkResult {self.count} records in {len(self._batches)} batches done={self.done()}>"


_FIELDS = ("key", "value", "headers", "timestamp", "partition")


def record_fields(rec: object) -> tuple[object, object, object, int | None, int | None]:
    """(key, value, headers, timestamp, partition) of one record given to ``send_many``: a value (bytes, str
    or None), a tuple ``(key, value[, headers[, timestamp[, partition]]])`` or a mapping with those names.
    Checked here at run time; the key, value and headers are checked by the producer's serializers or its
    encoding."""
    if isinstance(rec, (bytes, bytearray, memoryview, str)):
        return None, rec, None, None, None
    if isinstance(rec, tuple):
        if not 2 <= len(rec) <= 5:
            raise ValueError(f"a record tuple is (key, value[, headers[, timestamp[, partition]]]), "
                             f"got {len(rec)} items")
        key, value, headers, ts, partition = rec + (None,) * (5 - len(rec))
    elif isinstance(rec, dict):
        unknown = set(rec) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown record fields {sorted(unknown)}: use {', '.join(_FIELDS)}")
        key, value, headers, ts, partition = (rec.get(f) for f in _FIELDS)
    else:
        raise TypeError(f"a record is bytes, str, None, a (key, value, ...) tuple or a dict, "
                        f"not {type(rec).__name__}")
    if ts is not None and type(ts) is not int:
        raise TypeError(f"timestamp must be an int (ms since the epoch), not {type(ts).__name__}")
    if partition is not None and type(partition) is not int:
        raise TypeError(f"partition must be an int, not {type(partition).__name__}")
    return key, value, headers, ts, partition
