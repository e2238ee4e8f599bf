"""Record formats of the internal topic ``__share_group_state`` (KIP-932's share coordinator, Kafka 4.2).

Every record's key starts with an int16, the record type; the value starts with an int16, its version:

======  ===========================================  =========================================================
 type    key (non-flexible)                           value v0 (flexible)
======  ===========================================  =========================================================
 0       ShareSnapshotKey: group, topic id, partition  ShareSnapshotValue: snapshot epoch, state epoch, leader
                                                       epoch, start offset, delivery complete count (tag 0),
                                                       create / write timestamps, state batches
 1       ShareUpdateKey: group, topic id, partition    ShareUpdateValue: snapshot epoch, leader epoch, start
                                                       offset (-1: unchanged), delivery complete count
                                                       (tag 0), state batches (those that changed)
======  ===========================================  =========================================================

A snapshot holds the whole state of one share-partition; an update is applied over the snapshot (and the
updates) before it. A state batch is (first offset, last offset, delivery state, delivery count), the delivery
state 0 Available, 2 Acknowledged, 4 Archived. A null value is a tombstone (the state was deleted).

The share coordinator's partition of a key is abs(String.hashCode("group:topicId:partition")) % partitions.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from .consumer_offsets import partition_for
from .schema import F, Message

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

_STATE_BATCH = [
    F("FirstOffset", "int64", "0+"),
    F("LastOffset", "int64", "0+"),
    F("DeliveryState", "int8", "0+"),
    F("DeliveryCount", "int16", "0+"),
]

_DCC = F("DeliveryCompleteCount", "int32", "0+", default=-1, tag=0, tagged="0+")  # Kafka 4.2 (KIP-1226)
_EPOCH = F("SnapshotEpoch", "int32", "0+")

ShareSnapshotValue = Message("ShareSnapshotValue", None, "data", "0", flexible="0+", fields=[
    _EPOCH, F("StateEpoch", "int32", "0+"), F("LeaderEpoch", "int32", "0+"), F("StartOffset", "int64", "0+"),
    _DCC, F("CreateTimestamp", "int64", "0+"), F("WriteTimestamp", "int64", "0+"),
    F("StateBatches", "[]StateBatch", "0+", fields=_STATE_BATCH),
])

ShareUpdateValue = Message("ShareUpdateValue", None, "data", "0", flexible="0+", fields=[
    _EPOCH, F("LeaderEpoch", "int32", "0+"), F("StartOffset", "int64", "0+"), _DCC,
    F("StateBatches", "[]StateBatch", "0+", fields=_STATE_BATCH),
])

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(slots=True, frozen=True)
class ShareKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what FindCoordinator key type 2 carries."""
        return f"{self.group_id}:{self.topic_id_str()}:{self.partition}"

    def topic_id_str(self) -> str:
        import base64

        return base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")


@dataclass(slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True)
class ShareState:
    """One record's value, decoded (a snapshot, or an update: ``start_offset`` -1 when unchanged)."""

    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    batches: list[StateBatch] = field(default_factory=list)


def state_partition(key: ShareKey | str, num_partitions: int) -> int:
    s = key.coordinator_key() if isinstance(key, ShareKey) else key
    return partition_for(s, num_partitions)


def encode_key(record_type: int, key: ShareKey) -> bytes:
    g = key.group_id.encode()
    return _I16.pack(record_type) + _I16.pack(len(g)) + g + key.topic_id.bytes + _I32.pack(key.partition)


def decode_key(buf: bytes | bytearray | memoryview) -> tuple[int, ShareKey]:
    b = bytes(buf)
    (rtype,) = _I16.unpack_from(b, 0)
    (n,) = _I16.unpack_from(b, 2)
    if rtype not in (SHARE_SNAPSHOT, SHARE_UPDATE) or n < 0 or len(b) != 4 + n + 16 + 4:
        raise ValueError(f"not a share-state key (type {rtype}, {len(b)} bytes)")
    group = b[4 : 4 + n].decode()
    tid = uuid.UUID(bytes=b[4 + n : 20 + n])
    (p,) = _I32.unpack_from(b, 20 + n)
    return rtype, ShareKey(group, tid, p)


def _batches(objs: list[object] | None) -> list[StateBatch]:
    return [StateBatch(getattr(o, "first_offset"), getattr(o, "last_offset"), getattr(o, "delivery_state"),
                       getattr(o, "delivery_count")) for o in objs or []]


def encode_value(record_type: int, state: ShareState) -> bytes:
    if record_type == SHARE_SNAPSHOT:
        msg = ShareSnapshotValue
        obj = msg.new(
            snapshot_epoch=state.snapshot_epoch,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
            create_timestamp=state.create_timestamp,
            write_timestamp=state.write_timestamp,
            state_batches=[],
        )
    else:
        msg = ShareUpdateValue
        obj = msg.new(
            snapshot_epoch=state.snapshot_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
            state_batches=[],
        )
    sb = msg.classes["StateBatch"]
    obj.state_batches = [
        sb(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in state.batches
    ]
    return _I16.pack(0) + bytes(msg.encode(obj, 0))


def decode_value(record_type: int, buf: bytes | bytearray | memoryview) -> ShareState:
    b = bytes(buf)
    (version,) = _I16.unpack_from(b, 0)
    if version != 0:
        raise ValueError(f"unknown share-state value version {version}")
    if record_type == SHARE_SNAPSHOT:
        o, _ = ShareSnapshotValue.decode(b, 0, offset=2)
        return ShareState(
            o.snapshot_epoch,
            o.state_epoch,
            o.leader_epoch,
            o.start_offset,
            o.delivery_complete_count,
            o.create_timestamp,
            o.write_timestamp,
            _batches(o.state_batches),
        )
    o, _ = ShareUpdateValue.decode(b, 0, offset=2)
    return ShareState(
        o.snapshot_epoch,
        0,
        o.leader_epoch,
        o.start_offset,
        o.delivery_complete_count,
        -1,
        -1,
        _batches(o.state_batches),
    )
