"""What the console knows about the cluster, read through the Kafka protocol only (the moldau admin client).

``ClusterView`` owns one ``AsyncAdmin`` and a lazily started ``AsyncProducer``. The topic snapshot (metadata,
start/end offsets, sizes, retention of every topic) is cached for ``cache_ttl`` seconds and dropped after any
change the console makes, so a page render with 10,000 partitions costs a few requests, not one per topic.
APIs the moldau client has no method for yet (DescribeLogDirs, transactions, ACLs, SCRAM users, quotas) are
sent as Kafka requests over the admin client's connections (``moldau.console.extra``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from moldau._aio import wait_for
from moldau.client import AsyncAdmin, AsyncProducer
from moldau.client.errors import ClientError, KafkaError
from moldau.client.types import (
    AlterConfigOp,
    ConfigResource,
    GroupDescription,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    TopicPartition,
)

from . import extra

log = logging.getLogger(__name__)

RESET_STRATEGIES = ("earliest", "latest", "timestamp", "offset", "shift")


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    start: int = -1
    end: int = -1
    size: int | None = None

    @property
    def records(self) -> int:
        return max(self.end - self.start, 0) if self.start >= 0 and self.end >= 0 else 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(slots=True)
class TopicInfo:
    name: str
    internal: bool
    partitions: list[PartitionInfo]
    retention_ms: str | None = None
    topic_id: str = ""

    @property
    def replication(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def end_sum(self) -> int:
        return sum(max(p.end, 0) for p in self.partitions)

    @property
    def size(self) -> int | None:
        sizes = [p.size for p in self.partitions if p.size is not None]
        return sum(sizes) if sizes else None

    @property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions if p.under_replicated)

    @property
    def offline(self) -> int:
        return sum(1 for p in self.partitions if p.leader < 0)


@dataclass(slots=True)
class Snapshot:
    taken: float
    topics: dict[str, TopicInfo]
    sizes_known: bool = False

    def leaders(self) -> dict[tuple[str, int], int]:
        """Leader of every partition of the non-internal topics."""
        return {
            (t.name, p.partition): p.leader
            for t in self.topics.values()
            if not t.internal
            for p in t.partitions
        }

    def end_offsets(self) -> dict[TopicPartition, int]:
        return {
            TopicPartition(t.name, p.partition): p.end for t in self.topics.values() for p in t.partitions
        }


@dataclass(slots=True)
class GroupLag:
    topic: str
    partition: int
    committed: int | None
    end: int
    member: str | None = None
    client: str | None = None

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(self.end - self.committed, 0)


@dataclass(slots=True)
class GroupView:
    description: GroupDescription
    rows: list[GroupLag] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.rows)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.rows})


@dataclass(slots=True)
class ShareLag:
    """A share-partition of a share group: its start offset (SPSO; None before the group's first fetch of
    it), the log end offset, the lag (DescribeShareGroupOffsets v1: records from the SPSO to the end not yet
    acknowledged or archived; None when the broker does not say) and the members it is assigned to (a
    share group may give one partition to several members)."""

    topic: str
    partition: int
    start: int | None
    end: int
    lag: int | None
    members: list[str] = field(default_factory=list)

    @property
    def done(self) -> int | None:
        """Records past the SPSO already acknowledged or archived (end - SPSO - lag)."""
        if self.start is None or self.lag is None or self.end < 0:
            return None
        return max(self.end - self.start - self.lag, 0)


@dataclass(slots=True)
class ShareGroupView:
    description: Any  # moldau.client.share_admin.ShareGroupDescription
    rows: list[ShareLag] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.rows)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.rows})


class ClusterView:
    def __init__(
        self, client_conf: dict[str, Any], *, cache_ttl: float = 2.0, stale_ttl: float = 0.0
    ) -> None:
        self.client_conf = dict(client_conf)
        self.cache_ttl = cache_ttl
        self.stale_ttl = stale_ttl
        self._refreshing: asyncio.Task[Any] | None = None
        self.admin = AsyncAdmin(config=self._conf_for("admin"))
        self._producer: AsyncProducer | None = None
        self._snapshot: Snapshot | None = None
        self._snapshot_lock = asyncio.Lock()
        self._offset_fetch_all_broken = False

    def _conf_for(self, kind: str) -> dict[str, Any]:
        from moldau.client.config import CONSUMER, PRODUCER

        own = {"producer": PRODUCER, "consumer": CONSUMER}.get(kind, {})
        others = [d for k, d in (("producer", PRODUCER), ("consumer", CONSUMER)) if k != kind]
        conf = {k: v for k, v in self.client_conf.items() if k in own or not any(k in d for d in others)}
        conf.setdefault("client.id", f"moldau-console-{kind}")
        return conf

    def consumer_conf(self) -> dict[str, Any]:
        conf = self._conf_for("consumer")
        conf.update({"enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100})
        conf.pop("group.id", None)
        return conf

    async def start(self) -> None:
        await self.admin.start()

    async def close(self) -> None:
        if self._producer is not None:
            try:
                await self._producer.close()
            except Exception:
                log.debug("producer close failed", exc_info=True)
            self._producer = None
        await self.admin.close()

    async def producer(self) -> AsyncProducer:
        if self._producer is None:
            conf = self._conf_for("producer")
            conf.setdefault("enable.idempotence", False)  # works against brokers without InitProducerId
            conf.setdefault("linger.ms", 0)
            p = AsyncProducer(config=conf)
            await p.start()
            self._producer = p
        return self._producer

    def invalidate(self) -> None:
        self._snapshot = None

    def snapshot_age(self) -> float | None:
        snap = self._snapshot
        return None if snap is None else time.monotonic() - snap.taken

    # ------------------------------------------------------------------------------------------ cluster
    async def describe_cluster(self) -> Any:
        return await self.admin.describe_cluster()

    async def snapshot(self, *, max_age: float | None = None) -> Snapshot:
        """The cluster snapshot, at most ``max_age`` (default ``cache_ttl``) seconds old. Without
        ``max_age``, a snapshot up to ``stale_ttl`` seconds old is returned at once while a fresh one is
        taken in the background (the sampler keeps it young, so list pages rarely wait for 10,000
        partitions' offsets)."""
        age = self.cache_ttl if max_age is None else max_age
        snap = self._snapshot
        if snap is not None and time.monotonic() - snap.taken <= age:
            return snap
        if max_age is None and snap is not None and time.monotonic() - snap.taken <= self.stale_ttl:
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.get_running_loop().create_task(self.snapshot(max_age=age))
            return snap
        async with self._snapshot_lock:
            snap = self._snapshot
            if snap is not None and time.monotonic() - snap.taken <= age:
                return snap
            snap = await self._take_snapshot()
            self._snapshot = snap
            return snap

    async def topic(self, name: str) -> TopicInfo | None:
        """One topic's information: from the cached snapshot while it is fresh, else asked for that topic
        alone (a topic page stays fast on a cluster with many partitions). None: no such topic."""
        snap = self._snapshot
        if snap is not None and time.monotonic() - snap.taken <= self.cache_ttl and name in snap.topics:
            return snap.topics[name]
        try:
            one = await self._take_snapshot([name])
        except KafkaError as e:
            if e.code in (3, 17):  # UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION
                return None
            raise
        return one.topics.get(name)

    async def _take_snapshot(self, only: list[str] | None = None) -> Snapshot:
        names = list(only) if only is not None else list(await self.admin.list_topics(include_internal=True))
        descs = await self.admin.describe_topics(names) if names else {}
        topics: dict[str, TopicInfo] = {}
        for name, d in descs.items():
            parts = [
                PartitionInfo(p.partition, p.leader, list(p.replicas), list(p.isr), list(p.offline_replicas))
                for p in sorted(d.partitions, key=lambda p: p.partition)
            ]
            topics[name] = TopicInfo(name, bool(d.is_internal), parts, topic_id=str(d.topic_id or ""))
        tps = [
            TopicPartition(t.name, p.partition)
            for t in topics.values()
            for p in t.partitions
            if p.leader >= 0
        ]
        if tps:
            starts, ends = await asyncio.gather(self._offsets(tps, "earliest"), self._offsets(tps, "latest"))
            for t in topics.values():
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition)
                    p.start = starts.get(tp, -1)
                    p.end = ends.get(tp, -1)
        sizes_known = False
        try:
            sizes = await extra.partition_sizes(self.admin, only)
        except Exception as exc:  # noqa: BLE001 - a broker without DescribeLogDirs: sizes stay unknown
            log.debug("DescribeLogDirs failed: %s", exc)
            sizes = {}
        if sizes:
            sizes_known = True
            for t in topics.values():
                for p in t.partitions:
                    p.size = sizes.get((t.name, p.partition))
        if topics:
            try:
                configs = await self.admin.describe_configs([ConfigResource.topic(n) for n in topics])
                for res, entries in configs.items():
                    e = entries.get("retention.ms")
                    if res.name in topics and e is not None:
                        topics[res.name].retention_ms = e.value
            except Exception as exc:  # noqa: BLE001 - shown as unknown
                log.debug("DescribeConfigs failed: %s", exc)
        return Snapshot(time.monotonic(), topics, sizes_known)

    async def _offsets(self, tps: list[TopicPartition], spec: str) -> dict[TopicPartition, int]:
        try:
            res = await self.admin.list_offsets({tp: spec for tp in tps})
        except Exception as exc:  # noqa: BLE001 - one bad partition must not hide the rest: ask each topic
            log.debug("ListOffsets %s failed (%s); asking per topic", spec, exc)
            out: dict[TopicPartition, int] = {}
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp)
            for group in by_topic.values():
                try:
                    r = await self.admin.list_offsets({tp: spec for tp in group})
                    out.update({tp: v.offset for tp, v in r.items()})
                except Exception as exc:  # noqa: BLE001
                    log.debug("ListOffsets %s of %s failed: %s", spec, group[0].topic, exc)
            return out
        return {tp: v.offset for tp, v in res.items()}

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._offsets(tps, "latest") if tps else {}

    # ------------------------------------------------------------------------------------------ topics
    async def topic_configs(self, name: str) -> dict[str, Any]:
        res = ConfigResource.topic(name)
        out = await self.admin.describe_configs([res], include_synonyms=True, include_documentation=True)
        return out.get(res, {})

    async def create_topic(
        self, name: str, partitions: int, replication: int, configs: dict[str, str]
    ) -> None:
        try:
            await self.admin.create_topics([NewTopic(name, partitions, replication, config=configs)])
        finally:
            self.invalidate()

    async def delete_topic(self, name: str) -> None:
        try:
            await self.admin.delete_topics([name])
        finally:
            self.invalidate()

    async def add_partitions(self, name: str, total: int) -> None:
        try:
            await self.admin.create_partitions({name: NewPartitions(total)})
        finally:
            self.invalidate()

    async def alter_topic_config(self, name: str, key: str, value: str | None) -> None:
        op = AlterConfigOp(key, value, AlterConfigOp.DELETE if value is None else AlterConfigOp.SET)
        try:
            await self.admin.incremental_alter_configs({ConfigResource.topic(name): [op]})
        finally:
            self.invalidate()

    async def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]],
        partition: int | None,
    ) -> Any:
        p = await self.producer()
        try:
            return await wait_for(
                p.send_and_wait(topic, value, key=key, partition=partition, headers=headers or None), 30
            )
        finally:
            self.invalidate()

    # ------------------------------------------------------------------------------------------ groups
    async def list_groups(self) -> list[Any]:
        return await self.admin.list_consumer_groups()

    async def group_type(self, group_id: str) -> str | None:
        """The group's type as ListGroups gives it ("classic", "consumer", "share"), None if not listed."""
        for g in await self.list_groups():
            if g.group_id == group_id:
                return str(g.group_type or g.protocol_type or "") or None
        return None

    async def share_member_counts(self, group_ids: list[str]) -> dict[str, int]:
        """Members of each share group (ShareGroupDescribe); groups that fail to describe are left out."""
        out: dict[str, int] = {}
        for gid in group_ids:
            try:
                out[gid] = len((await self.admin.describe_share_groups([gid]))[gid].members)
            except (KafkaError, ClientError) as exc:  # deleted meanwhile
                log.debug("describe share group %s: %s", gid, exc)
        return out

    async def share_offsets(self, group_id: str) -> dict[TopicPartition, Any]:
        """DescribeShareGroupOffsets of all the group's topics: SPSO and lag per share-partition."""
        return await self.admin.list_share_group_offsets(group_id)

    async def share_group(self, group_id: str) -> ShareGroupView:
        desc = (await self.admin.describe_share_groups([group_id]))[group_id]
        offsets = await self.share_offsets(group_id)
        holders: dict[TopicPartition, list[str]] = {}
        for mem in desc.members:
            for tp in mem.assignment:
                holders.setdefault(tp, []).append(mem.client_id or mem.member_id)
        tps = sorted(set(offsets) | set(holders))
        ends = await self.end_offsets(tps)
        rows = []
        for tp in tps:
            o = offsets.get(tp)
            start = o.start_offset if o is not None and o.start_offset >= 0 else None
            lag = o.lag if o is not None and o.lag >= 0 and start is not None else None
            rows.append(ShareLag(tp.topic, tp.partition, start, ends.get(tp, -1), lag,
                                 sorted(holders.get(tp, []))))
        return ShareGroupView(desc, rows)

    async def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets. OffsetFetch for all topics (a null topic list) first; a broker that
        answers it wrongly (some Kafka-compatible brokers do) is asked again for every partition by name."""
        if not self._offset_fetch_all_broken:
            try:
                return await self.admin.list_consumer_group_offsets(group_id)
            except KafkaError:
                raise
            except ClientError as exc:
                log.info("OffsetFetch of all topics failed (%s); asking for the partitions by name", exc)
                self._offset_fetch_all_broken = True
        snap = await self.snapshot()
        tps = [
            TopicPartition(t.name, p.partition)
            for t in snap.topics.values()
            if not t.internal
            for p in t.partitions
        ]
        return await self.admin.list_consumer_group_offsets(group_id, tps) if tps else {}

    async def group(self, group_id: str) -> GroupView:
        desc = (await self.admin.describe_consumer_groups([group_id]))[group_id]
        committed = await self.committed(group_id)
        owner: dict[TopicPartition, Any] = {}
        for mem in desc.members:
            for tp in mem.assignment:
                owner[tp] = mem
        tps = sorted(set(committed) | set(owner))
        ends = await self.end_offsets(tps)
        rows = []
        for tp in tps:
            owner_of = owner.get(tp)
            c = committed.get(tp)
            rows.append(
                GroupLag(
                    tp.topic,
                    tp.partition,
                    c.offset if c is not None else None,
                    ends.get(tp, -1),
                    owner_of.member_id if owner_of else None,
                    owner_of.client_id if owner_of else None,
                )
            )
        return GroupView(desc, rows)

    async def delete_group(self, group_id: str) -> None:
        await self.admin.delete_consumer_groups([group_id])

    async def reset_plan(
        self, group_id: str, topic: str | None, strategy: str, value: str
    ) -> list[tuple[TopicPartition, int | None, int]]:
        """(partition, current committed offset, new offset) for a reset, computed but not applied."""
        if strategy not in RESET_STRATEGIES:
            raise ValueError(f"unknown reset strategy {strategy!r} (one of {', '.join(RESET_STRATEGIES)})")
        committed = await self.committed(group_id)
        if topic:
            snap = await self.snapshot()
            t = snap.topics.get(topic)
            if t is None:
                raise ValueError(f"unknown topic {topic!r}")
            tps = [TopicPartition(topic, p.partition) for p in t.partitions]
        else:
            tps = sorted(committed)
        if not tps:
            raise ValueError("the group has no committed offsets; pick a topic")
        starts = {
            tp: r.offset for tp, r in (await self.admin.list_offsets({tp: "earliest" for tp in tps})).items()
        }
        ends = {
            tp: r.offset for tp, r in (await self.admin.list_offsets({tp: "latest" for tp in tps})).items()
        }
        new: dict[TopicPartition, int] = {}
        if strategy == "earliest":
            new = dict(starts)
        elif strategy == "latest":
            new = dict(ends)
        elif strategy == "timestamp":
            ts = parse_time_ms(value)
            res = await self.admin.list_offsets({tp: ts for tp in tps})
            new = {tp: (r.offset if r.offset >= 0 else ends[tp]) for tp, r in res.items()}
        elif strategy == "offset":
            try:
                target = int(value)
            except ValueError:
                raise ValueError(f"offset must be an integer, got {value!r}") from None
            new = {tp: target for tp in tps}
        elif strategy == "shift":
            try:
                delta = int(value)
            except ValueError:
                raise ValueError(f"shift must be an integer (negative goes back), got {value!r}") from None
            new = {tp: (committed[tp].offset if tp in committed else ends[tp]) + delta for tp in tps}
        else:
            raise ValueError(f"unknown reset strategy {strategy!r}")
        plan = []
        for tp in tps:
            off = min(max(new[tp], starts[tp]), ends[tp])  # Kafka's tool clamps into the log's range
            cur = committed.get(tp)
            plan.append((tp, cur.offset if cur is not None else None, off))
        return plan

    async def apply_reset(self, group_id: str, plan: list[tuple[TopicPartition, int | None, int]]) -> None:
        await self.admin.alter_consumer_group_offsets(group_id, {tp: new for tp, _cur, new in plan})


def parse_time_ms(value: str) -> int:
    """A timestamp from the UI: epoch milliseconds, or an ISO 8601 date/time (UTC unless it names a zone)."""
    from datetime import UTC, datetime

    v = value.strip()
    if not v:
        raise ValueError("a timestamp is needed")
    if v.lstrip("-").isdigit():
        return int(v)
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"timestamp {value!r}: give epoch milliseconds or an ISO date/time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)
