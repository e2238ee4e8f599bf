"""TLS: certificate generation (cryptography and openssl backends), server contexts from Kafka-style settings,
client-certificate principals, listener parsing and the security CLI commands offline."""

import os
import shutil
import socket
import ssl
import threading

import pytest

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.security import SecurityManager
from moldau.broker.security.listeners import enabled_mechanisms, listener_getter
from moldau.broker.security.tls import (
    TlsConfigError,
    generate,
    map_principal,
    parse_mapping_rules,
    server_context,
    subject_dn,
)
from moldau.cli.main import main as cli_main

BACKENDS = ["openssl", "cryptography"]


def _backend_available(name):
    if name == "openssl":
        return shutil.which("openssl") is not None
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module", params=BACKENDS)
def certs(request, tmp_path_factory):
    if not _backend_available(request.param):
        pytest.skip(f"{request.param} not available")
    d = tmp_path_factory.mktemp(f"certs-{request.param}")
    files = generate(d, hostnames=["localhost", "127.0.0.1"], clients=["alice"], backend=request.param)
    assert oct(os.stat(files.broker_key).st_mode & 0o777) == "0o600"
    return d


def _handshake(server_ctx, client_ctx):
    """One TLS handshake over a socketpair; returns the server side's peer certificate (or raises)."""
    a, b = socket.socketpair()
    result = {}

    def serve():
        try:
            s = server_ctx.wrap_socket(a, server_side=True)
            result["cert"] = s.getpeercert()
            s.recv(1)
            s.close()
        except (ssl.SSLError, OSError) as e:
            result["error"] = e

    t = threading.Thread(target=serve)
    t.start()
    try:
        c = client_ctx.wrap_socket(b, server_hostname="localhost")
        c.sendall(b"x")
        c.close()
    finally:
        t.join(5)
    if "error" in result:
        raise result["error"]
    return result.get("cert")


def _get(**values):
    return lambda key: values.get(key)


def test_generated_certificates_work_with_client_auth(certs):
    ctx = server_context(_get(**{"ssl.certificate.location": str(certs / "broker.pem"),
                                 "ssl.key.location": str(certs / "broker.key"),
                                 "ssl.ca.location": str(certs / "ca.pem"), "ssl.client.auth": "required",
                                 "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"]}))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    client = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    client.load_cert_chain(str(certs / "alice.pem"), str(certs / "alice.key"))
    cert = _handshake(ctx, client)
    assert subject_dn(cert) == "CN=alice"
    # without a client certificate: refused
    with pytest.raises((ssl.SSLError, OSError)):
        _handshake(ctx, ssl.create_default_context(cafile=str(certs / "ca.pem")))


def test_pem_keystore_spelling(certs, tmp_path):
    both = tmp_path / "keystore.pem"
    both.write_bytes((certs / "broker.key").read_bytes() + (certs / "broker.pem").read_bytes())
    ctx = server_context(
        _get(
            **{
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(both),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs / "ca.pem"),
                "ssl.client.auth": "requested",
            }
        )
    )
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert _handshake(ctx, ssl.create_default_context(cafile=str(certs / "ca.pem"))) in (None, {})


def test_context_errors(certs):
    with pytest.raises(TlsConfigError, match="ssl.certificate.location"):
        server_context(_get())
    with pytest.raises(TlsConfigError, match="JKS is not supported"):
        server_context(_get(**{"ssl.keystore.location": "/x.jks", "ssl.keystore.type": "JKS"}))
    with pytest.raises(TlsConfigError, match="cannot load"):
        server_context(_get(**{"ssl.certificate.location": "/nonexistent.pem"}))
    with pytest.raises(TlsConfigError, match="needs ssl.ca.location"):
        server_context(_get(**{"ssl.certificate.location": str(certs / "broker.pem"),
                               "ssl.key.location": str(certs / "broker.key"), "ssl.client.auth": "required"}))


