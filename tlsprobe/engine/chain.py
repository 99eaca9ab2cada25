"""Certificate chain verification, reported like `openssl s_client`'s "Verify return code".

The server's chain is checked with `cryptography.x509.verification` (RFC 5280 path
building with the CA/Browser Forum profile) against a trust store: `--cafile`, or the system
bundle. The outcome is a value, never an exception: a probe still reports what the server
negotiated when its certificate is untrusted. Codes and reasons are OpenSSL's X509_V_ERR
values, chosen from facts checked here (validity dates, self-signed, issuer in the store,
hostname) rather than from the library's error text, which is only added as detail.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache

from cryptography import x509
from cryptography.x509 import verification as xv

SYSTEM_CAFILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                  "/etc/ssl/cert.pem")

V_OK = 0
V_UNSPECIFIED = 1
V_NOT_YET_VALID = 9
V_EXPIRED = 10
V_SELF_SIGNED = 18
V_SELF_SIGNED_IN_CHAIN = 19
V_NO_LOCAL_ISSUER = 20
V_HOSTNAME_MISMATCH = 62

REASONS = {V_OK: "ok", V_UNSPECIFIED: "unspecified certificate verification error",
           V_NOT_YET_VALID: "certificate is not yet valid", V_EXPIRED: "certificate has expired",
           V_SELF_SIGNED: "self-signed certificate",
           V_SELF_SIGNED_IN_CHAIN: "self-signed certificate in certificate chain",
           V_NO_LOCAL_ISSUER: "unable to get local issuer certificate",
           V_HOSTNAME_MISMATCH: "hostname mismatch"}


@dataclass(frozen=True)
class ChainResult:
    """Outcome of a chain check: `code` is OpenSSL's X509_V_ERR value (0 = ok)."""

    code: int
    detail: str | None = None
    hostname_ok: bool | None = None

    @property
    def ok(self) -> bool:
        return self.code == V_OK

    @property
    def reason(self) -> str:
        return REASONS.get(self.code, "certificate verify failed")

    @property
    def message(self) -> str:
        """'0 (ok)' or '20 (unable to get local issuer certificate): detail'."""
        text = f"{self.code} ({self.reason})"
        return f"{text}: {self.detail}" if self.detail else text


def default_cafile() -> str | None:
    """The system trust bundle, when there is one."""
    return next((p for p in SYSTEM_CAFILES if os.path.isfile(p)), None)


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> tuple[x509.Certificate, ...]:
    with open(path, "rb") as fh:
        data = fh.read()
    certs: list[x509.Certificate] = []
    marker = b"-----BEGIN CERTIFICATE-----"
    for block in data.split(marker)[1:]:  # one bad certificate must not hide the others
        try:
            with warnings.catch_warnings():  # e.g. a negative serial in a system root
                warnings.simplefilter("ignore")
                certs.extend(x509.load_pem_x509_certificates(marker + block))
        except ValueError:
            continue
    if not certs and data and marker not in data:
        try:
            certs.append(x509.load_der_x509_certificate(data))
        except ValueError:
            pass
    return tuple(certs)


def load_trust_store(path: str | os.PathLike[str]) -> tuple[x509.Certificate, ...]:
    """Every certificate in a PEM bundle (or one DER file). ValueError when none is there;
    OSError when the file cannot be read."""
    path = os.fspath(path)
    certs = _load(path, os.path.getmtime(path))
    if not certs:
        raise ValueError(f"{path}: no certificates found")
    return certs


def _subject(name: str) -> xv.DNSName | xv.IPAddress:
    try:
        return xv.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return xv.DNSName(name.rstrip(".").lower())


def _own_name(leaf: x509.Certificate) -> str | None:
    """A name the leaf claims (first SAN), to check the chain apart from the hostname."""
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        return None
    dns = san.get_values_for_type(x509.DNSName)
    if dns:
        return dns[0].replace("*.", "wildcard.", 1)
    ips = san.get_values_for_type(x509.IPAddress)
    return str(ips[0]) if ips else None


def _try(store: xv.Store, now: datetime.datetime, name: str, leaf: x509.Certificate,
         rest: list[x509.Certificate]) -> str | None:
    """None when the chain verifies for `name`, else the library's reason."""
    try:
        verifier = xv.PolicyBuilder().store(store).time(now).build_server_verifier(_subject(name))
        verifier.verify(leaf, rest)
    except (xv.VerificationError, ValueError) as exc:
        text = str(exc) or exc.__class__.__name__
        # The library appends a repr of the certificate it was processing: drop it.
        return text.split(" (encountered processing", 1)[0]
    return None


def _chain_code(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...],
                now: datetime.datetime) -> int:
    """The OpenSSL-style code for a chain the verifier refused."""
    for cert in chain:
        if cert.not_valid_after_utc < now:
            return V_EXPIRED
        if cert.not_valid_before_utc > now:
            return V_NOT_YET_VALID
    anchor_names = {a.subject for a in anchors}
    last = chain[-1]
    if last.issuer in anchor_names or last.subject in anchor_names:
        return V_UNSPECIFIED
    if last.issuer == last.subject:
        return V_SELF_SIGNED if len(chain) == 1 else V_SELF_SIGNED_IN_CHAIN
    return V_NO_LOCAL_ISSUER


def verify_chain(ders: list[bytes], hostname: str | None,
                 anchors: tuple[x509.Certificate, ...],
                 now: datetime.datetime | None = None) -> ChainResult:
    """Check the server's chain (leaf first) against `anchors` and `hostname`."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if not ders:
        return ChainResult(V_UNSPECIFIED, "the server sent no certificate")
    try:
        chain = [x509.load_der_x509_certificate(d) for d in ders]
    except ValueError as exc:
        return ChainResult(V_UNSPECIFIED, f"unparsable certificate: {exc}")
    leaf, rest = chain[0], chain[1:]
    if not anchors:
        return ChainResult(V_NO_LOCAL_ISSUER, "no trust store (use --cafile)")
    store = xv.Store(list(anchors))
    if hostname:
        problem = _try(store, now, hostname, leaf, rest)
        if problem is None:
            return ChainResult(V_OK, hostname_ok=True)
    own = _own_name(leaf)
    chain_problem = _try(store, now, own, leaf, rest) if own else \
        "the certificate has no subjectAltName"
    if chain_problem is None:
        if hostname:
            return ChainResult(V_HOSTNAME_MISMATCH, f"certificate is not valid for {hostname}",
                               hostname_ok=False)
        return ChainResult(V_OK)
    return ChainResult(_chain_code(chain, anchors, now), chain_problem)
