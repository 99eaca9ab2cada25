"""Certificate chain verification, reported like `openssl s_client`'s "Verify return code".

The server's chain is checked with `cryptography.x509.verification` (RFC 5280 path
building with the CA/Browser Forum profile, relaxed where OpenSSL accepts what it refuses: a
CA certificate without keyUsage or authorityKeyIdentifier, a leaf without
authorityKeyIdentifier; `_chain_policies`) against a trust store: `--cafile`, or the system
bundle. The outcome is a value, never an exception: a probe still reports what the server
negotiated when its certificate is untrusted. Codes and reasons are OpenSSL's X509_V_ERR
values, chosen from facts checked here (validity dates, self-signed, issuer in the store,
hostname) rather than from the library's error text, which is only added as detail.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import stat
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import verification as xv
from cryptography.x509.oid import ExtendedKeyUsageOID

from tlsprobe.engine.chainpath import MAX_PATH, anchors_of, follow, self_signed
from tlsprobe.errors import UsageError

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
V_CA_MD_TOO_WEAK = 68

REASONS = {V_OK: "ok", V_UNSPECIFIED: "unspecified certificate verification error",
           V_NOT_YET_VALID: "certificate is not yet valid", V_EXPIRED: "certificate has expired",
           V_SELF_SIGNED: "self-signed certificate",
           V_SELF_SIGNED_IN_CHAIN: "self-signed certificate in certificate chain",
           V_NO_LOCAL_ISSUER: "unable to get local issuer certificate",
           V_LEAF_UNVERIFIED: "unable to verify the first certificate",
           V_HOSTNAME_MISMATCH: "hostname mismatch",
           V_CA_MD_TOO_WEAK: "CA signature digest algorithm too weak"}


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


#: the largest trust store read (the system bundle is about 220 kB): more is no trust store,
#: and a device such as /dev/zero must not be read without end
MAX_TRUST_STORE = 64 * 1024 * 1024


class TrustStoreTooLarge(ValueError):
    """The file holds more than MAX_TRUST_STORE bytes."""


@lru_cache(maxsize=8)
def _load(path: str, stamp: tuple[float, int, int]) -> tuple[x509.Certificate, ...]:
    """The certificates of `path`; `stamp` (mtime, inode, device) tells a changed file, and
    a pipe (`--cafile <(cat a.pem b.pem)`, which can be read once) by its inode alone."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_TRUST_STORE + 1)
    if len(data) > MAX_TRUST_STORE:
        raise TrustStoreTooLarge(f"over {MAX_TRUST_STORE // 2**20} MiB: not a trust store")
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
    st = os.stat(path)
    certs = _load(path, (st.st_mtime if stat.S_ISREG(st.st_mode) else 0.0, st.st_ino,
                         st.st_dev))
    if not certs:
        raise ValueError(f"{path}: no certificates found")
    return certs


def _dns_form(name: str) -> str:
    """A host name as certificates hold it: lower case, no final dot, and a U-label as the
    A-label the server_name extension sends (IDNA, wire/extensions.py); ValueError when it
    has none."""
    name = name.rstrip(".").lower()
    if name.isascii():
        return name
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"{name} has no IDNA form ({exc})") from None


def _subject(name: str) -> x509.DNSName | x509.IPAddress:
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return x509.DNSName(_dns_form(name))


def _sans(leaf: x509.Certificate) -> x509.SubjectAlternativeName | None:
    try:
        return leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        return None


def _name_matches(leaf: x509.Certificate, hostname: str) -> bool:
    """RFC 6125 matching of `hostname` against the leaf's SAN (DNS, one left-most wildcard
    label; or IP address); the subject CN is never used, as in the verifier."""
    san = _sans(leaf)
    if san is None:
        return False
    try:
        subject = _subject(hostname)
    except ValueError:   # no IDNA form, or a name the library's DNSName refuses
        return False
    if isinstance(subject, x509.IPAddress):
        return subject.value in san.get_values_for_type(x509.IPAddress)
    host = subject.value
    for pattern in (d.rstrip(".").lower() for d in san.get_values_for_type(x509.DNSName)):
        if pattern == host:
            return True
        if pattern.startswith("*.") and "." in host and host.split(".", 1)[1] == pattern[2:] \
                and "*" not in pattern[2:]:
            return True
    return False


