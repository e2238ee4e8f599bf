"""ZkClient: kazoo (which runs its own threads) bridged to the broker's asyncio loop.

Calls that talk to ZooKeeper run in one worker thread (``await zk.get(path)``), so the loop never blocks and
calls stay in order. Watches and session events come back to the loop with ``call_soon_threadsafe``; the
callbacks given to ``watch_children`` / ``watch_data`` therefore always run on the loop. kazoo's watch recipes
re-register themselves after reconnects, also after a new session.

Once the first connection is made (within ``zookeeper.connection.timeout.ms``, else start-up fails), every
call waits while ZooKeeper is unreachable (kazoo reconnects for ever) and is sent again when the session is
connected again, as Kafka's ``KafkaZkClient.retryRequestsUntilConnected``: a ConnectionLoss or an
OperationTimeout (the request may or may not have been applied). A call made while a new session is being
set up (after an expiry) waits for it; a call whose session expired before it was answered raises kazoo's
SessionExpiredError, as Kafka's client answers SESSIONEXPIRED: its caller decides. Writes whose
answer was lost are retried so that they stay correct: a create that finds the znode is a success when the
znode is an ephemeral of our own session (or a persistent one with our data); a conditional set that finds
the version moved on is a success when the znode holds our data at the next version; a delete that finds no
znode reports False as usual. Sequential creates are retried too: moldau's sequential znodes are change
notifications (``/config/changes``, ACL changes), which readers apply idempotently, so a second one costs a
re-read. A multi-op transaction is not retried after its answer was lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)


class ZkUnavailable(RuntimeError):
    """ZooKeeper cannot be reached (connection timeout, lost session)."""


RECONNECT_MAX_DELAY_S = 2.0  # kazoo's reconnection backoff stops growing here (its default is an hour)


def _retryable() -> tuple[type[BaseException], ...]:
    from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

    return (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/") if slash else ""


class ZkClient:
    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        from kazoo.client import KazooClient

        self.connect_string = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.loop = loop or asyncio.get_running_loop()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moldau-zk")
        from kazoo.retry import KazooRetry

        # reconnect for ever (Kafka's client does), at most RECONNECT_MAX_DELAY_S apart
        self._kz = KazooClient(
            hosts=self.hosts + self.chroot,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_MAX_DELAY_S),
        )
        self._session_listeners: list[Callable[[str], None]] = []
        self._kz.add_listener(self._on_state)
        self.closed = False
        self.retries = 0  # calls retried after a ConnectionLoss, OperationTimeout or session expiry

    # ------------------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.chroot:
            await self._ensure_chroot()
        try:
            await self._call(self._kz.start, self.connection_timeout_ms / 1000.0)
        except Exception as e:
            raise ZkUnavailable(f"cannot connect to ZooKeeper at {self.connect_string}: {e}") from e

    async def _ensure_chroot(self) -> None:
        from kazoo.client import KazooClient

        def work() -> None:
            kz = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0)
            kz.start(self.connection_timeout_ms / 1000.0)
            try:
                kz.ensure_path(self.chroot)
            finally:
                kz.stop()
                kz.close()

        try:
            await self._call(work)
        except Exception as e:
            raise ZkUnavailable(f"cannot connect to ZooKeeper at {self.connect_string}: {e}") from e

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True

        def work() -> None:
            try:
                self._kz.stop()
            finally:
                self._kz.close()

        try:
            await self._call(work)
        finally:
            self._pool.shutdown(wait=False)

    def add_session_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(state)`` on the loop for "LOST" (session expired: ephemerals are gone), "SUSPENDED" and
        "CONNECTED"."""
        self._session_listeners.append(fn)

    def _on_state(self, state: Any) -> None:
        name = str(state)
        for fn in list(self._session_listeners):
            self._post(fn, name)

    @property
    def sync(self) -> Any:
        """The kazoo client itself, for the few synchronous calls (one loopback round trip) that the broker's
        synchronous interfaces need."""
        return self._kz

    @property
    def session_id(self) -> int:
        sid = self._kz.client_id
        return int(sid[0]) if sid else -1

    # ------------------------------------------------------------------------------------------ calls
    async def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await self.loop.run_in_executor(self._pool, lambda: fn(*args, **kw))

    async def wait_connected(self) -> None:
        """Until the session is connected (a new one after an expiry); ZkUnavailable once closed."""
        logged = False
        while not self._kz.connected:
            if self.closed:
                raise ZkUnavailable("ZooKeeper client closed")
            if not logged:
                log.info("waiting until connected to ZooKeeper (%s)", self._kz.state)
                logged = True
            await asyncio.sleep(0.1)
        if logged:
            log.info("connected to ZooKeeper again")

    async def _send(
        self, what: str, fn: Callable[..., Any], *args: Any, lost: list[bool] | None = None, **kw: Any
    ) -> Any:
        """``fn`` until it gets an answer within one session. Sent while disconnected: waits for the
        connection (a new session after an expiry) first. Its answer lost (ConnectionLoss, OperationTimeout):
        waits, and sends it again when the same session is connected again; ``lost`` (when given) gets True,
        for ``create`` and ``set`` to check what the lost try may have done. The session expired meanwhile:
        kazoo's SessionExpiredError goes to the caller, as Kafka answers SESSIONEXPIRED (the ephemerals and
        watches of that session are gone; the caller decides, see ``ClusterServices``)."""
        from kazoo.exceptions import SessionExpiredError

        retryable = _retryable()
        sid = -1
        while True:
            if self.closed:
                raise ZkUnavailable("ZooKeeper client closed")
            if not self._kz.connected:
                await self.wait_connected()
            cur = self.session_id
            if sid != -1 and cur != sid:
                raise SessionExpiredError(f"ZooKeeper session 0x{sid:x} expired before {what} was answered")
            sid = cur
            try:
                return await self._call(fn, *args, **kw)
            except retryable as e:
                log.info("ZooKeeper %s: %s; retrying when connected", what, type(e).__name__)
                self.retries += 1
                if lost is not None:
                    lost[0] = True

    async def exists(self, path: str) -> Any:
        return await self._send(f"exists {path}", self._kz.exists, path)

    async def get(self, path: str) -> tuple[bytes, Any] | None:
        """(data, stat) or None when the znode does not exist."""
        from kazoo.exceptions import NoNodeError

        try:
            return await self._send(f"get {path}", self._kz.get, path)
        except NoNodeError:
            return None

    async def children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return list(await self._send(f"children {path}", self._kz.get_children, path))
        except NoNodeError:
            return []

    async def children_stat(self, path: str) -> tuple[list[str], Any] | None:
        """(children, the parent's stat) or None when ``path`` does not exist. The stat's pzxid is the zxid
        of the last change of the children: the list is as of that zxid."""
        from kazoo.exceptions import NoNodeError

        try:
            names, stat = await self._call(self._kz.get_children, path, include_data=True)
        except NoNodeError:
            return None
        return list(names), stat

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = True,
    ) -> str:
        """Raises kazoo's NodeExistsError when the znode exists (and is not what a lost try of ours made)."""
        from kazoo.exceptions import NodeExistsError

        lost = [False]
        try:
            return await self._send(
                f"create {path}", self._kz.create, path, data,
                ephemeral=ephemeral, sequence=sequence, makepath=makepath, lost=lost,
            )
        except NodeExistsError:
            if not lost[0] or sequence:
                raise
            got = await self.get(path)
            if got is not None and self._made_by_us(got, data, ephemeral):
                log.info("ZooKeeper create %s: made by the try whose answer was lost", path)
                return path
            raise

    def _made_by_us(self, got: tuple[bytes, Any], data: bytes, ephemeral: bool) -> bool:
        owner = int(got[1].ephemeralOwner)
        if ephemeral:
            return owner != 0 and owner == self.session_id and got[0] == data
        return owner == 0 and got[0] == data

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        """Raises kazoo's BadVersionError when ``version`` is not the znode's version (and the znode is not
        at ``version`` + 1 with our data after a try whose answer was lost)."""
        from kazoo.exceptions import BadVersionError

        lost = [False]
        try:
            return await self._send(f"set {path}", self._kz.set, path, data, version, lost=lost)
        except BadVersionError:
            if not lost[0]:
                raise
            got = await self.get(path)
            if got is not None and got[0] == data and got[1].version == version + 1:
                log.info("ZooKeeper set %s: made by the try whose answer was lost", path)
                return got[1]
            raise

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        from kazoo.exceptions import NoNodeError

        try:
            await self._send(f"delete {path}", self._kz.delete, path, recursive=recursive)
            return True
        except NoNodeError:
            return False

    async def ensure_path(self, path: str) -> None:
        await self._send(f"ensure_path {path}", self._kz.ensure_path, path)

    async def create_or_get(self, path: str, data: bytes) -> bytes:
        """Create ``path`` with ``data`` unless it exists; the znode's data either way."""
        from kazoo.exceptions import NodeExistsError

        try:
            await self.create(path, data)
            return data
        except NodeExistsError:
            got = await self.get(path)
            return got[0] if got else data

    async def transaction(self, ops: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Atomic multi-op: ops are ("create"|"set_data"|"delete"|"check", args). Waits for the connection
        first; not retried once sent (its answer lost, it may have been applied)."""

        def work() -> list[Any]:
            t = self._kz.transaction()
            for name, args in ops:
                getattr(t, name)(*args)
            return list(t.commit())

        if not self._kz.connected:
            await self.wait_connected()
        return await self._call(work)

    # ------------------------------------------------------------------------------------------ watches
    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(_safe, fn, *args)
        except RuntimeError:  # loop closed meanwhile
            pass

    def watch_children(self, path: str, fn: Callable[[list[str]], None]) -> None:
        """``fn(children)`` on the loop now and after every change (kazoo's ChildrenWatch)."""
        from kazoo.recipe.watchers import ChildrenWatch

        def cb(children: list[str]) -> bool:
            if self.closed:
                return False
            self._post(fn, list(children))
            return True

        ChildrenWatch(self._kz, path, cb)

    def watch_data(self, path: str, fn: Callable[[bytes | None, Any], Any]) -> None:
        """``fn(data, stat)`` on the loop now and after every change; data None when the znode is absent. The
        watch ends when ``fn`` returns False."""
        from kazoo.recipe.watchers import DataWatch

        state = {"stop": False}

        def cb(data: bytes | None, stat: Any) -> bool:
            if self.closed or state["stop"]:
                return False

            def run() -> None:
                if fn(data, stat) is False:
                    state["stop"] = True

            self._post(run)
            return True

        DataWatch(self._kz, path, cb)


def _safe(fn: Callable[..., Any], *args: Any) -> None:
    try:
        r = fn(*args)
        if asyncio.iscoroutine(r):
            asyncio.ensure_future(r).add_done_callback(_log_task_error)
    except Exception:
        log.exception("ZooKeeper callback %r failed", fn)


def _log_task_error(t: asyncio.Future[Any]) -> None:
    if not t.cancelled() and t.exception() is not None:
        log.error("ZooKeeper callback task failed", exc_info=t.exception())
