"""Security against a real ``moldau broker`` process: TLS, SASL (PLAIN, SCRAM-SHA-256/512) and ACLs, driven
by confluent-kafka, kafka-python, aiokafka, kcat and raw protocol requests.

Brokers (module scope, one process each):
* ``secure``: PLAINTEXT + SASL_PLAINTEXT + SSL (client certificates required) + SASL_SSL, no authorizer.
* ``acl_broker``: PLAINTEXT + SASL_PLAINTEXT + SSL (certificates required), ACL authorizer on,
  allow.everyone.if.no.acl.found=false, super.users=User:admin.
* a short-lived broker with connections.max.reauth.ms for KIP-368.

With ``MOLDAU_TEST_BROKER=cluster`` each is three brokers and a ZooKeeper (docs/cluster.md): every broker with
its own port on each listener, the brokers' own traffic on PLAINTEXT (``User:ANONYMOUS``, a super user under
the authorizer), PLAIN users in every broker's credential file, SCRAM users and ACLs in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from moldau.broker.security.credentials import CredentialStore
from moldau.broker.security.tls import generate
from moldau.protocol import frame
from moldau.protocol import messages as m
from moldau.protocol.records import BatchBuilder
from moldau.protocol.sasl_mechanisms import client_mechanism, plain_message

from harness.brokerproc import BrokerProcess, ClusterProcess, broker_kind, free_port, moldau_command

pytestmark = [
    pytest.mark.moldau_only(reason="TLS/SASL/ACL listeners are configured through moldau's settings"),
]

MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
ALICE, ALICE_PW = "alice", "alice-Pässword"
ADMIN, ADMIN_PW = "admin", "admin-secret"
TIMEOUT = 20.0
_QUIET = logging.getLogger("test_security.rdkafka")
_QUIET.setLevel(logging.CRITICAL)


# ------------------------------------------------------------------------------------------------ fixtures

class Secured:
    """A broker process (one, or the three of a cluster) plus its listener ports and certificate files."""

    def __init__(self, proc: BrokerProcess, ports: dict[str, list[int]], certs: Path) -> None:
        self.proc, self.ports, self.certs = proc, ports, certs

    def addr(self, listener: str) -> str:
        """The bootstrap string of a listener: every broker's address on it."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports[listener])

    @property
    def data_dirs(self) -> list[Path]:
        """Each broker's data dir (its local credential file: PLAIN users are configured per broker)."""
        return self.proc.data_dirs if isinstance(self.proc, ClusterProcess) else [self.proc.data_dir]

    def add_local_user(self, name: str, pw: str, mechanisms: list[str] | None = None) -> None:
        """A user in every broker's credential file, as ``moldau users add --data-dir`` (a cluster broker
        reads only the PLAIN entries from it; SCRAM credentials of a cluster are in ZooKeeper)."""
        for d in self.data_dirs:
            CredentialStore(d).add_password(name, pw, mechanisms)

    def _acls_at(self, address: str) -> frozenset[tuple[Any, ...]]:
        """Every ACL binding as the broker at ``address`` holds them (DescribeAcls as the super user)."""
        r = Raw(address)
        try:
            assert r.sasl("PLAIN", ADMIN, ADMIN_PW).error_code == 0
            resp = r.call(29, 1, m.DescribeAclsRequest.new(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))  # 1 = ANY
        finally:
            r.close()
        assert resp.error_code == 0, resp
        return frozenset((x.resource_type, x.resource_name, x.pattern_type, a.principal, a.host, a.operation,
                          a.permission_type) for x in resp.resources for a in x.acls)

    def acls_everywhere(self) -> None:
        """After CreateAcls / DeleteAcls through one broker: wait until every broker holds the same ACLs (the
        others follow through ZooKeeper's change notifications, as Kafka's brokers do)."""
        addrs = self.addr("SASL_PLAINTEXT").split(",")
        if len(addrs) > 1:
            _eventually(lambda: len({self._acls_at(a) for a in addrs}) == 1, "the same ACLs on every broker")

    def logs_in_everywhere(self, mech: str, user: str, pw: str, expected: bool = True) -> None:
        """After a SCRAM credential change through one broker: wait until it holds on every broker."""
        for a in self.addr("SASL_PLAINTEXT").split(","):
            _eventually(lambda: _logs_in(a, mech, user, pw) == expected,  # noqa: B023 - called at once
                        f"{user} {'can' if expected else 'cannot'} log in on {a}")

    def rdkafka(self, listener: str, mech: str | None = None, user: str = ALICE, pw: str = ALICE_PW,
                cert: str | None = None, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for a listener."""
        conf: dict[str, Any] = {"bootstrap.servers": self.addr(listener), "security.protocol": listener,
                                "logger": _QUIET, "socket.timeout.ms": 10000}
        if "SSL" in listener:
            conf["ssl.ca.location"] = str(self.certs / "ca.pem")
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mech or "PLAIN", "sasl.username": user, "sasl.password": pw})
        if cert:
            conf["ssl.certificate.location"] = str(self.certs / f"{cert}.pem")
            conf["ssl.key.location"] = str(self.certs / f"{cert}.key")
        conf.update(extra)
        return conf


def _eventually(check: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Wait until ``check()`` holds: a change made through one broker of a cluster reaches the others through
    ZooKeeper's change notifications a moment later (on one broker at once)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)


def _logs_in(addr: str, mech: str, user: str, pw: str) -> bool:
    r = Raw(addr)
    try:
        return r.sasl(mech, user, pw).error_code == 0
    finally:
        r.close()


def _start(tmp: Path, certs: Path, settings: dict[str, str], users: dict[str, str]) -> Secured:
    """One broker, or with MOLDAU_TEST_BROKER=cluster three brokers and a ZooKeeper (each broker with its own
    port on every listener, the brokers' own traffic on PLAINTEXT), with ``users`` for PLAIN and SCRAM."""
    base = {
        "ssl.certificate.location": str(certs / "broker.pem"),
        "ssl.key.location": str(certs / "broker.key"),
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
        "connection.failed.authentication.delay.ms": "50",
    }
    base.update(settings)
    listeners = ("SASL_PLAINTEXT", "SSL", "SASL_SSL")
    cluster = broker_kind() == "cluster"
    n = 3 if cluster else 1
    ports = {name: [free_port() for _ in range(n)] for name in listeners}

    def listeners_of(i: int) -> str:
        return ",".join(["PLAINTEXT://127.0.0.1:0"]
                        + [f"{name}://127.0.0.1:{ports[name][i]}" for name in listeners])

    proc: BrokerProcess
    if not cluster:
        data = tmp / "data"
        data.mkdir(parents=True)
        store = CredentialStore(data)  # offline, before the broker starts (moldau users add --data-dir)
        for name, pw in users.items():
            store.add_password(name, pw)
        proc = BrokerProcess("moldau", data, settings={**base, "listeners": listeners_of(0)}, log_dir=tmp)
        proc.start()
        ports["PLAINTEXT"] = [proc.port]
        return Secured(proc, ports, certs)
    # The brokers talk to each other on PLAINTEXT (moldau's inter-broker connections are plaintext only), as
    # User:ANONYMOUS: with an authorizer that principal must be a super user (or be granted ClusterAction),
    # as Kafka requires of its brokers' principal.
    base["inter.broker.listener.name"] = "PLAINTEXT"
    if base.get("authorizer.class.name") and "User:ANONYMOUS" not in base.get("super.users", ""):
        base["super.users"] = ";".join(x for x in (base.get("super.users"), "User:ANONYMOUS") if x)
    folder = tmp / "data"
    for i in (1, 2, 3):  # PLAIN users: each broker's own credential file (Kafka keeps them out of ZooKeeper)
        store = CredentialStore(ClusterProcess.broker_data_dir(folder, i))
        for name, pw in users.items():
            store.add_password(name, pw, ["PLAIN"])
    proc = ClusterProcess(folder, settings=base, log_dir=tmp,
                          per_broker={i + 1: {"listeners": listeners_of(i)} for i in range(3)})
    proc.start()
    ports["PLAINTEXT"] = [int(a.rsplit(":", 1)[1]) for a in proc.bootstrap.split(",")]
    s = Secured(proc, ports, certs)
    # SCRAM users: through the admin API (the cluster keeps them in ZooKeeper); PLAINTEXT is a super user
    admin = _admin(s.rdkafka("PLAINTEXT"))
    scram = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    up = [UserScramCredentialUpsertion(name, ScramCredentialInfo(mech, 4096), pw.encode())
          for name, pw in users.items() for mech in scram]
    for f in admin.alter_user_scram_credentials(up).values():
        f.result(timeout=TIMEOUT)
    for name, pw in users.items():
        for one in s.addr("SASL_PLAINTEXT").split(","):
            _eventually(lambda: _logs_in(one, "SCRAM-SHA-512", name, pw), f"{name} logs in on {one}")
    return s


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    generate(d, hostnames=["localhost", "127.0.0.1"], clients=["alice", "admin"])
    other = d / "other-ca"
    generate(other, hostnames=["localhost"], clients=["mallory"], ca_name="some other CA")
    return d


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[Secured]:
    s = _start(tmp_path_factory.mktemp("secure"), certs, {}, {ALICE: ALICE_PW})
    try:
        yield s
    finally:
        s.proc.close()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[Secured]:
    s = _start(tmp_path_factory.mktemp("acl"), certs, {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:admin;User:CN=admin",
    }, {ALICE: ALICE_PW, ADMIN: ADMIN_PW, "bob": "bob-pw"})
    try:
        yield s
    finally:
        s.proc.close()


def _topic(prefix: str = "sec") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _admin(conf: dict[str, Any]) -> AdminClient:
    return AdminClient(conf)


def _create(conf: dict[str, Any], *names: str) -> None:
    admin = _admin(conf)  # keep it alive until the futures are done
    rf = 3 if broker_kind() == "cluster" else 1
    fs = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=rf) for n in names],
                             request_timeout=TIMEOUT)
    for f in fs.values():
        f.result(timeout=TIMEOUT)


