"""The broker's user credential store: ``<data-dir>/__moldau_credentials.json`` (mode 0600).

Per user and mechanism:

* SCRAM-SHA-256 / SCRAM-SHA-512: salt, iterations, StoredKey and ServerKey (RFC 5802) -- what Kafka keeps
  in its metadata log. The password is never stored, and the salted password is not kept either.
* PLAIN: a salted PBKDF2-HMAC-SHA-256 hash of the password (salt, iterations, hash). Kafka itself takes PLAIN
  users from a JAAS file with clear-text passwords; moldau keeps only the hash.

The file is written atomically (temp file, fsync, rename, directory fsync). The broker re-reads it when its
modification time changes, so ``moldau users add --data-dir`` takes effect on a running broker too. Online
changes go through AlterUserScramCredentials (SCRAM only; the Kafka protocol has no request for PLAIN
credentials).

    store = CredentialStore(data_dir)
    store.add_password("alice", "secret")                      # PLAIN + both SCRAM mechanisms
    store.add_password("bob", "pw", mechanisms=["SCRAM-SHA-512"], iterations=8192)
    store.scram("alice", "SCRAM-SHA-256") -> ScramCredential | None
    store.check_plain("alice", "secret") -> bool
    store.users() -> {name: {mechanism: iterations}}
    store.delete("alice") / store.delete("alice", "PLAIN")
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading
from typing import Any, Iterable

from moldau.log.checkpoint import atomic_write
from moldau.protocol.sasl_mechanisms import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    credential_from_salted,
    new_credential,
)

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "__moldau_credentials.json"
PLAIN_ITERATIONS = 4096
_FORMAT_VERSION = 1


class CredentialError(ValueError):
    """A credential that cannot be stored (bad mechanism, iterations, user name)."""


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _unb64(s: str) -> bytes:
    return base64.b64decode(s.encode("ascii"))


def plain_hash(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations, 32)


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
                              f"got {iterations}")


def check_user(name: str) -> None:
    if not name:
        raise CredentialError("user name must not be empty")


class CredentialStore:
    """Users and their credentials, persisted in one JSON file in the data directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.fspath(data_dir), CREDENTIALS_FILE)
        self._users: dict[str, dict[str, dict[str, Any]]] = {}
        self._mtime: int | None = None
        self._lock = threading.Lock()
        self.reload(force=True)

    # ---------------------------------------------------------------------------------------- file
    def reload(self, force: bool = False) -> bool:
        """Re-read the file when it changed (or always with ``force``). Returns whether it was read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._users or force:
                self._users = {}
            self._mtime = None
            return False
        if not force and st.st_mtime_ns == self._mtime:
            return False
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            users = data.get("users", {})
            if not isinstance(users, dict):
                raise ValueError("'users' is not an object")
        except (OSError, ValueError) as e:
            log.error("cannot read the credential store %s: %s (keeping the previous users)", self.path, e)
            return False
        self._users = users
        self._mtime = st.st_mtime_ns
        return True

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        data = json.dumps({"version": _FORMAT_VERSION, "users": self._users}, indent=1, sort_keys=True)
        atomic_write(self.path, data.encode("utf-8"), mode=0o600)
        try:
            self._mtime = os.stat(self.path).st_mtime_ns
        except OSError:  # pragma: no cover
            self._mtime = None

    # ---------------------------------------------------------------------------------------- queries
    def users(self) -> dict[str, dict[str, int]]:
        """{user: {mechanism: iterations}}, sorted by user."""
        self.reload()
        return {u: {m: int(c.get("iterations", 0)) for m, c in sorted(creds.items())}
                for u, creds in sorted(self._users.items())}

    def has_user(self, name: str) -> bool:
        self.reload()
        return name in self._users

    def scram(self, name: str, mechanism: str) -> ScramCredential | None:
        self.reload()
        c = self._users.get(name, {}).get(mechanism)
        if c is None or mechanism not in SCRAM_MECHANISMS:
            return None
        try:
            return ScramCredential(_unb64(c["salt"]), int(c["iterations"]), _unb64(c["stored_key"]),
                                   _unb64(c["server_key"]))
        except (KeyError, ValueError, TypeError):
            log.error("credential store %s: the %s credential of %r is damaged", self.path, mechanism, name)
            return None

    def check_plain(self, name: str, password: str) -> bool:
        self.reload()
        c = self._users.get(name, {}).get("PLAIN")
        if c is None:
            return False
        try:
            expected = _unb64(c["hash"])
            got = plain_hash(password, _unb64(c["salt"]), int(c["iterations"]))
        except (KeyError, ValueError, TypeError):
            log.error("credential store %s: the PLAIN credential of %r is damaged", self.path, name)
            return False
        return hmac.compare_digest(expected, got)

    # ---------------------------------------------------------------------------------------- changes
    def add_password(self, name: str, password: str, mechanisms: Iterable[str] | None = None, *,
                     iterations: int = DEFAULT_ITERATIONS) -> list[str]:
        """Set the password of ``name`` for ``mechanisms`` (default: PLAIN and both SCRAM). Returns them."""
        check_user(name)
        if not password:
            raise CredentialError("password must not be empty")
        check_iterations(iterations)
        mechs = [m.upper() for m in (mechanisms or MECHANISMS)]
        for m in mechs:
            if m not in MECHANISMS:
                raise CredentialError(f"unsupported mechanism {m!r} (supported: {', '.join(MECHANISMS)})")
        with self._lock:
            self.reload()
            entry = self._users.setdefault(name, {})
            for m in mechs:
                if m == "PLAIN":
                    salt = os.urandom(16)
                    entry[m] = {"salt": _b64(salt), "iterations": PLAIN_ITERATIONS,
                                "hash": _b64(plain_hash(password, salt, PLAIN_ITERATIONS))}
                else:
                    cred = new_credential(SCRAM_MECHANISMS[m], password, iterations=iterations)
                    entry[m] = self._scram_json(cred)
            self._save()
        return mechs

    def upsert_scram_salted(self, name: str, mechanism: str, iterations: int, salt: bytes,
                            salted_password: bytes) -> None:
        """AlterUserScramCredentials' upsertion: the client sends the salted password, we keep the keys."""
        check_user(name)
        check_iterations(iterations)
        mech = SCRAM_MECHANISMS.get(mechanism)
        if mech is None:
            raise CredentialError(f"unsupported SCRAM mechanism {mechanism!r}")
        if not salt or not salted_password:
            raise CredentialError("salt and salted password must not be empty")
        cred = credential_from_salted(mech, salted_password, salt, iterations)
        with self._lock:
            self.reload()
            self._users.setdefault(name, {})[mechanism] = self._scram_json(cred)
            self._save()

    def delete(self, name: str, mechanism: str | None = None) -> bool:
        """Delete one mechanism's credential (or the whole user). Returns whether something was deleted."""
        with self._lock:
            self.reload()
            entry = self._users.get(name)
            if entry is None:
                return False
            if mechanism is None:
                del self._users[name]
            else:
                if mechanism not in entry:
                    return False
                del entry[mechanism]
                if not entry:
                    del self._users[name]
            self._save()
            return True

    def apply(self, changes: list[tuple[str, str, Any]]) -> None:
        """Apply several changes at once (one write): ("delete", user, mechanism) or
        ("upsert", user, (mechanism, iterations, salt, salted_password))."""
        with self._lock:
            self.reload()
            for kind, name, arg in changes:
                if kind == "delete":
                    entry = self._users.get(name)
                    if entry is not None:
                        entry.pop(arg, None)
                        if not entry:
                            del self._users[name]
                else:
                    mechanism, iterations, salt, salted = arg
                    cred = credential_from_salted(SCRAM_MECHANISMS[mechanism], salted, salt, iterations)
                    self._users.setdefault(name, {})[mechanism] = self._scram_json(cred)
            self._save()

    @staticmethod
    def _scram_json(cred: ScramCredential) -> dict[str, Any]:
        return {"salt": _b64(cred.salt), "iterations": cred.iterations, "stored_key": _b64(cred.stored_key),
                "server_key": _b64(cred.server_key)}
