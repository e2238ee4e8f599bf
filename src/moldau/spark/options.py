"""Options of the moldau data source: Spark's Kafka source/sink option names, parsed and checked once.

Spark's option maps are case-insensitive (PySpark hands data sources a ``CaseInsensitiveDict`` with
lower-cased keys); every lookup here is by lower-cased name. Options this source does not know are
refused by name, and so are the Kafka client settings Spark's own connector refuses (the source always
reads bytes from explicitly tracked offsets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import OptionError

__all__ = [
    "AT_LEAST_ONCE",
    "EARLIEST",
    "EXACTLY_ONCE",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "client_config",
    "parse_sink_options",
    "parse_source_options",
]

EARLIEST = -2
LATEST = -1




# Spark's names (camel case as documented; matched case-insensitively).
_SOURCE_OPTIONS = [
    "kafka.bootstrap.servers", "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions",
    "maxRecordsPerPartition",
    "groupIdPrefix", "includeHeaders",
    # moldau's own
    "moldau.arrow",
    # registry-framed values (moldau.spark.valueformat)
    "value.format", "value.subject", "value.schema", "value.schema.version", "schema.registry.url",
    "schema.registry.basic.auth.user.info",
]
_SINK_OPTIONS = ["kafka.bootstrap.servers", "topic", "includeHeaders", "moldau.arrow", "deliveryGuarantee",
                 "transactionalIdPrefix", "value.format", "value.subject", "value.schema",
                 "schema.registry.url", "schema.registry.basic.auth.user.info"]
EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
# Keys Spark itself may put into a source's or sink's options.
_SPARK_INTERNAL = {"path", "checkpointlocation", "queryname"}

# Kafka client settings refused like Spark's Kafka connector refuses them, with the reason.
_REFUSED_SOURCE_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; deserialize with DataFrame operations",
    "value.deserializer": "values are always read as bytes; deserialize with DataFrame operations",
    "enable.auto.commit": "the source does not commit offsets to Kafka; the checkpoint keeps them",
    "interceptor.classes": "consumer interceptors are not supported",
}
_REFUSED_SINK_KAFKA = {
    "key.serializer": "keys are written as bytes (cast or serialize the key column)",
    "value.serializer": "values are written as bytes (cast or serialize the value column)",
    "interceptor.classes": "producer interceptors are not supported",
    "transactional.id": "the sink derives a transactional id per query and task itself (exactly-once "
    "streaming writes); set the option 'transactionalIdPrefix' to choose its prefix",
}
_CLIENT_DEFAULTS_SOURCE: dict[str, str] = {}


def _lower(opts: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in opts.items()}


def _check_known(opts: dict[str, str], known: list[str], what: str) -> None:
    names = {k.lower(): k for k in known}
    for k in opts:
        if k in names or k in _SPARK_INTERNAL:
            continue
        if k.startswith("kafka."):
            continue  # checked with the client's config below
        raise OptionError(
            f"option '{k}' is not supported by the moldau {what} (supported: {', '.join(sorted(known))}, "
            "and kafka.* client settings)")


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    v = opts.get(name.lower())
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {v!r}")


def _long(opts: dict[str, str], name: str, default: int | None, minimum: int | None = None) -> int | None:
    v = opts.get(name.lower())
    if v is None:
        return default
    try:
        n = int(v.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {v!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option '{name}' must be at least {minimum}, got {n}")
    return n


_DURATION = re.compile(
    r"^\s*(\d+)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?|h|hours?|d|days?)?\s*$", re.IGNORECASE
)
_UNIT_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "second": 1000,
            "seconds": 1000, "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
            "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000,
            "days": 86_400_000}


def _duration_ms(opts: dict[str, str], name: str, default: int) -> int:
    v = opts.get(name.lower())
    if v is None:
        return default
    m = _DURATION.match(v)
    if not m:
        raise OptionError(f"option '{name}' must be a duration such as '15m' or '30s', got {v!r}")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


@dataclass(slots=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind: ``earliest``, ``latest``, ``offsets`` (``offsets``: {(topic, partition): offset, -2 earliest,
    -1 latest}), ``timestamp`` (``timestamp``: one time for every partition) or ``timestamps``
    ({(topic, partition): time}).
    """

    kind: str
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int = -1
    strategy: str = "error"  # for timestamps: what to do when no offset has a time >= the given one

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "offsets": [[t, p, o] for (t, p), o in sorted(self.offsets.items())],
                "timestamp": self.timestamp,
                "strategy": self.strategy,
            }
        )


def _partition_json(name: str, text: str) -> dict[tuple[str, int], int]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{name}' is not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(data, dict):
        raise OptionError(
            f"option '{name}' must be a JSON object like {{\"topic\":{{\"0\":23}}}}, got {text!r}"
        )
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(
                f"option '{name}': the value for topic {topic!r} must be an object of partition -> number"
            )
        for p, v in parts.items():
            try:
                pn = int(p)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{name}': partition {p!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(f"option '{name}': the value for {topic}-{p} must be an integer, got {v!r}")
            out[(topic, pn)] = v
    return out


