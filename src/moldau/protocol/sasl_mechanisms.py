"""SASL mechanisms PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), sans-I/O.

Shared by the broker (``moldau.broker.security.sasl``, the server state machines) and the client (the client
state machines below): message formatting and parsing, key derivation, proofs and signatures. Bytes in, bytes
out; no sockets, no clocks. Randomness (client nonces) is injectable.

Kafka's choices, followed here:

* Passwords are used as their UTF-8 bytes (Kafka's ``ScramFormatter.normalize`` does no SASLprep).
* Channel binding is never used: the GS2 header is ``n,,`` or ``n,a=<authzid>,``; ``y`` and ``p=`` are
refused.
  The authorization id, when given, must equal the user name.
* User names are escaped in SCRAM messages as ``saslname`` (``=`` -> ``=3D``, ``,`` -> ``=2C``).
* Iterations: at least 4096 (RFC 7677 and Kafka's minimum), at most 16384 (Kafka's maximum).

Client use (one object per authentication)::

    mech = client_mechanism("SCRAM-SHA-256", "alice", "secret")
    token = mech.step(None)            # first client message
    while not mech.complete:
        token = mech.step(server_token)  # -> next client message, b"" / None when done
    # raises SaslError when the server's messages are wrong (bad nonce, bad server signature, e=...)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from typing import Callable

__all__ = [
    "SaslError", "SCRAM_MECHANISMS", "MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "DEFAULT_ITERATIONS",
    "ScramCredential", "ScramMechanism", "scram_mechanism", "salted_password", "credential_from_salted",
    "new_credential", "escape_saslname", "unescape_saslname", "parse_attributes", "ClientFirst",
    "ServerFirst",
    "ClientFinal", "parse_client_first", "parse_server_first", "parse_client_final", "parse_server_final",
    "plain_message", "parse_plain", "PlainClient", "ScramClient", "client_mechanism",
    "SCRAM_MECHANISM_CODES", "scram_mechanism_code", "scram_mechanism_name",
]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class SaslError(Exception):
    """A SASL exchange failed (bad message, bad credentials, bad server signature)."""


@dataclass(slots=True, frozen=True)
class ScramMechanism:
    name: str          # "SCRAM-SHA-256"
    hash_name: str     # hashlib name
    digest_size: int
    code: int          # ScramMechanism code in Describe/AlterUserScramCredentials (1, 2)

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)


SCRAM_MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", "sha256", 32, 1),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", "sha512", 64, 2),
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISM_CODES = {m.code: m.name for m in SCRAM_MECHANISMS.values()}


def scram_mechanism(name: str) -> ScramMechanism:
    try:
        return SCRAM_MECHANISMS[name.upper()]
    except KeyError:
        raise SaslError(f"unsupported SCRAM mechanism {name!r}") from None


def scram_mechanism_code(name: str) -> int:
    return scram_mechanism(name).code


def scram_mechanism_name(code: int) -> str | None:
    return SCRAM_MECHANISM_CODES.get(code)


# ------------------------------------------------------------------------------------------------ keys

@dataclass(slots=True, frozen=True)
class ScramCredential:
    """What a server stores for one user and mechanism (never the password)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salted_password(mech: ScramMechanism, password: str | bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) = PBKDF2-HMAC(H) with the hash's output size."""
    pw = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mech.hash_name, pw, salt, iterations, mech.digest_size)


