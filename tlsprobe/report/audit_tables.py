"""Rich rendering of an audit report: one section per check, findings last.

Every table states how its answer was learnt and how many connections it cost; values that
could not be established are listed as such, never folded into "not supported".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import IO

from rich.console import Group, RenderableType
from rich.text import Text

from tlsprobe import registry
from tlsprobe.escaping import quoted_text
from tlsprobe.model.audit import (
    ORDER_CLIENT,
    ORDER_SERVER,
    ORDER_SINGLE,
    AuditReport,
    DheAudit,
    GroupAudit,
    SigalgAudit,
    SuiteAudit,
)
from tlsprobe.model.rating import Rating
from tlsprobe.model.severity import Severity
from tlsprobe.model.units import host_port
from tlsprobe.model.vocab import Order
from tlsprobe.report.cert_tables import certificate_section
from tlsprobe.report.escape import shown
from tlsprobe.report.lines import row as _row
from tlsprobe.report.lines import table as _table
from tlsprobe.report.lines import text as _text
from tlsprobe.report.lines import title as _title
from tlsprobe.report.suite_kx import kx_text, weak_line
from tlsprobe.report.tones import TONE_STYLE, pq_tone, version_tone

ORDER_TEXT = {ORDER_SERVER: "the server enforces its own order",
              ORDER_CLIENT: "the server follows the client's order (listed as offered)",
              ORDER_SINGLE: "a single value: no order to tell"}
METHOD_TEXT = {"hello_retry_request": "offers without key shares, HelloRetryRequest",
               "key_share": "offers with real key shares",
               "server_key_exchange": "ECDHE and DHE suites, ServerKeyExchange"}
SEVERITY_STYLE = {Severity.critical: "bold red", Severity.high: "red", Severity.medium: "yellow", Severity.low: "cyan",
                  Severity.info: "dim"}
CUT = re.compile(r" and \d+ more\b")   # a list a finding's message cut short


def order_text(order: Order) -> str:
    return ORDER_TEXT.get(order, "order not established")


def conns(n: int) -> str:
    return f"{n} connection{'' if n == 1 else 's'}"


def _names(items: tuple[object, ...], limit: int | None = 12) -> str:
    """Names joined; past `limit` (None: no limit, --full) cut with "and N more"."""
    names = [getattr(i, "name", str(i)) for i in items]
    if limit is None or len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def versions_section(r: AuditReport) -> RenderableType:
    table = _table("Version", "Spoken", "Answer")
    label = {"supported": "yes", "not_supported": "no", "inconclusive": "inconclusive"}
    for v in r.versions:   # coloured by good or bad news: TLS 1.0 spoken is red
        _row(table, v.version.name, _text(label.get(v.status, v.status),
                                          style=TONE_STYLE[version_tone(r, v)]), v.detail)
    return Group(_title(f"Protocol versions ({conns(r.connections.get('versions', 0))})"),
                 table, _text(""))


def _dhe_lines(d: DheAudit, full: bool = False) -> list[str]:
    notes = list(d.notes)
    if d.status == "fixed" and d.fixed is not None:
        head = f"DHE: fixed parameters {d.fixed.label()}, whatever ffdhe groups are offered"
        notes = [n for n in notes if "ignores the client's ffdhe groups" not in n]
    elif d.status == "rfc7919":
        head = "DHE (RFC 7919): " + ", ".join(g.name for g in d.negotiated) + \
            f"; {order_text(d.order)}"
    elif d.status == "none":
        head = "DHE: no DHE suite accepted"
    else:
        head = f"DHE: {d.status.replace('_', ' ')}"
    lines = [f"{head} ({conns(d.connections)})"]
    if d.inconclusive:
        lines.append(f"DHE not established: {_names(d.inconclusive, None if full else 12)}")
    return lines + [f"note: {n}" for n in notes]


def group_section(g: GroupAudit, full: bool = False) -> RenderableType:
    """The groups of one version; `full`: no list cut short."""
    if g.method == "not_run":
        return Group(_title(f"Groups, {g.version.name}"), _text(
            "; ".join(g.notes) or "not tested"), _text(""))
    head = (f"Groups, {g.version.name}: {METHOD_TEXT.get(g.method, g.method)} "
            f"({conns(g.connections)})")
    parts: list[RenderableType] = [_title(head)]
    if g.spoken is False and not g.supported:
        parts.append(_text(f"{g.version.name} is not spoken by the server"))
    elif g.supported:
        table = _table("#", "Group", "Kind")
        for i, cp in enumerate(g.supported, 1):
            info = registry.group(cp.id)
            kind = info.kind if info is not None else "?"
            kind = {"ec": "ECDHE", "ecx": "ECDHE", "ffdhe": "FFDHE", "mlkem": "ML-KEM",
                    "hybrid": "hybrid PQ", "draft": "draft PQ"}.get(kind, kind)
            _row(table, str(i), cp.label(), kind)
        parts += [table, _text(f"Order: {order_text(g.order)}")]
    else:
        parts.append(_text("no group accepted"))
    if g.inconclusive:
        parts.append(_text(f"Not established: {_names(g.inconclusive, None if full else 12)}",
                           style="yellow"))
    if g.not_supported:
        parts.append(_text(f"Not supported: {len(g.not_supported)} group(s): "
                          f"{_names(g.not_supported, None if full else 8)}", style="dim"))
    if g.dhe is not None:
        parts += [_text(line) for line in _dhe_lines(g.dhe, full)]
    parts += [_text(f"note: {n}", style="dim") for n in g.notes]
    return Group(*parts, _text(""))


def pq_section(r: AuditReport) -> RenderableType:
    table = _table("Check", "About", "Verdict", "Detail")
    for v in r.post_quantum:
        _row(table, v.check.replace("_", " "), v.subject,
                      _text(v.verdict.replace("_", " "), style=TONE_STYLE[pq_tone(r, v)]),
                      v.detail)
    n = r.connections.get("post-quantum", 0)
    return Group(_title(f"Post-quantum, TLS 1.3 ({conns(n)})"), table, _text(""))


def suite_section(s: SuiteAudit) -> RenderableType:
    head = f"Cipher suites, {s.version.name} ({conns(s.connections)})"
    if not s.supported:
        return Group(_title(head), _text("none accepted" if s.complete else "not established",
                                         style="" if s.complete else "yellow"),
                     *[_text(f"note: {n}", style="dim") for n in s.notes], _text(""))
    rows = {r.suite.id: r for r in s.rows}
    table = _table("#", "Cipher suite", "OpenSSL name", *(("Kx",) if rows else ()))
    for i, c in enumerate(s.supported, 1):
        row = rows.get(c.id)
        weak = row is not None and row.weak   # marked "!" and red (report/suite_kx.py)
        cells = [_text(f"{i}!" if weak else str(i), style="red" if weak else ""),
                 _text(f"{c.iana_name} ({c.hex})", style="red" if weak else ""),
                 _text(c.openssl_name or "", style="red" if weak else "")]
        _row(table, *cells, *((kx_text(row),) if rows else ()))
    parts: list[RenderableType] = [_title(head), table]
    weak_note = weak_line(s)
    if weak_note is not None:
        parts.append(weak_note)
    parts.append(_text(f"Order: {order_text(s.order)}"))
    if not s.complete:
        parts.append(_text("the list may be incomplete", style="yellow"))
    parts += [_text(f"note: {n}", style="dim") for n in s.notes]
    return Group(*parts, _text(""))


def sigalg_section(s: SigalgAudit) -> RenderableType:
    head = f"Signature schemes, {s.version.name} ({conns(s.connections)})"
    if s.status != "established" and len(s.by_key_type) < 2:
        found = [_text("found before it stopped: " + ", ".join(c.name for c in s.supported))] \
            if s.supported else []
        return Group(_title(head), _text(f"{s.status.replace('_', ' ')}: {s.reason}"), *found,
                     _text(""))
    if len(s.by_key_type) > 1:   # TLS 1.2, several certificates: each one's schemes
        return Group(_title(head), *(line for k in s.by_key_type for line in (
            _text(f"{k.key_type} certificate ({k.suites}): "
                  f"{', '.join(c.name for c in k.supported) or '(none)'}"),
            _text(f"  Order: {order_text(k.order)}" if k.status == "established" else
                  f"  {k.status.replace('_', ' ')}: {k.reason}"))),
            *([_text(f"note: {s.reason}", style="dim")] if s.reason else []), _text(""))
    text = ", ".join(c.name for c in s.supported) or "(none)"
    parts: list[RenderableType] = [_title(head), _text(text),
                                   _text(f"Order: {order_text(s.order)}")]
    if s.reason:
        parts.append(_text(f"note: {s.reason}", style="dim"))
    return Group(*parts, _text(""))


def consistency_section(r: AuditReport) -> RenderableType:
    """The reference hello's answers when they disagree; one line when they agree."""
    c = r.consistency
    if c is None or c.status == "not_checked":
        return Group()
    n = r.connections.get("consistency", 0)
    if c.status == "consistent":
        return Group(_text(f"Consistency: the reference hello ({c.reference}) got the same "
                          f"answer {len(c.answers)} times ({conns(n)} to repeat it)",
                          style="dim"), _text(""))
    parts: list[RenderableType] = [
        _title(f"Consistency ({conns(n)})"),
        _text("the target answers inconsistently (likely several servers or configurations "
             "behind one name): results marked so may merge them", style="yellow")]
    if c.reference:
        parts.append(_text(f"Reference hello: {c.reference}; its answers, by phase:"))
    parts += [_text(f"  {a}") for a in c.answers]
    parts += [_text(f"note: {note}", style="dim") for note in c.notes]
    return Group(*parts, _text(""))