def _offset_spec(opts: dict[str, str], prefix: str, *, streaming: bool, default: str) -> OffsetSpec:
    """startingX or endingX options -> OffsetSpec (Spark's precedence: timestamp, by-timestamp, offsets)."""
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                          f"got {opts.get('startingoffsetsbytimestampstrategy')!r}")
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        n = _long(opts, f"{prefix}Timestamp", None, 0)
        return OffsetSpec("timestamp", timestamp=int(n or 0), strategy=strategy)
    bt = opts.get(f"{prefix}offsetsbytimestamp")
    if bt is not None:
        tss = _partition_json(f"{prefix}OffsetsByTimestamp", bt)
        for tp, t in tss.items():
            if t < 0:
                raise OptionError(
                    f"option '{prefix}OffsetsByTimestamp': timestamp for {tp[0]}-{tp[1]} must be >= 0"
                )
        return OffsetSpec("timestamps", offsets=tss, strategy=strategy)
    text = opts.get(f"{prefix}offsets")
    name = f"{prefix}Offsets"
    if text is None:
        return OffsetSpec(default)
    s = text.strip()
    if s.lower() in ("earliest", "latest"):
        return OffsetSpec(s.lower())
    offsets = _partition_json(name, s)
    for (topic, part), o in offsets.items():
        if o < -2:
            raise OptionError(
                f"option '{name}': offset {o} for {topic}-{part} is not valid (use -2 earliest, -1 latest)"
            )
    return OffsetSpec("offsets", offsets=offsets)


@dataclass(slots=True)
class SourceOptions:
    client: dict[str, str]                 # kafka.* settings for the moldau client (prefix removed)
    strategy: str                          # assign | subscribe | subscribePattern
    assign: dict[str, list[int]]           # assign: topic -> partitions
    topics: list[str]                      # subscribe
    pattern: str | None                    # subscribePattern
    starting: OffsetSpec
    ending: OffsetSpec | None              # batch only
    include_headers: bool
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    poll_timeout_ms: int
    fetch_offset_retries: int
    fetch_offset_retry_interval_ms: int
    read_committed: bool
    arrow: bool
    value_format: Any = None               # moldau.spark.valueformat.ValueFormat with value.format


def client_config(opts: dict[str, str], refused: dict[str, str], what: str) -> dict[str, str]:
    cfg: dict[str, str] = {}
    for k, v in opts.items():
        if not k.startswith("kafka."):
            continue
        key = k[len("kafka."):]
        if key in refused:
            raise OptionError(f"Kafka option '{key}' is not supported by the moldau {what}: {refused[key]}")
        cfg[key] = v
    if not cfg.get("bootstrap.servers", "").strip():
        raise OptionError("option 'kafka.bootstrap.servers' must be specified (host:port[,host:port...])")
    return cfg