def credential_from_salted(
    mech: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    client_key = mech.hmac(salted, b"Client Key")
    return ScramCredential(salt, iterations, mech.h(client_key), mech.hmac(salted, b"Server Key"))


def new_credential(mech: ScramMechanism, password: str | bytes, *, iterations: int = DEFAULT_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    if salt is None:
        salt = os.urandom(mech.digest_size)
    return credential_from_salted(mech, salted_password(mech, password, salt, iterations), salt, iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise SaslError(f"invalid base64 in {what}") from None


# ------------------------------------------------------------------------------------------------ messages

def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


_BAD_ESCAPE = re.compile(r"=(?!3D|2C)")


def unescape_saslname(name: str) -> str:
    if _BAD_ESCAPE.search(name):
        raise SaslError(f"invalid saslname {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


_PRINTABLE_NONCE = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")  # printable ASCII except ','


def parse_attributes(text: str) -> list[tuple[str, str]]:
    """'a=1,b=2' -> [('a','1'), ('b','2')]; every attribute is one letter (extensions may be longer)."""
    out = []
    for part in text.split(","):
        k, sep, v = part.partition("=")
        if not sep:
            raise SaslError(f"invalid SCRAM attribute {part!r}")
        if not k:
            raise SaslError(f"invalid SCRAM attribute {part!r}")
        out.append((k, v))
    return out


@dataclass(slots=True)
class ClientFirst:
    gs2_header: str          # "n,," or "n,a=authzid,"
    authzid: str             # "" when absent
    username: str            # unescaped
    nonce: str
    extensions: dict[str, str]
    bare: str                # client-first-message-bare (for the AuthMessage)


@dataclass(slots=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int
    text: str


@dataclass(slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def parse_client_first(data: bytes) -> ClientFirst:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("client-first-message is not UTF-8") from None
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise SaslError("invalid client-first-message")
    cb, authz, bare = parts
    if cb != "n":
        # 'y' (client supports channel binding, thinks the server does not) and 'p=' (binding) are refused
        raise SaslError("channel binding is not supported")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise SaslError("invalid authzid in client-first-message")
        authzid = unescape_saslname(authz[2:])
    attrs = parse_attributes(bare)
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        if attrs and attrs[0][0] == "m":
            raise SaslError("SCRAM mandatory extensions are not supported")
        raise SaslError("invalid client-first-message")
    username = unescape_saslname(attrs[0][1])
    nonce = attrs[1][1]
    if not username or not nonce or not _PRINTABLE_NONCE.match(nonce):
        raise SaslError("invalid client-first-message")
    extensions = dict(attrs[2:])
    return ClientFirst(f"{cb},{authz},", authzid, username, nonce, extensions, bare)


def format_client_first(username: str, nonce: str, authzid: str = "",
                        extensions: dict[str, str] | None = None) -> tuple[str, str]:
    """-> (gs2 header, client-first-message-bare)."""
    gs2 = f"n,a={escape_saslname(authzid)}," if authzid else "n,,"
    bare = f"n={escape_saslname(username)},r={nonce}"
    for k, v in (extensions or {}).items():
        bare += f",{k}={v}"
    return gs2, bare


def format_server_first(nonce: str, salt: bytes, iterations: int) -> str:
    return f"r={nonce},s={_b64(salt)},i={iterations}"


def parse_server_first(data: bytes) -> ServerFirst:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("server-first-message is not UTF-8") from None
    attrs = parse_attributes(text)
    if attrs and attrs[0][0] == "e":
        raise SaslError(f"server error: {attrs[0][1]}")
    if len(attrs) < 3 or [a[0] for a in attrs[:3]] != ["r", "s", "i"]:
        if attrs and attrs[0][0] == "m":
            raise SaslError("SCRAM mandatory extensions are not supported")
        raise SaslError("invalid server-first-message")
    try:
        iterations = int(attrs[2][1])
    except ValueError:
        raise SaslError("invalid iteration count in server-first-message") from None
    return ServerFirst(attrs[0][1], _unb64(attrs[1][1], "salt"), iterations, text)


def parse_client_final(data: bytes) -> ClientFinal:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("client-final-message is not UTF-8") from None
    idx = text.rfind(",p=")
    if idx < 0:
        raise SaslError("invalid client-final-message: no proof")
    without_proof = text[:idx]
    attrs = parse_attributes(without_proof)
    if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
        raise SaslError("invalid client-final-message")
    return ClientFinal(_unb64(attrs[0][1], "channel binding"), attrs[1][1],
                       _unb64(text[idx + 3:], "proof"), without_proof)


def format_server_final(server_signature: bytes) -> str:
    return f"v={_b64(server_signature)}"


def parse_server_final(data: bytes) -> bytes:
    """-> the server signature; SaslError for 'e=...' or a malformed message."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("server-final-message is not UTF-8") from None
    attrs = parse_attributes(text)
    if attrs and attrs[0][0] == "e":
        raise SaslError(f"server error: {attrs[0][1]}")
    if not attrs or attrs[0][0] != "v":
        raise SaslError("invalid server-final-message")
    return _unb64(attrs[0][1], "server signature")


def client_proof(mech: ScramMechanism, salted: bytes, auth_message: bytes) -> tuple[bytes, bytes]:
    """-> (client proof, expected server signature)."""
    client_key = mech.hmac(salted, b"Client Key")
    stored_key = mech.h(client_key)
    signature = mech.hmac(stored_key, auth_message)
    server_key = mech.hmac(salted, b"Server Key")
    return _xor(client_key, signature), mech.hmac(server_key, auth_message)


def verify_client_proof(
    mech: ScramMechanism, cred: ScramCredential, auth_message: bytes, proof: bytes
) -> bool:
    if len(proof) != mech.digest_size:
        return False
    signature = mech.hmac(cred.stored_key, auth_message)
    client_key = _xor(proof, signature)
    return hmac.compare_digest(mech.h(client_key), cred.stored_key)


def server_signature(mech: ScramMechanism, cred: ScramCredential, auth_message: bytes) -> bytes:
    return mech.hmac(cred.server_key, auth_message)


# ------------------------------------------------------------------------------------------------ PLAIN

def plain_message(username: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\x00{username}\x00{password}".encode("utf-8")


def parse_plain(data: bytes) -> tuple[str, str, str]:
    """-> (authzid, username, password); SaslError when malformed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("PLAIN message is not UTF-8") from None
    parts = text.split("\x00")
    if len(parts) != 3:
        raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
    authzid, username, password = parts
    if not username:
        raise SaslError("Authentication failed: username not specified")
    if not password:
        raise SaslError("Authentication failed: password not specified")
    return authzid, username, password


# ------------------------------------------------------------------------------------------------ clients

class PlainClient:
    """Client side of PLAIN: one message, no answer expected."""

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        self._msg = plain_message(username, password, authzid)
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        if self.complete:
            return None
        self.complete = True
        return self._msg


class ScramClient:
    """Client side of SCRAM-SHA-256/512: first message, final message, server signature check."""

    def __init__(self, mechanism: str, username: str, password: str, *, authzid: str = "",
                 nonce: str | None = None, extensions: dict[str, str] | None = None,
                 randbytes: Callable[[int], bytes] = os.urandom) -> None:
        self.mech = scram_mechanism(mechanism)
        self.name = self.mech.name
        self.username = username
        self.password = password
        self.nonce = nonce or base64.b64encode(randbytes(24)).decode("ascii").replace(",", "-")
        self.gs2, self.bare = format_client_first(username, self.nonce, authzid, extensions)
        self._expected_signature: bytes | None = None
        self._state = 0
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            self._state = 1
            return (self.gs2 + self.bare).encode("utf-8")
        if self._state == 1:
            if challenge is None:
                raise SaslError("no server-first-message")
            sf = parse_server_first(challenge)
            if not sf.nonce.startswith(self.nonce) or len(sf.nonce) <= len(self.nonce):
                raise SaslError("server nonce does not extend the client nonce")
            if sf.iterations < MIN_ITERATIONS:
                raise SaslError(f"iteration count {sf.iterations} is below the minimum {MIN_ITERATIONS}")
            salted = salted_password(self.mech, self.password, sf.salt, sf.iterations)
            cb = base64.b64encode(self.gs2.encode("utf-8")).decode("ascii")
            without_proof = f"c={cb},r={sf.nonce}"
            auth_message = f"{self.bare},{sf.text},{without_proof}".encode("utf-8")
            proof, self._expected_signature = client_proof(self.mech, salted, auth_message)
            self._state = 2
            return f"{without_proof},p={_b64(proof)}".encode("utf-8")
        if self._state == 2:
            if challenge is None:
                raise SaslError("no server-final-message")
            sig = parse_server_final(challenge)
            assert self._expected_signature is not None
            if not hmac.compare_digest(sig, self._expected_signature):
                raise SaslError("invalid server signature")
            self._state = 3
            self.complete = True
            return None
        return None


def client_mechanism(name: str, username: str, password: str, **kw: object) -> PlainClient | ScramClient:
    """The client state machine for ``name`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
    up = name.upper()
    if up == "PLAIN":
        return PlainClient(username, password, str(kw.get("authzid", "")))
    if up in SCRAM_MECHANISMS:
        return ScramClient(up, username, password, **kw)  # type: ignore[arg-type]
    raise SaslError(f"unsupported SASL mechanism {name!r}")
