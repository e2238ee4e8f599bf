"""Committed offsets (Kafka's OffsetMetadataManager): OffsetCommit and TxnOffsetCommit (pending until the
transaction's marker), OffsetFetch, OffsetDelete, and the expiry of old offsets."""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.errors import ErrorCode

from ..coordinator import Record
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicGroupState,
    CommittedOffset,
    GroupBase,
    TopicPartition,
)
from .model import GroupContext, PartitionOffset

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicGroupState


class OffsetManager:
    def __init__(self, ctx: GroupContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.groups = ctx.groups

    def validate_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        api_version: int,
        *,
        transactional: bool = False,
    ) -> tuple[int, GroupBase | None]:
        """Kafka's offset commit validation; creates a "simple" group for generation -1 commits."""
        if group_id and not self.ctx.owns(group_id):
            return E.NOT_COORDINATOR, None
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            if generation_id < 0:
                return E.NONE, self.groups.create_classic(group_id, self.ctx.now())
            if api_version >= 9:
                return E.GROUP_ID_NOT_FOUND, None
            return E.ILLEGAL_GENERATION, None
        if not isinstance(group, ClassicGroup):
            return self.ctx.consumer.validate_commit(
                group, member_id, generation_id, api_version, transactional
            ), group
        if generation_id < 0 and group.is_empty:
            return E.NONE, group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                existing = group.static_member_id(group_instance_id)
                if existing is None:
                    return E.UNKNOWN_MEMBER_ID, group
                if existing != member_id:
                    return E.FENCED_INSTANCE_ID, group
            if member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID, group
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION, group
        elif not transactional and not group.is_empty:
            # no member id and no generation (v0): only an empty group takes such commits
            return E.UNKNOWN_MEMBER_ID, group
        if not transactional and group.is_in(S.COMPLETING_REBALANCE):
            # the member saw the JoinGroup answer but not the SyncGroup one yet
            return E.REBALANCE_IN_PROGRESS, group
        return E.NONE, group

    def _check_metadata(self, offsets: dict[TopicPartition, CommittedOffset]
                        ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """(OFFSET_METADATA_TOO_LARGE by partition, the offsets accepted)."""
        refused = {tp: int(E.OFFSET_METADATA_TOO_LARGE) for tp, co in offsets.items()
                   if self.metadata_too_large(co.metadata)}
        return refused, {tp: co for tp, co in offsets.items() if tp not in refused}

    def metadata_too_large(self, metadata: str | None) -> bool:
        if not metadata:
            return False
        # Kafka compares String.length() (UTF-16 code units)
        return len(metadata.encode("utf-16-le")) // 2 > self.config.offset_metadata_max_bytes

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        api_version: int = 9,
    ) -> dict[TopicPartition, int]:
        error, group = self.validate_commit(
            group_id, member_id, generation_id, group_instance_id, api_version
        )
        if error != E.NONE or group is None:
            return {tp: error for tp in offsets}
        results, accepted = self._check_metadata(offsets)
        if accepted:
            records = offset_records(group_id, accepted)
            try:
                await self.ctx.append(group_id, records)
            except Exception as exc:
                log.warning("group %s: storing offsets failed: %s", group_id, exc)
                err = storage_error(exc)
                results.update({tp: err for tp in accepted})
                return results
            current = self.groups.get(group_id)
            if current is group and not group.is_dead:
                group.offsets.update(accepted)
            elif current is not None and not current.is_dead:
                current.offsets.update(accepted)
            results.update({tp: E.NONE for tp in accepted})
        return {tp: results[tp] for tp in offsets}

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        api_version: int = 3,
        producer_epoch: int | None = None,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets kept pending until the transaction ends (``complete_transaction``).

        With ``producer_epoch`` (the broker's TxnOffsetCommit handler) the records are written at once as a
        transactional batch of the producer, as Kafka does: the transaction coordinator's COMMIT/ABORT marker
        on the partition then decides them, also after a restart (``load``)."""
        if not self.ctx.owns(group_id):
            return {tp: E.NOT_COORDINATOR for tp in offsets}
        group = self.groups.get(group_id)
        error: int
        if group is None or group.is_dead:
            group = self.groups.create_classic(group_id, self.ctx.now())
            error = E.NONE
        else:
            error, _ = self.validate_commit(
                group_id, member_id, generation_id, group_instance_id, api_version, transactional=True
            )
        if error != E.NONE:
            return {tp: error for tp in offsets}
        results, accepted = self._check_metadata(offsets)
        results.update({tp: E.NONE for tp in accepted})
        if accepted and producer_epoch is not None:
            records = offset_records(group_id, accepted)
            try:
                await self.ctx.append(group_id, records, producer_id=producer_id,
                                      producer_epoch=producer_epoch, transactional=True)
            except Exception as exc:
                log.warning("group %s: storing transactional offsets failed: %s", group_id, exc)
                err = storage_error(exc)
                results.update({tp: err for tp in accepted})
                return results
        if accepted:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
        return results

    async def complete_transaction(
        self,
        producer_id: int,
        committed: bool,
        group_ids: Iterable[str] | None = None,
        persist: bool = True,
    ) -> None:
        """End of a transaction: its pending offsets become committed (and durable) or are dropped.
        ``persist=False``: the records are already in the log, decided by the marker just written (the
        transaction coordinator's call), so nothing is appended."""
        for gid in list(group_ids) if group_ids is not None else list(self.groups):
            group = self.groups.get(gid)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not committed:
                continue
            if persist:
                records = offset_records(gid, pending)
                await self.ctx.append(gid, records)
            if not group.is_dead:
                group.offsets.update(pending)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, list[PartitionOffset]]:
        """Committed offsets; ``partitions`` None = all of the group's. Unknown ones answer offset -1."""
        if not self.ctx.owns(group_id):
            return E.NOT_COORDINATOR, []
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            if partitions is None:
                return E.NONE, []
            return E.NONE, [PartitionOffset(t, p) for t, p in partitions]
        if member_id is not None or member_epoch >= 0:
            error = self.ctx.consumer.validate_fetch(group, member_id, member_epoch)
            if error != E.NONE:
                return error, []
        if partitions is None:
            wanted = sorted(
                set(group.offsets) | {tp for offs in group.pending_txn_offsets.values() for tp in offs}
                if require_stable
                else group.offsets
            )
        else:
            wanted = list(partitions)
        out: list[PartitionOffset] = []
        for t, p in wanted:
            if require_stable and group.has_pending_txn_offset((t, p)):
                out.append(PartitionOffset(t, p, error=E.UNSTABLE_OFFSET_COMMIT))
                continue
            co = group.offsets.get((t, p))
            if co is None:
                out.append(PartitionOffset(t, p))
            else:
                out.append(PartitionOffset(t, p, co.offset, co.leader_epoch, co.metadata))
        return E.NONE, out

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        if not group_id:
            return E.INVALID_GROUP_ID, {}
        if not self.ctx.owns(group_id):
            return E.NOT_COORDINATOR, {}
        group = self.groups.get(group_id)
        if group is None or group.is_dead:
            return E.GROUP_ID_NOT_FOUND, {}
        if isinstance(group, ClassicGroup):
            if (
                group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
                and group.protocol_type != CONSUMER_PROTOCOL_TYPE
            ):
                return E.NON_EMPTY_GROUP, {}
            subscribed: Callable[[str], bool] = group.is_subscribed_to_topic
        else:
            subscribed = self.ctx.consumer.is_subscribed_to_topic(group)
        results: dict[TopicPartition, int] = {}
        deleted: list[TopicPartition] = []
        for tp in partitions:
            if subscribed(tp[0]):
                results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = E.NONE
                if tp in group.offsets:
                    deleted.append(tp)
        if deleted:
            for tp in deleted:
                group.offsets.pop(tp, None)
            try:
                await self.ctx.append(
                    group_id, [(fmt.encode_offset_commit_key(group_id, t, p), None) for t, p in deleted]
                )
            except Exception as exc:
                log.warning("group %s: writing offset tombstones failed: %s", group_id, exc)
                return storage_error(exc), {}
        return E.NONE, results

    async def cleanup_expired_offsets(self) -> int:
        """Drop expired offsets (Kafka's rules) and groups left empty without offsets. Returns how many
        offsets expired."""
        now = self.ctx.now()
        retention = self.config.offsets_retention_ms
        total = 0
        for group in list(self.groups.values()):
            if group.is_dead:
                continue
            expired = self._expired_offsets(group, now, retention)
            records: list[tuple[bytes, bytes | None]] = []
            for tp in expired:
                group.offsets.pop(tp, None)
                records.append((fmt.encode_offset_commit_key(group.group_id, *tp), None))
            total += len(expired)
            if expired:
                log.info("group %s: %d offsets expired", group.group_id, len(expired))
            if self._can_delete_when_empty(group):
                records.append((fmt.encode_group_metadata_key(group.group_id), None))
                records.extend(self.ctx.consumer.tombstones_for(group))
                self.ctx.remove_group(group)
                log.info("group %s: empty without offsets, removed", group.group_id)
            if records:
                try:
                    await self.ctx.append(group.group_id, records)
                except Exception as exc:
                    log.warning("group %s: writing expiry tombstones failed: %s", group.group_id, exc)
        return total

    def _can_delete_when_empty(self, group: GroupBase) -> bool:
        if not group.is_empty or group.offsets or group.pending_txn_offsets:
            return False
        if isinstance(group, ClassicGroup):
            return not group.pending_members and not group.members
        return True

    def _expired_offsets(self, group: GroupBase, now: int, retention: int) -> list[TopicPartition]:
        def expired(co: CommittedOffset, base: int) -> bool:
            if co.expire_timestamp >= 0:  # the old per-commit expire timestamp (OffsetCommit v1-v4)
                return now >= co.expire_timestamp
            return now - base >= retention

        def pick(
            base_of: Callable[[CommittedOffset], int], subscribed: set[str] | None = None
        ) -> list[TopicPartition]:
            return [
                tp
                for tp, co in group.offsets.items()
                if (subscribed is None or tp[0] not in subscribed)
                and not group.has_pending_txn_offset(tp)
                and expired(co, base_of(co))
            ]

        if isinstance(group, ClassicGroup):
            if group.protocol_type is not None and group.is_empty:
                # nobody in the group: retention counts from when it became empty
                return pick(
                    lambda co: group.state_timestamp if group.state_timestamp >= 0 else co.commit_timestamp
                )
            if (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_in(S.STABLE)
            ):
                # active consumers: offsets of topics nobody subscribes to expire from their last commit
                return pick(lambda co: co.commit_timestamp, group.subscribed_topics)
            if group.protocol_type is None:
                # simple consumer group (offsets only): from the last commit
                return pick(lambda co: co.commit_timestamp)
            return []
        return self.ctx.consumer.expired_offsets(group, pick)


def committed_offset(v: fmt.OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def offset_records(group_id: str, offsets: dict[TopicPartition, CommittedOffset]) -> list[Record]:
    """The OffsetCommit records of ``group_id`` for ``offsets``."""
    return [(fmt.encode_offset_commit_key(group_id, t, p), fmt.encode_offset_commit_value(_to_value(co)))
            for (t, p), co in offsets.items()]


def _to_value(co: CommittedOffset) -> fmt.OffsetCommitValue:
    return fmt.OffsetCommitValue(
        offset=co.offset,
        metadata=co.metadata or "",
        commit_timestamp=co.commit_timestamp,
        leader_epoch=co.leader_epoch,
        expire_timestamp=co.expire_timestamp,
    )


def storage_error(exc: BaseException) -> int:
    """Kafka's mapping of a failed __consumer_offsets append to what the client sees."""
    code = getattr(exc, "code", None)
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    if code == E.INVALID_PRODUCER_EPOCH:  # transactional offsets of a fenced producer (the log's epoch check)
        return E.INVALID_PRODUCER_EPOCH
    return E.COORDINATOR_NOT_AVAILABLE