def parse_source_options(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    _check_known(opts, _SOURCE_OPTIONS, "source")
    client = client_config(opts, _REFUSED_SOURCE_KAFKA, "source")
    iso = client.pop("isolation.level", "read_uncommitted").strip().lower()
    if iso not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            f"option 'kafka.isolation.level' must be read_committed or read_uncommitted, got {iso!r}"
        )
    client.pop("group.id", None)  # the source reads by offsets, without a consumer group

    given = [n for n in ("assign", "subscribe", "subscribepattern") if n in opts]
    if len(given) != 1:
        raise OptionError("exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be "
                          f"specified, got {len(given)}")
    strategy = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}[
        given[0]
    ]
    assign: dict[str, list[int]] = {}
    topics: list[str] = []
    pattern: str | None = None
    if strategy == "assign":
        text = opts["assign"]
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise OptionError(
                f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {text!r}"
            ) from None
        if (
            not isinstance(data, dict)
            or not data
            or not all(
                isinstance(v, list)
                and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in v)
                for v in data.values()
            )
        ):
            raise OptionError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {text!r}")
        assign = {t: sorted(set(v)) for t, v in data.items()}
    elif strategy == "subscribe":
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise OptionError("option 'subscribe' must name at least one topic")
    else:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise OptionError("option 'subscribePattern' must not be empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None

    starting = _offset_spec(
        opts, "starting", streaming=streaming, default="latest" if streaming else "earliest"
    )
    ending: OffsetSpec | None = None
    has_ending = any(k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"))
    if streaming:
        if has_ending:
            raise OptionError(
                "options 'endingOffsets', 'endingTimestamp' and 'endingOffsetsByTimestamp' are not "
                "valid in streaming queries"
            )
    else:
        ending = _offset_spec(opts, "ending", streaming=False, default="latest")
        if starting.kind == "latest":
            raise OptionError("option 'startingOffsets' must not be 'latest' for batch queries")
        if starting.kind == "offsets" and any(o == LATEST for o in starting.offsets.values()):
            raise OptionError("option 'startingOffsets' must not use -1 (latest) for batch queries")
        if ending.kind == "earliest":
            raise OptionError("option 'endingOffsets' must not be 'earliest' for batch queries")
        if ending.kind == "offsets" and any(o == EARLIEST for o in ending.offsets.values()):
            raise OptionError("option 'endingOffsets' must not use -2 (earliest) for batch queries")
        for name in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if name in opts:
                raise OptionError(f"option '{name}' is only valid in streaming queries")

    max_opt = _long(opts, "maxOffsetsPerTrigger", None, 1)
    min_opt = _long(opts, "minOffsetsPerTrigger", None, 1)
    if max_opt is not None and min_opt is not None and min_opt > max_opt:
        raise OptionError(
            f"option 'minOffsetsPerTrigger' ({min_opt}) must not exceed 'maxOffsetsPerTrigger' ({max_opt})"
        )
    return SourceOptions(
        client=client,
        strategy=strategy,
        assign=assign,
        topics=topics,
        pattern=pattern,
        starting=starting,
        ending=ending,
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=max_opt,
        min_offsets_per_trigger=min_opt,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60_000),
        min_partitions=_long(opts, "minPartitions", None, 1),
        max_records_per_partition=_long(opts, "maxRecordsPerPartition", None, 1),
        poll_timeout_ms=int(_long(opts, "kafkaConsumer.pollTimeoutMs", 120_000, 1) or 120_000),
        fetch_offset_retries=int(_long(opts, "fetchOffset.numRetries", 3, 0) or 0),
        fetch_offset_retry_interval_ms=int(_long(opts, "fetchOffset.retryIntervalMs", 10, 0) or 0),
        read_committed=iso == "read_committed",
        arrow=_bool(opts, "moldau.arrow", True),
        value_format=_value_format(opts, list(assign) if strategy == "assign" else topics, sink=False),
    )


def _value_format(opts: dict[str, str], topics: list[str], *, sink: bool) -> Any:
    from .valueformat import parse_value_format

    return parse_value_format(opts, topics, sink=sink)


@dataclass(slots=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    arrow: bool
    # streaming: "exactly-once", "at-least-once", or None (exactly once where the broker supports
    # transactions, else at least once with a warning); batch writes: "at-least-once"
    delivery: str | None = AT_LEAST_ONCE
    txn_prefix: str | None = None      # transactionalIdPrefix (default: moldau-spark-<query id>)
    fallback_reason: str | None = None  # why a streaming write without deliveryGuarantee is at least once
    value_format: Any = None            # moldau.spark.valueformat.ValueFormat with value.format


def parse_sink_options(options: Mapping[str, Any], *, streaming: bool = False) -> SinkOptions:
    opts = _lower(options)
    _check_known(opts, _SINK_OPTIONS, "sink")
    client = client_config(opts, _REFUSED_SINK_KAFKA, "sink")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' must not be empty")
    given = opts.get("deliveryguarantee")
    delivery: str | None = None
    if given is not None:
        delivery = given.strip().lower().replace("_", "-")
        if delivery not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise OptionError(
                f"option 'deliveryGuarantee' must be '{EXACTLY_ONCE}' or '{AT_LEAST_ONCE}', got {given!r}"
            )
    prefix = opts.get("transactionalidprefix")
    if prefix is not None:
        prefix = prefix.strip()
        if not prefix:
            raise OptionError("option 'transactionalIdPrefix' must not be empty")
    if not streaming:
        if delivery == EXACTLY_ONCE:
            raise OptionError(
                "deliveryGuarantee 'exactly-once' applies to streaming writes (per micro-batch); "
                "batch writes are at least once (a failed job can be run again only by "
                "writing its rows again)"
            )
        if prefix is not None:
            raise OptionError("option 'transactionalIdPrefix' applies to exactly-once streaming writes only")
        delivery = AT_LEAST_ONCE
    elif delivery == AT_LEAST_ONCE and prefix is not None:
        raise OptionError("option 'transactionalIdPrefix' has no use with deliveryGuarantee 'at-least-once'")
    fallback: str | None = None
    if delivery != AT_LEAST_ONCE:
        acks = client.get("acks", "all").strip().lower()
        idem = client.get("enable.idempotence", "true").strip().lower()
        why = None
        if acks not in ("all", "-1"):
            why = f"kafka.acks={client['acks']} (transactions need acks=all)"
        elif idem in ("false", "0", "no"):
            why = "kafka.enable.idempotence=false (transactions need the idempotent producer)"
        if why is not None:
            if delivery == EXACTLY_ONCE:
                raise OptionError(f"deliveryGuarantee 'exactly-once' cannot be used with {why}")
            delivery = AT_LEAST_ONCE
            fallback = why
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        arrow=_bool(opts, "moldau.arrow", True),
        delivery=delivery,
        txn_prefix=prefix,
        fallback_reason=fallback,
        value_format=_value_format(opts, [topic.strip()] if topic else [], sink=True),
    )
