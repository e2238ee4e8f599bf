"""Consumer group membership (classic protocol) and offset commits.

``GroupCoordinator`` finds the group's coordinator (FindCoordinator), commits and fetches offsets
(OffsetCommit/OffsetFetch: also for a consumer that only uses ``assign()``, with generation -1), and for a
subscribed consumer runs the JoinGroup/SyncGroup cycle: the member chosen as leader computes the assignment
with the protocol the group agreed on (range, roundrobin, cooperative-sticky). Heartbeats run in a
background task; a rebalance is carried out by the next ``poll()`` (like the Java client), which also runs
the rebalance listener's callbacks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Iterable, TypeVar

from moldau._aio import wait_for
from moldau.protocol import messages as m

from .assignors import (
    MemberSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    get_assignor,
)
from .cluster import Cluster
from .errors import (
    Codes,
    CommitFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RequestTimedOutError,
    UnsupportedVersionError,
    broker_error,
    error_name,
)
from .subscription import RebalanceHandler, SubscriptionState
from .types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from moldau.protocol.messages._types import ApiMessage, ApiRequest

    from .config import ConsumerConfig

log = logging.getLogger(__name__)

_Resp = TypeVar("_Resp", bound="ApiMessage")

__all__ = ["GroupCoordinator", "ConsumerProtocolCoordinator", "make_coordinator"]

_JOIN = 11
_HEARTBEAT = 12
_LEAVE = 13
_SYNC = 14
_OFFSET_COMMIT = 8
_OFFSET_FETCH = 9

_COORDINATOR_ERRORS = frozenset({Codes.NOT_COORDINATOR, Codes.COORDINATOR_NOT_AVAILABLE})
# STALE_MEMBER_EPOCH (consumer protocol): the commit raced an epoch bump; retried with the epoch of the next
# heartbeat answer
_RETRY_ERRORS = frozenset({Codes.COORDINATOR_LOAD_IN_PROGRESS, Codes.REQUEST_TIMED_OUT,
                           Codes.UNSTABLE_OFFSET_COMMIT, Codes.NETWORK_EXCEPTION, Codes.STALE_MEMBER_EPOCH})
_MEMBER_ERRORS = frozenset({Codes.UNKNOWN_MEMBER_ID, Codes.ILLEGAL_GENERATION, Codes.REBALANCE_IN_PROGRESS,
                            Codes.FENCED_INSTANCE_ID})


class GroupCoordinator:
    def __init__(self, config: ConsumerConfig, cluster: Cluster, subscription: SubscriptionState,
                 rebalance: RebalanceHandler) -> None:
        c = config
        self.config = config
        self.cluster = cluster
        self.subscription = subscription
        self.rebalance = rebalance
        group_id = c["group.id"]
        assert group_id is not None  # the consumer makes a coordinator only when it has a group.id
        self.group_id: str = group_id
        self.group_instance_id: str | None = c["group.instance.id"]
        self.session_timeout_ms = c["session.timeout.ms"]
        self.rebalance_timeout_ms = c["max.poll.interval.ms"]
        self.heartbeat_interval = c["heartbeat.interval.ms"] / 1000.0
        self.max_poll_interval = c["max.poll.interval.ms"] / 1000.0
        self.retry_backoff = c["retry.backoff.ms"] / 1000.0
        self.request_timeout_ms = c["request.timeout.ms"]
        self.rack_id = c["client.rack"]
        self.assignors = [get_assignor(s) for s in c["partition.assignment.strategy"]]
        if not self.assignors:
            raise ValueError("partition.assignment.strategy is empty")
        self.coordinator_id: int | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.rejoin_needed = True
        self.joined_topics: dict[str, int] = {}  # partition counts the current assignment was made with
        # the last assignment received and its generation (kept across an eager revocation: sticky user data)
        self.last_assignment: list[TopicPartition] = []
        self.last_generation = -1
        self._fatal: BaseException | None = None
        self.rejoin_event = asyncio.Event()
        self.last_poll = time.monotonic()
        self._find_lock = asyncio.Lock()
        self._join_task: asyncio.Task | None = None
        self._hb_task: asyncio.Task | None = None
        self._closing = False
        self._joining = False

    # ------------------------------------------------------------------------------------------------
    # coordinator discovery

    async def ensure_coordinator(self, timeout_ms: int | None = None) -> int:
        if self.coordinator_id is not None and self.coordinator_id in self.cluster.brokers:
            return self.coordinator_id
        async with self._find_lock:
            if self.coordinator_id is not None:
                return self.coordinator_id
            deadline = (
                time.monotonic() + (timeout_ms or self.config["default.api.timeout.ms"]) / 1000.0
            )
            last: Exception | None = None
            while time.monotonic() < deadline:
                try:
                    code, node_id = await self.cluster.find_coordinator(self.group_id)
                    if code == 0:
                        self.coordinator_id = node_id
                        log.debug("group %s: coordinator is node %d", self.group_id, node_id)
                        return node_id
                    last = broker_error(code, f"FindCoordinator for group {self.group_id!r}")
                    if code not in (Codes.COORDINATOR_NOT_AVAILABLE, Codes.COORDINATOR_LOAD_IN_PROGRESS,
                                    Codes.NOT_COORDINATOR):
                        raise last
                except (KafkaConnectionError, RequestTimedOutError) as exc:
                    last = exc
                await asyncio.sleep(self.retry_backoff)
            raise KafkaTimeoutError(f"no coordinator found for group {self.group_id!r}: {last}")

    def coordinator_dead(self, why: str) -> None:
        if self.coordinator_id is not None:
            log.info("group %s: coordinator %d unusable (%s); looking it up again", self.group_id,
                     self.coordinator_id, why)
        self.coordinator_id = None

    async def _send(self, api_key: int, req: ApiRequest[_Resp], timeout_ms: int | None = None) -> _Resp:
        node = await self.ensure_coordinator()
        try:
            return await self.cluster.send(
                self.cluster.coordinator_node(node), api_key, req, timeout_ms=timeout_ms
            )
        except KafkaConnectionError:
            self.coordinator_dead("connection failed")
            raise

    async def _version(self, api_key: int) -> int:
        node = await self.ensure_coordinator()
        conn = await self.cluster.connection(self.cluster.coordinator_node(node))
        return conn.api_version(api_key)

    # ------------------------------------------------------------------------------------------------
    # offsets

    async def commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None
    ) -> None:
        """OffsetCommit; retries coordinator moves; CommitFailedError when the group rebalanced."""
        if not offsets:
            return
        deadline = time.monotonic() + (timeout_ms or self.config["default.api.timeout.ms"]) / 1000.0
        R = m.OffsetCommitRequest
        while True:
            subscribed = self.subscription.subscribed
            generation, member_id = self._commit_identity(subscribed)
            topics: dict[str, list[m.OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
            for tp, om in offsets.items():
                if not isinstance(om, OffsetAndMetadata):
                    om = OffsetAndMetadata(int(om))
                topics.setdefault(tp.topic, []).append(R.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch, commit_timestamp=-1,
                    committed_metadata=om.metadata or ""))
            req = R.new(
                group_id=self.group_id,
                generation_id_or_member_epoch=generation,
                member_id=member_id,
                group_instance_id=self.group_instance_id if subscribed else None,
                retention_time_ms=-1,
                topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
            )
            retry: str | None = None
            try:
                resp = await self._send(_OFFSET_COMMIT, req)
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                retry = str(exc)
            else:
                failed: list[tuple[TopicPartition, int]] = []
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            failed.append((TopicPartition(t.name, p.partition_index), p.error_code))
                if not failed:
                    return
                codes = {c for _tp, c in failed}
                if codes & _COORDINATOR_ERRORS:
                    self.coordinator_dead(error_name(next(iter(codes & _COORDINATOR_ERRORS))))
                    retry = "coordinator moved"
                elif codes & _RETRY_ERRORS:
                    retry = error_name(next(iter(codes & _RETRY_ERRORS)))
                    if Codes.STALE_MEMBER_EPOCH in codes:
                        self._on_stale_epoch()
                elif codes & _MEMBER_ERRORS:
                    code = next(iter(codes & _MEMBER_ERRORS))
                    if code in (Codes.UNKNOWN_MEMBER_ID, Codes.ILLEGAL_GENERATION):
                        self.reset_generation(lost=code == Codes.UNKNOWN_MEMBER_ID)
                    self.request_rejoin()
                    raise CommitFailedError(
                        f"commit of group {self.group_id!r} failed ({error_name(code)}): the group "
                        "rebalanced and the partitions may now belong to another member"
                    )
                else:
                    tp, code = failed[0]
                    raise broker_error(code, f"OffsetCommit {tp.topic}-{tp.partition}")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"commit for group {self.group_id!r} did not complete in time ({retry})"
                )
            await asyncio.sleep(self.retry_backoff)

    def _on_stale_epoch(self) -> None:
        """A commit carried an outdated member epoch (consumer protocol only)."""

    def _commit_identity(self, subscribed: bool) -> tuple[int, str]:
        """(generation or member epoch, member id) an OffsetCommit carries; (-1, "") outside the group."""
        if not subscribed:
            return -1, ""
        return self.generation, self.member_id

    async def fetch_committed(
        self, tps: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        tps = list(tps)
        if not tps:
            return {}
        deadline = time.monotonic() + (timeout_ms or self.config["default.api.timeout.ms"]) / 1000.0
        R = m.OffsetFetchRequest
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        while True:
            retry: str | None = None
            try:
                version = await self._version(_OFFSET_FETCH)
                req = R.new(group_id=self.group_id,
                            topics=[R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                                    for t, ps in by_topic.items()],
                            require_stable=True)
                resp = await self._send(_OFFSET_FETCH, req)
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                retry = str(exc)
            else:
                top = getattr(resp, "error_code", 0) if version >= 2 else 0
                if top in _COORDINATOR_ERRORS:
                    self.coordinator_dead(error_name(top))
                    retry = error_name(top)
                elif top in _RETRY_ERRORS:
                    retry = error_name(top)
                elif top:
                    raise broker_error(top, f"OffsetFetch for group {self.group_id!r}")
                else:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
                    for t in resp.topics:
                        for p in t.partitions:
                            tp = TopicPartition(t.name, p.partition_index)
                            if p.error_code in _RETRY_ERRORS or p.error_code in _COORDINATOR_ERRORS:
                                retry = error_name(p.error_code)
                                break
                            if p.error_code:
                                raise broker_error(p.error_code, f"OffsetFetch {tp.topic}-{tp.partition}")
                            out[tp] = (OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                         getattr(p, "committed_leader_epoch", -1))
                                       if p.committed_offset >= 0 else None)
                    if retry is None:
                        for tp in tps:
                            out.setdefault(tp, None)
                        return out
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"fetching committed offsets of group {self.group_id!r} timed out ({retry})"
                )
            await asyncio.sleep(self.retry_backoff)

    # ------------------------------------------------------------------------------------------------
    # membership

    def request_rejoin(self) -> None:
        self.rejoin_needed = True
        self.rejoin_event.set()

    def reset_generation(self, lost: bool = False) -> None:
        self.generation = -1
        if lost:
            self.member_id = ""
        self.rejoin_needed = True

    @property
    def cooperative(self) -> bool:
        for a in self.assignors:
            if a.name == self.protocol:
                return a.cooperative
        return all(a.cooperative for a in self.assignors)

    def ensure_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name="moldau-heartbeat"
            )

    async def ensure_active(self, deadline: float) -> None:
        """Called by poll(): start a rebalance when one is needed and wait for it until ``deadline``."""
        if self._fatal is not None:
            raise self._fatal
        if self.rejoin_needed and (self._join_task is None or self._join_task.done()):
            self._join_task = asyncio.get_running_loop().create_task(self._join(), name="moldau-join")
        task = self._join_task
        if task is not None and not task.done():
            remaining = deadline - time.monotonic()
            if remaining > 0:
                await asyncio.wait([task], timeout=remaining)
        if task is not None and task.done():
            self._join_task = None
            exc = task.exception() if not task.cancelled() else None
            if exc is not None:
                raise exc

    async def _join(self) -> None:
        sub = self.subscription
        self._joining = True
        try:
            await self.ensure_coordinator()
            owned = set(sub.assignment)
            if sub.take_lost():
                if owned:
                    await self.rebalance.lose(owned)
                    owned = set()
            if owned and not self.cooperative:
                # eager: commit and give everything up before joining
                await self.rebalance.revoke(owned, commit=True)
                owned = set()
            while True:
                if self._closing:
                    return
                self.rejoin_needed = False
                self.rejoin_event.clear()
                topics = sub.subscribed_topics()
                if not topics and sub.pattern is not None:
                    await self.cluster.refresh()
                    topics = sub.subscribed_topics()
                ok = await self._join_once(topics, owned)
                if ok:
                    break
                await asyncio.sleep(self.retry_backoff)
            self.ensure_heartbeat()
        finally:
            self._joining = False

    async def _join_once(self, topics: set[str], owned: set[TopicPartition]) -> bool:
        protocols = []
        for a in self.assignors:
            user_data_of = getattr(a, "subscription_user_data", None)  # e.g. sticky: the previous assignment
            user_data = user_data_of(self.last_assignment, self.last_generation) if user_data_of else None
            protocols.append(
                m.JoinGroupRequest.JoinGroupRequestProtocol(
                    name=a.name,
                    metadata=encode_subscription(
                        topics,
                        owned if a.cooperative else (),
                        self.generation,
                        self.rack_id,
                        user_data=user_data,
                    ),
                )
            )
        req = m.JoinGroupRequest.new(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer", protocols=protocols,
            reason=None)
        timeout = max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000)
        try:
            resp = await self._send(_JOIN, req, timeout_ms=timeout)
        except (KafkaConnectionError, RequestTimedOutError) as exc:
            log.info("group %s: JoinGroup failed: %s", self.group_id, exc)
            return False
        code = resp.error_code
        if code == Codes.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return await self._join_once(topics, owned)
        if code:
            return self._join_error(code, "JoinGroup")
        self.generation = resp.generation_id
        self.member_id = resp.member_id
        self.protocol = resp.protocol_name
        self.leader_id = resp.leader
        log.info("group %s: joined generation %d as %s%s (protocol %s)", self.group_id, self.generation,
                 self.member_id, " (leader)" if resp.leader == resp.member_id else "", self.protocol)
        assignments: list[m.SyncGroupRequest.SyncGroupRequestAssignment] = []
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            result = await self._assign(resp.members)
            assignments = [m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=data)
                           for mid, data in result.items()]
        sreq = m.SyncGroupRequest.new(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer", protocol_name=self.protocol,
            assignments=assignments)
        try:
            sresp = await self._send(_SYNC, sreq, timeout_ms=timeout)
        except (KafkaConnectionError, RequestTimedOutError) as exc:
            log.info("group %s: SyncGroup failed: %s", self.group_id, exc)
            return False
        if sresp.error_code:
            return self._join_error(sresp.error_code, "SyncGroup")
        assigned = decode_assignment(sresp.assignment)
        self.last_assignment, self.last_generation = list(assigned), self.generation
        await self.rebalance.assign(assigned, self.cooperative)
        topics = self.subscription.subscribed_topics()
        self.joined_topics = {t: self.cluster.num_partitions(t) for t in topics}
        return True

    def _fenced_instance(self, what: str) -> None:
        """Another consumer took this member's group.instance.id: fatal for this one (as in Kafka), else the
        two would keep fencing each other."""
        self._fatal = broker_error(Codes.FENCED_INSTANCE_ID,
                                   f"{what} for group {self.group_id!r}: another consumer joined with "
                                   f"group.instance.id {self.group_instance_id!r}")
        log.error("group %s: %s", self.group_id, self._fatal)
        self.generation = -1
        self.subscription.mark_lost()
        self.rejoin_event.set()

    def _join_error(self, code: int, what: str) -> bool:
        log.info("group %s: %s error %s", self.group_id, what, error_name(code))
        if code == Codes.FENCED_INSTANCE_ID:
            self._fenced_instance(what)
            raise self._fatal  # type: ignore[misc]
        if code in _COORDINATOR_ERRORS:
            self.coordinator_dead(error_name(code))
            return False
        if code == Codes.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
            return False
        if code in (Codes.ILLEGAL_GENERATION, Codes.REBALANCE_IN_PROGRESS):
            if code == Codes.ILLEGAL_GENERATION:
                self.generation = -1
            return False
        if code in (Codes.COORDINATOR_LOAD_IN_PROGRESS, Codes.REQUEST_TIMED_OUT):
            return False
        raise broker_error(code, f"{what} for group {self.group_id!r}")

    async def _assign(self, members: list[m.JoinGroupResponse.JoinGroupResponseMember]) -> dict[str, bytes]:
        subs: dict[str, MemberSubscription] = {}
        for mem in members:
            subs[mem.member_id] = decode_subscription(mem.member_id, mem.metadata,
                                                      getattr(mem, "group_instance_id", None))
        all_topics = {t for s in subs.values() for t in s.topics}
        missing = [t for t in all_topics if self.cluster.num_partitions(t) == 0]
        if missing:
            self.cluster.add_topics(missing)
            try:
                await self.cluster.refresh(missing, timeout_ms=self.request_timeout_ms)
            except KafkaTimeoutError:
                pass
        counts = {t: self.cluster.num_partitions(t) for t in all_topics if self.cluster.num_partitions(t) > 0}
        assignor = next((a for a in self.assignors if a.name == self.protocol), self.assignors[0])
        result = assignor.assign(counts, subs)
        log.debug("group %s: %s assignment %s", self.group_id, assignor.name, result)
        return {mid: encode_assignment(result.get(mid, [])) for mid in subs}

    def check_metadata(self) -> None:
        """Rejoin when a subscribed topic's partition count changed since the assignment."""
        if self.generation < 0 or self.rejoin_needed:
            return
        for t in self.subscription.subscribed_topics():
            n = self.cluster.num_partitions(t)
            if n and self.joined_topics.get(t) != n:
                log.info("group %s: partitions of %s changed (%s -> %d); rejoining", self.group_id, t,
                         self.joined_topics.get(t), n)
                self.request_rejoin()
                return

    async def _heartbeat_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.heartbeat_interval)
            if self._closing or self.generation < 0 or self._joining:
                continue
            if time.monotonic() - self.last_poll > self.max_poll_interval:
                log.warning(
                    "group %s: poll() not called within max.poll.interval.ms (%d ms); leaving the group",
                    self.group_id,
                    self.max_poll_interval * 1000,
                )
                await self.leave("consumer poll timeout has expired")
                self.request_rejoin()
                continue
            req = m.HeartbeatRequest.new(group_id=self.group_id, generation_id=self.generation,
                                         member_id=self.member_id, group_instance_id=self.group_instance_id)
            try:
                resp = await self._send(_HEARTBEAT, req)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                continue
            code = resp.error_code
            if code == 0:
                continue
            log.info("group %s: heartbeat: %s", self.group_id, error_name(code))
            if code == Codes.REBALANCE_IN_PROGRESS:
                self.request_rejoin()
            elif code == Codes.FENCED_INSTANCE_ID:
                self._fenced_instance("Heartbeat")
                return
            elif code in (Codes.UNKNOWN_MEMBER_ID, Codes.ILLEGAL_GENERATION):
                self.reset_generation(lost=code != Codes.ILLEGAL_GENERATION)
                self.subscription.mark_lost()
                self.request_rejoin()
            elif code in _COORDINATOR_ERRORS:
                self.coordinator_dead(error_name(code))

    async def leave(self, reason: str = "the consumer is being closed") -> None:
        if self.generation < 0 and not self.member_id:
            return
        if self.group_instance_id is not None:
            # static members keep their place across restarts; the session timeout removes them
            self.generation = -1
            return
        try:
            version = await self._version(_LEAVE)
            R = m.LeaveGroupRequest
            if version >= 3:
                req = R.new(group_id=self.group_id, members=[
                    R.MemberIdentity(member_id=self.member_id, group_instance_id=None, reason=reason)])
            else:
                req = R.new(group_id=self.group_id, member_id=self.member_id)
            resp = await self._send(_LEAVE, req, timeout_ms=min(self.request_timeout_ms, 5000))
            if resp.error_code:
                log.info("group %s: LeaveGroup: %s", self.group_id, error_name(resp.error_code))
        except Exception as exc:  # noqa: BLE001
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.generation = -1
        self.member_id = ""

    async def close(self) -> None:
        self._closing = True
        for t in (self._join_task, self._hb_task):
            if t is not None and not t.done():
                t.cancel()
                try:
                    await t
                except (asyncio.CancelledError, Exception):  # noqa: BLE001
                    pass


