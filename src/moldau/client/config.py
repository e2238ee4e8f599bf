"""Client configuration: Kafka's own config names and defaults.

Every client class takes its configuration either as keyword arguments with underscores
(``bootstrap_servers="h:9092", linger_ms=5``) or as a dict with Kafka's dotted names
(``{"bootstrap.servers": "h:9092", "linger.ms": 5}``), or both (keywords win). Values may be given as
Python values or as strings the way a ``.properties`` file or librdkafka would take them (``"all"``,
``"true"``, ``"5"``). Unknown names are refused with an error naming the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Mapping, TypeAlias, TypedDict, cast, overload

from ._typing import Deserializer, PartitionerFn, Serializer

if TYPE_CHECKING:
    from .assignors import Assignor

log = logging.getLogger(__name__)

__all__ = [
    "ConfigError",
    "ConfigDef",
    "COMMON",
    "PRODUCER",
    "CONSUMER",
    "ADMIN",
    "resolve_config",
    "parse_bootstrap",
    "ConfigInput",
    "ClientConfig",
    "ProducerConfig",
    "ConsumerConfig",
    "AdminConfig",
    "ShareConsumerConfig",
]

# What an application passes: Kafka's dotted names (or underscore keywords) to Python values or strings, each
# checked and converted by the parser of its ConfigDef at run time.
ConfigInput: TypeAlias = Mapping[str, object]

# The resolved configuration of each client kind: every name of its ConfigDef tables (COMMON and the kind's),
# with the type its parser returns (tests/client/test_client_typing.py checks the keys against the tables).
ClientConfig = TypedDict("ClientConfig", {
    "bootstrap.servers": list[str],
    "client.id": str | None,
    "request.timeout.ms": int,
    "metadata.max.age.ms": int,
    "reconnect.backoff.ms": int,
    "reconnect.backoff.max.ms": int,
    "retry.backoff.ms": int,
    "retry.backoff.max.ms": int,
    "socket.connection.setup.timeout.ms": int,
    "connections.max.idle.ms": int,
    "send.buffer.bytes": int,
    "receive.buffer.bytes": int,
    "security.protocol": str,
    "sasl.mechanism": str,
    "sasl.username": str | None,
    "sasl.password": str | None,
    "sasl.jaas.config": str | None,
    "ssl.ca.location": str | None,
    "ssl.certificate.location": str | None,
    "ssl.key.location": str | None,
    "ssl.key.password": str | None,
    "ssl.endpoint.identification.algorithm": str,
    "enable.ssl.certificate.verification": bool,
    "ssl.context": object,  # an ssl.SSLContext or None; checked when the client connects
    "client.software.name": str | None,
    "client.software.version": str | None,
    "default.api.timeout.ms": int,
    "use.uvloop": bool,
})

_ProducerOnly = TypedDict("_ProducerOnly", {
    "acks": int,
    "batch.size": int,
    "linger.ms": int,
    "buffer.memory": int,
    "max.block.ms": int,
    "compression.type": str,
    "compression.level": int | None,
    "retries": int,
    "delivery.timeout.ms": int,
    "max.in.flight.requests.per.connection": int,
    "enable.idempotence": bool,
    "max.request.size": int,
    "key.serializer": Serializer[object] | None,
    "value.serializer": Serializer[object] | None,
    "partitioner": PartitionerFn | None,
    "partitioner.ignore.keys": bool,
    "transactional.id": str | None,
    "transaction.timeout.ms": int,
})

_ConsumerOnly = TypedDict("_ConsumerOnly", {
    "group.id": str | None,
    "group.instance.id": str | None,
    "group.protocol": str,
    "group.remote.assignor": str | None,
    "session.timeout.ms": int,
    "heartbeat.interval.ms": int,
    "max.poll.interval.ms": int,
    "max.poll.records": int,
    "enable.auto.commit": bool,
    "auto.commit.interval.ms": int,
    "auto.offset.reset": str,
    "fetch.min.bytes": int,
    "fetch.max.wait.ms": int,
    "fetch.max.bytes": int,
    "max.partition.fetch.bytes": int,
    "isolation.level": str,
    "partition.assignment.strategy": "list[str | Assignor]",
    "key.deserializer": Deserializer[object] | None,
    "value.deserializer": Deserializer[object] | None,
    "check.crcs": bool,
    "client.rack": str | None,
    "exclude.internal.topics": bool,
    "allow.auto.create.topics": bool,
})

_ShareConsumerOnly = TypedDict("_ShareConsumerOnly", {
    "group.id": str | None,
    "share.acknowledgement.mode": str,
    "max.poll.records": int,
    "fetch.min.bytes": int,
    "fetch.max.wait.ms": int,
    "fetch.max.bytes": int,
    "key.deserializer": Deserializer[object] | None,
    "value.deserializer": Deserializer[object] | None,
    "check.crcs": bool,
    "client.rack": str | None,
    "allow.auto.create.topics": bool,
})


class ProducerConfig(ClientConfig, _ProducerOnly):
    """A producer's resolved configuration."""


