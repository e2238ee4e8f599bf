"""Record formats of the internal topic ``__consumer_offsets`` (Kafka's formats, byte for byte).

Every record's key starts with an int16 that selects the record type (historically "the key version"):

======  ===================================  ==========================================================
 type    key                                  value (int16 version first)
======  ===================================  ==========================================================
 0       legacy offset commit: group, topic,  OffsetCommitValue (same as type 1)
         partition
 1       OffsetCommitKey: group, topic,       OffsetCommitValue v0-4: offset, leader_epoch (v3+), metadata,
         partition                            commit_timestamp, expire_timestamp (v1 only); flexible v4+
 2       GroupMetadataKey: group              GroupMetadataValue v0-4: protocol_type, generation, protocol,
                                              leader, current_state_timestamp (v2+), members; flexible v4+
 3+      KIP-848 / share / streams records    not interpreted by moldau (kept opaque)
======  ===================================  ==========================================================

A record with a null value is a tombstone: the offset or the group was deleted.

Kafka writes OffsetCommitValue v3 (v1 when the commit carries an explicit expire timestamp, i.e. an
OffsetCommit v2-v4 request with a retention time) and GroupMetadataValue v3; moldau does the same. All
versions are decoded, including the flexible v4 that newer brokers may write.

The keys use non-flexible encodings: strings are int16 length + UTF-8, int32 big endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, TypeVar, cast

KEY_LEGACY_OFFSET_COMMIT = 0
KEY_OFFSET_COMMIT = 1
KEY_GROUP_METADATA = 2

# The versions moldau writes (those a Kafka 2.3+ broker writes).
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A __consumer_offsets key or value that cannot be parsed."""


# --------------------------------------------------------------------------------------------- hashing


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: Math.abs, except Integer.MIN_VALUE maps to 0."""
    return 0 if n == -0x8000_0000 else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition that holds ``group_id``'s records (Kafka's partitionFor)."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


# ---------------------------------------------------------------------------------------- data classes


@dataclass(slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = KEY_OFFSET_COMMIT  # 0 for the legacy key type, 1 otherwise


@dataclass(slots=True)
class GroupMetadataKey:
    group: str


@dataclass(slots=True)
class OtherKey:
    """A key of a record type moldau keeps but does not interpret (KIP-848/share/streams records)."""

    version: int
    raw: bytes


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # written only by value v1
    version: int = OFFSET_COMMIT_VALUE_VERSION


@dataclass(slots=True)
class MemberMetadataRecord:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataRecord] = field(default_factory=list)
    version: int = GROUP_METADATA_VALUE_VERSION


# ------------------------------------------------------------------------------------------- writing


class _Writer:
    __slots__ = ("parts", "flexible")

    def __init__(self, flexible: bool = False) -> None:
        self.parts: list[bytes] = []
        self.flexible = flexible

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise RecordFormatError("string longer than 32767 bytes")
            self.i16(len(data))
        self.parts.append(data)

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i32(-1)
            return
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.parts.append(bytes(b))

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def value(self) -> bytes:
        return b"".join(self.parts)


def encode_offset_commit_key(
    group: str, topic: str, partition: int, version: int = KEY_OFFSET_COMMIT
) -> bytes:
    w = _Writer()
    w.i16(version)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return w.value()


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer()
    w.i16(KEY_GROUP_METADATA)
    w.string(group)
    return w.value()


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka would write for this value: 1 with an expire timestamp, else 3."""
    return (
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE
        if value.expire_timestamp >= 0
        else OFFSET_COMMIT_VALUE_VERSION
    )


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = offset_commit_value_version(value)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"OffsetCommitValue version {version} not supported")
    w = _Writer(flexible=version >= 4)
    w.i16(version)
    w.i64(value.offset)
    if version >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if version == 1:
        w.i64(value.expire_timestamp)
    w.tags()
    return w.value()


def encode_group_metadata_value(value: GroupMetadataValue, version: int | None = None) -> bytes:
    if version is None:
        version = GROUP_METADATA_VALUE_VERSION
    if not 0 <= version <= 4:
        raise RecordFormatError(f"GroupMetadataValue version {version} not supported")
    w = _Writer(flexible=version >= 4)
    w.i16(version)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return w.value()