_EKU_REFUSED = "required EKU not found"


def _server_eku(policy: xv.Policy, cert: x509.Certificate,
                ext: x509.ExtendedKeyUsage | None) -> None:
    """A leaf's extendedKeyUsage, when present, must allow serverAuth (as the server
    verifier requires)."""
    if ext is not None and ExtendedKeyUsageOID.SERVER_AUTH not in ext \
            and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in ext:
        raise ValueError(_EKU_REFUSED)


def _signs_certificates(policy: xv.Policy, cert: x509.Certificate,
                        ext: x509.KeyUsage | None) -> None:
    """A CA certificate's keyUsage, when present, must allow keyCertSign (RFC 5280
    4.2.1.3); absent, it allows every use, as OpenSSL reads it."""
    if ext is not None and not ext.key_cert_sign:
        raise ValueError("keyUsage of a CA certificate without keyCertSign")


def _chain_policies(named: bool) -> tuple[xv.ExtensionPolicy, xv.ExtensionPolicy]:
    """The server verifier's rules (CA certificates, leaf), as OpenSSL and the clients
    built on it apply them: a CA certificate needs basicConstraints CA:TRUE, but neither
    a keyUsage (when present it must allow keyCertSign) nor an authorityKeyIdentifier, and
    a leaf no authorityKeyIdentifier (the CA/Browser Forum profile the library defaults to
    asks all three: a private CA made by `openssl req -x509`, which OpenSSL, curl and
    browsers accept, was 'untrusted'). An EKU, in the leaf or a CA certificate, must allow
    serverAuth (the client verifier's own rule asks clientAuth). Without a name (`named`
    false) the leaf's subjectAltName may hold anything (or be absent)."""
    agnostic = xv.Criticality.AGNOSTIC
    ca = (xv.ExtensionPolicy.webpki_defaults_ca()
          .may_be_present(x509.ExtendedKeyUsage, agnostic, _server_eku)
          .may_be_present(x509.KeyUsage, agnostic, _signs_certificates)
          .may_be_present(x509.AuthorityKeyIdentifier, agnostic, None))
    ee = (xv.ExtensionPolicy.webpki_defaults_ee()
          .may_be_present(x509.ExtendedKeyUsage, agnostic, _server_eku)
          .may_be_present(x509.AuthorityKeyIdentifier, agnostic, None))
    if not named:
        ee = ee.may_be_present(x509.SubjectAlternativeName, agnostic, None)
    return ca, ee


def _try(store: xv.Store, now: datetime.datetime, name: str | None, leaf: x509.Certificate,
         rest: list[x509.Certificate]) -> str | None:
    """None when the chain verifies (for `name`), else the library's reason.

    Without a name the chain alone is checked: the path to an anchor, signatures, dates,
    the CA certificates and the leaf's extensions as for a server, but not its names
    (which need not be names the library can parse or match: a partial wildcard, an
    address written as a DNS name, an underscore)."""
    try:
        ca, ee = _chain_policies(name is not None)
        builder = xv.PolicyBuilder().store(store).time(now).max_chain_depth(
            MAX_PATH).extension_policies(ca_policy=ca, ee_policy=ee)
        if name is not None:
            builder.build_server_verifier(_subject(name)).verify(leaf, rest)
        else:
            builder.build_client_verifier().verify(leaf, rest)
    except (xv.VerificationError, ValueError) as exc:
        text = str(exc) or exc.__class__.__name__
        # The library appends a repr of the certificate it was processing: drop it; and says
        # our validator's refusal in its own words: say it as the server verifier does.
        text = text.split(" (encountered processing", 1)[0]
        return "validation failed: " + _EKU_REFUSED if text.endswith(_EKU_REFUSED) else text
    return None