class ConsumerConfig(ClientConfig, _ConsumerOnly):
    """A consumer's resolved configuration."""


class ShareConsumerConfig(ClientConfig, _ShareConsumerOnly):
    """A share consumer's resolved configuration."""


AdminConfig: TypeAlias = ClientConfig


class ConfigError(ValueError):
    """An unknown config name or a value that cannot be used."""


def _bool(name: str, v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
    raise ConfigError(f"{name}: expected a boolean, got {v!r}")


def _int(name: str, v: object) -> int:
    if isinstance(v, bool):
        raise ConfigError(f"{name}: expected an integer, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise ConfigError(f"{name}: expected an integer, got {v!r}")


def _str(name: str, v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    raise ConfigError(f"{name}: expected a string, got {v!r}")


def _list(name: str, v: object) -> list[object]:
    if v is None:
        return []
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def _any(name: str, v: object) -> object:
    return v


def _callable(name: str, v: object) -> object:
    if v is None or callable(v):
        return v
    raise ConfigError(f"{name}: expected a callable, got {v!r}")


def _acks(name: str, v: object) -> int:
    if isinstance(v, str):
        s = v.strip().lower()
        if s == "all":
            return -1
        v = _int(name, s)
    v = _int(name, v)
    if v not in (-1, 0, 1):
        raise ConfigError(f"{name}: expected 0, 1, -1 or 'all', got {v!r}")
    return v


def _choice(*choices: str) -> Callable[[str, object], str]:
    def check(name: str, v: object) -> str:
        if not isinstance(v, str) or v.strip().lower() not in choices:
            raise ConfigError(f"{name}: expected one of {', '.join(choices)}, got {v!r}")
        return v.strip().lower()

    return check


def _upper_choice(*choices: str) -> Callable[[str, object], str]:
    def check(name: str, v: object) -> str:
        if not isinstance(v, str) or v.strip().upper() not in choices:
            raise ConfigError(f"{name}: expected one of {', '.join(choices)}, got {v!r}")
        return v.strip().upper()

    return check


def _sasl_mechanism(name: str, v: object) -> str:
    s = v.strip().upper() if isinstance(v, str) else v
    if s in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return s
    if s in ("GSSAPI", "OAUTHBEARER"):
        raise ConfigError(
            f"{name}: {s} is not supported by the moldau client (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
        )
    raise ConfigError(f"{name}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got {v!r}")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    default: object
    parse: Callable[[str, object], object]
    doc: str = ""


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in items}


COMMON = _defs(
    ConfigDef("bootstrap.servers", ["localhost:9092"], _list, "host:port list, comma separated or a list"),
    ConfigDef("client.id", "moldau", _str),
    ConfigDef("request.timeout.ms", 30000, _int, "time to wait for one response"),
    ConfigDef("metadata.max.age.ms", 300000, _int, "refresh metadata at least this often"),
    ConfigDef("reconnect.backoff.ms", 50, _int),
    ConfigDef("reconnect.backoff.max.ms", 1000, _int),
    ConfigDef("retry.backoff.ms", 100, _int),
    ConfigDef("retry.backoff.max.ms", 1000, _int),
    ConfigDef("socket.connection.setup.timeout.ms", 10000, _int),
    ConfigDef("connections.max.idle.ms", 540000, _int),
    ConfigDef("send.buffer.bytes", 131072, _int),
    ConfigDef("receive.buffer.bytes", 65536, _int),
    ConfigDef(
        "security.protocol", "PLAINTEXT", _upper_choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    ),
    ConfigDef("sasl.mechanism", "PLAIN", _sasl_mechanism, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ConfigDef("sasl.username", None, _str),
    ConfigDef("sasl.password", None, _str),
    ConfigDef("sasl.jaas.config", None, _str, "Java-style JAAS line; its username/password are used"),
    ConfigDef("ssl.ca.location", None, _str, "PEM file (or directory) of trusted CAs; default: the system's"),
    ConfigDef("ssl.certificate.location", None, _str, "client certificate (PEM), for ssl.client.auth"),
    ConfigDef("ssl.key.location", None, _str, "the client certificate's private key (PEM)"),
    ConfigDef("ssl.key.password", None, _str),
    ConfigDef(
        "ssl.endpoint.identification.algorithm",
        "https",
        _choice("https", "none", ""),
        "https: check the broker's host name against its certificate; none: do not",
    ),
    ConfigDef("enable.ssl.certificate.verification", True, _bool, "false: accept any broker certificate"),
    ConfigDef("ssl.context", None, _any, "an ssl.SSLContext to use instead of the ssl.* files"),
    ConfigDef("client.software.name", "moldau", _str),
    ConfigDef("client.software.version", None, _str),
    ConfigDef("default.api.timeout.ms", 60000, _int, "bound for blocking calls without an explicit timeout"),
    ConfigDef("use.uvloop", True, _bool, "run the sync facade's private loop on uvloop when installed"),
)

PRODUCER = _defs(
    ConfigDef("acks", -1, _acks, "0, 1 or all/-1"),
    ConfigDef("batch.size", 262144, _int),  # Java: 16384; see docs/client.md "Performance"
    ConfigDef("linger.ms", 5, _int),
    ConfigDef("buffer.memory", 33554432, _int),
    ConfigDef("max.block.ms", 60000, _int),
    ConfigDef("compression.type", "none", _choice("none", "gzip", "snappy", "lz4", "zstd")),
    ConfigDef("compression.level", None, _any, "codec-specific level; None = codec default"),
    ConfigDef("retries", 2147483647, _int),
    ConfigDef("delivery.timeout.ms", 120000, _int),
    ConfigDef("max.in.flight.requests.per.connection", 5, _int),
    ConfigDef("enable.idempotence", True, _bool),
    ConfigDef("max.request.size", 1048576, _int),
    ConfigDef("key.serializer", None, _callable),
    ConfigDef("value.serializer", None, _callable),
    ConfigDef("partitioner", None, _callable, "callable(key_bytes, all_partitions, available) -> partition"),
    ConfigDef("partitioner.ignore.keys", False, _bool),
    ConfigDef("transactional.id", None, _str),
    ConfigDef("transaction.timeout.ms", 60000, _int),
)

CONSUMER = _defs(
    ConfigDef("group.id", None, _str),
    ConfigDef("group.instance.id", None, _str),
    ConfigDef(
        "group.protocol",
        "classic",
        _choice("classic", "consumer"),
        "classic (JoinGroup/SyncGroup) or consumer (KIP-848 ConsumerGroupHeartbeat)",
    ),
    ConfigDef(
        "group.remote.assignor", None, _str, "group.protocol=consumer: the broker's assignor (uniform, range)"
    ),
    ConfigDef("session.timeout.ms", 45000, _int),
    ConfigDef("heartbeat.interval.ms", 3000, _int),
    ConfigDef("max.poll.interval.ms", 300000, _int),
    ConfigDef("max.poll.records", 500, _int),
    ConfigDef("enable.auto.commit", True, _bool),
    ConfigDef("auto.commit.interval.ms", 5000, _int),
    ConfigDef("auto.offset.reset", "latest", _choice("earliest", "latest", "none")),
    ConfigDef("fetch.min.bytes", 1, _int),
    ConfigDef("fetch.max.wait.ms", 500, _int),
    ConfigDef("fetch.max.bytes", 52428800, _int),
    ConfigDef("max.partition.fetch.bytes", 1048576, _int),
    ConfigDef("isolation.level", "read_uncommitted", _choice("read_uncommitted", "read_committed")),
    ConfigDef(
        "partition.assignment.strategy",
        ["range", "cooperative-sticky"],
        _list,
        "assignor names (range, roundrobin, cooperative-sticky) or assignor objects, in preference order",
    ),
    ConfigDef("key.deserializer", None, _callable),
    ConfigDef("value.deserializer", None, _callable),
    ConfigDef("check.crcs", True, _bool),
    ConfigDef("client.rack", None, _str),
    ConfigDef("exclude.internal.topics", True, _bool),
    ConfigDef("allow.auto.create.topics", True, _bool),
)

ADMIN: dict[str, ConfigDef] = {}

SHARE_CONSUMER = _defs(
    ConfigDef("group.id", None, _str),
    ConfigDef(
        "share.acknowledgement.mode",
        "implicit",
        _choice("implicit", "explicit"),
        "implicit: the records of a poll are accepted at the next poll/commit; explicit: acknowledge() each",
    ),
    ConfigDef("max.poll.records", 500, _int),
    ConfigDef("fetch.min.bytes", 1, _int),
    ConfigDef("fetch.max.wait.ms", 500, _int),
    ConfigDef("fetch.max.bytes", 52428800, _int),
    ConfigDef("key.deserializer", None, _callable),
    ConfigDef("value.deserializer", None, _callable),
    ConfigDef("check.crcs", True, _bool),
    ConfigDef("client.rack", None, _str),
    ConfigDef("allow.auto.create.topics", True, _bool),
)

_KINDS = {"producer": PRODUCER, "consumer": CONSUMER, "admin": ADMIN, "share_consumer": SHARE_CONSUMER}

# Names accepted for compatibility but without effect, so configs written for other clients still load.
_IGNORED = {"api.version.request", "socket.keepalive.enable"}


def _normalize(key: str) -> str:
    return key.replace("_", ".")


Kind: TypeAlias = Literal["producer", "consumer", "admin", "share_consumer"]


@overload
def resolve_config(
    kind: Literal["producer"], config: ConfigInput | None, kwargs: ConfigInput
) -> ProducerConfig: ...
@overload
def resolve_config(
    kind: Literal["consumer"], config: ConfigInput | None, kwargs: ConfigInput
) -> ConsumerConfig: ...
@overload
def resolve_config(
    kind: Literal["share_consumer"], config: ConfigInput | None, kwargs: ConfigInput
) -> ShareConsumerConfig: ...
@overload
def resolve_config(
    kind: Literal["admin"], config: ConfigInput | None, kwargs: ConfigInput
) -> AdminConfig: ...
@overload
def resolve_config(kind: Kind, config: ConfigInput | None, kwargs: ConfigInput) -> ClientConfig: ...


def resolve_config(kind: Kind, config: ConfigInput | None, kwargs: ConfigInput) -> ClientConfig:
    """Merge a dotted dict and underscore keywords into {dotted name: parsed value} with defaults.

    ``kind`` is "producer", "consumer", "share_consumer" or "admin". Raises ConfigError naming any unknown
    key.
    """
    defs = dict(COMMON)
    defs.update(_KINDS[kind])
    given: dict[str, object] = {}
    for source in (config or {}, kwargs):
        for key, value in source.items():
            name = _normalize(key) if key not in defs else key
            if name not in defs:
                if name in _IGNORED:
                    continue
                close = [d for d in defs if d.split(".")[-1] == name.split(".")[-1]]
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown {kind} config {key!r}{hint}")
            given[name] = value
    out: dict[str, object] = {}
    for name, d in defs.items():
        if name in given:
            out[name] = d.parse(name, given[name])
        else:
            out[name] = list(d.default) if isinstance(d.default, list) else d.default
    # every name of the kind's tables, each the value its parser returns: the kind's TypedDict
    c = cast(ClientConfig, out)
    _validate(c)
    if kind == "producer":
        _validate_producer(cast(ProducerConfig, c), given)
    elif kind == "consumer":
        _validate_consumer(cast(ConsumerConfig, c))
    return c


def _idempotence(c: ProducerConfig, explicit: bool) -> None:
    """The Java producer's rule (KIP-679): idempotence is on by default, and off (silently, logged at info)
    when acks, retries or max.in.flight.requests.per.connection conflict with it; an explicit
    enable.idempotence=true with a conflicting setting is an error."""
    if not c["enable.idempotence"]:
        return
    conflicts = []
    if c["acks"] != -1:
        conflicts.append("acks=all")
    if c["max.in.flight.requests.per.connection"] > 5:
        conflicts.append("max.in.flight.requests.per.connection <= 5")
    if c["retries"] == 0:
        conflicts.append("retries > 0")
    if not conflicts:
        return
    if explicit:
        raise ConfigError(f"enable.idempotence=true needs {' and '.join(conflicts)}")
    log.info("idempotence disabled: it needs %s (enable.idempotence not set)", " and ".join(conflicts))
    c["enable.idempotence"] = False


def _validate(c: ClientConfig) -> None:
    if not c["bootstrap.servers"]:
        raise ConfigError("bootstrap.servers: at least one host:port is needed")
    for addr in c["bootstrap.servers"]:
        parse_bootstrap(addr)
    if c["security.protocol"] in ("PLAINTEXT", "SSL"):
        unused = [k for k in ("sasl.username", "sasl.password", "sasl.jaas.config") if c[k] is not None]
        if unused:
            log.warning(
                "%s set but security.protocol is %s: SASL is not used (set security.protocol=SASL_%s)",
                ", ".join(unused),
                c["security.protocol"],
                c["security.protocol"],
            )
    if c["reconnect.backoff.max.ms"] < c["reconnect.backoff.ms"]:
        c["reconnect.backoff.max.ms"] = c["reconnect.backoff.ms"]


def _validate_producer(c: ProducerConfig, given: Mapping[str, object]) -> None:
    _idempotence(c, explicit="enable.idempotence" in given)
    if c["max.in.flight.requests.per.connection"] < 1:
        raise ConfigError("max.in.flight.requests.per.connection must be >= 1")
    if c["transactional.id"] is not None:
        if not c["enable.idempotence"]:
            raise ConfigError("transactional.id needs enable.idempotence=true")
        if not c["transactional.id"]:
            raise ConfigError("transactional.id must not be empty")
    if c["batch.size"] < 0 or c["linger.ms"] < 0:
        raise ConfigError("batch.size and linger.ms must be >= 0")


def _validate_consumer(c: ConsumerConfig) -> None:
    if c["heartbeat.interval.ms"] >= c["session.timeout.ms"]:
        raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
    if c["max.poll.records"] < 1:
        raise ConfigError("max.poll.records must be >= 1")


def parse_bootstrap(addr: str) -> tuple[str, int]:
    """'host:port' (or '[v6]:port', or 'PLAINTEXT://host:port') -> (host, port)."""
    if not isinstance(addr, str):
        raise ConfigError(f"bootstrap.servers: expected 'host:port', got {addr!r}")
    s = addr.strip()
    if "://" in s:
        s = s.split("://", 1)[1]
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port_s = rest.lstrip(":")
    else:
        host, sep, port_s = s.rpartition(":")
        if not sep:
            host, port_s = s, "9092"
    try:
        port = int(port_s)
    except ValueError:
        raise ConfigError(f"bootstrap.servers: bad port in {addr!r}") from None
    if not host or not 0 < port < 65536:
        raise ConfigError(f"bootstrap.servers: bad address {addr!r}")
    return host, port
