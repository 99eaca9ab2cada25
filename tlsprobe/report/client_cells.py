"""Client simulation results (model/clients.py) as cells and rows without rich: the text
table's cells, the CSV rows (`tlsprobe clients --csv`, the scan CSV's "client" section) and
the HTML table (`--html`). report/clients.py renders the rich table from the same cells."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tlsprobe import registry
from tlsprobe.model.clients import (
    ClientSimulation,
    ClientsReport,
    FailureReason,
    SimStatus,
)
from tlsprobe.model.units import host_port
from tlsprobe.report.html_parts import e

__all__ = [
    "CLIENT_COLUMNS",
    "CSV_COLUMNS",
    "client_cells",
    "client_name",
    "client_names",
    "client_row",
    "clients_html",
    "clients_page",
    "scan_client_rows",
]

CLIENT_COLUMNS = ("client", "version", "suite", "group", "ALPN", "signature", "trusted")
CSV_COLUMNS = ("target", "profile", "client", "status", "version", "cipher_suite", "group",
               "dh_bits", "hello_retry", "alpn", "signature_scheme", "trusted",
               "post_quantum", "reason", "detail", "ja4_sent")
_TRUST = {True: "yes", False: "NO", None: "not checked"}


def _group(s: ClientSimulation) -> str:
    if s.group is None:
        return "-"
    name = registry.group_name(s.group)
    if s.dh_bits and not name.startswith("ffdhe"):
        name = f"DH {s.dh_bits}"
    return name + (" via HRR" if s.hello_retry else "")


def _negotiated(s: ClientSimulation) -> bool:
    return s.version is not None and s.cipher_suite is not None


def client_name(s: ClientSimulation) -> str:
    """The client and its version without the platform ("Chromium 156.0.8078.114"): the
    profile's label less its last parenthesis, nested ones included ("curl 7.68.0 (Linux
    (not stated))" -> "curl 7.68.0"; the JSON keeps the whole label)."""
    label = s.client
    depth = 0
    for i in range(len(label) - 1, -1, -1) if label.endswith(")") else ():
        depth += {")": 1, "(": -1}.get(label[i], 0)
        if depth == 0:
            return label[:i].rstrip() or label
    return label


def client_names(sims: Iterable[ClientSimulation]) -> dict[str, str]:
    """Each simulated profile's name in a table (by profile id): without its platform
    (`client_name`) unless another profile of the table would then read the same (Internet
    Explorer 8.0 on Windows XP and on Windows 7): those keep their whole label."""
    short = {s.profile: (client_name(s), s.client) for s in sims}
    taken = Counter(name for name, _ in short.values())
    return {profile: name if taken[name] == 1 else label
            for profile, (name, label) in short.items()}


def client_cells(s: ClientSimulation, name: str | None = None) -> tuple[str, ...]:
    """The table's cells of one simulation (CLIENT_COLUMNS), its client shown as `name`
    (default `client_name`; `client_names` tells apart profiles it would merge); a failure
    or an inconclusive result says so across the negotiated columns, with its reason and
    detail."""
    name = client_name(s) if name is None else name
    if s.status != SimStatus.connected and not _negotiated(s):
        # the verdict in the version column, its reason and evidence across the next one
        head = "FAILED" if s.status == SimStatus.failed else "inconclusive"
        why = s.reason.value if s.reason is not None else ""
        text = f"{why}: {s.detail}" if why and s.detail else why or s.detail
        return (name, head, text, "", "", "", "")
    version = registry.version_name(s.version or 0)
    trusted = _TRUST[s.trusted]
    suite = registry.suite_name(s.cipher_suite) if s.cipher_suite is not None else "-"
    if s.reason == FailureReason.certificate_not_trusted:
        trusted = "NO: fails"
    elif s.status == SimStatus.failed and s.reason is not None:   # after the ServerHello
        suite = f"{suite}, then FAILED: {s.reason.value}" + \
            (f" ({s.detail})" if s.detail else "")
    elif s.status == SimStatus.inconclusive:
        suite = f"{suite}, then inconclusive: {s.detail}"
    sig = registry.sigscheme_name(s.signature_scheme) if s.signature_scheme else "-"
    return (name, version, suite, _group(s), s.alpn or "-", sig, trusted)


def client_row(s: ClientSimulation) -> tuple[object, ...]:
    """One CSV row of a simulation (CSV_COLUMNS without the target)."""
    return (s.profile, s.client, s.status.value,
            registry.version_name(s.version) if s.version is not None else None,
            registry.suite_name(s.cipher_suite) if s.cipher_suite is not None else None,
            registry.group_name(s.group) if s.group is not None else None, s.dh_bits,
            s.hello_retry, s.alpn,
            registry.sigscheme_name(s.signature_scheme) if s.signature_scheme else None,
            s.trusted, s.post_quantum, s.reason.value if s.reason else None, s.detail,
            s.ja4_sent)


def scan_client_rows(sims: Iterable[ClientSimulation]) -> list[tuple[object, ...]]:
    """The scan CSV's rows of its clients section (section, version, rank, name, code,
    status, severity, detail): the client, its profile id, the status, and in the detail
    what it negotiated or why it failed."""
    rows: list[tuple[object, ...]] = []
    for s in sims:
        cells = client_cells(s)
        detail = ", ".join(c for c in cells[2:6] if c and c != "-") if _negotiated(s) \
            else cells[1]
        if s.reason is not None and _negotiated(s):
            detail += f"; {s.reason.value}" + (f" ({s.detail})" if s.detail else "")
        rows.append(("client", registry.version_name(s.version) if s.version else None,
                     None, s.client, s.profile, s.status.value, None, detail))
    return rows


def clients_html(sims: Iterable[ClientSimulation]) -> str:
    """The HTML table of the clients section (every text escaped)."""
    head = "".join(f"<th>{e(c)}</th>" for c in CLIENT_COLUMNS)
    body = []
    sims = list(sims)
    names = client_names(sims)
    for s in sims:
        cls = f' class="{s.status.value}"'
        cells = "".join(f"<td>{e(c)}</td>" for c in client_cells(s, names[s.profile]))
        body.append(f"<tr{cls}>{cells}</tr>")
    return (f"<table class=\"clients\"><thead><tr>{head}</tr></thead><tbody>"
            f"{''.join(body)}</tbody></table>")


def clients_page(reports: Iterable[ClientsReport]) -> str:
    """`tlsprobe clients --html FILE`: one self-contained page, a table per target."""
    parts = []
    for r in reports:
        target = e(host_port(r.host, r.port))
        body = f"<p class=\"error\">{e(r.error)}</p>" if r.error else \
            clients_html(r.clients)
        parts.append(f"<h2>{target}</h2>{body}")
    style = ("body{font-family:sans-serif}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
             "tr.failed{background:#fdd}tr.inconclusive{background:#ffd}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tlsprobe client "
            f"simulation</title><style>{style}</style></head><body><h1>Client simulation"
            f"</h1>{''.join(parts)}</body></html>\n")