def findings_section(r: AuditReport, full: bool = False) -> RenderableType:
    """The findings; a message that names only the first items ("and N more") is followed,
    with `full`, by the whole list (`Finding.items`)."""
    if not r.findings:
        return Group(_title("Findings"), _text("none"), *waived_section(r, full))
    table = _table("Severity", "Finding", "Policy", "Code")
    for f in r.findings:
        message = _text(f.message)
        if full and CUT.search(f.message) and f.items:
            message.append("\n" + shown(f"all {len(f.items)}: {', '.join(f.items)}"))
        _row(table, _text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")), message,
             f.policy, f.code)
    note = inconclusive_line(r)
    return Group(_title(f"Findings ({r.policies_label() or 'built-in checks only'})"), table,
                 *([_text(note)] if note else []), *waived_section(r, full), _text(""))


def waived_section(r: AuditReport, full: bool = False) -> list[RenderableType]:
    """The findings a policy waives, each with the policy's reason (none: nothing)."""
    if not r.waived:
        return []
    table = _table("Severity", "Finding", "Code", "Waived by", "Reason")
    for f in r.waived:
        message = _text(f.message)
        if full and CUT.search(f.message) and f.items:
            message.append("\n" + shown(f"all {len(f.items)}: {', '.join(f.items)}"))
        _row(table, f.severity, message, f.code, f.waived_by or "", f.waiver or "")
    return [_text(""), _title(f"Waived findings ({len(r.waived)}: not counted for --fail-on)"),
            table]