def test_subject_dn_and_mapping_rules():
    cert = {"subject": ((("countryName", "DE"),), (("organizationName", "Acme, Inc"),),
                        (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}
    dn = subject_dn(cert)
    assert dn == "CN=alice,OU=eng,O=Acme\\, Inc,C=DE"
    assert map_principal(dn, parse_mapping_rules("DEFAULT")) == dn
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,RULE:^CN=([^,]*).*$/$1/U,DEFAULT")
    assert map_principal("CN=Alice,OU=ENG,O=x", rules) == "alice@eng"
    assert map_principal("CN=bob,O=x", rules) == "BOB"
    assert map_principal("O=only", rules) == "O=only"
    with pytest.raises(TlsConfigError):
        parse_mapping_rules("RULE:broken")


def test_listener_settings(tmp_path, certs):
    cfg = BrokerConfig.load(None, {
        "listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
        "log.dirs": str(tmp_path),
        "ssl.certificate.location": str(certs / "broker.pem"), "ssl.key.location": str(certs / "broker.key"),
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.connections.max.reauth.ms": "60000",
    }, env={})
    assert [lst.security_protocol for lst in cfg.listeners] == ["PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT"]
    assert enabled_mechanisms(cfg, "INTERNAL") == ["PLAIN"]
    assert enabled_mechanisms(cfg, "CLIENT") == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert listener_getter(cfg, "CLIENT")("connections.max.reauth.ms") == 60000
    assert listener_getter(cfg, "INTERNAL")("connections.max.reauth.ms") == 0

    class FakeBroker:
        config = cfg
        data_dir = str(tmp_path)

    sec = SecurityManager(FakeBroker())
    assert sec.ssl_context("CLIENT") is not None and sec.ssl_context("INTERNAL") is None
    assert sec.reauth_ms("CLIENT") == 60000 and sec.authorizer is None
    # a listener without a protocol, an unsupported mechanism, an unknown prefixed key
    bad = BrokerConfig.load(None, {"listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                                   "log.dirs": str(tmp_path)}, env={})
    FakeBroker.config = bad
    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        SecurityManager(FakeBroker())
    gss = BrokerConfig.load(None, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                   "sasl.enabled.mechanisms": "GSSAPI,PLAIN"}, env={})
    FakeBroker.config = gss
    with pytest.raises(ConfigError, match="GSSAPI"):
        SecurityManager(FakeBroker())
    with pytest.raises(ConfigError, match="Unknown configuration key"):
        BrokerConfig.load(None, {"listener.name.x.num.partitions": "3"}, env={})


def test_cli_tls_users_acls_offline(tmp_path, capsys):
    assert cli_main(["tls", "init", "--dir", str(tmp_path / "tls"), "--client", "bob"]) == 0
    out = capsys.readouterr().out
    assert "ssl.certificate.location=" in out and (tmp_path / "tls" / "bob.key").exists()
    ca = (tmp_path / "tls" / "ca.pem").read_bytes()
    assert cli_main(["tls", "init", "--dir", str(tmp_path / "tls")]) == 0  # the CA is kept
    assert (tmp_path / "tls" / "ca.pem").read_bytes() == ca
    d = str(tmp_path / "data")
    assert cli_main(["users", "add", "alice", "--password", "pw", "--data-dir", d]) == 0
    assert cli_main(["users", "add", "bob", "--password", "pw", "--mechanism", "scram-sha-512",
                     "--iterations", "8192", "--data-dir", d]) == 0
    capsys.readouterr()
    assert cli_main(["users", "list", "--data-dir", d]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "alice\tPLAIN, SCRAM-SHA-256 (4096 iterations), SCRAM-SHA-512 (4096 iterations)",
        "bob\tSCRAM-SHA-512 (8192 iterations)"]
    assert cli_main(["users", "delete", "alice", "--mechanism", "PLAIN", "--data-dir", d]) == 0
    assert cli_main(["users", "delete", "carol", "--data-dir", d]) == 1
    assert cli_main(["users", "add", "x", "--password", "pw", "--iterations", "10", "--data-dir", d]) == 1
    assert cli_main(["acls", "add", "--data-dir", d, "--allow-principal", "User:alice", "--operation", "Read",
                     "--operation", "IdempotentWrite", "--cluster"]) == 0
    capsys.readouterr()
    assert cli_main(["acls", "add", "--data-dir", d, "--allow-principal", "User:alice", "--operation", "Read",
                     "--topic", "t", "--resource-pattern-type", "prefixed"]) == 0
    assert (
        cli_main(["acls", "list", "--data-dir", d, "--topic", "t-1", "--resource-pattern-type", "match"]) == 0
    )
    assert "TOPIC:PREFIXED:t\tUser:alice\tALLOW\tREAD" in capsys.readouterr().out
