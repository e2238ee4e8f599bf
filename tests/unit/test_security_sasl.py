"""SASL mechanisms: SCRAM against RFC 7677's test vector and kafka-python's independent client, PLAIN,
the server state machines and the credential store."""

import base64
import hashlib
import hmac
import json
import os

import pytest

from moldau.broker.security.credentials import CredentialError, CredentialStore
from moldau.broker.security.sasl import PlainServer, SaslAuthenticationFailed, ScramServer
from moldau.protocol import sasl_mechanisms as sm

# RFC 7677 section 3
RFC_USER, RFC_PASSWORD = "user", "pencil"
RFC_CNONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SNONCE_PART = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_client_messages():
    c = sm.ScramClient("SCRAM-SHA-256", RFC_USER, RFC_PASSWORD, nonce=RFC_CNONCE)
    assert c.step(None) == RFC_CLIENT_FIRST
    assert c.step(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert c.step(RFC_SERVER_FINAL) is None
    assert c.complete


def test_rfc7677_client_rejects_bad_server_signature():
    c = sm.ScramClient("SCRAM-SHA-256", RFC_USER, RFC_PASSWORD, nonce=RFC_CNONCE)
    c.step(None)
    c.step(RFC_SERVER_FIRST)
    bad = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(sm.SaslError, match="server signature"):
        c.step(bad)


def test_rfc7677_server(tmp_path):
    """The server, given the RFC's salt and nonce, produces the RFC's server messages."""
    store = CredentialStore(tmp_path)
    mech = sm.SCRAM_MECHANISMS["SCRAM-SHA-256"]
    salted = sm.salted_password(mech, RFC_PASSWORD, RFC_SALT, 4096)
    store.upsert_scram_salted(RFC_USER, "SCRAM-SHA-256", 4096, RFC_SALT, salted)
    srv = ScramServer("SCRAM-SHA-256", store, b"secret")
    srv._rand = lambda n: b""  # server nonce = client nonce + hex("") ...
    first = srv.step(RFC_CLIENT_FIRST)
    # ... then splice in the RFC's server nonce part to reproduce its exact exchange
    srv._nonce = RFC_CNONCE + RFC_SNONCE_PART
    srv._server_first = sm.format_server_first(srv._nonce, RFC_SALT, 4096)
    assert first.startswith(b"r=" + RFC_CNONCE.encode())
    assert srv._server_first.encode() == RFC_SERVER_FIRST
    assert srv.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert srv.complete and srv.username == RFC_USER
    # the store kept keys, not the password or the salted password
    text = open(store.path).read()
    assert RFC_PASSWORD not in text and base64.b64encode(salted).decode() not in text


def test_keys_match_rfc5802_definitions():
    mech = sm.SCRAM_MECHANISMS["SCRAM-SHA-512"]
    salt = b"0123456789abcdef"
    cred = sm.new_credential(mech, "pw", iterations=4096, salt=salt)
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert cred.stored_key == hashlib.sha512(client_key).digest()
    assert cred.server_key == hmac.new(salted, b"Server Key", "sha512").digest()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_moldau_client_against_moldau_server(tmp_path, mechanism):
    store = CredentialStore(tmp_path)
    store.add_password("al=ice,x", "sécret", [mechanism], iterations=4096)
    client = sm.ScramClient(mechanism, "al=ice,x", "sécret")
    server = ScramServer(mechanism, store, b"k")
    token = client.step(None)
    assert b"n=al=3Dice=2Cx," in token
    token = client.step(server.step(token))
    out = server.step(token)
    assert server.complete and server.username == "al=ice,x"
    assert client.step(out) is None and client.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_scram_client_against_moldau_server(tmp_path, mechanism):
    """An independent SCRAM client implementation (kafka-python's, test-only) agrees with our server."""
    scram = pytest.importorskip("kafka.net.sasl.scram")
    store = CredentialStore(tmp_path)
    store.add_password("bob", "hunter2", [mechanism])

    client = scram.ScramClient("bob", "hunter2", mechanism)
    server = ScramServer(mechanism, store, b"k")
    client_first = client.first_message()
    server_first = server.step(client_first)
    client.process_server_first_message(server_first)
    server_final = server.step(client.final_message())
    client.process_server_final_message(server_final)
    assert server.complete and server.username == "bob"


def test_scram_wrong_password_and_unknown_user(tmp_path):
    store = CredentialStore(tmp_path)
    store.add_password("alice", "right", ["SCRAM-SHA-256"])
    for user, pw in (("alice", "wrong"), ("nobody", "x")):
        client = sm.ScramClient("SCRAM-SHA-256", user, pw)
        server = ScramServer("SCRAM-SHA-256", store, b"k")
        server_first = server.step(client.step(None))
        # unknown users get a plausible challenge too (no user enumeration)
        parsed = sm.parse_server_first(server_first)
        assert parsed.iterations == 4096 and len(parsed.salt) == 32
        with pytest.raises(
            SaslAuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"
        ):
            server.step(client.step(server_first))
        assert not server.complete


def test_scram_server_refuses_channel_binding_bad_nonce_and_authzid(tmp_path):
    store = CredentialStore(tmp_path)
    store.add_password("alice", "pw", ["SCRAM-SHA-256"])
    with pytest.raises(SaslAuthenticationFailed, match="channel binding"):
        ScramServer("SCRAM-SHA-256", store, b"k").step(b"p=tls-unique,,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        ScramServer("SCRAM-SHA-256", store, b"k").step(b"n,a=bob,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationFailed, match="delegation tokens"):
        ScramServer("SCRAM-SHA-256", store, b"k").step(b"n,,n=alice,r=abc,tokenauth=true")
    with pytest.raises(SaslAuthenticationFailed):
        ScramServer("SCRAM-SHA-256", store, b"k").step(b"garbage")
    # a final message with another nonce
    client = sm.ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256", store, b"k")
    server.step(client.step(None))
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        server.step(b"c=biws,r=othernonce,p=" + base64.b64encode(b"x" * 32))
    # authzid equal to the user is accepted, and c= must then carry that GS2 header
    client = sm.ScramClient("SCRAM-SHA-256", "alice", "pw", authzid="alice")
    server = ScramServer("SCRAM-SHA-256", store, b"k")
    first = client.step(None)
    assert first.startswith(b"n,a=alice,")
    client.step(server.step(client.step(server.step(first))))
    assert server.complete and client.complete


def test_scram_client_checks_server():
    c = sm.ScramClient("SCRAM-SHA-256", "u", "p", nonce="abc")
    c.step(None)
    with pytest.raises(sm.SaslError, match="nonce"):
        c.step(b"r=zzz,s=" + base64.b64encode(b"salt") + b",i=4096")
    c = sm.ScramClient("SCRAM-SHA-256", "u", "p", nonce="abc")
    c.step(None)
    with pytest.raises(sm.SaslError, match="iteration"):
        c.step(b"r=abcdef,s=" + base64.b64encode(b"salt") + b",i=1000")
    c = sm.ScramClient("SCRAM-SHA-256", "u", "p", nonce="abc")
    c.step(None)
    with pytest.raises(sm.SaslError, match="server error: other-error"):
        c.step(b"e=other-error")


def test_saslname_escaping():
    assert sm.escape_saslname("a=b,c") == "a=3Db=2Cc"
    assert sm.unescape_saslname("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(sm.SaslError):
        sm.unescape_saslname("a=4Fb")


def test_plain(tmp_path):
    store = CredentialStore(tmp_path)
    store.add_password("alice", "pw", ["PLAIN"])
    ok = PlainServer(store)
    assert ok.step(sm.PlainClient("alice", "pw").step(None)) == b""
    assert ok.complete and ok.username == "alice"
    ok2 = PlainServer(store)
    ok2.step(sm.plain_message("alice", "pw", authzid="alice"))
    assert ok2.username == "alice"
    for msg, match in ((sm.plain_message("alice", "bad"), "Invalid username or password"),
                       (sm.plain_message("bob", "pw"), "Invalid username or password"),
                       (sm.plain_message("alice", "pw", authzid="root"), "authorization id"),
                       (b"alice\x00pw", "expected 3 tokens"),
                       (b"\x00\x00pw", "username not specified")):
        with pytest.raises(SaslAuthenticationFailed, match=match):
            PlainServer(store).step(msg)
    # a SCRAM-only user cannot use PLAIN
    store.add_password("carol", "pw", ["SCRAM-SHA-256"])
    with pytest.raises(SaslAuthenticationFailed):
        PlainServer(store).step(sm.plain_message("carol", "pw"))


def test_credential_store_persists_hashes_only(tmp_path):
    store = CredentialStore(tmp_path)
    assert store.add_password("alice", "s3cr3t-password") == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    store.add_password("bob", "pw", ["SCRAM-SHA-512"], iterations=8192)
    text = open(store.path).read()
    assert "s3cr3t-password" not in text
    assert oct(os.stat(store.path).st_mode & 0o777) == "0o600"
    again = CredentialStore(tmp_path)
    assert again.users() == {"alice": {"PLAIN": 4096, "SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096},
                             "bob": {"SCRAM-SHA-512": 8192}}
    assert again.check_plain("alice", "s3cr3t-password") and not again.check_plain("alice", "x")
    data = json.loads(text)
    assert set(data["users"]["alice"]["SCRAM-SHA-256"]) == {"salt", "iterations", "stored_key", "server_key"}
    # another process (the offline CLI) changes the file: the store sees it
    CredentialStore(tmp_path).delete("alice", "PLAIN")
    os.utime(store.path, ns=(1, 1))  # force a different mtime even within one clock tick
    assert not store.check_plain("alice", "s3cr3t-password")
    assert store.delete("bob") and not store.has_user("bob")
    assert not store.delete("bob")
    with pytest.raises(CredentialError, match="iterations"):
        store.add_password("x", "pw", ["SCRAM-SHA-256"], iterations=100)
    with pytest.raises(CredentialError, match="unsupported mechanism"):
        store.add_password("x", "pw", ["GSSAPI"])
    with pytest.raises(CredentialError, match="empty"):
        store.add_password("", "pw")
