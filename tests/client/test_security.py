"""The moldau client over TLS and SASL against a moldau broker with SASL_PLAINTEXT, SSL (client certificates
required) and SASL_SSL listeners; KIP-368 re-authentication against a broker with connections.max.reauth.ms.
(tests/integration/test_security.py::test_moldau_client_sasl_ssl covers SASL_SSL + SCRAM-SHA-256 there.)"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.security.credentials import CredentialStore
from moldau.broker.security.tls import generate
from moldau.client import (
    Admin,
    AsyncProducer,
    AuthenticationError,
    ConfigError,
    Consumer,
    KafkaConnectionError,
    NewTopic,
    Producer,
    SaslAuthenticationError,
    SaslMechanismError,
    TopicPartition,
)

from harness.brokerproc import BrokerProcess, free_port

pytestmark = pytest.mark.moldau_only(reason="TLS/SASL listeners are configured through moldau's settings")

USER, PW = "carol", "c4rol-Pässword"
T = 20.0


class Secured:
    def __init__(self, proc: BrokerProcess, ports: dict[str, int], certs: Path) -> None:
        self.proc, self.ports, self.certs = proc, ports, certs

    def conf(self, listener: str, mech: str = "PLAIN", user: str = USER, pw: str = PW,
             cert: str | None = None, **extra: Any) -> dict[str, Any]:
        c: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[listener]}",
            "security.protocol": listener,
        }
        if "SSL" in listener:
            c["ssl.ca.location"] = str(self.certs / "ca.pem")
        if listener.startswith("SASL"):
            c.update({"sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw})
        if cert:
            c["ssl.certificate.location"] = str(self.certs / f"{cert}.pem")
            c["ssl.key.location"] = str(self.certs / f"{cert}.key")
        c.update(extra)
        return c


def _start(tmp: Path, certs: Path, extra: dict[str, str] | None = None) -> Secured:
    ports = {"SASL_PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": free_port()}
    data = tmp / "data"
    data.mkdir(parents=True)
    CredentialStore(data).add_password(USER, PW)
    settings = {
        "listeners": ",".join(
            ["PLAINTEXT://127.0.0.1:0"] + [f"{n}://127.0.0.1:{p}" for n, p in ports.items()]
        ),
        "ssl.certificate.location": str(certs / "broker.pem"),
        "ssl.key.location": str(certs / "broker.key"),
        "ssl.ca.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
        "connection.failed.authentication.delay.ms": "20",
    }
    settings.update(extra or {})
    proc = BrokerProcess("moldau", data, settings=settings, log_dir=tmp)
    proc.start()
    ports["PLAINTEXT"] = proc.port
    return Secured(proc, ports, certs)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("client-certs")
    generate(d, hostnames=["localhost", "127.0.0.1"], clients=["carol"])
    generate(d / "other", hostnames=["localhost"], clients=["mallory"], ca_name="another CA")
    return d


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[Secured]:
    s = _start(tmp_path_factory.mktemp("client-secure"), certs)
    try:
        yield s
    finally:
        s.proc.close()


def _roundtrip(conf: dict[str, Any], n: int = 20) -> None:
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=2)])
    # some values above the connection's small-response buffer: big frames through TLS too
    values = [b"v%03d" % i + (b"x" * 150_000 if i % 5 == 0 else b"") for i in range(n)]
    with Producer(conf, linger_ms=1) as p:
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % 2)
        p.flush(T)
    got: list[bytes] = []
    with Consumer(config=conf, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        deadline = time.monotonic() + T
        while len(got) < n and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
    assert sorted(got) == values


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext(secure: Secured, mech: str) -> None:
    _roundtrip(secure.conf("SASL_PLAINTEXT", mech))


def test_ssl_with_client_certificate(secure: Secured) -> None:
    _roundtrip(secure.conf("SSL", cert="carol"))


def test_sasl_ssl_scram_512_kwargs_and_jaas(secure: Secured) -> None:
    """Keyword arguments with underscores, and the credentials taken from a Java-style sasl.jaas.config."""
    c = secure.conf("SASL_SSL")
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
            f'password="{PW}";')
    _roundtrip({"bootstrap.servers": c["bootstrap.servers"], "security_protocol": "sasl_ssl",
                "sasl_mechanism": "scram-sha-512", "sasl_jaas_config": jaas,
                "ssl_ca_location": c["ssl.ca.location"]}, n=4)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_a_fatal_authentication_error(secure: Secured, mech: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as ei:
        Producer(secure.conf("SASL_PLAINTEXT", mech, pw="wrong"))
    assert time.monotonic() - t0 < 5  # not retried until a timeout
    e = ei.value
    assert e.code == 58 and not e.retriable and isinstance(e, AuthenticationError)
    assert USER in str(e) and mech in str(e)
    with pytest.raises(SaslAuthenticationError):
        Consumer(config=secure.conf("SASL_SSL", mech, user="nobody"))


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A broker enabling only SCRAM-SHA-512, whose certificate names only kafka.invalid."""
    d = tmp_path_factory.mktemp("odd-certs")
    generate(d, hostnames=["kafka.invalid"], clients=[])
    s = _start(tmp_path_factory.mktemp("client-odd"), d, {"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    try:
        yield s
    finally:
        s.proc.close()


def test_mechanism_not_enabled_and_plaintext_listener(odd: Secured, secure: Secured) -> None:
    with pytest.raises(SaslMechanismError, match="SCRAM-SHA-512"):
        Admin(odd.conf("SASL_PLAINTEXT", "PLAIN"))
    with Admin(odd.conf("SASL_PLAINTEXT", "SCRAM-SHA-512")) as a:
        assert a.describe_cluster().brokers
    # SASL against a PLAINTEXT listener: the handshake is refused, with a hint
    conf = secure.conf("SASL_PLAINTEXT")
    conf["bootstrap.servers"] = f"127.0.0.1:{secure.ports['PLAINTEXT']}"
    with pytest.raises(AuthenticationError, match="SASL listener"):
        Admin(conf)


def test_tls_verification_failures(secure: Secured, odd: Secured, certs: Path) -> None:
    # a CA that did not sign the broker's certificate: fatal, names the cause
    conf = secure.conf("SASL_SSL", ssl_ca_location=str(certs / "other" / "ca.pem"))
    t0 = time.monotonic()
    with pytest.raises(AuthenticationError, match="certificate verif"):
        Admin(conf)
    assert time.monotonic() - t0 < 5
    # the broker's certificate names kafka.invalid, not 127.0.0.1
    conf = odd.conf("SASL_SSL", "SCRAM-SHA-512")
    with pytest.raises(AuthenticationError, match="certificate verif.*(mismatch|127.0.0.1)"):
        Admin(conf)
    conf["ssl.endpoint.identification.algorithm"] = "none"
    with Admin(conf) as a:
        assert a.describe_cluster().brokers
    # the SSL listener requires a client certificate: the broker ends the handshake
    with pytest.raises((AuthenticationError, KafkaConnectionError)):
        Admin(secure.conf("SSL"), socket_connection_setup_timeout_ms=3000)
    # TLS to a plaintext listener
    conf = secure.conf("SSL", cert="carol")
    conf["bootstrap.servers"] = f"127.0.0.1:{secure.ports['PLAINTEXT']}"
    with pytest.raises(KafkaConnectionError, match="TLS"):
        Admin(conf, socket_connection_setup_timeout_ms=3000)
    # plaintext to a TLS listener
    with pytest.raises(KafkaConnectionError, match="security.protocol=SSL"):
        Admin(bootstrap_servers=f"127.0.0.1:{secure.ports['SSL']}", socket_connection_setup_timeout_ms=3000,
              request_timeout_ms=3000)


def test_config_errors(secure: Secured, certs: Path) -> None:
    with pytest.raises(ConfigError, match="sasl.username"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="GSSAPI"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="GSSAPI")
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SSL", ssl_ca_location="/nonexistent.pem")
    with pytest.raises(ConfigError, match="security.protocol"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="TLS")


def test_reauthentication_kip368(tmp_path: Path, certs: Path) -> None:
    """With connections.max.reauth.ms the client re-authenticates on the same connection before the session
    ends, while producing; the broker never closes an expired session."""
    s = _start(tmp_path, certs, {"connections.max.reauth.ms": "1200"})
    try:
        conf = s.conf("SASL_SSL", "SCRAM-SHA-256")
        topic = f"reauth-{uuid.uuid4().hex[:8]}"
        with Admin(conf) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=1)])

        async def run() -> tuple[list[int], int, int]:
            async with AsyncProducer(conf, linger_ms=0) as p:
                offsets = []
                for i in range(40):
                    offsets.append((await p.send_and_wait(topic, b"%d" % i)).offset)
                    await asyncio.sleep(0.1)
                conns = list(p._cluster._conns.values())
                return (
                    offsets,
                    sum(c.reauthentications for c in conns),
                    max(c.session_lifetime_ms for c in conns),
                )

        offsets, reauths, lifetime = asyncio.run(run())
        assert offsets == list(range(40))
        assert lifetime == 1200
        assert reauths >= 2
        assert "expired and was not re-authenticated" not in s.proc.output()
    finally:
        s.proc.close()
