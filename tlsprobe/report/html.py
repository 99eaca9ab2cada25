"""`scan --html FILE`: the audit as one self-contained HTML page.

One page for every target of the run: the per-target table first (report/html_targets.py,
with the layout rules that keep the page inside the window), then per target protocol versions, groups per version in the server's
order, post-quantum verdicts, cipher suites, signature schemes, the certificate chain and
its trust, every check section (vulnerability, hygiene, tolerance, HTTP, certificate), the
consistency check and the findings coloured by severity. Colour says good or bad news
(`report.tones`: "TLS 1.0 spoken: yes" is red, "SSL 3.0: no" green), and every row with a
problem carries its severity badge, a check's own or that of the findings stating its
facts. Lists the text view shortens
("and N more") are given whole. The style sheet is inline and the page loads nothing: no
script, font or image, from the network or elsewhere, so it can be mailed or archived as is.

Every string goes through `_e`: control and invisible characters escaped as the terminal
view shows them (`report.escape.shown`), then HTML-escaped, so a certificate subject, a
STARTTLS banner or an error text quoting the server cannot add markup to the page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from tlsprobe import registry
from tlsprobe._version import __version__
from tlsprobe.escaping import quoted_text
from tlsprobe.model.audit import (
    AuditReport,
    GroupAudit,
    SigalgAudit,
    SuiteAudit,
)
from tlsprobe.model.checks import CATEGORIES, CheckResult
from tlsprobe.model.severity import Severity
from tlsprobe.model.units import host_port
from tlsprobe.report.cert_html import certificate_html, trust_html
from tlsprobe.report.html_parts import e as _e
from tlsprobe.report.html_parts import p as _p
from tlsprobe.report.html_parts import table as _table
from tlsprobe.report.html_targets import LAYOUT_CSS, anchor, targets_html
from tlsprobe.report.suite_kx import WEAK_CSS, suite_table_html
from tlsprobe.report.tones import (
    Tone,
    check_severity,
    check_tone,
    highest,
    pq_findings,
    pq_tone,
    version_findings,
    version_tone,
)

ORDER_TEXT = {"server": "the server enforces its own order",
              "client": "the server follows the client's order (listed as offered)",
              "single": "a single value: no order to tell"}
METHOD_TEXT = {"hello_retry_request": "offers without key shares, HelloRetryRequest",
               "key_share": "offers with real key shares",
               "server_key_exchange": "ECDHE and DHE suites, ServerKeyExchange"}
SECTION = {"vulnerability": "Vulnerability checks", "hygiene": "Hygiene checks",
           "tolerance": "Tolerance checks", "http": "HTTP checks",
           "certificate": "Certificate checks"}
KIND = {"ec": "ECDHE", "ecx": "ECDHE", "ffdhe": "FFDHE", "mlkem": "ML-KEM",
        "hybrid": "hybrid PQ", "draft": "draft PQ"}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;
max-width:1100px;padding:1em 2em;color:#1d1f21;background:#fff}
h1{font-size:1.5em;border-bottom:2px solid #333}h2{font-size:1.3em;margin-top:2em;
border-bottom:1px solid #999}h3{font-size:1.05em;margin:1.4em 0 .3em}
table{border-collapse:collapse;margin:.3em 0 .6em}th,td{border:1px solid #ccc;
padding:.2em .6em;text-align:left;vertical-align:top}th{background:#f0f0f0}
td.n{text-align:right}.muted{color:#666}.note{color:#666;font-size:.92em}
.sev{font-weight:bold;padding:.1em .5em;border-radius:3px;white-space:nowrap}
.sev-critical{background:#7b0000;color:#fff}.sev-high{background:#d32f2f;color:#fff}
.sev-medium{background:#f9a825;color:#000}.sev-low{background:#4fc3f7;color:#000}
.sev-info{background:#e0e0e0;color:#000}
.v-good{color:#1b5e20;font-weight:bold}.v-bad{color:#b71c1c;font-weight:bold}
.v-unsure{color:#8a6d00;font-weight:bold}.v-none{color:#666}
.error{color:#b71c1c;font-weight:bold}.items{font-size:.92em;color:#333}
""" + WEAK_CSS

#: a row's tone (report.tones: good or bad news, whatever the words) -> its CSS class
TONE_CLASS: dict[str, str] = {"good": "v-good", "bad": "v-bad", "unsure": "v-unsure",
                              "neutral": "v-none"}


def _order(order: str) -> str:
    return ORDER_TEXT.get(order, "order not established")


def _conns(n: int) -> str:
    return f"{n} connection{'' if n == 1 else 's'}"


def _notes(notes: Iterable[str]) -> str:
    return "".join(_p(f"note: {n}", "note") for n in notes)


def _names(items: Iterable[object]) -> str:
    return ", ".join(getattr(i, "name", str(i)) for i in items)


