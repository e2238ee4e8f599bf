"""SASL on the broker: server mechanisms (PLAIN, SCRAM-SHA-256/512) and the per-connection session.

Server mechanisms (one object per authentication, ``step(token) -> token``, ``complete``, ``username``):

* ``PlainServer``: RFC 4616; the authorization id, when given, must equal the user name (as Kafka).
* ``ScramServer``: RFC 5802/7677 without channel binding (``n,,`` GS2 header only, as Kafka). Unknown users
  get a server-first-message with a salt derived from a per-broker secret, so the answer does not tell
  whether a user exists; the exchange then fails at the proof like a wrong password. ``tokenauth``
  (delegation tokens) is refused. The nonce of the client's final message must end with the server's nonce
  (Kafka's check: librdkafka before 2.1 sends the client nonce followed by the whole server nonce).

``AuthSession`` is the authentication state of one connection on a SASL listener (``conn.auth``):

    INITIAL --SaslHandshake v1--> AUTHENTICATE --SaslAuthenticate...--> AUTHENTICATED
    INITIAL --SaslHandshake v0--> RAW (next frames are bare, size-prefixed SASL tokens) --> AUTHENTICATED
    AUTHENTICATED --SaslHandshake (same mechanism)--> AUTHENTICATE (KIP-368 re-authentication)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are accepted; anything else closes
the connection (``gate``, called by the router before a request is decoded). When
``connections.max.reauth.ms`` is set, a session expires that long after authentication; a request other than
ApiVersions / SaslHandshake / SaslAuthenticate on an expired session closes the connection, as Kafka does.
A failed authentication is logged, answered after ``connection.failed.authentication.delay.ms`` and the
connection closed.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import struct
import time
from typing import TYPE_CHECKING, Any, Callable, Literal

from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl_mechanisms import (
    SCRAM_MECHANISMS,
    SaslError,
    ScramCredential,
    credential_from_salted,
    format_server_final,
    format_server_first,
    parse_client_final,
    parse_client_first,
    parse_plain,
    server_signature,
    verify_client_proof,
)

if TYPE_CHECKING:
    from .credentials import CredentialStore

log = logging.getLogger(__name__)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_PRE_AUTH_APIS = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))
_PEEK = struct.Struct(">hh")
_SIZE = struct.Struct(">i")


class SaslAuthenticationFailed(SaslError):
    """Wrong credentials or a malformed exchange: SASL_AUTHENTICATION_FAILED (58) with this message."""


# ------------------------------------------------------------------------------------------- mechanisms

class PlainServer:
    name = "PLAIN"

    def __init__(self, store: "CredentialStore") -> None:
        self.store = store
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN authentication is already complete")
        try:
            authzid, username, password = parse_plain(bytes(token))
        except SaslError as e:
            raise SaslAuthenticationFailed(str(e)) from None
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        if not self.store.check_plain(username, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = username
        self.complete = True
        return b""


class ScramServer:
    def __init__(self, mechanism: str, store: "CredentialStore", secret: bytes,
                 randbytes: Callable[[int], bytes] = os.urandom) -> None:
        self.mech = SCRAM_MECHANISMS[mechanism]
        self.name = mechanism
        self.store = store
        self._secret = secret
        self._rand = randbytes
        self._state = 0
        self._first: Any = None
        self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None
        self.complete = False
        self.username: str | None = None

    def _fail(self) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.name}")

    def _fake_credential(self, username: str) -> ScramCredential:
        # a stable salt per unknown user, and keys that match no password
        salt = hmac.digest(self._secret, b"salt:" + username.encode("utf-8"),
                           "sha256")[:self.mech.digest_size]
        junk = hmac.digest(self._secret, b"key:" + username.encode("utf-8"), self.mech.hash_name)
        return credential_from_salted(self.mech, junk, salt, 4096)

    def step(self, token: bytes) -> bytes:
        data = bytes(token)
        try:
            if self._state == 0:
                first = parse_client_first(data)
                if first.authzid and first.authzid != first.username:
                    raise SaslAuthenticationFailed(
                        "Authentication failed: Client requested an authorization id that is different from "
                        "username")
                if first.extensions.get("tokenauth", "").lower() == "true":
                    raise SaslAuthenticationFailed(
                        "Authentication failed: delegation tokens are not supported")
                cred = self.store.scram(first.username, self.name)
                if cred is None:
                    log.debug("SCRAM: unknown user %r (answering with a decoy salt)", first.username)
                    cred = self._fake_credential(first.username)
                    self._cred = None
                else:
                    self._cred = cred
                self._first = first
                self._nonce = first.nonce + self._rand(18).hex()
                self._server_first = format_server_first(self._nonce, cred.salt, cred.iterations)
                self._state = 1
                return self._server_first.encode("utf-8")
            if self._state == 1:
                final = parse_client_final(data)
                # Kafka checks endsWith, not equality: librdkafka before 2.1 sends client nonce + server's r=
                if not final.nonce.endswith(self._nonce):
                    log.debug("SCRAM: nonce %r in the client's final message, expected %r", final.nonce,
                              self._nonce)
                    raise SaslAuthenticationFailed("Authentication failed: invalid nonce")
                if final.channel_binding != self._first.gs2_header.encode("utf-8"):
                    raise SaslAuthenticationFailed("Authentication failed: invalid channel binding")
                auth_message = f"{self._first.bare},{self._server_first},{final.without_proof}".encode()
                cred = self._cred
                if cred is None or not verify_client_proof(self.mech, cred, auth_message, final.proof):
                    raise self._fail()
                self._state = 2
                self.complete = True
                self.username = self._first.username
                return format_server_final(server_signature(self.mech, cred, auth_message)).encode("utf-8")
        except SaslAuthenticationFailed:
            self._state = 3
            raise
        except SaslError as e:
            self._state = 3
            raise SaslAuthenticationFailed(f"Authentication failed: {e}") from None
        raise SaslAuthenticationFailed("Authentication failed: unexpected SCRAM message")


def close_soon(conn: Any, delay_s: float = 0.05) -> None:
    """Close ``conn`` shortly after an answer written now, so the client reads it before the end of the
    stream (closing at once can reset the connection and lose the answer)."""
    asyncio.get_running_loop().call_later(delay_s, conn.close)


def server_mechanism(name: str, store: "CredentialStore", secret: bytes) -> PlainServer | ScramServer:
    if name == "PLAIN":
        return PlainServer(store)
    return ScramServer(name, store, secret)


# ------------------------------------------------------------------------------------------- session

INITIAL, AUTHENTICATE, RAW = "initial", "authenticate", "raw"
AUTHENTICATED, FAILED = "authenticated", "failed"


class AuthSession:
    """The SASL state of one connection (``conn.auth``)."""

    __slots__ = ("manager", "listener_name", "mechanisms", "state", "mechanism", "server", "principal",
                 "expires_at", "authenticated_once", "reauthenticating", "handshake_version")

    def __init__(self, manager: Any, listener_name: str, mechanisms: list[str]) -> None:
        self.manager = manager
        self.listener_name = listener_name
        self.mechanisms = mechanisms
        self.state = INITIAL
        self.mechanism: str | None = None
        self.server: PlainServer | ScramServer | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None   # monotonic seconds; None = never
        self.authenticated_once = False
        self.reauthenticating = False
        self.handshake_version = -1

    # ------------------------------------------------------------------------------ state queries
    @property
    def open(self) -> bool:
        """Authenticated and the session has not expired: requests pass without a look."""
        if self.state != AUTHENTICATED:
            return False
        return self.expires_at is None or time.monotonic() < self.expires_at

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    async def gate(self, conn: Any, frame: bytearray) -> list[Any] | Literal[False] | None:
        """Called by the router for every frame while the session is not open. Returns None to let the
        request through, response parts (a raw SASL token was answered) or False (close the connection)."""
        if self.state == RAW:
            return await self._raw_token(conn, frame)
        if self.state == FAILED:
            return []  # authentication failed, the connection is about to close: drop the request
        if len(frame) < 4:
            return None  # the router refuses it
        api_key, version = _PEEK.unpack_from(frame, 0)
        if api_key in _PRE_AUTH_APIS:
            return None
        if self.state == AUTHENTICATED or self.authenticated_once:
            log.warning("closing connection from %s:%d (%s): SASL session of %s expired and was not "
                        "re-authenticated (api key %d)", conn.peer[0], conn.peer[1], self.listener_name,
                        self.principal, api_key)
        else:
            log.warning("closing connection from %s:%d (%s): api key %d v%d before SASL authentication "
                        "completed", conn.peer[0], conn.peer[1], self.listener_name, api_key, version)
        return False

    # ------------------------------------------------------------------------------ handshake
    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: returns an error code (0, UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34)."""
        if self.state == AUTHENTICATED:
            # KIP-368 re-authentication: v1 only, same mechanism
            if version < 1 or mechanism != self.mechanism:
                return ErrorCode.ILLEGAL_SASL_STATE
            self.reauthenticating = True
        elif self.state != INITIAL:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            self.state = FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self.handshake_version = version
        self.server = server_mechanism(mechanism, self.manager.credentials, self.manager.secret)
        self.state = RAW if version == 0 else AUTHENTICATE
        return 0

    # ------------------------------------------------------------------------------ authenticate
    def authenticate(self, conn: Any, token: bytes) -> bytes:
        """One SaslAuthenticate step; raises SaslAuthenticationFailed (state FAILED)."""
        server = self.server
        if self.state != AUTHENTICATE or server is None:
            raise SaslError("SaslAuthenticate request received in an illegal state")
        try:
            out = server.step(token)
        except SaslAuthenticationFailed:
            self.state = FAILED
            raise
        if server.complete:
            self._complete(conn)
        return out

    def _complete(self, conn: Any) -> None:
        server = self.server
        assert server is not None and server.username is not None
        principal = "User:" + server.username
        if self.reauthenticating and principal != self.principal:
            self.state = FAILED
            raise SaslAuthenticationFailed(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}")
        self.principal = principal
        conn.principal = principal
        self.state = AUTHENTICATED
        self.server = None
        lifetime = self.session_lifetime_ms()
        self.expires_at = time.monotonic() + lifetime / 1000.0 if lifetime > 0 else None
        if self.reauthenticating:
            log.debug("%s re-authenticated with %s from %s:%d", principal, self.mechanism, *conn.peer)
        else:
            log.info("%s authenticated with SASL/%s from %s:%d on %s", principal, self.mechanism,
                     conn.peer[0],
                     conn.peer[1], self.listener_name)
        self.authenticated_once = True
        self.reauthenticating = False

    def session_lifetime_ms(self) -> int:
        return int(self.manager.reauth_ms(self.listener_name))

    def log_failure(self, conn: Any, err: BaseException) -> None:
        user = getattr(getattr(self.server, "_first", None), "username", None) \
            or getattr(self.server, "username", None)
        log.warning("failed authentication with SASL/%s from %s:%d on %s%s: %s", self.mechanism, conn.peer[0],
                    conn.peer[1], self.listener_name, f" (user {user!r})" if user else "", err)

    async def failure_delay(self) -> None:
        delay = self.manager.failed_auth_delay_ms
        if delay > 0:
            await asyncio.sleep(delay / 1000.0)

    def close_later(self, conn: Any) -> None:
        """Close the connection after the failed-authentication delay (at least 50 ms), so the answer written
        now is read before the connection ends."""
        self.state = FAILED
        close_soon(conn, max(self.manager.failed_auth_delay_ms, 50) / 1000.0)

    # ------------------------------------------------------------------------------ SaslHandshake v0
    async def _raw_token(self, conn: Any, frame: bytearray) -> Any:
        """Handshake v0: the frame is a bare SASL token, the answer a bare size-prefixed token."""
        server = self.server
        assert server is not None
        try:
            out = server.step(bytes(frame))
            if server.complete:
                self.state = AUTHENTICATE  # _complete expects it
                self._complete(conn)
        except SaslError as e:
            self.state = FAILED
            self.log_failure(conn, e)
            await self.failure_delay()
            return False  # no way to send an error in the v0 flow: close
        return [_SIZE.pack(len(out)), out]
