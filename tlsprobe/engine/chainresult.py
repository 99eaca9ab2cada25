"""The trust verdict's value and OpenSSL's verify codes (X509_V_ERR values and their texts,
as `openssl s_client` prints them), with the check of the certificates' dates that the
verdict (engine/chain.py) and the path to the trust store (engine/chainanchor.py) share.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509

from tlsprobe.engine import chaincodes
from tlsprobe.engine.certtwin import time_format_errors

__all__ = ["REASONS", "V_BAD_NOT_AFTER", "V_BAD_NOT_BEFORE", "V_CA_MD_TOO_WEAK", "V_EXPIRED",
           "V_HOSTNAME_MISMATCH", "V_IP_MISMATCH", "V_LEAF_UNVERIFIED", "V_NOT_YET_VALID",
           "V_NO_ISSUER", "V_NO_LOCAL_ISSUER", "V_OK", "V_SELF_SIGNED", "V_SELF_SIGNED_IN_CHAIN",
           "V_SIGNATURE_FAILURE", "V_UNSPECIFIED", "ChainResult", "dates", "subject"]

V_OK = 0
V_UNSPECIFIED = 1
V_NO_ISSUER = 2
V_SIGNATURE_FAILURE = 7
V_NOT_YET_VALID = 9
V_EXPIRED = 10
V_BAD_NOT_BEFORE, V_BAD_NOT_AFTER = 13, 14   # a time OpenSSL cannot compare
V_SELF_SIGNED = 18
V_SELF_SIGNED_IN_CHAIN = 19
V_NO_LOCAL_ISSUER = 20
V_LEAF_UNVERIFIED = 21
V_HOSTNAME_MISMATCH = 62
V_IP_MISMATCH = 64
V_CA_MD_TOO_WEAK = chaincodes.V_CA_MD_TOO_WEAK
REASONS = {V_OK: "ok", V_UNSPECIFIED: "unspecified certificate verification error",
           V_NO_ISSUER: "unable to get issuer certificate",
           V_SIGNATURE_FAILURE: "certificate signature failure",
           V_NOT_YET_VALID: "certificate is not yet valid", V_EXPIRED: "certificate has expired",
           V_BAD_NOT_BEFORE: "format error in certificate's notBefore field",
           V_BAD_NOT_AFTER: "format error in certificate's notAfter field",
           V_SELF_SIGNED: "self-signed certificate",
           V_SELF_SIGNED_IN_CHAIN: "self-signed certificate in certificate chain",
           V_NO_LOCAL_ISSUER: "unable to get local issuer certificate",
           V_LEAF_UNVERIFIED: "unable to verify the first certificate",
           V_HOSTNAME_MISMATCH: "hostname mismatch", V_IP_MISMATCH: "IP address mismatch",
           **chaincodes.REASONS}


@dataclass(frozen=True)
class ChainResult:
    """Outcome of a chain check: `code` is OpenSSL's X509_V_ERR value (0 = ok).
    `established` False: OpenSSL's verdict could not be told (`detail` says why; `code` is
    then 1 and means nothing): report it as not verified, never as untrusted."""

    code: int
    detail: str | None = None
    hostname_ok: bool | None = None
    established: bool = True

    @property
    def ok(self) -> bool:
        return self.established and self.code == V_OK

    @property
    def reason(self) -> str:
        if not self.established:
            return "verdict not established"
        return REASONS.get(self.code, "certificate verify failed")

    @property
    def message(self) -> str:
        """'0 (ok)', '20 (unable to get local issuer certificate): detail', or 'not
        established: detail'."""
        text = f"{self.code} ({self.reason})" if self.established else "not established"
        return f"{text}: {self.detail}" if self.detail else text


def dates(certs: list[x509.Certificate], now: datetime.datetime,
          anchor: x509.Certificate | None = None) -> tuple[int, str] | None:
    """The first of `certs` outside its validity period, as a code and its reason (its
    notBefore first, as OpenSSL's check_cert_time: a validity that ends before it begins
    is 9)."""
    for cert in certs:
        name = subject(cert) + (" (in the trust store)" if cert is anchor else "")
        bad_before, bad_after = time_format_errors(cert)   # (a twin's: 13, 14)
        if bad_before or bad_after and cert.not_valid_before_utc <= now:
            which = "notBefore" if bad_before else "notAfter"
            return (V_BAD_NOT_BEFORE if bad_before else V_BAD_NOT_AFTER,
                    f"{name}: its {which} is no time OpenSSL compares")
        if cert.not_valid_before_utc > now:
            return V_NOT_YET_VALID, (f"{name} is valid from "
                                     f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
        if cert.not_valid_after_utc < now:
            return V_EXPIRED, f"{name} expired {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    return None


def subject(cert: x509.Certificate) -> str:
    """A certificate's subject as RFC 4514 text, "(empty subject)" for none."""
    return cert.subject.rfc4514_string() or "(empty subject)"