def _verdict(text: str, tone: Tone) -> str:
    """A verdict in the colour of its tone: good or bad news, not the words it uses."""
    return f'<span class="{TONE_CLASS[tone]}">{_e(text)}</span>'


def _badge(severity: str | None) -> str:
    return f'<span class="sev sev-{_e(severity)}">{_e(severity)}</span>' if severity else ""


def versions_html(r: AuditReport) -> str:
    label = {"supported": "yes", "not_supported": "no", "inconclusive": "inconclusive"}
    rows = []
    for v in r.versions:
        badge = _badge(highest([f.severity for f in version_findings(r, v)]))
        rows.append((_e(v.version.name), _verdict(label.get(v.status, v.status),
                                                  version_tone(r, v))
                     + (" " + badge if badge else ""), _e(v.detail)))
    return (f"<h3>Protocol versions ({_conns(r.connections.get('versions', 0))})</h3>\n"
            + _table(("Version", "Spoken", "Answer"), rows, raw=True))


def group_html(g: GroupAudit) -> str:
    if g.method == "not_run":
        return f"<h3>Groups, {_e(g.version.name)}</h3>\n" + _p("; ".join(g.notes) or
                                                                "not tested")
    out = (f"<h3>Groups, {_e(g.version.name)}: {_e(METHOD_TEXT.get(g.method, g.method))} "
           f"({_conns(g.connections)})</h3>\n")
    if g.spoken is False and not g.supported:
        out += _p(f"{g.version.name} is not spoken by the server")
    elif g.supported:
        rows = []
        for i, cp in enumerate(g.supported, 1):
            info = registry.group(cp.id)
            kind = info.kind if info is not None else "?"
            rows.append((str(i), cp.name, cp.hex, KIND.get(kind, kind)))
        out += _table(("#", "Group", "Code", "Kind"), rows) + _p(f"Order: {_order(g.order)}")
    else:
        out += _p("no group accepted")
    if g.inconclusive:
        out += _p(f"Not established: {_names(g.inconclusive)}", "v-unsure")
    if g.not_supported:
        out += _p(f"Not supported: {len(g.not_supported)} group(s): "
                  f"{_names(g.not_supported)}", "muted")
    d = g.dhe
    if d is not None:
        if d.status == "fixed" and d.fixed is not None:
            head = f"DHE: fixed parameters {d.fixed.label()}, whatever ffdhe groups are offered"
        elif d.status == "rfc7919":
            head = f"DHE (RFC 7919): {_names(d.negotiated)}; {_order(d.order)}"
        elif d.status == "none":
            head = "DHE: no DHE suite accepted"
        else:
            head = f"DHE: {d.status.replace('_', ' ')}"
        out += _p(f"{head} ({_conns(d.connections)})")
        if d.inconclusive:
            out += _p(f"DHE not established: {_names(d.inconclusive)}", "v-unsure")
        out += _notes(d.notes)
    return out + _notes(g.notes)


def pq_html(r: AuditReport) -> str:
    rows = []
    for v in r.post_quantum:
        badge = _badge(highest([f.severity for f in pq_findings(r, v)]))
        rows.append((_e(v.check.replace("_", " ")), _e(v.subject),
                     _verdict(v.verdict.replace("_", " "), pq_tone(r, v))
                     + (" " + badge if badge else ""), _e(v.detail)))
    return (f"<h3>Post-quantum, TLS 1.3 ({_conns(r.connections.get('post-quantum', 0))})</h3>\n"
            + _table(("Check", "About", "Verdict", "Detail"), rows, raw=True))


def suite_html(s: SuiteAudit) -> str:
    out = f"<h3>Cipher suites, {_e(s.version.name)} ({_conns(s.connections)})</h3>\n"
    if not s.supported:
        out += _p("none accepted", "") if s.complete else _p("not established", "v-unsure")
        return out + _notes(s.notes)
    if s.rows:   # with the key exchange and the weak rows marked (report/suite_kx.py)
        out += suite_table_html(s)
    else:
        rows = [(str(i), c.iana_name, c.hex, c.openssl_name or "")
                for i, c in enumerate(s.supported, 1)]
        out += _table(("#", "Cipher suite", "Code", "OpenSSL name"), rows)
    out += _p(f"Order: {_order(s.order)}")
    if not s.complete:
        out += _p("the list may be incomplete", "v-unsure")
    return out + _notes(s.notes)


