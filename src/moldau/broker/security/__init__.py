"""Broker security: listeners' security protocols, TLS, SASL, credentials, ACL authorization.

``SecurityManager`` is created once per broker (``ensure_security(broker)``, called by the server before it
listens) and reached as ``broker.security``; the authorizer as ``broker.authorizer`` (None when
``authorizer.class.name`` is empty, which allows everything, Kafka's behaviour without an authorizer).

    sec.ssl_context(listener_name) -> ssl.SSLContext | None      # for SSL / SASL_SSL listeners
    sec.connection_made(conn, transport)                         # principal from a client certificate,
                                                                 # conn.auth = AuthSession on SASL listeners
    sec.credentials                                              # CredentialStore (data dir)
"""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

from ..config import ConfigError
from .authorizer import AclAuthorizer, parse_super_users
from .credentials import CredentialStore
from .listeners import (
    ListenerConfigError,
    enabled_mechanisms,
    is_sasl,
    is_ssl,
    listener_getter,
    validate_listeners,
)
from .sasl import AuthSession
from .tls import TlsConfigError, map_principal, parse_mapping_rules, server_context, subject_dn

log = logging.getLogger(__name__)

__all__ = ["SecurityManager", "ensure_security", "ANONYMOUS"]

ANONYMOUS = "User:ANONYMOUS"


class SecurityManager:
    def __init__(self, broker: Any) -> None:
        cfg = broker.config
        self.config = cfg
        data_dir = getattr(broker, "data_dir", None) or os.path.abspath(cfg.log_dirs[0])
        try:
            validate_listeners(cfg)
            self._listeners = {lst.name: lst for lst in cfg.listeners}
            self._mechanisms = {name: enabled_mechanisms(cfg, name) for name, lst in self._listeners.items()
                                if is_sasl(lst.security_protocol)}
            self._ssl: dict[str, ssl.SSLContext] = {}
            self._principal_rules: dict[str, Any] = {}
            for name, lst in self._listeners.items():
                if is_ssl(lst.security_protocol):
                    get = listener_getter(cfg, name)
                    self._ssl[name] = server_context(get, name)
                    self._principal_rules[name] = parse_mapping_rules(get("ssl.principal.mapping.rules"))
        except (ListenerConfigError, TlsConfigError) as e:
            raise ConfigError(e.key, str(e)) from None
        os.makedirs(data_dir, exist_ok=True)
        # in a cluster, SCRAM credentials and ACLs live in ZooKeeper (cluster.zkconfig, cluster.zkacl)
        cluster = getattr(broker, "cluster", None)
        local = CredentialStore(data_dir)
        self.credentials: Any = cluster.credential_store(local) if cluster is not None else local
        self.secret = os.urandom(32)
        self.failed_auth_delay_ms = int(_get(cfg, "connection.failed.authentication.delay.ms", 100))
        self.authorizer: AclAuthorizer | None = None
        name = (cfg.get("authorizer.class.name") or "").strip()
        if name:
            try:
                kw: dict[str, Any] = {
                    "super_users": parse_super_users(cfg.get("super.users")),
                    "allow_everyone_if_no_acl_found": bool(cfg.get("allow.everyone.if.no.acl.found"))}
                self.authorizer = (cluster.acl_authorizer(**kw) if cluster is not None
                                   else AclAuthorizer(data_dir, **kw))
            except ValueError as e:
                raise ConfigError("authorizer.class.name", str(e)) from None
            log.info("ACL authorizer on (authorizer.class.name=%s, super.users=%s, "
                     "allow.everyone.if.no.acl.found=%s)", name, cfg.get("super.users") or "",
                     bool(cfg.get("allow.everyone.if.no.acl.found")))
        for lname, lst in self._listeners.items():
            if lst.security_protocol != "PLAINTEXT":
                extra = f" ({', '.join(self._mechanisms[lname])})" if lname in self._mechanisms else ""
                log.info("listener %s: %s%s", lname, lst.security_protocol, extra)

    def ssl_context(self, listener_name: str) -> ssl.SSLContext | None:
        return self._ssl.get(listener_name)

    def security_protocol(self, listener_name: str) -> str:
        lst = self._listeners.get(listener_name)
        return lst.security_protocol if lst is not None else "PLAINTEXT"

    def reauth_ms(self, listener_name: str) -> int:
        return int(listener_getter(self.config, listener_name)("connections.max.reauth.ms") or 0)

    def connection_made(self, conn: Any, transport: Any) -> None:
        """Set the connection's principal (client certificate) and SASL session, by listener protocol."""
        name = conn.listener_name
        protocol = self.security_protocol(name)
        conn.principal = ANONYMOUS
        if is_ssl(protocol):
            sslobj = transport.get_extra_info("ssl_object")
            cert = sslobj.getpeercert() if sslobj is not None else None
            dn = subject_dn(cert) if cert else None
            if dn:
                conn.principal = "User:" + map_principal(dn, self._principal_rules.get(name) or
                                                         parse_mapping_rules(None))
                log.debug("TLS client %s:%d on %s: %s", conn.peer[0], conn.peer[1], name, conn.principal)
        if is_sasl(protocol):
            conn.auth = AuthSession(self, name, self._mechanisms[name])


def _get(cfg: Any, key: str, default: Any) -> Any:
    try:
        v = cfg.get(key)
    except (ConfigError, KeyError):
        return default
    return default if v is None else v


def ensure_security(services: Any) -> SecurityManager:
    """The broker's SecurityManager, created on first use from ``services.config`` and ``services.data_dir``
    (sets ``services.security`` and ``services.authorizer``; ``services`` is a ``BrokerServices``)."""
    sec: SecurityManager | None = services.security
    if sec is None:
        sec = SecurityManager(services)
        services.security = sec
        services.authorizer = sec.authorizer
    return sec