# ------------------------------------------------------------------------------------------------ clients

def confluent_roundtrip(conf: dict[str, Any], topic: str, n: int = 5) -> list[bytes]:
    errors: list[Any] = []
    p = Producer({**conf, "error_cb": errors.append})
    delivered: list[Any] = []
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(TIMEOUT) == 0, errors
    assert delivered == [None] * n, delivered
    c = Consumer({**conf, "group.id": "unused-" + topic, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        return out
    finally:
        c.close()


def kafka_python_conf(s: Secured, listener: str, mech: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"bootstrap_servers": s.addr(listener), "security_protocol": listener,
                          "request_timeout_ms": 10000}
    if listener.startswith("SASL"):
        kw.update(sasl_mechanism=mech, sasl_plain_username=ALICE, sasl_plain_password=ALICE_PW)
    if "SSL" in listener:
        kw.update(ssl_cafile=str(s.certs / "ca.pem"), ssl_check_hostname=True)
    return kw


def kafka_python_roundtrip(kw: dict[str, Any], topic: str, n: int = 5) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    p = KafkaProducer(**kw)
    try:
        for i in range(n):
            p.send(topic, f"v{i}".encode()).get(timeout=TIMEOUT)
    finally:
        p.close()
    c = KafkaConsumer(**kw, enable_auto_commit=False, consumer_timeout_ms=int(TIMEOUT * 1000))
    try:
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        out = []
        for msg in c:
            out.append(msg.value)
            if len(out) == n:
                break
        return out
    finally:
        c.close()


def aiokafka_roundtrip(s: Secured, listener: str, mech: str, topic: str, n: int = 5) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    from aiokafka.helpers import create_ssl_context

    kw: dict[str, Any] = {"bootstrap_servers": s.addr(listener), "security_protocol": listener}
    if listener.startswith("SASL"):
        kw.update(sasl_mechanism=mech, sasl_plain_username=ALICE, sasl_plain_password=ALICE_PW)
    if "SSL" in listener:
        kw["ssl_context"] = create_ssl_context(cafile=str(s.certs / "ca.pem"))

    async def main() -> list[bytes]:
        p = AIOKafkaProducer(**kw)
        await p.start()
        try:
            for i in range(n):
                await p.send_and_wait(topic, f"v{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**kw, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            await c.seek_to_beginning()
            out: list[bytes] = []
            while len(out) < n:
                batch = await c.getmany(timeout_ms=int(TIMEOUT * 1000))
                if not batch:
                    break
                for msgs in batch.values():
                    out.extend(x.value for x in msgs)
            return out
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(main(), 60))


EXPECTED = [f"v{i}".encode() for i in range(5)]


# ------------------------------------------------------------------------------------------------ raw
# protocol

class Raw:
    """A raw blocking connection for protocol-level checks."""

    def __init__(self, addr: str, tls: ssl.SSLContext | None = None) -> None:
        host, port = addr.split(",")[0].rsplit(":", 1)  # the first broker of a bootstrap string
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.corr = 0

    def send(self, api_key: int, version: int, obj: Any) -> None:
        self.corr += 1
        self.sock.sendall(frame.encode_request(api_key, version, self.corr, "raw", obj))

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes | None:
        """One frame, or None when the broker closed the connection."""
        head = self._exact(4)
        if head is None:
            return None
        return self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def call(self, api_key: int, version: int, obj: Any) -> Any:
        self.send(api_key, version, obj)
        body = self.recv_frame()
        assert body is not None, f"connection closed instead of answering api {api_key}"
        hdr, off = frame.decode_response_header(body, api_key, version)
        assert hdr.correlation_id == self.corr
        return m.RESPONSES[api_key].decode(body, version, off)[0]

    def sasl(self, mech: str, user: str, pw: str, version: int = 2) -> Any:
        hs = self.call(17, 1, m.SaslHandshakeRequest.new(mechanism=mech))
        assert hs.error_code == 0, hs
        client = client_mechanism(mech, user, pw)
        token = client.step(None)
        while True:
            resp = self.call(36, version, m.SaslAuthenticateRequest.new(auth_bytes=token))
            if resp.error_code:
                return resp
            token = client.step(bytes(resp.auth_bytes))
            if client.complete:
                return resp

    def closed(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, ssl.SSLError):
            return True
        except socket.timeout:
            return False
        return data == b""

    def close(self) -> None:
        self.sock.close()


def _metadata_req() -> Any:
    return m.MetadataRequest.new(topics=None, allow_auto_topic_creation=False)


# ================================================================================================ SASL + TLS

@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_kafka_sasl(secure: Secured, listener: str, mech: str) -> None:
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert confluent_roundtrip(secure.rdkafka(listener, mech), topic) == EXPECTED


@pytest.mark.parametrize("mech", MECHS)
def test_kafka_python_sasl_ssl(secure: Secured, mech: str) -> None:
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert kafka_python_roundtrip(kafka_python_conf(secure, "SASL_SSL", mech), topic) == EXPECTED


def test_kafka_python_sasl_plaintext_scram(secure: Secured) -> None:
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert (
        kafka_python_roundtrip(kafka_python_conf(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256"), topic)
        == EXPECTED
    )


@pytest.mark.parametrize("mech", MECHS)
def test_aiokafka_sasl_ssl(secure: Secured, mech: str) -> None:
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert aiokafka_roundtrip(secure, "SASL_SSL", mech, topic) == EXPECTED


def test_aiokafka_sasl_plaintext_plain(secure: Secured) -> None:
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert aiokafka_roundtrip(secure, "SASL_PLAINTEXT", "PLAIN", topic) == EXPECTED


def test_ssl_client_certificates(secure: Secured) -> None:
    """The SSL listener requires a client certificate signed by the broker's CA."""
    topic = _topic()
    _create(secure.rdkafka("PLAINTEXT"), topic)
    assert confluent_roundtrip(secure.rdkafka("SSL", cert="alice"), topic) == EXPECTED
    assert kafka_python_roundtrip({**kafka_python_conf(secure, "SSL", "PLAIN"),
                                   "ssl_certfile": str(secure.certs / "alice.pem"),
                                   "ssl_keyfile": str(secure.certs / "alice.key")}, topic) == EXPECTED
    other = secure.certs / "other-ca"
    for conf in (secure.rdkafka("SSL"),  # no certificate
                 secure.rdkafka("SSL", **{"ssl.certificate.location": str(other / "mallory.pem"),
                                          "ssl.key.location": str(other / "mallory.key")})):
        errors: list[Any] = []
        delivery: list[Any] = []
        p = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
        p.produce(topic, b"nope", on_delivery=lambda err, msg: delivery.append(err))
        p.flush(6)
        assert delivery and delivery[0] is not None and delivery[0].code() == KafkaError._MSG_TIMED_OUT
        assert errors and all(
            e.code() in (KafkaError._TRANSPORT, KafkaError._SSL, KafkaError._ALL_BROKERS_DOWN) for e in errors
        ), errors
    # the raw TLS handshake itself is refused for the other CA's certificate
    ctx = ssl.create_default_context(cafile=str(secure.certs / "ca.pem"))
    ctx.load_cert_chain(str(other / "mallory.pem"), str(other / "mallory.key"))
    with pytest.raises((ssl.SSLError, ConnectionResetError, AssertionError)):
        r = Raw(secure.addr("SSL"), ctx)
        r.call(18, 0, m.ApiVersionsRequest.new())  # TLS 1.3: the refusal shows on first use
    # ... and a client that does not trust the broker's CA refuses the broker
    with pytest.raises(ssl.SSLCertVerificationError):
        Raw(secure.addr("SASL_SSL"), ssl.create_default_context(cafile=str(other / "ca.pem")))


def test_metadata_advertises_the_listener_used(secure: Secured) -> None:
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"):
        conf = secure.rdkafka(listener, "SCRAM-SHA-512", cert="alice" if listener == "SSL" else None)
        md = _admin(conf).list_topics(timeout=TIMEOUT)
        assert sorted((b.host, b.port) for b in md.brokers.values()) == sorted(
            ("127.0.0.1", p) for p in secure.ports[listener])


def test_wrong_password_confluent(secure: Secured) -> None:
    for mech in MECHS:
        errors: list[Any] = []
        p = Producer({**secure.rdkafka("SASL_SSL", mech, pw="wrong"), "error_cb": errors.append})
        p.produce("whatever", b"x")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            p.poll(0.1)
        p.purge()
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert auth, errors
        assert "Authentication failed" in auth[0].str(), auth[0].str()
    assert "failed authentication with SASL/SCRAM-SHA-512" in secure.proc.output(limit=1 << 30)


def test_wrong_password_kafka_python_and_aiokafka(secure: Secured, caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from kafka import KafkaConsumer
    from kafka.errors import KafkaTimeoutError

    with caplog.at_level(logging.ERROR):
        kw = {**kafka_python_conf(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256"), "sasl_plain_password": "wrong",
              "request_timeout_ms": 3000, "bootstrap_timeout_ms": 3000}
        with pytest.raises(KafkaTimeoutError):
            KafkaConsumer(**kw).topics()
    assert "SaslAuthenticationFailed" in caplog.text and "Authentication failed" in caplog.text
    caplog.clear()

    async def aio() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=secure.addr("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=ALICE,
            sasl_plain_password="wrong",
        )
        try:
            await p.start()
        finally:
            await p.stop()

    with caplog.at_level(logging.ERROR):
        with pytest.raises(KafkaConnectionError):
            asyncio.run(aio())
    assert "Invalid username or password" in caplog.text


def test_wrong_password_protocol_level(secure: Secured) -> None:
    for mech in MECHS:
        r = Raw(secure.addr("SASL_PLAINTEXT"))
        resp = r.sasl(mech, ALICE, "wrong")
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert "Authentication failed" in resp.error_message
        assert r.closed()
        r.close()
    # an unknown user looks the same as a wrong password
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    resp = r.sasl("SCRAM-SHA-256", "nobody", "x")
    assert resp.error_code == 58 and "invalid credentials" in resp.error_message
    r.close()
    # an unsupported mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then close
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    hs = r.call(17, 1, m.SaslHandshakeRequest.new(mechanism="GSSAPI"))
    assert hs.error_code == 33 and hs.mechanisms == MECHS
    assert r.closed()


def test_kcat_sasl_ssl_and_ssl(secure: Secured, kcat: str) -> None:
    for mech in MECHS:
        topic = _topic("kcat")
        _create(secure.rdkafka("PLAINTEXT"), topic)
        x = [
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            f"sasl.mechanisms={mech}",
            "-X",
            f"sasl.username={ALICE}",
            "-X",
            f"sasl.password={ALICE_PW}",
            "-X",
            f"ssl.ca.location={secure.certs / 'ca.pem'}",
        ]
        b = ["-b", secure.addr("SASL_SSL")]
        subprocess.run([kcat, *b, *x, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=30)
        out = subprocess.run([kcat, *b, *x, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                             capture_output=True, check=True, timeout=30)
        assert out.stdout.split() == [b"one", b"two"]
    bad = subprocess.run([kcat, "-b", secure.addr("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
                          "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", f"sasl.username={ALICE}",
                          "-X", "sasl.password=wrong", "-X", f"ssl.ca.location={secure.certs / 'ca.pem'}",
                          "-L", "-m", "5"], capture_output=True, timeout=30)
    assert bad.returncode != 0 and b"Authentication failed" in bad.stderr + bad.stdout
    topic = _topic("kcat")
    _create(secure.rdkafka("PLAINTEXT"), topic)
    x = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={secure.certs / 'ca.pem'}",
         "-X", f"ssl.certificate.location={secure.certs / 'alice.pem'}",
         "-X", f"ssl.key.location={secure.certs / 'alice.key'}"]
    subprocess.run(
        [kcat, "-b", secure.addr("SSL"), *x, "-P", "-t", topic], input=b"tls\n", check=True, timeout=30
    )
    out = subprocess.run(
        [kcat, "-b", secure.addr("SSL"), *x, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.split() == [b"tls"]


def test_unauthenticated_requests_close_the_connection(secure: Secured) -> None:
    """Every API except ApiVersions/SaslHandshake/SaslAuthenticate, sent before authentication on a SASL
    listener, closes the connection without an answer, and nothing is read or written."""
    admin_conf = secure.rdkafka("PLAINTEXT")
    existing = _topic("gate")
    _create(admin_conf, existing)
    confluent_roundtrip(admin_conf, existing, 1)  # one record at offset 0
    new_topic = _topic("gate-new")
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    versions = r.call(18, 0, m.ApiVersionsRequest.new())
    r.close()
    batch = BatchBuilder()
    batch.append(int(time.time() * 1000), b"k", b"intruder")
    records = batch.build()
    real = {
        0: (3, m.ProduceRequest.new(acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
            name=existing, partition_data=[m.ProduceRequest.PartitionProduceData(index=0,
            records=records)])])),
        1: (4, m.FetchRequest.new(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            m.FetchRequest.FetchTopic(topic=existing, partitions=[m.FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])),
        3: (1, _metadata_req()),
        19: (2, m.CreateTopicsRequest.new(timeout_ms=5000, topics=[m.CreateTopicsRequest.CreatableTopic(
            name=new_topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])])),
        20: (1, m.DeleteTopicsRequest.new(topic_names=[existing], timeout_ms=5000)),
        51: (0, m.AlterUserScramCredentialsRequest.new(deletions=[], upsertions=[
            m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name="intruder", mechanism=1, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 32)])),
    }
    tried = []
    for k in versions.api_keys:
        if k.api_key in (17, 18, 36):
            continue
        r = Raw(secure.addr("SASL_PLAINTEXT"))
        assert r.call(18, 0, m.ApiVersionsRequest.new()).error_code == 0  # allowed before authentication
        if k.api_key in real:
            v, obj = real[k.api_key]
            r.send(k.api_key, v, obj)
        else:  # a header is enough: the broker must refuse before it reads the body
            r.send_raw(struct.pack(">hhih", k.api_key, k.min_version, 99, 3) + b"raw")
        assert r.recv_frame() is None, f"api {k.api_key} was answered before authentication"
        r.close()
        tried.append(k.api_key)
    assert {0, 1, 3, 19, 20, 51}.issubset(tried)
    # nothing happened: the topic still exists with its one record, no new topic, no new user
    md = _admin(admin_conf).list_topics(timeout=TIMEOUT)
    assert existing in md.topics and new_topic not in md.topics
    c = Consumer({**admin_conf, "group.id": "g-gate"})
    lo, hi = c.get_watermark_offsets(TopicPartition(existing, 0), timeout=TIMEOUT)
    c.close()
    assert (lo, hi) == (0, 1)
    admin = _admin(admin_conf)  # alive until the future is done
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND") as info:
        admin.describe_user_scram_credentials(["intruder"])["intruder"].result(timeout=TIMEOUT)
    assert "intruder" in str(info.value)
    for d in secure.data_dirs:
        assert "intruder" not in (d / "__moldau_credentials.json").read_text()
    assert "before SASL authentication completed" in secure.proc.output(limit=1 << 30)


def test_handshake_v0_raw_tokens(secure: Secured) -> None:
    """SaslHandshake v0: the SASL tokens follow as bare size-prefixed frames (old clients)."""
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    hs = r.call(17, 0, m.SaslHandshakeRequest.new(mechanism="PLAIN"))
    assert hs.error_code == 0
    r.send_raw(plain_message(ALICE, ALICE_PW))
    assert r.recv_frame() == b""  # PLAIN's empty server token
    assert r.call(3, 1, _metadata_req()).brokers
    r.close()
    # SCRAM over raw tokens
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    assert r.call(17, 0, m.SaslHandshakeRequest.new(mechanism="SCRAM-SHA-512")).error_code == 0
    client = client_mechanism("SCRAM-SHA-512", ALICE, ALICE_PW)
    r.send_raw(client.step(None))
    r.send_raw(client.step(r.recv_frame()))
    client.step(r.recv_frame())
    assert client.complete
    assert r.call(3, 1, _metadata_req()).brokers
    r.close()
    # a wrong password in the raw flow: the connection closes
    r = Raw(secure.addr("SASL_PLAINTEXT"))
    r.call(17, 0, m.SaslHandshakeRequest.new(mechanism="PLAIN"))
    r.send_raw(plain_message(ALICE, "wrong"))
    assert r.recv_frame() is None
    r.close()


def test_sasl_handshake_on_plaintext_listener_is_illegal(secure: Secured) -> None:
    r = Raw(secure.addr("PLAINTEXT"))
    assert r.call(17, 1, m.SaslHandshakeRequest.new(mechanism="PLAIN")).error_code == 34  # ILLEGAL_SASL_STATE
    r.close()


def test_acl_apis_without_authorizer_are_security_disabled(secure: Secured) -> None:
    admin = _admin(secure.rdkafka("SASL_PLAINTEXT", "PLAIN"))
    f = admin.create_acls([AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*",
                                      AclOperation.READ, AclPermissionType.ALLOW)])
    with pytest.raises(Exception, match="SECURITY_DISABLED|No Authorizer"):
        list(f.values())[0].result(timeout=TIMEOUT)


def test_reauthentication(tmp_path: Path, certs: Path) -> None:
    """KIP-368: session_lifetime_ms from connections.max.reauth.ms; an expired session is closed on its next
    request; re-authenticating on the same connection extends it; librdkafka re-authenticates by itself."""
    s = _start(tmp_path, certs, {"connections.max.reauth.ms": "1500"}, {ALICE: ALICE_PW})
    try:
        r = Raw(s.addr("SASL_PLAINTEXT"))
        assert r.sasl("SCRAM-SHA-256", ALICE, ALICE_PW).session_lifetime_ms == 1500
        assert r.call(3, 1, _metadata_req()).brokers
        time.sleep(1.7)
        r.send(3, 1, _metadata_req())
        assert r.recv_frame() is None
        r.close()
        r = Raw(s.addr("SASL_PLAINTEXT"))
        r.sasl("PLAIN", ALICE, ALICE_PW)
        time.sleep(1.0)
        assert r.sasl("PLAIN", ALICE, ALICE_PW).error_code == 0  # re-authentication, same connection
        time.sleep(1.0)  # 2 s after the first authentication, 1 s after the second
        assert r.call(3, 1, _metadata_req()).brokers
        # re-authenticating as someone else is refused
        s.add_local_user("eve", "eve-pw", ["PLAIN"])
        hs = r.call(17, 1, m.SaslHandshakeRequest.new(mechanism="PLAIN"))
        assert hs.error_code == 0
        resp = r.call(36, 2, m.SaslAuthenticateRequest.new(auth_bytes=plain_message("eve", "eve-pw")))
        assert resp.error_code == 58 and "Cannot change principals" in resp.error_message
        r.close()
        topic = _topic("reauth")
        conf = s.rdkafka("SASL_SSL", "SCRAM-SHA-512")
        _create(conf, topic)
        p = Producer(conf)
        for _ in range(3):
            p.produce(topic, b"x")
            assert p.flush(TIMEOUT) == 0
            time.sleep(1.2)
        assert "expired and was not re-authenticated" in s.proc.output(limit=1 << 30)
    finally:
        s.proc.close()


@pytest.mark.parametrize("mech", MECHS)
def test_moldau_client_sasl_ssl(secure: Secured, mech: str) -> None:
    from moldau.client import Consumer as MConsumer
    from moldau.client import Producer as MProducer
    from moldau.client import TopicPartition as MTP

    conf = {"bootstrap.servers": secure.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mech, "sasl.username": ALICE, "sasl.password": ALICE_PW,
            "ssl.ca.location": str(secure.certs / "ca.pem")}
    p = MProducer(conf)
    topic = _topic("moldau")
    _create(secure.rdkafka("PLAINTEXT"), topic)
    try:
        p.send(topic, b"hello").result(TIMEOUT)
    finally:
        p.close()
    c = MConsumer(conf)
    try:
        c.assign([MTP(topic, 0)])
        c.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while not got and time.monotonic() < deadline:
            got += [r.value for r in c.poll(1.0)]  # the moldau consumer's poll(seconds) returns a list
        assert got == [b"hello"]
    finally:
        c.close()


# ================================================================================================ users

def test_users_online_through_admin_apis(acl_broker: Secured) -> None:
    """AlterUserScramCredentials / DescribeUserScramCredentials through confluent-kafka and the moldau CLI;
    the new users authenticate at once."""
    admin = _admin(acl_broker.rdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256", ADMIN, ADMIN_PW))
    fs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw", b"0123456789abcdef")])
    fs["carol"].result(timeout=TIMEOUT)
    acl_broker.logs_in_everywhere("SCRAM-SHA-512", "carol", "carol-pw")
    desc = admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=TIMEOUT)
    assert [(ci.mechanism, ci.iterations) for ci in desc.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    md = _admin(acl_broker.rdkafka("SASL_PLAINTEXT", "SCRAM-SHA-512", "carol", "carol-pw")).list_topics(
        timeout=TIMEOUT)
    assert md.brokers
    # the CLI, online, authenticating as admin over SASL_SSL
    x = [
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanism=SCRAM-SHA-512",
        "-X",
        f"sasl.username={ADMIN}",
        "-X",
        f"sasl.password={ADMIN_PW}",
        "-X",
        f"ssl.ca.location={acl_broker.certs / 'ca.pem'}",
    ]
    run = lambda *a: subprocess.run([*moldau_command(), *a], capture_output=True, text=True, timeout=30)  # noqa: E731
    out = run(
        "users", "add", "dave", "--password", "dave-pw", "--bootstrap-server", acl_broker.addr("SASL_SSL"), *x
    )
    assert out.returncode == 0, out.stderr
    out = run("users", "list", "--bootstrap-server", acl_broker.addr("SASL_SSL"), *x)
    assert "dave\tSCRAM-SHA-256 (4096 iterations), SCRAM-SHA-512 (4096 iterations)" in out.stdout, out
    acl_broker.logs_in_everywhere("SCRAM-SHA-256", "dave", "dave-pw")
    assert _admin(acl_broker.rdkafka("SASL_SSL", "SCRAM-SHA-256", "dave", "dave-pw")).list_topics(
        timeout=TIMEOUT).brokers
    out = run("users", "delete", "dave", "--bootstrap-server", acl_broker.addr("SASL_SSL"), *x)
    assert out.returncode == 0, out.stderr
    acl_broker.logs_in_everywhere("SCRAM-SHA-256", "dave", "dave-pw", expected=False)
    r = Raw(acl_broker.addr("SASL_PLAINTEXT"))
    assert r.sasl("SCRAM-SHA-256", "dave", "dave-pw").error_code == 58
    r.close()
    # a user without Alter on the cluster cannot change credentials
    bob = _admin(acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", "bob", "bob-pw"))
    fs = bob.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|[Cc]luster authorization"):
        fs["mallory"].result(timeout=TIMEOUT)


# ================================================================================================ ACLs

def _produce_error(conf: dict[str, Any], topic: str) -> Any:
    """The delivery error of one record (None when delivered)."""
    result: list[Any] = []
    p = Producer({**conf, "message.timeout.ms": 8000})
    p.produce(topic, b"x", on_delivery=lambda err, msg: result.append(err))
    p.flush(12)
    return result[0] if result else "not delivered"


def _consume_error(conf: dict[str, Any], topic: str, group: str) -> Any:
    """Subscribe with a group; returns the first error, or the first record's value."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            return msg.error() if msg.error() else msg.value()
        return None
    finally:
        c.close()


def _allow(principal: str, rtype: ResourceType, name: str, op: AclOperation,
           perm: AclPermissionType = AclPermissionType.ALLOW,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def test_acls_end_to_end(acl_broker: Secured) -> None:
    admin_conf = acl_broker.rdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256", ADMIN, ADMIN_PW)
    alice = acl_broker.rdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256")
    admin = _admin(admin_conf)
    a, b = _topic("acl-a"), _topic("acl-b")
    _create(admin_conf, a, b)
    assert _produce_error(admin_conf, b) is None  # super user

    # no ACLs, allow.everyone.if.no.acl.found=false: denied
    err = _produce_error(alice, a)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    alice_admin = _admin(alice)
    fs = alice_admin.create_acls([_allow("User:alice", ResourceType.TOPIC, a, AclOperation.ALL)])
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|[Cc]luster authorization"):
        list(fs.values())[0].result(timeout=TIMEOUT)

    # CreateAcls by the admin: takes effect at once, no restart
    group = "g-alice-" + uuid.uuid4().hex[:6]
    for f in admin.create_acls([
        _allow("User:alice", ResourceType.TOPIC, a, AclOperation.WRITE),
        _allow("User:alice", ResourceType.TOPIC, a, AclOperation.READ),
        _allow("User:alice", ResourceType.GROUP, group, AclOperation.READ),
    ]).values():
        f.result(timeout=TIMEOUT)
    acl_broker.acls_everywhere()
    assert _produce_error(alice, a) is None
    assert _consume_error(alice, a, group) == b"x"
    # topic B: TOPIC_AUTHORIZATION_FAILED, and not in alice's metadata
    err = _produce_error(alice, b)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = _consume_error(alice, b, group)
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    seen = set(_admin(alice).list_topics(timeout=TIMEOUT).topics)
    assert a in seen and b not in seen
    assert b in set(admin.list_topics(timeout=TIMEOUT).topics)
    # a group without an ACL: joining is denied
    err = _consume_error(alice, a, "g-other-" + uuid.uuid4().hex[:6])
    assert isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err

    # DescribeAcls with a filter
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            "User:alice",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(timeout=TIMEOUT)
    assert {(x.name, x.operation) for x in found} == {(a, AclOperation.WRITE), (a, AclOperation.READ),
                                                     (group, AclOperation.READ)}

    # deny beats allow (a PREFIXED deny over the literal allow)
    for f in admin.create_acls([_allow("User:alice", ResourceType.TOPIC, "acl-a", AclOperation.READ,
                                       AclPermissionType.DENY, ResourcePatternType.PREFIXED)]).values():
        f.result(timeout=TIMEOUT)
    acl_broker.acls_everywhere()
    err = _consume_error(alice, a, group)
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert _produce_error(alice, a) is None  # the deny is for Read only

    # the ACLs survive a restart
    acl_broker.proc.restart()
    err = _consume_error(alice, a, group)
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert _produce_error(alice, a) is None
    assert len(admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None,
                                                    None,
                                                    AclOperation.ANY, AclPermissionType.ANY)).result(
        timeout=TIMEOUT)) >= 4

    # DeleteAcls removes the deny: reading works again
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "acl-a", ResourcePatternType.PREFIXED,
                                                  None,
                                                  None, AclOperation.ANY, AclPermissionType.DENY)])
    assert len(list(deleted.values())[0].result(timeout=TIMEOUT)) == 1
    acl_broker.acls_everywhere()
    assert _consume_error(alice, a, group) == b"x"


def test_acls_tls_principal_and_kafka_python_admin(acl_broker: Secured) -> None:
    """The client certificate's subject is the principal on the SSL listener; ACLs through kafka-python's
    admin client."""
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KRT

    admin_conf = acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", ADMIN, ADMIN_PW)
    t = _topic("tls-acl")
    _create(admin_conf, t)
    cert_alice = acl_broker.rdkafka("SSL", cert="alice")
    err = _produce_error(cert_alice, t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    ka = KafkaAdminClient(
        bootstrap_servers=acl_broker.addr("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=ADMIN,
        sasl_plain_password=ADMIN_PW,
    )
    try:
        acl = ACL(principal="User:CN=alice", host="*", operation=ACLOperation.WRITE,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(KRT.TOPIC, t, ACLResourcePatternType.LITERAL))
        result = ka.create_acls([acl])
        assert not result["failed"], result
        acl_broker.acls_everywhere()
        flt = ACLFilter(principal="User:CN=alice", host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(KRT.TOPIC, t, ACLResourcePatternType.LITERAL))
        acls, _error = ka.describe_acls(flt)
        assert [x.principal for x in acls] == ["User:CN=alice"]
        assert _produce_error(cert_alice, t) is None
        # the admin certificate is a super user (User:CN=admin)
        assert _produce_error(acl_broker.rdkafka("SSL", cert="admin"), t) is None
        ka.delete_acls([flt])
        acl_broker.acls_everywhere()
    finally:
        ka.close()
    err = _produce_error(cert_alice, t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_cli_online(acl_broker: Secured) -> None:
    """moldau acls add / list / remove with --bootstrap-server: the ACL takes effect (on every broker)."""
    x = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        f"sasl.username={ADMIN}",
        "-X",
        f"sasl.password={ADMIN_PW}",
    ]
    t = _topic("cli-acl")
    _create(acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", ADMIN, ADMIN_PW), t)
    run = lambda *a: subprocess.run([*moldau_command(), "acls", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=30)
    out = run(
        "add",
        "--bootstrap-server",
        acl_broker.addr("SASL_PLAINTEXT"),
        *x,
        "--allow-principal",
        "User:bob",
        "--operation",
        "Write",
        "--topic",
        t,
    )
    assert out.returncode == 0, out.stderr
    acl_broker.acls_everywhere()
    bob = acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", "bob", "bob-pw")
    assert _produce_error(bob, t) is None
    out = run("list", "--bootstrap-server", acl_broker.addr("SASL_PLAINTEXT"), *x, "--principal", "User:bob")
    assert f"TOPIC:LITERAL:{t}\tUser:bob\tALLOW\tWRITE" in out.stdout, out
    out = run(
        "remove", "--bootstrap-server", acl_broker.addr("SASL_PLAINTEXT"), *x, "--principal", "User:bob"
    )
    assert out.returncode == 0
    acl_broker.acls_everywhere()
    err = _produce_error(bob, t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.single_broker("offline edits with --data-dir change one broker's local ACL file, which a "
                           "cluster broker does not read (ZooKeeper holds the cluster's ACLs)")
def test_acls_cli_offline(acl_broker: Secured) -> None:
    """moldau acls add --data-dir on the running broker's data dir: picked up within a second."""
    t = _topic("cli-acl")
    _create(acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", ADMIN, ADMIN_PW), t)
    run = lambda *a: subprocess.run([*moldau_command(), "acls", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=30)
    bob = acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", "bob", "bob-pw")
    err = _produce_error(bob, t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    out = run(
        "add",
        "--data-dir",
        str(acl_broker.proc.data_dir),
        "--allow-principal",
        "User:bob",
        "--operation",
        "write",
        "--topic",
        t,
    )
    assert out.returncode == 0, out.stderr
    time.sleep(1.2)
    assert _produce_error(bob, t) is None
    run("remove", "--data-dir", str(acl_broker.proc.data_dir), "--principal", "User:bob")


def test_follower_fetch_needs_cluster_action(acl_broker: Secured) -> None:
    """A Fetch with a replica id (a follower's) needs ClusterAction on the cluster, not Read on the topic: a
    consumer allowed to read the topic is refused on every partition when it poses as a replica."""
    admin_conf = acl_broker.rdkafka("SASL_PLAINTEXT", "PLAIN", ADMIN, ADMIN_PW)
    t = _topic("ffetch")
    _create(admin_conf, t)
    assert _produce_error(admin_conf, t) is None
    admin = _admin(admin_conf)  # alive until the futures are done
    for f in admin.create_acls([_allow("User:alice", ResourceType.TOPIC, t, AclOperation.READ)]).values():
        f.result(timeout=TIMEOUT)
    acl_broker.acls_everywhere()

    def fetch(replica_id: int) -> list[int]:
        r = Raw(acl_broker.addr("SASL_PLAINTEXT"))
        try:
            assert r.sasl("SCRAM-SHA-256", ALICE, ALICE_PW).error_code == 0
            resp = r.call(1, 4, m.FetchRequest.new(
                replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                topics=[m.FetchRequest.FetchTopic(topic=t, partitions=[m.FetchRequest.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
        finally:
            r.close()
        return [p.error_code for x in resp.responses for p in x.partitions]

    # as a consumer: allowed (a cluster's first broker may not lead the partition: NOT_LEADER_OR_FOLLOWER)
    assert fetch(-1) in ([0], [6])
    assert fetch(1) == [29]  # TOPIC_AUTHORIZATION_FAILED


def test_kafka41_admin_apis_acls(acl_broker: Secured) -> None:
    """DescribeTopicPartitions (Describe per topic), ListConfigResources (DescribeConfigs on the cluster),
    AlterReplicaLogDirs (Alter on the cluster) for a principal with one topic ACL."""
    from kafka import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError
    from kafka.structs import TopicPartitionReplica

    admin_conf = acl_broker.rdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256", ADMIN, ADMIN_PW)
    seen, hidden = _topic("dtp-seen"), _topic("dtp-hidden")
    _create(admin_conf, seen, hidden)
    admin = _admin(admin_conf)
    acl = _allow("User:alice", ResourceType.TOPIC, seen, AclOperation.DESCRIBE)
    for f in admin.create_acls([acl]).values():
        f.result(timeout=TIMEOUT)
    acl_broker.acls_everywhere()
    ka = KafkaAdminClient(bootstrap_servers=acl_broker.addr("SASL_PLAINTEXT"),
                          security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                          sasl_plain_username=ALICE, sasl_plain_password=ALICE_PW)
    try:
        out = ka.describe_topic_partitions([hidden, seen])
        assert [(t["name"], t["error_code"]) for t in out["topics"]] == [(seen, 0), (hidden, 29)]
        ok, denied = out["topics"]
        assert ok["topic_authorized_operations"] == 1 << 8  # DESCRIBE, alice's only operation
        assert len(ok["partitions"]) == 1
        assert denied["partitions"] == [] and denied["topic_id"] in (None, uuid.UUID(int=0))
        every = {t["name"] for t in ka.describe_topic_partitions([])["topics"]}
        assert seen in every and hidden not in every  # left out, not reported
        with pytest.raises(ClusterAuthorizationFailedError):
            ka.list_config_resources()
        tpr = TopicPartitionReplica(seen, 0, ka.describe_cluster()["controller_id"])
        assert ka.alter_replica_log_dirs({tpr: "/anywhere"}) == {tpr: ClusterAuthorizationFailedError}
    finally:
        ka.close()