def sigalg_html(s: SigalgAudit) -> str:
    out = f"<h3>Signature schemes, {_e(s.version.name)} ({_conns(s.connections)})</h3>\n"
    if len(s.by_key_type) > 1:   # TLS 1.2, several certificates: each one's schemes
        kinds = [(k.key_type, k.suites, _names(k.supported) or "(none)",
                  _order(k.order) if k.status == "established" else
                  f"{k.status.replace('_', ' ')}: {k.reason}") for k in s.by_key_type]
        out += _table(("Certificate", "Suites offered", "Signature schemes", "Order"), kinds)
        return out + (_notes([s.reason]) if s.reason else "")
    if s.status != "established":
        out += _p(f"{s.status.replace('_', ' ')}: {s.reason}", "v-unsure")
        if s.supported:
            out += _p(f"found before it stopped: {_names(s.supported)}")
        return out
    rows = [(str(i), c.name, c.hex) for i, c in enumerate(s.supported, 1)]
    out += _table(("#", "Signature scheme", "Code"), rows) if rows else _p("(none)")
    out += _p(f"Order: {_order(s.order)}")
    return out + (_notes([s.reason]) if s.reason else "")


def checks_html(r: AuditReport) -> str:
    """One table per check section, every evidence item listed."""
    out = ""
    for category in CATEGORIES:
        results = [c for c in r.check_results if c.category == category]
        if results:
            out += _check_section(r, SECTION.get(category, category), results)
    return out


def _check_section(r: AuditReport, title: str, results: list[CheckResult]) -> str:
    used = sum(c.connections for c in results)
    how = f"{_conns(used)} of their own" if used else "read from the audit, no connection " \
        "of their own"
    if used and any(c.method == "derived" for c in results):
        how += "; the others read from the audit"
    rows = []
    for c in results:
        evidence = f'<div class="items">{_e(", ".join(c.evidence))}</div>' if c.evidence \
            else ""
        rows.append((_e(c.title), _verdict(str(c.verdict), check_tone(r, c)),
                     _badge(check_severity(r, c)), _e(c.reason) + evidence))
    return f"<h3>{_e(title)} ({_e(how)})</h3>\n" + _table(
        ("Check", "Verdict", "Severity", "Why and evidence"), rows, raw=True)


def consistency_html(r: AuditReport) -> str:
    c = r.consistency
    if c is None or c.status == "not_checked":
        return ""
    n = r.connections.get("consistency", 0)
    if c.status == "consistent":
        return (f"<h3>Consistency ({_conns(n)})</h3>\n" + _p(
            f"the reference hello ({c.reference}) got the same answer {len(c.answers)} times"))
    out = f"<h3>Consistency ({_conns(n)})</h3>\n" + _p(
        "the target answers inconsistently (likely several servers or configurations behind "
        "one name): results marked so may merge them", "v-unsure")
    if c.reference:
        out += _p(f"Reference hello: {c.reference}; its answers, by phase:")
    out += "<ul>" + "".join(f"<li>{_e(a)}</li>" for a in c.answers) + "</ul>\n"
    return out + _notes(c.notes)


def findings_html(r: AuditReport) -> str:
    title = f"Findings ({r.policies_label() or 'built-in checks only'})"
    if not r.findings:
        return f"<h3>{_e(title)}</h3>\n" + _p("none")
    rows = []
    for f in r.findings:
        items = f'<div class="items">all {len(f.items)}: {_e(", ".join(f.items))}</div>' \
            if f.items else ""
        rows.append((_badge(f.severity),
                     _e(f.message) + items, _e(f.policy), _e(f.code)))
    from tlsprobe.report.audit_tables import inconclusive_line
    note = inconclusive_line(r)
    return f"<h3>{_e(title)}</h3>\n" + _table(("Severity", "Finding", "Policy", "Code"), rows,
                                               raw=True) + (_p(note) if note else "")


def waived_html(r: AuditReport) -> str:
    """The findings a policy waives, each with the policy's reason ("" when none)."""
    if not r.waived:
        return ""
    rows = []
    for f in r.waived:
        items = f'<div class="items">all {len(f.items)}: {_e(", ".join(f.items))}</div>' \
            if f.items else ""
        rows.append((_e(f.severity), _e(f.message) + items, _e(f.code), _e(f.waived_by or ""),
                     _e(f.waiver or "")))
    return (f"<h3>Waived findings ({len(r.waived)}: not counted for --fail-on)</h3>\n"
            + _table(("Severity", "Finding", "Code", "Waived by", "Reason"), rows, raw=True))


def _connections_line(r: AuditReport) -> str:
    parts = ", ".join(f"{phase} {n}" for phase, n in r.connections.items() if n)
    retries = f"; {r.retries} retries after a reset or timeout" if r.retries else ""
    serial = f"; one at a time: {r.one_at_a_time}" if r.one_at_a_time else ""
    return (f"Connections: {r.total_connections} in {r.duration_s:.2f} s"
            f"{f' ({parts})' if parts else ''}{retries}{serial}")


