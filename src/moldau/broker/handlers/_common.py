"""Helpers shared by the admin handlers (not a handler module: the package loads only ``kNN_*.py``)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Iterable, TypeVar

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
