"""The certificate chains of a scan's text report: the default chain, then on a server with
several certificates each other key type's, each with its trust line."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.probe import CertificateInfo, TrustCheck
from tlsprobe.model.server_certs import key_family
from tlsprobe.report.cert_facts import short_time
from tlsprobe.report.lines import row as _row
from tlsprobe.report.lines import table as _table
from tlsprobe.report.lines import text as _text
from tlsprobe.report.lines import title as _title


def trust_line(t: TrustCheck | None) -> Text:
    """'Trust: chain verified against FILE, valid for HOST' or 'Trust: NOT trusted against
    FILE: CODE (REASON): DETAIL': the trust store goes with the verdict, never after a note
    of the detail (such as the one on a missing subjectAltName)."""
    if t is None:
        return _text("Trust: not checked", style="dim")
    if t.status == "not_checked":
        return _text(f"Trust: not checked: {t.detail}", style="yellow")
    store = f" against {t.trust_store}" if t.trust_store else ""
    if t.status == "trusted":
        return _text(f"Trust: chain verified{store}, valid for {t.hostname}", style="green")
    detail = f": {t.detail}" if t.detail else ""
    return _text(f"Trust: NOT trusted{store}: {t.code} ({t.reason}){detail}", style="red")


def certificate_section(r: AuditReport) -> RenderableType:
    """The default chain; then, on a server with several certificates (key types), each
    other one, with its key type and the offer that got it in the titles."""
    if not r.other_certificates and r.other_certificates_note is None:
        return chain_section("Certificate chain", r.certificates, r.trust)
    first = f"Certificate chain ({key_family(r.certificates[0])})" if r.certificates else \
        "Certificate chain"
    out = [chain_section(first, r.certificates, r.trust)]
    out += [chain_section(f"Certificate chain ({c.key_type}; {c.offer})", c.certificates,
                          c.trust) for c in r.other_certificates]
    if r.other_certificates_note is not None:
        out += [_text("Certificates of other key types: not established: "
                      f"{r.other_certificates_note}", style="yellow"), _text("")]
    return Group(*out)


def chain_section(title: str, chain: tuple[CertificateInfo, ...],
                  trust: TrustCheck | None) -> RenderableType:
    table = _table("#", "Subject", "Key", "Signature", "Valid until", "Issuer")
    for i, c in enumerate(chain):
        bits = f" {c.key_bits}" if c.key_bits else ""
        _row(table, str(i), c.subject, f"{c.key_type}{bits}", c.signature_algorithm,
                      short_time(c.not_after), c.issuer)
    san = ", ".join(chain[0].san) if chain else ""
    from tlsprobe.report.cert_facts import fact_lines
    facts: list[RenderableType] = []
    for i, c in enumerate(chain):
        first, *rest = fact_lines(c)
        facts += [_text(f"{i} {first}"), *(_text(f"  {line}") for line in rest)]
    return Group(_title(title), table, *facts,
                 _text(f"Names (subjectAltName): {san or 'none'}"), trust_line(trust), _text(""))