def audit_html(r: AuditReport, anchor: str = "") -> str:
    """One target's section of the page (with the id `anchor`, the per-target table's
    link, if given)."""
    where = host_port(r.host, r.port)
    ident = f' id="{_e(anchor)}"' if anchor else ""
    if r.error_kind == "usage":
        return (f'<section class="target"{ident}><h2>Skipped {_e(quoted_text(r.host))}</h2>\n'
                + _p(f"Error: {r.error}", "error") + "</section>\n")
    addr = f" ({r.address})" if r.address and r.address != r.host else ""
    out = f'<section class="target"{ident}><h2>Audit of {_e(where + addr)}</h2>\n'
    if r.rating is not None:
        from tlsprobe.report.rating import rating_html
        out += rating_html(r.rating, TONE_CLASS)[0]
    if r.transport == "quic":
        out += _p("Transport: QUIC (TLS 1.3 in QUIC Initial and Handshake packets, UDP)")
    if r.starttls is not None:
        s = r.starttls
        out += _p(f"STARTTLS: {s.protocol} (chosen by {s.chosen_by})")
        if s.banner:
            out += _p(f"Banner: {s.banner}")
        if s.capability:
            out += _p(f"Capability: {s.capability}")
    if r.error and r.error_kind != "internal":
        return out + _p(f"Error: {r.error}", "error") + _p(_connections_line(r)) + \
            "</section>\n"
    if r.versions:
        out += versions_html(r)
    out += "".join(group_html(g) for g in r.groups)
    if r.post_quantum:
        out += pq_html(r)
    out += "".join(suite_html(s) for s in r.suites)
    out += "".join(sigalg_html(s) for s in r.signature_schemes)
    if r.certificates:
        out += certificate_html(r)
    elif r.trust is not None:
        out += "<h3>Certificate chain</h3>\n" + trust_html(r.trust)
    out += checks_html(r)
    if r.clients:
        from tlsprobe.report.client_cells import clients_html
        out += "<h3>Client simulation</h3>\n" + clients_html(r.clients)
    out += consistency_html(r) + findings_html(r)
    if r.rating is not None:
        from tlsprobe.report.rating import rating_html
        out += rating_html(r.rating, TONE_CLASS)[1]
    out += waived_html(r)
    out += _p(_connections_line(r), "muted")
    if r.error:
        out += _p(f"Error: {r.error}", "error")
    return out + "</section>\n"


def summary_html(reports: Sequence[AuditReport], code: int, reason: str) -> str:
    """Targets and findings by severity across the run, and the exit code with its why."""
    counts: dict[str, int] = {}
    for r in reports:
        for f in r.findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
    cells = " ".join(f'<span class="sev sev-{s}">{counts[s]} {s}</span>'
                     for s in (Severity.critical, Severity.high, Severity.medium, Severity.low, Severity.info) if s in counts)
    errors = sum(1 for r in reports if r.error)
    from tlsprobe.report.audit_tables import inconclusive_note
    from tlsprobe.report.rating import grades_line
    grades = grades_line(reports)
    return (f"<p>Targets: {len(reports)}; with an error: {errors}</p>\n"
            f"<p>Findings: {cells or 'none'}{_e(inconclusive_note(reports))}</p>\n"
            + (_p(grades) if grades else "")
            + _p(f"Exit code {code}: {reason}"))


def render_html(reports: Sequence[AuditReport], code: int, reason: str,
                when: datetime | None = None) -> str:
    """The whole page for the audited `reports` (one section each, in input order)."""
    when = when or datetime.now(UTC)
    names = ", ".join(host_port(r.host, r.port)
                      for r in reports)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>tlsprobe audit: {_e(names)}</title>\n<style>{STYLE}{LAYOUT_CSS}</style>"
            "</head>\n"
            f"<body>\n<h1>tlsprobe audit</h1>\n"
            f"<p class=\"muted\">tlsprobe {_e(__version__)}, "
            f"{_e(when.strftime('%Y-%m-%d %H:%M UTC'))}</p>\n"
            + summary_html(reports, code, reason) + targets_html(reports)
            + "".join(audit_html(r, anchor(i)) for i, r in enumerate(reports))
            + "</body></html>\n")


def write_html(path: str, reports: Sequence[AuditReport], code: int, reason: str) -> None:
    """Write the page to `path` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(reports, code, reason))


def write_scan_files(html_path: str | None, csv_path: str | None,
                     reports: Sequence[AuditReport], code: int, reason: str) -> None:
    """`scan --html FILE` and `--csv FILE`: write what was asked (the paths were checked
    before the audit by `csv_out.check_writable`)."""
    if html_path:
        write_html(html_path, reports, code, reason)
    if csv_path:
        from tlsprobe.report.csv_out import write_scan_csv
        write_scan_csv(csv_path, reports)


__all__ = ["audit_html", "render_html", "write_html", "write_scan_files"]