# ------------------------------------------------------------------------------------------- reading


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes | bytearray | memoryview, flexible: bool = False) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError("truncated record")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = 0
        out = 0
        while True:
            b = self._take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise RecordFormatError("varint too long")

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError("invalid UTF-8 in string") from exc

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return None
        return self._take(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def decode_key(key: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey | OtherKey:
    r = _Reader(key)
    version = r.i16()
    if version in (KEY_LEGACY_OFFSET_COMMIT, KEY_OFFSET_COMMIT):
        group = r.string()
        topic = r.string()
        partition = r.i32()
        if group is None or topic is None:
            raise RecordFormatError("null group or topic in offset commit key")
        return OffsetCommitKey(group, topic, partition, version)
    if version == KEY_GROUP_METADATA:
        group = r.string()
        if group is None:
            raise RecordFormatError("null group in group metadata key")
        return GroupMetadataKey(group)
    return OtherKey(version, bytes(key))


def decode_offset_commit_value(value: bytes | bytearray | memoryview) -> OffsetCommitValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(
        offset=offset,
        metadata=metadata if metadata is not None else "",
        commit_timestamp=commit_timestamp,
        leader_epoch=leader_epoch,
        expire_timestamp=expire_timestamp,
        version=version,
    )


def decode_group_metadata_value(value: bytes | bytearray | memoryview) -> GroupMetadataValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    current_state_timestamp = r.i64() if version >= 2 else -1
    members: list[MemberMetadataRecord] = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        group_instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadataRecord(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
                rebalance_timeout=rebalance_timeout,
                group_instance_id=group_instance_id,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(
        protocol_type=protocol_type or "",
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=members,
        version=version,
    )


V = TypeVar("V")


def _decode_value(
    out: dict[str, object], value: bytes | bytearray | memoryview | None,
    decode: Callable[[bytes | bytearray | memoryview], V],
) -> V | None:
    """``decode(value)``, or None after noting a tombstone (null value) or the parse error in ``out``."""
    if value is None:
        out["tombstone"] = True
        return None
    try:
        return decode(value)
    except RecordFormatError as exc:
        out["error"] = str(exc)
        return None


def decode_offsets_record(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> dict[str, object]:
    """A __consumer_offsets record as a JSON-friendly dict (used by ``moldau log dump``).

    Never raises: a record that cannot be parsed comes back with an ``"error"`` entry.
    """
    if key is None:
        return {"type": "unknown", "error": "null key"}
    try:
        k = decode_key(key)
    except RecordFormatError as exc:
        return {"type": "unknown", "error": str(exc), "key_hex": bytes(key).hex()}
    out: dict[str, object]
    if isinstance(k, OffsetCommitKey):
        out = {
            "type": "offset_commit",
            "key_version": k.version,
            "group": k.group,
            "topic": k.topic,
            "partition": k.partition,
        }
        v = _decode_value(out, value, decode_offset_commit_value)
        if v is None:
            return out
        out.update(
            value_version=v.version,
            offset=v.offset,
            leader_epoch=v.leader_epoch,
            metadata=v.metadata,
            commit_timestamp=v.commit_timestamp,
        )
        if v.version == 1:
            out["expire_timestamp"] = v.expire_timestamp
        return out
    if isinstance(k, GroupMetadataKey):
        out = {"type": "group_metadata", "key_version": KEY_GROUP_METADATA, "group": k.group}
        g = _decode_value(out, value, decode_group_metadata_value)
        if g is None:
            return out
        out.update(
            value_version=g.version,
            protocol_type=g.protocol_type,
            generation=g.generation,
            protocol=g.protocol,
            leader=g.leader,
            current_state_timestamp=g.current_state_timestamp,
            members=[
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout,
                    "session_timeout": m.session_timeout,
                    "subscription_hex": m.subscription.hex(),
                    "assignment_hex": m.assignment.hex(),
                }
                for m in g.members
            ],
        )
        return out
    return {
        "type": "other",
        "key_version": k.version,
        "key_hex": k.raw.hex(),
        "value_hex": None if value is None else bytes(value).hex(),
        "tombstone": value is None,
    }


def dump_fields(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> dict[str, object]:
    """``key``/``payload`` strings for ``moldau log dump`` of a __consumer_offsets partition, in the shape of
    Kafka's ``kafka-dump-log.sh --offsets-decoder``: ``{"type":"1","data":{...}}`` and
    ``{"version":"3","data":{...}}`` (``<DELETE>`` for a tombstone), plus the flat ``decoded`` dict."""
    import json

    d = decode_offsets_record(key, value)
    out: dict[str, object] = {"decoded": d}
    if "error" in d or d.get("type") in ("unknown", "other"):
        return out
    if d["type"] == "offset_commit":
        kdata: dict[str, object] = {"group": d["group"], "topic": d["topic"], "partition": d["partition"]}
        vdata: dict[str, object] = {
            "offset": d.get("offset"),
            "leaderEpoch": d.get("leader_epoch"),
            "metadata": d.get("metadata"),
            "commitTimestamp": d.get("commit_timestamp"),
        }
        if "expire_timestamp" in d:
            vdata["expireTimestamp"] = d["expire_timestamp"]
    else:
        kdata = {"group": d["group"]}
        vdata = {
            "protocolType": d.get("protocol_type"),
            "generation": d.get("generation"),
            "protocol": d.get("protocol"),
            "leader": d.get("leader"),
            "currentStateTimestamp": d.get("current_state_timestamp"),
            "members": [
                {
                    "memberId": m["member_id"],
                    "groupInstanceId": m["group_instance_id"],
                    "clientId": m["client_id"],
                    "clientHost": m["client_host"],
                    "rebalanceTimeout": m["rebalance_timeout"],
                    "sessionTimeout": m["session_timeout"],
                    "subscription": m["subscription_hex"],
                    "assignment": m["assignment_hex"],
                }
                for m in cast(list[dict[str, object]], d.get("members", []))
            ],
        }
    out["key"] = json.dumps({"type": str(d["key_version"]), "data": kdata}, separators=(",", ":"))
    out["payload"] = (
        "<DELETE>"
        if d.get("tombstone")
        else json.dumps({"version": str(d["value_version"]), "data": vdata}, separators=(",", ":"))
    )
    return out
