"""The facts of one certificate that people compare with other tools, for every renderer
that shows a chain (scan text and HTML, probe --full): serial, SHA-256 and SHA-1
fingerprints (colon-separated upper-case hex, as `openssl x509 -fingerprint` and browsers'
certificate viewers print them; SHA-1 only to compare with those), the extendedKeyUsage
purposes and the CRL, OCSP and CA-issuer URIs. Plain strings: each renderer escapes them
(the URIs and purposes come from the server's certificate)."""

from __future__ import annotations

from tlsprobe.model.probe import CertificateInfo

__all__ = ["colons", "fact_lines", "s_client_lines", "short_time", "url_facts"]


def colons(hex_digest: str) -> str:
    """'ab12cd' -> 'AB:12:CD' (a fingerprint as OpenSSL and browsers print it)."""
    digest = hex_digest.upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def short_time(value: str) -> str:
    """A validity time to the minute ('2026-12-07 23:10'); one that is no ISO time (a
    time OpenSSL cannot compare, shown as sent: "(format error: ...)") whole."""
    return value[:16].replace("T", " ") if value[:4].isdigit() else value


def url_facts(c: CertificateInfo) -> list[tuple[str, str]]:
    """(label, value) for the extendedKeyUsage and each kind of URI the certificate has."""
    out: list[tuple[str, str]] = []
    if c.extended_key_usage:
        out.append(("extended key usage", ", ".join(c.extended_key_usage)))
    for label, urls in (("CRL", c.crl_urls), ("OCSP", c.ocsp_urls),
                        ("CA issuers", c.ca_issuer_urls)):
        if urls:
            out.append((label, ", ".join(urls)))
    return out


def fact_lines(c: CertificateInfo) -> list[str]:
    """'serial HEX', 'SHA-256 AB:..', 'SHA-1 AB:.. (to compare with browsers)', then one
    'LABEL: value' per extendedKeyUsage and URI kind the certificate has."""
    out = [f"serial {c.serial or '(not read)'}", f"SHA-256 {colons(c.sha256)}"]
    if c.sha1:
        out.append(f"SHA-1 {colons(c.sha1)} (to compare with browsers)")
    return out + [f"{label}: {value}" for label, value in url_facts(c)]


def s_client_lines(c: CertificateInfo) -> list[str]:
    """The 'i:', 'a:' and 'v:' lines s_client prints under a certificate's subject; a field
    that was not read (a certificate `cryptography` does not parse) says so."""
    bits = f" {c.key_bits} bits" if c.key_bits else ""
    validity = f"{c.not_before} -> {c.not_after}" if c.not_before or c.not_after \
        else "(not read)"
    return [f"i: {c.issuer}", f"a: {c.key_type}{bits}; {c.signature_algorithm or '(not read)'}",
            f"v: {validity}"]
