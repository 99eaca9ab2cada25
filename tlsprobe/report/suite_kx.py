"""The key exchange and weak marks of the suites table, for the text and HTML reports.

Each accepted suite's row (model.audit.SuiteRow) adds a "Kx" cell as testssl.sh prints it
("ECDH 253", "DH 1024", "RSA 2048", "X25519MLKEM768", "unknown") and, when the suite is
weak (policy/suite_strength.py), a marker: in text "!" after the row number, the row in
red, and one "weak:" line under the table naming why per row (a reason column would not
fit an 80-column terminal beside the suite names); in HTML the row's class "weak" and a
"Weak" cell with the reasons.
"""

from __future__ import annotations

import html

from rich.text import Text

from tlsprobe.model.audit import SuiteAudit, SuiteRow
from tlsprobe.model.vocab import KxStrength
from tlsprobe.report.escape import shown

__all__ = ["KX_STYLE", "WEAK_CSS", "kx_text", "suite_table_html", "weak_line"]

#: the text style of a Kx cell by strength (weak and insecure red, unknown yellow)
KX_STYLE = {KxStrength.OK: "", KxStrength.WEAK: "red", KxStrength.INSECURE: "bold red",
            KxStrength.UNKNOWN: "yellow"}
#: the page's style for the suites table's weak rows
WEAK_CSS = "tr.weak td{background:#fdecea}tr.weak td.why{color:#b71c1c;font-weight:bold}\n"


def kx_text(row: SuiteRow | None) -> Text:
    """The Kx cell ("" when the audit recorded no row for the suite)."""
    if row is None:
        return Text("")
    return Text(shown(row.kx_label), style=KX_STYLE.get(row.kx_strength, ""))


def weak_line(s: SuiteAudit) -> Text | None:
    """'weak: 3 3DES; 5 DH 1024: under 2048 bits' for the weak rows, by their number in
    the table; None when none is weak."""
    rows = {r.suite.id: r for r in s.rows}
    parts = [f"{i} {', '.join(row.weak_reasons)}" for i, c in enumerate(s.supported, 1)
             if (row := rows.get(c.id)) is not None and row.weak]
    return Text(shown("weak: " + "; ".join(parts)), style="red") if parts else None


def _e(text: object) -> str:
    return html.escape(shown(str(text)), quote=True)


def suite_table_html(s: SuiteAudit) -> str:
    """The suites table of one version: number, names, code, Kx and why a weak row is."""
    rows = {r.suite.id: r for r in s.rows}
    head = "".join(f"<th>{h}</th>" for h in ("#", "Cipher suite", "Code", "OpenSSL name",
                                                "Kx", "Weak"))
    body = []
    for i, c in enumerate(s.supported, 1):
        row = rows.get(c.id)
        weak = row is not None and row.weak
        kx = row.kx_label if row is not None else ""
        why = ", ".join(row.weak_reasons) if row is not None and row.weak else ""
        cells = [f"<td>{_e(v)}</td>" for v in (i, c.iana_name, c.hex, c.openssl_name or "")]
        strength = row.kx_strength if row is not None else KxStrength.UNKNOWN
        cells.append(f'<td class="kx kx-{_e(strength)}">{_e(kx)}</td>')
        cells.append(f'<td class="why">{_e(why)}</td>')
        tr = '<tr class="weak">' if weak else "<tr>"
        body.append(f"{tr}{''.join(cells)}</tr>\n")
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{''.join(body)}</tbody></table>\n"
