"""The certificate chains of the HTML report: the default chain, then on a server with
several certificates each other key type's, each with its trust line (as the text report's
report/cert_tables.py)."""

from __future__ import annotations

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.probe import CertificateInfo, TrustCheck
from tlsprobe.report.cert_facts import short_time
from tlsprobe.report.html_parts import e as _e
from tlsprobe.report.html_parts import p as _p
from tlsprobe.report.html_parts import table as _table


def certificate_html(r: AuditReport) -> str:
    """The default chain; on a server with several certificates, each other key type's."""
    if not r.other_certificates and r.other_certificates_note is None:
        return chain_html("Certificate chain", r.certificates, r.trust)
    from tlsprobe.model.server_certs import key_family
    out = chain_html(f"Certificate chain ({key_family(r.certificates[0])})", r.certificates,
                     r.trust)
    out += "".join(chain_html(f"Certificate chain ({c.key_type}; {c.offer})", c.certificates,
                              c.trust) for c in r.other_certificates)
    if r.other_certificates_note is not None:
        out += _p("Certificates of other key types: not established: "
                  f"{r.other_certificates_note}", "v-unsure")
    return out


def chain_html(title: str, chain: tuple[CertificateInfo, ...], trust: TrustCheck | None) -> str:
    rows = [(str(i), c.subject, f"{c.key_type}{f' {c.key_bits}' if c.key_bits else ''}",
             c.signature_algorithm, short_time(c.not_before),
             short_time(c.not_after), c.issuer, c.sha256)
            for i, c in enumerate(chain)]
    out = f"<h3>{_e(title)}</h3>\n" + _table(
        ("#", "Subject", "Key", "Signature", "Valid from", "Valid until", "Issuer",
         "SHA-256"), rows)
    san = ", ".join(chain[0].san) if chain else ""
    from tlsprobe.report.cert_facts import colons, url_facts
    facts = [(str(i), c.serial, colons(c.sha1),
              "; ".join(f"{label}: {value}" for label, value in url_facts(c)) or "none")
             for i, c in enumerate(chain)]
    out += _table(("#", "Serial", "SHA-1 (to compare with browsers)",
                   "Extended key usage, CRL, OCSP and CA issuer URIs"), facts)
    return out + _p(f"Names (subjectAltName): {san or 'none'}") + trust_html(trust)


def trust_html(t: TrustCheck | None) -> str:
    if t is None:
        return _p("Trust: not checked", "muted")
    if t.status == "not_checked":
        return _p(f"Trust: not checked: {t.detail}", "v-unsure")
    store = f" against {t.trust_store}" if t.trust_store else ""
    if t.status == "trusted":
        return _p(f"Trust: chain verified{store}, valid for {t.hostname}", "v-good")
    detail = f": {t.detail}" if t.detail else ""
    return _p(f"Trust: NOT trusted{store}: {t.code} ({t.reason}){detail}", "v-bad")