def connections_line(r: AuditReport) -> str:
    """'Connections: 9 in 0.12 s (versions 5, groups TLS 1.3 4); 2 retries after a reset or
    timeout' (no parentheses when no connection was made); '; one at a time: WHY' for a
    server that serves one connection at a time."""
    parts = ", ".join(f"{phase} {n}" for phase, n in r.connections.items() if n)
    retries = f"; {r.retries} {'retry' if r.retries == 1 else 'retries'} after a reset or " \
        "timeout" if r.retries else ""
    serial = f"; one at a time: {r.one_at_a_time}" if r.one_at_a_time else ""
    return (f"Connections: {r.total_connections} in {r.duration_s:.2f} s"
            f"{f' ({parts})' if parts else ''}{retries}{serial}")


def audit_renderables(r: AuditReport, full: bool = False) -> list[RenderableType]:
    if r.error_kind == "usage":   # a bad line of the targets file, skipped
        return [_text(f"Skipped {quoted_text(r.host)}", style="bold underline"),
                _text(f"Error: {r.error}", style="red")]
    where = host_port(r.host, r.port)
    addr = f" ({r.address})" if r.address and r.address != r.host else ""
    out: list[RenderableType] = [_text(f"Audit of {where}{addr}", style="bold underline")]
    if r.rating is not None:
        out.append(rating_text(r.rating))
    if r.transport == "quic":
        out.append(_text("Transport: QUIC (TLS 1.3 in QUIC Initial and Handshake packets, "
                         "UDP)"))
    if r.starttls is not None:
        from tlsprobe.report.starttls import starttls_summary
        out.append(_text(f"STARTTLS: {starttls_summary(r.starttls)}"))
    if r.error and r.error_kind != "internal":   # an internal error keeps what was learnt
        return out + [_text(f"Error: {r.error}", style="red"), _text(connections_line(r))]
    if r.versions:
        out.append(versions_section(r))
    out += [group_section(g, full) for g in r.groups]
    if r.post_quantum:
        out.append(pq_section(r))
    out += [suite_section(s) for s in r.suites]
    out += [sigalg_section(s) for s in r.signature_schemes]
    if r.certificates:
        out.append(certificate_section(r))
    if r.check_results:
        from tlsprobe.report.checks import checks_section
        out.append(checks_section(r, full))
    if r.clients:
        from tlsprobe.report.clients import clients_table
        out.append(clients_table(r.clients))
    out += [consistency_section(r), findings_section(r, full)]
    if r.rating is not None:
        from tlsprobe.report.rating import rating_detail_lines
        out.append(Group(_title("Rating"), *(_text(line) for line in
                                                rating_detail_lines(r.rating)), _text("")))
    out.append(_text(connections_line(r)))
    if r.error:
        out.append(_text(f"Error: {r.error}", style="red"))
    return out


