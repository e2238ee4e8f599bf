"""A small blocking connection for the security CLIs' online mode (``moldau users`` / ``moldau acls`` with
``--bootstrap-server``): one broker, one request at a time, TLS and SASL (PLAIN, SCRAM) through
``moldau.protocol.sasl_mechanisms``. It exists because those admin requests (AlterUserScramCredentials,
CreateAcls, ...) are not in the moldau client yet; it is not a general client.

Client settings use the Kafka/librdkafka names (``security.protocol``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` = https | none), read from a
``--command-config`` properties file and ``-X key=value`` options.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.sasl_mechanisms import SaslError, client_mechanism

_SIZE = struct.Struct(">i")


def add_target_args(sp: Any, offline_help: str, online_help: str) -> None:
    """``--data-dir`` (offline) or ``--bootstrap-server`` (online, with ``--command-config`` and ``-X``): the
    target options of the commands that work either way (users, quotas)."""
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--data-dir", help=offline_help)
    g.add_argument("--bootstrap-server", help=online_help)
    sp.add_argument("--command-config", metavar="FILE", help="client properties for --bootstrap-server")
    sp.add_argument("-X", dest="client_settings", metavar="KEY=VALUE", action="append", default=[],
                    help="client setting for --bootstrap-server (repeatable)")


class AdminConnError(Exception):
    pass


def load_client_config(path: str | None, overrides: list[str]) -> dict[str, str]:
    from moldau.broker.config import parse_properties

    conf: dict[str, str] = {}
    if path:
        with open(path, encoding="utf-8") as f:
            conf.update(dict(parse_properties(f.read())))
    for item in overrides:
        if "=" not in item:
            raise AdminConnError(f"-X expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        conf[k.strip()] = v
    return conf


class AdminConn:
    def __init__(self, bootstrap: str, conf: dict[str, str] | None = None, *, timeout: float = 15.0,
                 client_id: str = "moldau-cli") -> None:
        self.conf = dict(conf or {})
        self.client_id = client_id
        self.timeout = timeout
        self._corr = 0
        self.versions: dict[int, tuple[int, int]] = {}
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if not host or not port.isdigit():
            raise AdminConnError(f"--bootstrap-server {bootstrap!r}: expected HOST:PORT")
        host = host.strip("[]")
        protocol = self.conf.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise AdminConnError(f"unknown security.protocol {protocol!r}")
        try:
            sock = socket.create_connection((host, int(port)), timeout=timeout)
        except OSError as e:
            raise AdminConnError(f"cannot connect to {host}:{port}: {e}") from None
        if protocol in ("SSL", "SASL_SSL"):
            sock = self._wrap_tls(sock, host)
        self.sock = sock
        self._api_versions()
        if protocol.startswith("SASL"):
            self._authenticate()

    # ------------------------------------------------------------------------------ transport
    def _wrap_tls(self, sock: socket.socket, host: str) -> socket.socket:
        from moldau.broker.security.tls import client_context

        c = self.conf
        verify_host = c.get("ssl.endpoint.identification.algorithm", "https").lower() not in ("", "none")
        try:
            ctx = client_context(
                ca_location=c.get("ssl.ca.location"),
                certificate_location=c.get("ssl.certificate.location"),
                key_location=c.get("ssl.key.location"),
                key_password=c.get("ssl.key.password"),
                check_hostname=verify_host,
            )
            return ctx.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as e:
            sock.close()
            raise AdminConnError(f"TLS handshake with {host} failed: {e}") from None

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise AdminConnError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, obj: Any, version: int | None = None) -> Any:
        if version is None:
            version = self.version_for(api_key)
        self._corr += 1
        data = frame.encode_request(api_key, version, self._corr, self.client_id, obj)
        self.sock.sendall(data)
        size = _SIZE.unpack(self._recv_exact(4))[0]
        body = self._recv_exact(size)
        if api_key == 18:
            hdr, off = frame.decode_response_header(body, api_key, version)
            resp, _ = frame.decode_api_versions_response(body, version, off)
            return resp
        hdr, off = frame.decode_response_header(body, api_key, version)
        if hdr.correlation_id != self._corr:
            raise AdminConnError("correlation id mismatch")
        resp, _ = m.RESPONSES[api_key].decode(body, version, off)
        return resp

    def version_for(self, api_key: int) -> int:
        msg = m.REQUESTS[api_key]
        versions = self.versions.get(api_key)
        if versions is None:
            raise AdminConnError(f"the broker does not support {msg.name}")
        lo, hi = versions
        v = min(hi, msg.max_version)
        if v < max(lo, msg.min_version):
            raise AdminConnError(f"no common version of {msg.name}")
        return v

    def _api_versions(self) -> None:
        resp = self.request(18, m.ApiVersionsRequest.new(client_software_name="moldau-cli",
                                                        client_software_version="1"), version=3)
        if resp.error_code:
            resp = self.request(18, m.ApiVersionsRequest.new(), version=0)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def _authenticate(self) -> None:
        c = self.conf
        mech_name = c.get("sasl.mechanism", "PLAIN").upper()
        user, password = c.get("sasl.username"), c.get("sasl.password")
        if not user or password is None:
            raise AdminConnError("SASL needs sasl.username and sasl.password (-X or --command-config)")
        hs = self.request(17, m.SaslHandshakeRequest.new(mechanism=mech_name), version=1)
        if hs.error_code:
            raise AdminConnError(f"SASL handshake failed (error {hs.error_code}); broker mechanisms: "
                                 f"{', '.join(hs.mechanisms)}")
        mech = client_mechanism(mech_name, user, password)
        token = mech.step(None)
        while True:
            resp = self.request(36, m.SaslAuthenticateRequest.new(auth_bytes=token or b""))
            if resp.error_code:
                raise AdminConnError(f"SASL authentication failed: {resp.error_message or resp.error_code}")
            try:
                token = mech.step(bytes(resp.auth_bytes or b""))
            except SaslError as e:
                raise AdminConnError(f"SASL authentication failed: {e}") from None
            if mech.complete:
                return

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover
            pass

    def __enter__(self) -> "AdminConn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
