"""TLS for SSL / SASL_SSL listeners: ``ssl.SSLContext`` from Kafka-style settings, client-certificate
principals, and local certificate generation (``moldau tls init``).

Settings (each may be given per listener as ``listener.name.<name>.<key>``):

* ``ssl.certificate.location`` (PEM certificate chain, leaf first), ``ssl.key.location`` (PEM private key),
  ``ssl.key.password`` (when the key is encrypted), ``ssl.ca.location`` (PEM CA bundle used to verify
  client certificates). These are moldau's names, as librdkafka spells them.
* Kafka's own spellings work too when the stores are PEM files: ``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location`` (one file holding the private key and the certificate chain), and
  ``ssl.truststore.type=PEM`` with ``ssl.truststore.location``; ``ssl.truststore.certificates`` (inline PEM).
  JKS and PKCS12 stores are not read (convert them: ``openssl pkcs12 -in ks.p12 -nodes``).
* ``ssl.client.auth`` = ``none`` | ``requested`` | ``required``.
* ``ssl.enabled.protocols`` (lowest listed version is the minimum), ``ssl.cipher.suites`` (OpenSSL names, TLS
  1.2 suites).
* ``ssl.principal.mapping.rules``: ``DEFAULT`` (the subject's RFC 2253 distinguished name, as Kafka) or a
  list of ``RULE:pattern/replacement/[LU]`` rules, ending optionally with ``DEFAULT``.

Certificate generation uses the ``cryptography`` package when it is installed, otherwise the ``openssl``
command; keys are EC P-256, written with mode 0600.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)


class TlsConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


_TLS_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1, "TLSV1.1": ssl.TLSVersion.TLSv1_1, "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}


def server_context(get: Callable[[str], Any], listener_name: str = "") -> ssl.SSLContext:
    """An SSLContext for a server socket; ``get(key)`` reads a (listener-scoped) config value."""
    where = f" (listener {listener_name})" if listener_name else ""
    cert = get("ssl.certificate.location")
    key = get("ssl.key.location")
    password = get("ssl.key.password")
    ks_type = (get("ssl.keystore.type") or "JKS").upper()
    ks_loc = get("ssl.keystore.location")
    if not cert and ks_loc:
        if ks_type != "PEM":
            raise TlsConfigError("ssl.keystore.location",
                                 f"ssl.keystore.type {ks_type} is not supported{where}: use PEM files "
                                 f"(ssl.certificate.location / ssl.key.location, or ssl.keystore.type=PEM)")
        cert = ks_loc
        key = key or ks_loc
    if not cert:
        raise TlsConfigError("ssl.certificate.location",
                             f"an SSL listener{where} needs ssl.certificate.location and ssl.key.location "
                             f"(PEM files; `moldau tls init` makes a local CA and broker certificate)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key or None, password or None)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError("ssl.certificate.location",
                             f"cannot load the certificate {cert} / key {key or cert}{where}: {e}") from None
    # versions
    protocols = [p.upper() for p in (get("ssl.enabled.protocols") or []) if p.upper() in _TLS_VERSIONS]
    if protocols:
        versions = sorted(_TLS_VERSIONS[p] for p in protocols)
        ctx.minimum_version = max(versions[0], ssl.TLSVersion.TLSv1_2)
        ctx.maximum_version = versions[-1]
    ciphers = get("ssl.cipher.suites") or []
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError as e:
            raise TlsConfigError("ssl.cipher.suites", f"ssl.cipher.suites{where}: {e}") from None
    # client authentication
    mode = (get("ssl.client.auth") or "none").lower()
    ca = get("ssl.ca.location")
    ts_type = (get("ssl.truststore.type") or "JKS").upper()
    ts_loc = get("ssl.truststore.location")
    ts_inline = get("ssl.truststore.certificates")
    if not ca and ts_loc:
        if ts_type != "PEM":
            raise TlsConfigError("ssl.truststore.location",
                                 f"ssl.truststore.type {ts_type} is not supported{where}: use a PEM file "
                                 f"(ssl.ca.location, or ssl.truststore.type=PEM)")
        ca = ts_loc
    if ca or ts_inline:
        try:
            if ca:
                ctx.load_verify_locations(cafile=ca)
            if ts_inline:
                ctx.load_verify_locations(cadata=ts_inline)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError("ssl.ca.location",
                                 f"cannot load the CA certificates {ca}{where}: {e}") from None
    if mode in ("required", "requested"):
        if not (ca or ts_inline):
            raise TlsConfigError("ssl.ca.location",
                                 f"ssl.client.auth={mode}{where} needs ssl.ca.location (the CA that signs "
                                 f"client certificates)")
        ctx.verify_mode = ssl.CERT_REQUIRED if mode == "required" else ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_context(*, ca_location: str | None = None, certificate_location: str | None = None,
                   key_location: str | None = None, key_password: str | None = None,
                   check_hostname: bool = True, verify: bool = True) -> ssl.SSLContext:
    """An SSLContext for a client (used by the CLI's online mode; the moldau client can use it too)."""
    ctx = ssl.create_default_context(cafile=ca_location or None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = check_hostname
    if certificate_location:
        ctx.load_cert_chain(certificate_location, key_location or None, key_password or None)
    return ctx


# ----------------------------------------------------------------------------------------- principals

_OID_SHORT = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID", "emailAddress": "EMAILADDRESS", "serialNumber": "SERIALNUMBER",
}


def _escape_rdn_value(v: str) -> str:
    out = []
    for i, ch in enumerate(v):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and (i == 0 or i == len(v) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(peercert: dict[str, Any]) -> str | None:
    """RFC 2253 form of a peer certificate's subject (most specific RDN first), as Java's X500Principal."""
    subject = peercert.get("subject") if peercert else None
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_OID_SHORT.get(k, k)}={_escape_rdn_value(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(slots=True, frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None = DEFAULT
    replacement: str
    case: str  # "", "L", "U"


_RULE = re.compile(r"\s*RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*(?:,|$)|\s*(DEFAULT)\s*(?:,|$)")


def parse_mapping_rules(text: str | list[str] | None) -> list[_Rule]:
    """Kafka's ssl.principal.mapping.rules: RULE:pattern/replacement/[LU], ..., DEFAULT."""
    if not text:
        return [_Rule(None, "", "")]
    if isinstance(text, list):
        text = ",".join(text)
    rules = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if not m or m.end() == pos:
            raise TlsConfigError("ssl.principal.mapping.rules", f"invalid rule at {text[pos:]!r}")
        if m.group(4):
            rules.append(_Rule(None, "", ""))
        else:
            pat = m.group(1).replace("\\/", "/")
            repl = re.sub(r"\$(\d+)", r"\\\1", m.group(2).replace("\\/", "/"))
            rules.append(_Rule(re.compile(pat), repl, m.group(3)))
        pos = m.end()
    return rules


def map_principal(dn: str, rules: list[_Rule]) -> str:
    for r in rules:
        if r.pattern is None:
            return dn
        m = r.pattern.fullmatch(dn)
        if m:
            name = m.expand(r.replacement)
            return name.lower() if r.case == "L" else name.upper() if r.case == "U" else name
    return dn


# ----------------------------------------------------------------------------------------- generation

@dataclass(slots=True)
class GeneratedFiles:
    ca_cert: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path
    clients: dict[str, tuple[Path, Path]]


def _have_cryptography() -> bool:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return False
    return True


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, 0o600)


def _sans(hostnames: list[str]) -> tuple[list[str], list[str]]:
    dns, ips = [], []
    for h in hostnames:
        try:
            ips.append(str(ipaddress.ip_address(h)))
        except ValueError:
            dns.append(h)
    return dns, ips


def default_hostnames() -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    try:
        fq = socket.getfqdn()
        if fq and fq not in names:
            names.append(fq)
    except OSError:  # pragma: no cover
        pass
    return names


def generate(out_dir: str | os.PathLike[str], *, hostnames: list[str] | None = None,
             clients: list[str] | None = None, days: int = 825, ca_name: str = "moldau local CA",
             reuse_ca: bool = True, backend: str = "auto") -> GeneratedFiles:
    """Write ca.pem/ca.key (reused when present and ``reuse_ca``), broker.pem/broker.key (subject
    CN=<first hostname>, SANs = hostnames) and <client>.pem/<client>.key per client name (subject CN=<name>,
    clientAuth) into ``out_dir``."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    hostnames = hostnames or default_hostnames()
    clients = clients or []
    if backend == "auto":
        backend = "cryptography" if _have_cryptography() else "openssl"
    if backend == "openssl" and shutil.which("openssl") is None:
        raise RuntimeError("neither the cryptography package nor the openssl command is available")
    gen = _CryptographyBackend() if backend == "cryptography" else _OpenSSLBackend()
    ca_cert, ca_key = out / "ca.pem", out / "ca.key"
    if not (reuse_ca and ca_cert.exists() and ca_key.exists()):
        gen.make_ca(ca_cert, ca_key, ca_name, days)
    gen.make_leaf(out / "broker.pem", out / "broker.key", ca_cert, ca_key, hostnames[0], hostnames, days,
                  server=True)
    made: dict[str, tuple[Path, Path]] = {}
    for name in clients:
        c, k = out / f"{name}.pem", out / f"{name}.key"
        gen.make_leaf(c, k, ca_cert, ca_key, name, [], days, server=False)
        made[name] = (c, k)
    return GeneratedFiles(ca_cert, ca_key, out / "broker.pem", out / "broker.key", made)


class _OpenSSLBackend:
    def _run(self, *args: str, cwd: str | None = None) -> None:
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, cwd=cwd)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {r.stderr.strip()}")

    def _key(self, path: Path) -> None:
        self._run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
        os.chmod(path, 0o600)

    def make_ca(self, cert: Path, key: Path, name: str, days: int) -> None:
        self._key(key)
        self._run("req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", str(days),
                  "-subj", "/CN=" + name.replace("/", "\\/"),
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                  "-addext", "subjectKeyIdentifier=hash")

    def make_leaf(self, cert: Path, key: Path, ca_cert: Path, ca_key: Path, cn: str, hostnames: list[str],
                  days: int, server: bool) -> None:
        self._key(key)
        with tempfile.TemporaryDirectory() as tmp:
            csr = os.path.join(tmp, "req.csr")
            ext = os.path.join(tmp, "ext.cnf")
            self._run("req", "-new", "-key", str(key), "-out", csr, "-subj", "/CN=" + cn.replace("/", "\\/"))
            dns, ips = _sans(hostnames)
            lines = ["basicConstraints=critical,CA:FALSE",
                     "keyUsage=critical,digitalSignature,keyEncipherment",
                     "extendedKeyUsage=" + ("serverAuth,clientAuth" if server else "clientAuth"),
                     "authorityKeyIdentifier=keyid", "subjectKeyIdentifier=hash"]
            if dns or ips:
                lines.append("subjectAltName=" + ",".join([f"DNS:{d}" for d in dns] + [f"IP:{i}"
                                                                                       for i in ips]))
            with open(ext, "w") as f:
                f.write("\n".join(lines) + "\n")
            serial = str(int.from_bytes(os.urandom(15), "big"))
            self._run("x509", "-req", "-in", csr, "-CA", str(ca_cert), "-CAkey", str(ca_key), "-set_serial",
                      serial, "-out", str(cert), "-days", str(days), "-sha256", "-extfile", ext)


class _CryptographyBackend:
    def __init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.x509, self.hashes, self.serialization, self.ec = x509, hashes, serialization, ec
        self.EKU, self.NameOID = ExtendedKeyUsageOID, NameOID

    def _key(self, path: Path) -> Any:
        key = self.ec.generate_private_key(self.ec.SECP256R1())
        s = self.serialization
        _write_private(path, key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
        return key

    def _name(self, cn: str) -> Any:
        return self.x509.Name([self.x509.NameAttribute(self.NameOID.COMMON_NAME, cn)])

    def make_ca(self, cert: Path, key: Path, name: str, days: int) -> None:
        import datetime

        x = self.x509
        k = self._key(key)
        now = datetime.datetime.now(datetime.timezone.utc)
        c = (x.CertificateBuilder().subject_name(self._name(name)).issuer_name(self._name(name))
             .public_key(k.public_key()).serial_number(x.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=days))
             .add_extension(x.BasicConstraints(ca=True, path_length=None), critical=True)
             .add_extension(x.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False),
                            critical=True)
             .add_extension(x.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False)
             .sign(k, self.hashes.SHA256()))
        cert.write_bytes(c.public_bytes(self.serialization.Encoding.PEM))

    def make_leaf(self, cert: Path, key: Path, ca_cert: Path, ca_key: Path, cn: str, hostnames: list[str],
                  days: int, server: bool) -> None:
        import datetime

        x = self.x509
        ca = x.load_pem_x509_certificate(ca_cert.read_bytes())
        cak = self.serialization.load_pem_private_key(ca_key.read_bytes(), None)
        k = self._key(key)
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x.CertificateBuilder().subject_name(self._name(cn)).issuer_name(ca.subject)
             .public_key(k.public_key()).serial_number(x.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=days))
             .add_extension(x.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x.KeyUsage(digital_signature=True, content_commitment=False,
                                       key_encipherment=True,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                       crl_sign=False, encipher_only=False, decipher_only=False),
                            critical=True)
             .add_extension(x.ExtendedKeyUsage([self.EKU.SERVER_AUTH, self.EKU.CLIENT_AUTH] if server
                                               else [self.EKU.CLIENT_AUTH]), critical=False)
             .add_extension(x.AuthorityKeyIdentifier.from_issuer_public_key(cak.public_key()),
                            critical=False))
        dns, ips = _sans(hostnames)
        if dns or ips:
            b = b.add_extension(x.SubjectAlternativeName([x.DNSName(d) for d in dns]
                                                         + [x.IPAddress(ipaddress.ip_address(i))
                                                            for i in ips]),
                                critical=False)
        c = b.sign(cak, self.hashes.SHA256())
        cert.write_bytes(c.public_bytes(self.serialization.Encoding.PEM))