def rating_text(rating: Rating) -> Text:
    """The "Rating: ..." line, styled by the grade's tone (a provisional grade: unsure)."""
    from tlsprobe.report.rating import grade_tone, rating_line
    return _text(rating_line(rating), style="bold " + TONE_STYLE[grade_tone(rating)])


def summary_lines(reports: list[AuditReport], code: int, reason: str) -> list[str]:
    """The end of a run over several targets: how many were audited and failed (by kind),
    the findings by severity, and the exit code with its reason."""
    kinds: dict[str, int] = {}
    for r in reports:
        if r.error:
            kind = (r.error_kind or "error").replace("_", " ")
            kinds[kind] = kinds.get(kind, 0) + 1
    failed = sum(kinds.values())
    by_kind = f" ({', '.join(f'{k} {n}' for k, n in kinds.items())})" if kinds else ""
    counts: dict[str, int] = {}
    for r in reports:
        for f in r.findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
    order = (Severity.critical, Severity.high, Severity.medium, Severity.low, Severity.info)
    found = ", ".join(f"{counts[s]} {s}" for s in order if s in counts) or "none"
    from tlsprobe.report.rating import grades_line
    grades = grades_line(reports)
    return [(f"Targets: {len(reports)}; audited {len(reports) - failed}; with an error "
            f"{failed}{by_kind}"),
            f"Findings: {found}{inconclusive_note(reports)}", *([grades] if grades else []),
            *gate_lines(reports), f"Exit code {code}: {reason}"]


def inconclusive_line(r: AuditReport) -> str:
    """The line under the findings when some only say what could not be established
    (Finding.inconclusive); "" when none."""
    n = sum(1 for f in r.findings if f.inconclusive)
    return (f"Inconclusive (what could not be established), counted by no gate, --fail-on "
            f"info included: {n} of these findings") if n else ""


def inconclusive_note(reports: Sequence[AuditReport]) -> str:
    """" (2 inconclusive: counted by no gate)" after the findings by severity, when some
    findings only say what could not be established (Finding.inconclusive); "" when none."""
    n = sum(1 for r in reports for f in r.findings if f.inconclusive)
    return f" ({n} inconclusive: counted by no gate)" if n else ""


def gate_lines(reports: list[AuditReport]) -> list[str]:
    """With --fail-on or --fail-under: which targets failed the gate, and why, one line
    each, then its reasons indented ("Failed: 127.0.0.1:443", "  - 2 finding(s) at or above
    --fail-on high: ...")."""
    gates = [(r, r.gate) for r in reports if r.gate is not None]
    if not gates:
        return []
    failing = [(r, g) for r, g in gates if not g.passed]
    lines = [f"Gate: {len(gates) - len(failing)} of {len(gates)} target(s) passed"]
    for r, g in failing:
        where = host_port(r.host, r.port) + (" (QUIC)" if r.transport == "quic" else "")
        if r.port == 0:     # a line of -f FILE that is no target
            where = r.host
        lines += [f"Failed: {where}", *(f"  - {why}" for why in g.reasons)]
    return lines


def render_summary(reports: list[AuditReport], code: int, reason: str, out: IO[str]) -> None:
    from tlsprobe.report.console import Console  # a closed stdout: BrokenPipeError
    console = Console(file=out, highlight=False, soft_wrap=False,
                      width=None if out.isatty() else 120)
    console.print(_title("Summary"))
    for line in summary_lines(reports, code, reason):
        console.print(_text(line))


def render_audit(r: AuditReport, out: IO[str], width: int | None = None,
                 full: bool = False) -> None:
    from tlsprobe.report.console import Console  # a closed stdout: BrokenPipeError
    console = Console(file=out, highlight=False, soft_wrap=False,
                      width=width or (None if out.isatty() else 120))
    for part in audit_renderables(r, full):
        console.print(part)
    console.print()