def _weak_signature(path: list[x509.Certificate]) -> str | None:
    """The first certificate of the path signed with MD5 or SHA-1, which the verifier
    refuses (a self-signed root's own signature does not count), said so; None: none."""
    for cert in path:
        if self_signed(cert):
            continue
        try:
            algorithm = cert.signature_hash_algorithm
        except UnsupportedAlgorithm:
            continue
        if isinstance(algorithm, (hashes.MD5, hashes.SHA1)):
            subject = cert.subject.rfc4514_string() or "(empty subject)"
            name = "MD5" if isinstance(algorithm, hashes.MD5) else "SHA-1"
            return f"{subject} is signed with {name}, which the verifier refuses"
    return None


def _dates(certs: list[x509.Certificate], now: datetime.datetime,
           where: str = "") -> tuple[int, str] | None:
    """The first of `certs` outside its validity period, as a code and its reason."""
    for cert in certs:
        subject = (cert.subject.rfc4514_string() or "(empty subject)") + where
        if cert.not_valid_after_utc < now:
            return V_EXPIRED, f"{subject} expired {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
        if cert.not_valid_before_utc > now:
            return V_NOT_YET_VALID, (f"{subject} is valid from "
                                     f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
    return None


def _chain_code(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...],
                now: datetime.datetime) -> tuple[int, str | None]:
    """The OpenSSL-style code for a chain the verifier refused, with its own reason stated
    from the facts (None: only the library can say what is wrong). The facts are those of
    the path from the leaf (chainpath.follow), as OpenSSL builds it: a certificate the
    server sends besides it (expired, self-signed, in any order) is not the problem; the
    trust store's root the path reaches is part of it (its dates count)."""
    path = [chain[i] for i in follow(chain).indexes]
    dated = _dates(path, now)
    if dated is not None:
        return dated
    last = path[-1]
    name = last.subject.rfc4514_string() or "(empty subject)"
    roots = anchors_of(last, anchors)
    if roots:
        stale = [_dates([root], now, " (in the trust store)") for root in roots]
        if all(stale):
            return stale[0] or (V_UNSPECIFIED, None)
        weak = _weak_signature(path)
        if weak is not None:
            return V_CA_MD_TOO_WEAK, weak
        return V_UNSPECIFIED, None  # the path reaches an anchor: the library says why not
    if self_signed(last):
        if len(path) == 1:
            return V_SELF_SIGNED, f"{name} signed itself and is not in the trust store"
        return V_SELF_SIGNED_IN_CHAIN, (f"the server sent the root {name}, which is not in "
                                        "the trust store")
    issuer = last.issuer.rfc4514_string() or "(empty name)"
    if len(path) == 1:   # OpenSSL's final code when the leaf's issuer is nowhere
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
    if not self_signed(leaf) or not any(a.public_bytes(Encoding.DER) == der for a in anchors):
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
    chain_problem = _try(store, now, None, leaf, rest)
    if chain_problem is None:
        if not hostname:
            return ChainResult(V_OK, no_san)
        if _name_matches(leaf, hostname):  # a name RFC 6125 matches that the library refuses
            return ChainResult(V_OK, f"{hostname} matched by RFC 6125 rules, which the "
                               f"verifier could not apply ({problem})",
                               hostname_ok=True)
        return ChainResult(V_HOSTNAME_MISMATCH, _join(
            f"certificate is not valid for {hostname}", no_san), hostname_ok=False)
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
    """A usage error (before any connection) when `path` cannot serve as `--cafile`: not
    there or a directory, or (with `contents`) unreadable, too large or without a
    certificate. A pipe serves (`--cafile <(cat a.pem b.pem)`: read once, then kept)."""
    if os.path.isdir(path) or not os.path.exists(path):
        raise UsageError(f"--cafile {path}: "
                         + ("is a directory" if os.path.isdir(path) else "no such file"))
    if not contents:
        return
    try:
        load_trust_store(path)
    except OSError as exc:
        raise UsageError(f"--cafile {path}: {exc.strerror or exc}") from None
    except TrustStoreTooLarge as exc:
        raise UsageError(f"--cafile {path}: {exc}") from None
    except ValueError:
        raise UsageError(f"--cafile {path}: no certificates found (a PEM bundle or one DER "
                         "certificate is expected)") from None
