"""Client security settings: TLS contexts and SASL credentials from Kafka's config names.

* ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
* TLS (SSL, SASL_SSL): ``ssl.ca.location`` (PEM file or directory of trusted CAs; the system's CAs when not
  set), ``ssl.certificate.location`` + ``ssl.key.location`` (+ ``ssl.key.password``) for a client
  certificate, ``ssl.endpoint.identification.algorithm`` ``https`` (check the broker's host name, the
  default) or ``none``, ``enable.ssl.certificate.verification`` (false: no verification at all, for tests),
  or a ready ``ssl.context`` (an ``ssl.SSLContext``, used as given).
* SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512,
  ``sasl.username`` and ``sasl.password`` (or the username/password of a Java-style ``sasl.jaas.config``).

The SASL exchange itself (SaslHandshake v1, SaslAuthenticate rounds, KIP-368 re-authentication) runs in
``moldau.client.conn.Connection``, with the sans-I/O mechanisms of ``moldau.protocol.sasl_mechanisms``.
"""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass

from .config import ClientConfig, ConfigError

log = logging.getLogger(__name__)

__all__ = ["SaslCredentials", "build_ssl_context", "parse_jaas", "sasl_credentials", "uses_sasl", "uses_ssl"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(slots=True, frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:  # never print the password
        return f"SaslCredentials(mechanism={self.mechanism!r}, username={self.username!r})"


def uses_ssl(config: ClientConfig) -> bool:
    return config["security.protocol"] in ("SSL", "SASL_SSL")


def uses_sasl(config: ClientConfig) -> bool:
    return config["security.protocol"] in ("SASL_PLAINTEXT", "SASL_SSL")


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


def parse_jaas(text: str) -> dict[str, str]:
    """Options of a Java ``sasl.jaas.config`` line:
    ``org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";``."""
    out: dict[str, str] = {}
    for m in _JAAS_OPTION.finditer(text):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        out[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
    return out


def sasl_credentials(config: ClientConfig) -> SaslCredentials | None:
    """The SASL mechanism and credentials to use, or None without SASL. Raises ConfigError when missing."""
    if not uses_sasl(config):
        return None
    user, pw = config["sasl.username"], config["sasl.password"]
    jaas = config["sasl.jaas.config"]
    if jaas and (user is None or pw is None):
        opts = parse_jaas(jaas)
        user = user if user is not None else opts.get("username")
        pw = pw if pw is not None else opts.get("password")
    if not user:
        raise ConfigError(f"security.protocol={config['security.protocol']} needs sasl.username")
    if pw is None:
        raise ConfigError(f"security.protocol={config['security.protocol']} needs sasl.password")
    return SaslCredentials(config["sasl.mechanism"], user, pw)


def build_ssl_context(config: ClientConfig) -> ssl.SSLContext | None:
    """The TLS context for SSL / SASL_SSL (None otherwise); ConfigError naming the setting that is wrong."""
    if not uses_ssl(config):
        return None
    given = config["ssl.context"]
    if given is not None:
        if not isinstance(given, ssl.SSLContext):
            raise ConfigError(f"ssl.context: expected an ssl.SSLContext, got {given!r}")
        return given
    ca = config["ssl.ca.location"]
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if ca:
            if _is_dir(ca):
                ctx.load_verify_locations(capath=ca)
            else:
                ctx.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location: cannot load {ca!r}: {exc}") from exc
    cert, key = config["ssl.certificate.location"], config["ssl.key.location"]
    if key and not cert:
        raise ConfigError("ssl.key.location is set without ssl.certificate.location")
    if cert:
        try:
            ctx.load_cert_chain(cert, key or None, password=config["ssl.key.password"])
        except (OSError, ssl.SSLError) as exc:
            where = "ssl.certificate.location / ssl.key.location" if key else "ssl.certificate.location"
            raise ConfigError(f"{where}: cannot load the client certificate {cert!r}: {exc}") from exc
    algorithm = (config["ssl.endpoint.identification.algorithm"] or "none").lower()
    if algorithm == "none":
        ctx.check_hostname = False
    if not config["enable.ssl.certificate.verification"]:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        log.warning("enable.ssl.certificate.verification=false: broker certificates are not verified")
    return ctx


def _is_dir(path: str) -> bool:
    import os

    return os.path.isdir(path)
