"""Listeners and their security protocols.

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093`` (parsed by ``moldau.broker.config``):
each listener's security protocol comes from ``listener.security.protocol.map`` (listener name ->
PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL); Kafka's default map names the four protocols after
themselves, so a listener called ``SASL_SSL`` needs no map entry while ``CLIENT://`` does
(``listener.security.protocol.map=CLIENT:SASL_SSL,...``). ``advertised.listeners`` names the endpoints
published in Metadata; a client is always told the advertised endpoint of the listener it came in on.

Per-listener settings: ``listener.name.<name lower-cased>.<key>`` overrides ``<key>`` for that listener
(``listener.name.external.ssl.client.auth=required``,
``listener.name.internal.sasl.enabled.mechanisms=PLAIN``),
as in Kafka.
"""

from __future__ import annotations

from typing import Any, Callable

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class ListenerConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def is_ssl(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def is_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def listener_key(listener_name: str, key: str) -> str:
    return f"listener.name.{listener_name.lower()}.{key}"


def listener_getter(config: Any, listener_name: str) -> Callable[[str], Any]:
    """``get(key)``: the listener-prefixed value when set, else the broker-wide one."""
    values = getattr(config, "values", {})

    def get(key: str) -> Any:
        full = listener_key(listener_name, key)
        if full in values:
            return values[full]
        return config.get(key)

    return get


def validate_listeners(config: Any) -> None:
    """Every listener has a known security protocol; listener names are unique per port."""
    for key, listeners in (("listeners", config.listeners), ("advertised.listeners",
                                                             config.advertised_listeners)):
        for lst in listeners:
            if lst.security_protocol not in SECURITY_PROTOCOLS:
                raise ListenerConfigError(
                    "listener.security.protocol.map",
                    f"listener {lst.name} in {key} has no security protocol: add {lst.name}:<protocol> to "
                    f"listener.security.protocol.map (protocols: {', '.join(SECURITY_PROTOCOLS)})")
    names = {lst.name for lst in config.listeners}
    if config.get("advertised.listeners"):
        for lst in config.advertised_listeners:
            if lst.name not in names:
                raise ListenerConfigError("advertised.listeners",
                                          f"advertised listener {lst.name} is not one of listeners "
                                          f"({', '.join(sorted(names))})")


def enabled_mechanisms(config: Any, listener_name: str) -> list[str]:
    """``sasl.enabled.mechanisms`` for a listener, limited to what moldau implements. Kafka's default
    (GSSAPI) is not implemented: when the key is not set, moldau enables PLAIN, SCRAM-SHA-256 and
    SCRAM-SHA-512."""
    get = listener_getter(config, listener_name)
    explicit = listener_key(listener_name, "sasl.enabled.mechanisms") in getattr(config, "values", {}) \
        or config.is_set("sasl.enabled.mechanisms")
    if not explicit:
        return list(SUPPORTED_MECHANISMS)
    wanted = [m.strip().upper() for m in (get("sasl.enabled.mechanisms") or []) if m.strip()]
    unsupported = [m for m in wanted if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ListenerConfigError("sasl.enabled.mechanisms",
                                  f"SASL mechanism(s) {', '.join(unsupported)} are not supported "
                                  f"(moldau supports {', '.join(SUPPORTED_MECHANISMS)})")
    if not wanted:
        raise ListenerConfigError("sasl.enabled.mechanisms",
                                  f"listener {listener_name} uses SASL but sasl.enabled.mechanisms is empty")
    return wanted
