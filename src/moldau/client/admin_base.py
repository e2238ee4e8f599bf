"""The admin client's common ground: its cluster, deadlines, retries and coordinator lookup."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Hashable, TypeVar

from .cluster import Cluster
from .config import ConfigInput, resolve_config
from .errors import (
    Codes,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RequestTimedOutError,
    broker_error,
)

if TYPE_CHECKING:  # the message stubs' base classes (no run-time module)
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

__all__ = ["AdminBase"]

_Resp = TypeVar("_Resp", bound="ApiMessage")
_T = TypeVar("_T")
_Key = TypeVar("_Key", bound=Hashable)

_LIST_OFFSETS, _METADATA, _OFFSET_COMMIT, _OFFSET_FETCH = 2, 3, 8, 9
_DESCRIBE_GROUPS, _LIST_GROUPS, _CREATE_TOPICS, _DELETE_TOPICS = 15, 16, 19, 20
_DELETE_RECORDS, _DESCRIBE_CONFIGS, _CREATE_PARTITIONS, _DELETE_GROUPS = 21, 32, 37, 42
_ALTER_REASSIGNMENTS, _LIST_REASSIGNMENTS = 45, 46
_INCREMENTAL_ALTER_CONFIGS, _OFFSET_DELETE, _DESCRIBE_CLUSTER, _CONSUMER_GROUP_DESCRIBE = 44, 47, 60, 69
_NOT_CONTROLLER = 41
_RETRY = frozenset(
    {
        Codes.NOT_COORDINATOR,
        Codes.COORDINATOR_NOT_AVAILABLE,
        Codes.COORDINATOR_LOAD_IN_PROGRESS,
        _NOT_CONTROLLER,
        Codes.REQUEST_TIMED_OUT,
        Codes.LEADER_NOT_AVAILABLE,
        Codes.NOT_LEADER_OR_FOLLOWER,
    }
)

_SPEC = {"earliest": -2, "latest": -1, "max_timestamp": -3}


def _results(
    results: dict[_Key, BaseException | None], raise_errors: bool
) -> dict[_Key, BaseException | None]:
    if raise_errors:
        for exc in results.values():
            if exc is not None:
                raise exc
    return results


class AdminBase:
    """What every part of ``AsyncAdmin`` uses: the cluster, deadlines, retries, the controller and a group's
    coordinator."""

    def __init__(self, config: ConfigInput | None = None, **kwargs: object) -> None:
        self.config = resolve_config("admin", config, kwargs)
        self._cluster = Cluster(self.config, allow_auto_topic_creation=False)
        self._timeout_ms = self.config["default.api.timeout.ms"]
        self._backoff = self.config["retry.backoff.ms"] / 1000.0
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._cluster.start()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self._cluster.close()


    def _check(self) -> None:
        if not self._started:
            raise IllegalStateError("admin client not started")

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (timeout if timeout is not None else self._timeout_ms / 1000.0)

    async def _controller_send(self, api_key: int, req: ApiRequest[_Resp]) -> _Resp:
        node = self._cluster.controller_id
        if node < 0 or node not in self._cluster.brokers:
            return await self._cluster.send_any(api_key, req)
        try:
            return await self._cluster.send(node, api_key, req)
        except KafkaConnectionError:
            return await self._cluster.send_any(api_key, req)

    async def _retrying(
        self, fn: Callable[[], Awaitable[tuple[_T, str | None]]], deadline: float
    ) -> _T:
        """Run ``fn()`` (returns (result, retry_reason|None)) until no retry is asked or the deadline."""
        while True:
            try:
                result, retry = await fn()
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                retry = str(exc)
            else:
                if retry is None:
                    return result
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"admin call did not complete in time ({retry})")
            await self._cluster.refresh(timeout_ms=max(int((deadline - time.monotonic()) * 1000), 1))
            await asyncio.sleep(self._backoff)

    # ------------------------------------------------------------------------------------------------
    # topics

    async def _coordinator(self, group_id: str, deadline: float) -> int:
        while True:
            code, node = await self._cluster.find_coordinator(group_id)
            if code == 0:
                return node
            if code not in _RETRY or time.monotonic() >= deadline:
                raise broker_error(code, f"FindCoordinator for group {group_id!r}")
            await asyncio.sleep(self._backoff)
