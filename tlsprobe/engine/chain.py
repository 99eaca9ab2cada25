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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import verification as xv

from tlsprobe.errors import UsageError
from tlsprobe.model.pubkey import public_key

SYSTEM_CAFILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                  "/etc/ssl/cert.pem")

V_OK = 0
V_UNSPECIFIED = 1
V_NOT_YET_VALID = 9
V_EXPIRED = 10
V_SELF_SIGNED = 18
V_SELF_SIGNED_IN_CHAIN = 19
V_NO_LOCAL_ISSUER = 20
V_LEAF_UNVERIFIED = 21
V_HOSTNAME_MISMATCH = 62

REASONS = {V_OK: "ok", V_UNSPECIFIED: "unspecified certificate verification error",
           V_NOT_YET_VALID: "certificate is not yet valid", V_EXPIRED: "certificate has expired",
           V_SELF_SIGNED: "self-signed certificate",
           V_SELF_SIGNED_IN_CHAIN: "self-signed certificate in certificate chain",
           V_NO_LOCAL_ISSUER: "unable to get local issuer certificate",
           V_LEAF_UNVERIFIED: "unable to verify the first certificate",
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


def _subject(name: str) -> x509.DNSName | x509.IPAddress:
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return x509.DNSName(name.rstrip(".").lower())


def _sans(leaf: x509.Certificate) -> x509.SubjectAlternativeName | None:
    try:
        return leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        return None


def _own_name(leaf: x509.Certificate) -> str | None:
    """A name the leaf claims (first SAN), to check the chain apart from the hostname."""
    san = _sans(leaf)
    if san is None:
        return None
    dns = san.get_values_for_type(x509.DNSName)
    if dns:
        return dns[0].replace("*.", "wildcard.", 1)
    ips = san.get_values_for_type(x509.IPAddress)
    return str(ips[0]) if ips else None


def _name_matches(leaf: x509.Certificate, hostname: str) -> bool:
    """RFC 6125 matching of `hostname` against the leaf's SAN (DNS, one left-most wildcard
    label; or IP address); the subject CN is never used, as in the verifier."""
    san = _sans(leaf)
    if san is None:
        return False
    subject = _subject(hostname)
    if isinstance(subject, x509.IPAddress):
        return subject.value in san.get_values_for_type(x509.IPAddress)
    host = hostname.rstrip(".").lower()
    for pattern in (d.rstrip(".").lower() for d in san.get_values_for_type(x509.DNSName)):
        if pattern == host:
            return True
        if pattern.startswith("*.") and "." in host and host.split(".", 1)[1] == pattern[2:] \
                and "*" not in pattern[2:]:
            return True
    return False


def _try(store: xv.Store, now: datetime.datetime, name: str | None, leaf: x509.Certificate,
         rest: list[x509.Certificate]) -> str | None:
    """None when the chain verifies (for `name`), else the library's reason.

    Without a name (a leaf with no subjectAltName) the chain alone is checked: the
    client-verifier path, with no extension rules on the leaf, so that only the path to an
    anchor, signatures, dates and the CA certificates count."""
    try:
        builder = xv.PolicyBuilder().store(store).time(now)
        if name is not None:
            builder.build_server_verifier(_subject(name)).verify(leaf, rest)
        else:
            builder.extension_policies(
                ca_policy=xv.ExtensionPolicy.webpki_defaults_ca(),
                ee_policy=xv.ExtensionPolicy.permit_all()).build_client_verifier().verify(
                    leaf, rest)
    except (xv.VerificationError, ValueError) as exc:
        text = str(exc) or exc.__class__.__name__
        # The library appends a repr of the certificate it was processing: drop it.
        return text.split(" (encountered processing", 1)[0]
    return None


def _self_signed(cert: x509.Certificate) -> bool:
    """Issuer is subject and the certificate's own key signed it; a signature that cannot
    be checked here (e.g. SHA-1, which this OpenSSL refuses) counts by the names alone."""
    if cert.issuer != cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(cert)
    except InvalidSignature:
        return False
    except (ValueError, TypeError):
        return True
    return True


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _may_issue(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """`issuer` names `cert`'s issuer and its key signed it; a signature that cannot be
    checked here counts by the names alone (as `_self_signed`)."""
    if issuer.subject != cert.issuer:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
    except InvalidSignature:
        return False
    except (ValueError, TypeError):
        return True
    return True


def _path(chain: list[x509.Certificate]) -> list[x509.Certificate]:
    """The path OpenSSL builds from the leaf through the certificates the server sent,
    whatever their order: each next one the issuer of the one before; it ends at a
    self-signed certificate or where the server sent no issuer."""
    path, pool = chain[:1], chain[1:]
    while not _self_signed(path[-1]):
        issuer = next((c for c in pool if _may_issue(path[-1], c)), None)
        if issuer is None:
            break
        path.append(issuer)
        pool.remove(issuer)
    return path


def _in_store(cert: x509.Certificate, anchors: tuple[x509.Certificate, ...]) -> bool:
    """The certificate itself is an anchor (same name and key), as OpenSSL looks it up."""
    for anchor in anchors:
        if anchor.subject == cert.subject:
            try:
                if public_key(anchor) == public_key(cert):
                    return True
            except (ValueError, TypeError):  # an unsupported key type cannot be compared
                continue
    return False


def _chain_code(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...],
                now: datetime.datetime) -> tuple[int, str | None]:
    """The OpenSSL-style code for a chain the verifier refused, with its own reason stated
    from the facts (None: only the library can say what is wrong): that of the path from
    the leaf through what the server sent (`_path`), as `openssl s_client` reports it."""
    chain = _path(chain)
    for cert in chain:
        subject = cert.subject.rfc4514_string() or "(empty subject)"
        if cert.not_valid_after_utc < now:
            return V_EXPIRED, f"{subject} expired {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
        if cert.not_valid_before_utc > now:
            return V_NOT_YET_VALID, (f"{subject} is valid from "
                                     f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
    last = chain[-1]
    name = last.subject.rfc4514_string() or "(empty subject)"
    if _in_store(last, anchors) or any(a.subject == last.issuer and _issued_by(last, a)
                                       for a in anchors):
        return V_UNSPECIFIED, None  # the path reaches an anchor: the library says why not
    if _self_signed(last):
        if len(chain) == 1:
            return V_SELF_SIGNED, f"{name} signed itself and is not in the trust store"
        return V_SELF_SIGNED_IN_CHAIN, (f"the server sent the root {name}, which is not in "
                                        "the trust store")
    issuer = last.issuer.rfc4514_string() or "(empty name)"
    if len(chain) == 1:   # OpenSSL's final code when the leaf's issuer is nowhere
        return V_LEAF_UNVERIFIED, (f"the server sent no issuer of {name}, and its issuer "
                                   f"{issuer} is not in the trust store")
    return V_NO_LOCAL_ISSUER, f"issuer {issuer} of {name} is not in the trust store"


NO_SAN_NOTE = ("note: the certificate has no subjectAltName (names are not checked against "
               "the subject CN)")


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _anchored_leaf(leaf: x509.Certificate, der: bytes, hostname: str | None,
                   anchors: tuple[x509.Certificate, ...],
                   now: datetime.datetime) -> ChainResult | None:
    """A self-signed leaf that is itself in the trust store is trusted, as OpenSSL trusts
    it (cryptography's verifier refuses an end-entity certificate as its own anchor)."""
    if not _self_signed(leaf) or not any(a.public_bytes(Encoding.DER) == der for a in anchors):
        return None
    code, detail = _chain_code([leaf], (), now)
    if code in (V_EXPIRED, V_NOT_YET_VALID):
        return ChainResult(code, detail)
    note = "the self-signed certificate is itself in the trust store"
    no_san = NO_SAN_NOTE if _sans(leaf) is None else None
    if hostname is None:
        return ChainResult(V_OK, _join(note, no_san))
    if _name_matches(leaf, hostname):
        return ChainResult(V_OK, note, hostname_ok=True)
    return ChainResult(V_HOSTNAME_MISMATCH, _join(f"certificate is not valid for {hostname}",
                                                  no_san), hostname_ok=False)


def verify_chain(ders: Sequence[bytes], hostname: str | None,
                 anchors: tuple[x509.Certificate, ...],
                 now: datetime.datetime | None = None) -> ChainResult:
    """Check the server's chain (leaf first) against `anchors` and `hostname`.

    The code names the first problem as OpenSSL would; its detail states that problem's
    facts. A leaf without subjectAltName is a separate note after "; " (it also means no
    host name can match), never the explanation of another code. A certificate whose key or
    signature cryptography cannot handle (an unknown curve) is code 1, never an exception."""
    try:
        return _verify_chain(ders, hostname, anchors, now)
    except (UnsupportedAlgorithm, ValueError, TypeError) as exc:
        text = " ".join(str(exc).split())[:200]
        return ChainResult(V_UNSPECIFIED, f"cannot check this certificate: {text}")


def _verify_chain(ders: Sequence[bytes], hostname: str | None,
                  anchors: tuple[x509.Certificate, ...],
                  now: datetime.datetime | None) -> ChainResult:
    now = now or datetime.datetime.now(datetime.UTC)
    if not ders:
        return ChainResult(V_UNSPECIFIED, "the server sent no certificate")
    try:
        chain = [x509.load_der_x509_certificate(d) for d in ders]
    except ValueError as exc:
        return ChainResult(V_UNSPECIFIED, f"unparsable certificate: {exc}")
    leaf, rest = chain[0], chain[1:]
    if not anchors:
        return ChainResult(V_NO_LOCAL_ISSUER, "no trust store (use --cafile)")
    anchored = _anchored_leaf(leaf, ders[0], hostname, anchors, now)
    if anchored is not None:
        return anchored
    store = xv.Store(list(anchors))
    if hostname:
        problem = _try(store, now, hostname, leaf, rest)
        if problem is None:
            return ChainResult(V_OK, hostname_ok=True)
    no_san = NO_SAN_NOTE if _sans(leaf) is None else None
    chain_problem = _try(store, now, _own_name(leaf), leaf, rest)
    if chain_problem is None:
        if hostname:
            return ChainResult(V_HOSTNAME_MISMATCH, _join(
                f"certificate is not valid for {hostname}", no_san), hostname_ok=False)
        return ChainResult(V_OK, no_san)
    code, reason = _chain_code(chain, anchors, now)
    return ChainResult(code, _join(reason or chain_problem, no_san))


def verify_with_store(ders: Sequence[bytes], hostname: str | None,
                      cafile: str | None) -> tuple[str | None, ChainResult | str]:
    """`verify_chain` against `cafile`, else the system bundle: (the trust store used, the
    result), or the reason no trust store could be used in place of the result."""
    path = cafile or default_cafile()
    if path is None:
        return None, "no trust store found (use --cafile)"
    try:
        anchors = load_trust_store(path)
    except (OSError, ValueError) as exc:
        return path, f"cannot read trust store: {exc}"
    return path, verify_chain(ders, hostname, anchors)


def check_cafile(path: str, *, contents: bool = True) -> None:
    """A usage error (before any connection) when `path` cannot serve as `--cafile`: not a
    file, or (with `contents`) unreadable or without a certificate."""
    if not os.path.isfile(path):
        raise UsageError(f"--cafile {path}: "
                         + ("is a directory" if os.path.isdir(path) else "no such file"))
    if not contents:
        return
    try:
        load_trust_store(path)
    except OSError as exc:
        raise UsageError(f"--cafile {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"--cafile {path}: no certificates found (a PEM bundle or one DER "
                         "certificate is expected)") from None
