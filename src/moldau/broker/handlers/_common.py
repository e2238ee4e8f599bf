"""Helpers shared by the admin handlers (not a handler module: the package loads only ``kNN_*.py``)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, TypeVar

from moldau.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")


def err(code: ErrorCode, message: str) -> KafkaError:
    """The KafkaError for ``code`` carrying ``message``."""
    return KafkaError.for_code(int(code), message)


def attempt(logger: logging.Logger, what: str, fn: Callable[..., T], *args: Any,
            log_refusal: bool = True) -> tuple[T | None, KafkaError | None]:
    """Run ``fn(*args)`` for one item of an admin request: ``(result, None)``, or ``(None, error)`` with the
    KafkaError to answer for that item - its own (logged at info as "<what> refused" when ``log_refusal``), or
    UNKNOWN_SERVER_ERROR carrying the message of anything else (e.g. a disk error; logged with its traceback
    as "<what> failed"), so the connection stays open."""
    try:
        return fn(*args), None
    except KafkaError as exc:
        if log_refusal:
            logger.info("%s refused: %s", what, exc)
        return None, exc
    except Exception as exc:  # noqa: BLE001 - answer it, keep the connection
        logger.exception("%s failed", what)
        return None, err(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))


def split_duplicates(items: Iterable[T], key: Callable[[T], Any]) -> tuple[list[T], list[Any]]:
    """``(items whose key is given once, in order; keys given more than once, in first-seen order)`` - the
    admin APIs answer each duplicated name once, with INVALID_REQUEST."""
    items = list(items)
    counts = Counter(key(i) for i in items)
    unique = [i for i in items if counts[key(i)] == 1]
    return unique, list(dict.fromkeys(key(i) for i in items if counts[key(i)] > 1))


async def wait_for_leaders(ctx: Any, partitions: Mapping[str, Iterable[int]], timeout_ms: int) -> set[str]:
    """Kafka's DelayedCreatePartitions: CreateTopics / CreatePartitions answer once this broker's metadata
    has a leader for every new partition (a client's next Metadata request finds them led), at most
    ``timeout_ms``. Returns the topics still without a leader for some partition (REQUEST_TIMED_OUT for
    them). One broker leads its partitions once they are created (``partition_state`` None)."""
    import asyncio
    import time

    md = ctx.services.metadata

    def missing() -> set[str]:
        out = set()
        for topic, parts in partitions.items():
            for p in parts:
                view = md.partition_state(topic, p)
                if view is not None and view.leader < 0:
                    out.add(topic)
                    break
        return out

    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    # one node: partitions created in the background (replica_manager) must exist first
    creating = await ctx.services.replica_manager.wait_created(list(partitions), max(timeout_ms, 0) / 1000)
    left = missing() | creating
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
        left = missing()
    return left