# ====================================================================================================
# KIP-848: group.protocol=consumer

_CONSUMER_GROUP_HEARTBEAT = 68
_LEAVE_EPOCH = -1
_LEAVE_STATIC_EPOCH = -2
# errors of ConsumerGroupHeartbeat that end the membership for good (raised from poll())
_FATAL_HEARTBEAT = frozenset({
    Codes.GROUP_AUTHORIZATION_FAILED, Codes.INVALID_REQUEST, Codes.UNSUPPORTED_ASSIGNOR,
    Codes.UNRELEASED_INSTANCE_ID, Codes.GROUP_MAX_SIZE_REACHED, Codes.UNSUPPORTED_VERSION,
    Codes.GROUP_ID_NOT_FOUND, Codes.INVALID_REGULAR_EXPRESSION, Codes.FENCED_INSTANCE_ID,
    Codes.TOPIC_AUTHORIZATION_FAILED,
})


class ConsumerProtocolCoordinator(GroupCoordinator):
    """Membership with the KIP-848 consumer group protocol (``group.protocol=consumer``).

    The broker computes the assignment; the member only heartbeats (ConsumerGroupHeartbeat, key 68) and
    reconciles: a heartbeat answer may carry the member's new assignment (topic ids), which the next
    ``poll()`` applies (revoked partitions first: auto-commit, ``on_partitions_revoked``; then
    ``on_partitions_assigned``), acknowledged at once by a heartbeat listing the partitions now owned.
    Joining is a heartbeat with member epoch 0 (v1: with a member id the client made), leaving one with
    epoch -1 (-2 for a static member: the broker keeps its partitions for its return). ``generation`` is the
    member epoch; commits carry it (OffsetCommit v9+). Fencing (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH)
    loses the partitions (``on_partitions_lost``) and rejoins with epoch 0. Errors that cannot be retried
    (an unsupported server assignor, UNRELEASED_INSTANCE_ID, authorization...) are raised from ``poll()``.
    ``session.timeout.ms``, ``heartbeat.interval.ms`` and ``partition.assignment.strategy`` are the
    broker's business under this protocol (``group.consumer.*``); ``group.remote.assignor`` names a
    server-side assignor.
    """

    def __init__(self, config: ConsumerConfig, cluster: Cluster, subscription: SubscriptionState,
                 rebalance: RebalanceHandler) -> None:
        super().__init__(config, cluster, subscription, rebalance)
        self.remote_assignor: str | None = config["group.remote.assignor"]
        self.member_id = ""
        self.member_epoch = 0
        self.heartbeat_interval = 5.0  # until the broker says
        self.protocol = "consumer"
        self._target: list[tuple[uuid.UUID, list[int]]] | None = None
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._send_full = True  # every field (join, after an error); else only what changed
        self._subscription_sent: list[str] | None = None
        self._owned_version = 0
        self._owned_sent = -1
        self._hb_wake = asyncio.Event()
        self._fenced = False  # partitions lost: poll() calls on_partitions_lost, then the member rejoins
        self._fatal: BaseException | None = None
        self._active = False  # the heartbeat task should be running (subscribed, not left)

    # ------------------------------------------------------------------------------------------------
    # driven by poll()

    def request_rejoin(self) -> None:
        """The subscription changed (subscribe(), a pattern matching other topics): tell the broker now."""
        self.rejoin_needed = True
        self._hb_wake.set()
        self.rejoin_event.set()

    def check_metadata(self) -> None:
        """Partition counts are the broker's concern under this protocol."""

    def reset_generation(self, lost: bool = False) -> None:
        self._hb_wake.set()  # a commit was refused as UNKNOWN_MEMBER_ID: the next heartbeat tells more

    def _on_stale_epoch(self) -> None:
        self._hb_wake.set()

    @property
    def cooperative(self) -> bool:
        return True

    async def ensure_active(self, deadline: float) -> None:
        if self._fatal is not None:
            raise self._fatal
        self.rejoin_event.clear()
        lost = self.subscription.take_lost()
        if self._fenced or lost:
            self._fenced = False
            owned = set(self.subscription.assignment)
            if owned:
                await self.rebalance.lose(owned)
            self._owned_version += 1
            self._send_full = True
            self._hb_wake.set()
        if self.rejoin_needed:
            self.rejoin_needed = False
            self._active = True
        if self._active:
            self.ensure_heartbeat()
        if self._target is not None:
            await self._reconcile()

    def ensure_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop(),
                                                                   name="moldau-consumer-heartbeat")

    async def _resolve(self, target: list[tuple[uuid.UUID, list[int]]]) -> set[TopicPartition] | None:
        names = self.cluster.topic_ids
        if any(tid not in names for tid, _ps in target):
            try:  # a topic the metadata does not know yet (just created, or subscribed by pattern)
                await self.cluster.refresh(timeout_ms=self.request_timeout_ms)
            except Exception as exc:  # noqa: BLE001
                log.info("group %s: metadata refresh for the assignment failed: %s", self.group_id, exc)
        out: set[TopicPartition] = set()
        for tid, parts in target:
            name = names.get(tid)
            if name is None:
                return None
            self._topic_ids[name] = tid
            out.update(TopicPartition(name, p) for p in parts)
        return out

    async def _reconcile(self) -> None:
        target, self._target = self._target, None
        assert target is not None
        new = await self._resolve(target)
        if new is None:
            if self._target is None:
                self._target = target  # retried by the next poll()
            log.info("group %s: assignment names topic ids the metadata does not know yet", self.group_id)
            return
        if self._target is not None:
            return  # a newer assignment arrived meanwhile: reconcile that one
        owned = set(self.subscription.assignment)
        revoked = owned - new
        added = new - owned
        if revoked:
            await self.rebalance.revoke(revoked, commit=True)
        if revoked or added or not owned:
            log.info("group %s: member epoch %d", self.group_id, self.member_epoch)
            await self.rebalance.assign(sorted(new), False)
        self._owned_version += 1  # acknowledge what is owned now
        self._hb_wake.set()

    # ------------------------------------------------------------------------------------------------
    # heartbeats

    def _owned_topic_partitions(self) -> list[m.ConsumerGroupHeartbeatRequest.TopicPartitions]:
        R = m.ConsumerGroupHeartbeatRequest
        by_topic: dict[str, list[int]] = {}
        for tp in self.subscription.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out = []
        for topic, parts in sorted(by_topic.items()):
            tid = self._topic_ids.get(topic)
            if tid is None:
                md = self.cluster.topics.get(topic)
                tid = md.topic_id if md is not None else None
            if tid is not None:
                out.append(R.TopicPartitions(topic_id=tid, partitions=sorted(parts)))
        return out

    async def _heartbeat_once(self) -> None:
        version = await self._version(_CONSUMER_GROUP_HEARTBEAT)
        if version >= 1 and not self.member_id:
            self.member_id = str(uuid.uuid4())  # v1+: the member names itself (v0: the broker does)
        full = self._send_full or self.member_epoch == 0
        topics = sorted(self.subscription.subscribed_topics())
        names = topics if full or topics != self._subscription_sent else None
        owned_version = self._owned_version
        if self.member_epoch == 0:
            owned: list[m.ConsumerGroupHeartbeatRequest.TopicPartitions] | None = []
        else:
            owned = self._owned_topic_partitions() if full or owned_version != self._owned_sent else None
        req = m.ConsumerGroupHeartbeatRequest.new(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=self.group_instance_id if full else None,
            rack_id=self.rack_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names, subscribed_topic_regex=None,
            server_assignor=self.remote_assignor if full else None,
            topic_partitions=owned)
        sent_epoch = self.member_epoch
        try:
            resp = await self._send(_CONSUMER_GROUP_HEARTBEAT, req)
        except (KafkaConnectionError, RequestTimedOutError) as exc:
            log.info("group %s: heartbeat failed: %s", self.group_id, exc)
            self._send_full = True
            await asyncio.sleep(self.retry_backoff)
            return
        code = resp.error_code
        log.debug(
            "group %s: heartbeat epoch %d owned=%s -> %s epoch %d interval %d assignment %s",
            self.group_id,
            sent_epoch,
            owned is not None,
            error_name(code),
            resp.member_epoch,
            resp.heartbeat_interval_ms,
            resp.assignment is not None,
        )
        if code == 0:
            if resp.member_id:
                self.member_id = resp.member_id
            if self.member_epoch != sent_epoch:
                return  # left or fenced meanwhile
            if resp.member_epoch != self.member_epoch:
                log.info(
                    "group %s: member %s epoch %d -> %d",
                    self.group_id,
                    self.member_id,
                    self.member_epoch,
                    resp.member_epoch,
                )
            self.member_epoch = resp.member_epoch
            self.generation = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval = resp.heartbeat_interval_ms / 1000.0
            self._send_full = False
            if names is not None:
                self._subscription_sent = names
                self.joined_topics = {t: self.cluster.num_partitions(t) for t in names}
            if owned is not None:
                self._owned_sent = owned_version
            if resp.assignment is not None:
                self._target = [(tp.topic_id, list(tp.partitions)) for tp in resp.assignment.topic_partitions]
                self.rejoin_event.set()  # poll() reconciles
            return
        message = resp.error_message or error_name(code)
        if code in (Codes.UNKNOWN_MEMBER_ID, Codes.FENCED_MEMBER_EPOCH):
            log.info("group %s: member %s fenced (%s): its partitions are lost; rejoining", self.group_id,
                     self.member_id, message)
            self._fence()
        elif code in _COORDINATOR_ERRORS:
            self.coordinator_dead(error_name(code))
            self._send_full = True
            await asyncio.sleep(self.retry_backoff)
        elif code in (Codes.COORDINATOR_LOAD_IN_PROGRESS, Codes.REQUEST_TIMED_OUT, Codes.NETWORK_EXCEPTION):
            await asyncio.sleep(self.retry_backoff)
        elif code in _FATAL_HEARTBEAT:
            hint = (" (the broker does not run the consumer group protocol: use group.protocol=classic)"
                    if code == Codes.UNSUPPORTED_VERSION else "")
            self._fail(
                broker_error(code, f"ConsumerGroupHeartbeat for group {self.group_id!r}: {message}{hint}")
            )
        else:
            log.warning("group %s: heartbeat: %s; retrying", self.group_id, message)
            self._send_full = True
            await asyncio.sleep(self.retry_backoff)

    def _fence(self) -> None:
        self.member_epoch = 0
        self.generation = -1
        self._target = None
        self._send_full = True
        self._subscription_sent = None
        self._fenced = True
        self.rejoin_event.set()

    def _fail(self, exc: BaseException) -> None:
        log.error("group %s: %s", self.group_id, exc)
        self._fatal = exc
        self._active = False
        self.generation = -1
        self.rejoin_event.set()

    async def _heartbeat_loop(self) -> None:
        while not self._closing and self._active and self._fatal is None:
            if self._fenced:  # wait for poll() to hand the lost partitions back first
                self._hb_wake.clear()
                await self._hb_wake.wait()
                continue
            if self.member_epoch > 0 and time.monotonic() - self.last_poll > self.max_poll_interval:
                log.warning(
                    "group %s: poll() not called within max.poll.interval.ms (%d ms); leaving the group",
                    self.group_id,
                    self.max_poll_interval * 1000,
                )
                await self._send_leave(_LEAVE_EPOCH, "consumer poll timeout has expired")
                self._fence()
                continue
            self._hb_wake.clear()
            try:
                await self._heartbeat_once()
            except asyncio.CancelledError:
                raise
            except UnsupportedVersionError as exc:
                self._fail(UnsupportedVersionError(f"{exc}: the broker does not offer the consumer group "
                                                   "protocol (KIP-848); use group.protocol=classic"))
                return
            except Exception as exc:  # noqa: BLE001
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                self._send_full = True
                await asyncio.sleep(self.retry_backoff)
                continue
            if self._closing or not self._active or self._hb_wake.is_set() or self._fenced:
                continue
            interval = self.heartbeat_interval
            if self.member_epoch == 0:
                interval = self.retry_backoff  # joining did not complete: try again soon
            try:
                await wait_for(self._hb_wake.wait(), interval)
            except asyncio.TimeoutError:
                pass

    async def _send_leave(self, epoch: int, reason: str) -> None:
        req = m.ConsumerGroupHeartbeatRequest.new(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
            rack_id=None,
            rebalance_timeout_ms=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
        )
        try:
            resp = await self._send(
                _CONSUMER_GROUP_HEARTBEAT, req, timeout_ms=min(self.request_timeout_ms, 5000)
            )
            if resp.error_code:
                log.info(
                    "group %s: leaving: %s", self.group_id, resp.error_message or error_name(resp.error_code)
                )
            else:
                log.info("group %s: member %s left (%s)", self.group_id, self.member_id, reason)
        except Exception as exc:  # noqa: BLE001
            log.info("group %s: leaving failed: %s", self.group_id, exc)

    async def leave(self, reason: str = "the consumer is being closed") -> None:
        self._active = False
        task, self._hb_task = self._hb_task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self.member_epoch > 0 and self.member_id:
            epoch = _LEAVE_STATIC_EPOCH if self.group_instance_id is not None else _LEAVE_EPOCH
            await self._send_leave(epoch, reason)
        self.member_epoch = 0
        self.generation = -1
        self._send_full = True
        self._subscription_sent = None
        self._target = None


def make_coordinator(config: ConsumerConfig, cluster: Cluster, subscription: SubscriptionState,
                     rebalance: RebalanceHandler) -> GroupCoordinator:
    """The membership implementation group.protocol asks for."""
    cls = ConsumerProtocolCoordinator if config["group.protocol"] == "consumer" else GroupCoordinator
    return cls(config, cluster, subscription, rebalance)
