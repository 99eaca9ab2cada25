"""CSV for spreadsheets: `scan --csv FILE` and `pcap --csv FILE`.

`scan --csv`: ONE file, one row per fact, with a `section` column to filter on, so that a
run over many targets opens as one sheet (a pivot table or a filter on `section` gives the
findings, the groups or the suites of every target):

    target,section,version,rank,name,code,status,severity,detail,kx,weak
    127.0.0.1:4433,rating,,,grade,,B,,B (capped: TLS 1.0 offered),,
    127.0.0.1:4433,rating,,,cap tls10_offered,,B,,TLS 1.0 offered (<source>) [<evidence>],,
    127.0.0.1:4433,version,TLS 1.3,,TLS 1.3,0x0304,supported,,,,
    127.0.0.1:4433,group,TLS 1.3,1,x25519,0x001d,supported,,ECDHE,,
    127.0.0.1:4433,suite,TLS 1.2,1,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,0xc02f,supported,,ECDHE-RSA-AES128-GCM-SHA256,ECDH 253,
    127.0.0.1:4433,suite,TLS 1.2,2,TLS_DHE_RSA_WITH_AES_128_GCM_SHA256,0x009e,supported,,DHE-RSA-AES128-GCM-SHA256,DH 1024,DH 1024: under 2048 bits
    127.0.0.1:4433,signature_scheme,TLS 1.3,1,rsa_pss_rsae_sha256,0x0804,supported,,,,
    127.0.0.1:4433,check,,,heartbleed,check.heartbleed,not vulnerable,,<reason>,,
    127.0.0.1:4433,finding,TLS 1.2,,<message>,version.not_allowed,,medium,<all items>,,
    127.0.0.1:4433,inconclusive,TLS 1.2,,<message>,audit.inconclusive,builtin,info,<items>,,
    127.0.0.1:4433,waived,,,<message>,check.sct,<waiving policy>,low,<the policy's reason>,,
    127.0.0.1:4433,error,,,,,network,,<error>,,

`rank` is the place in the server's order (groups, suites, signature schemes), given only
where the audit established that the server enforces one; empty where it follows the
client's order, has a single value or its order is not established (the text view's "Order:"
line), so that no rank claims a preference the server does not have; the rows keep the
order the text view lists either way. `status` supported / not_supported / inconclusive for versions and groups
(a group the audit could not establish is a row with status inconclusive), a verdict for a
check. A suite row's `kx` is the key exchange its connection established, as testssl.sh
prints it ("ECDH 253", "DH 1024", "RSA 2048", "X25519MLKEM768", "unknown"), and `weak` says
why the suite is weak ("3DES", "DH 1024: under 2048 bits"; several joined with "; "), empty
when it is not (policy/suite_strength.py); both are empty on the other rows.
The `rating` rows come first: `grade` (the letter in `status`, the one-line label
in `detail`), `score`, then `cap RULE`, `warning RULE` and `unknown RULE` (docs/RATING.md).
Findings keep their whole item list in `detail` (joined with ", "); a finding a
policy waives is a `waived` row with that policy in `status` and its reason in `detail`;
one that says what could not be established (`audit.inconclusive`, `certificate.not_verified`,
an inconclusive check's: docs/POLICY.md "Inconclusive findings") is an `inconclusive` row,
so the `finding` rows are exactly those that count toward `--fail-on`.

`pcap --csv`: one row per connection with the columns of the connection table, the capture
file first (`File,#,Client,Server,SNI,Version,Cipher suite,Group,Key S/C,ALPN,JA4`); a
handshake ended by an alert says so in `Version` ("TLS 1.2, failed: client alert unknown_ca";
"TLS 1.3, failed: client sent an encrypted alert (its description is encrypted)" without
keys), one not seen to finish too ("TLS 1.3, not finished in the capture"), and a protocol
violation of the ServerHello's choice is named there in the live probe's words.

Both are UTF-8 with a header row. Text from the network (SNI, certificate names, ALPN,
messages quoting a server) is written as the text table shows it, control characters and
other non-printables escaped (report/escape.py: `\\x1b`, `\\n`, `\\u202e`), so that a
sheet shown in a terminal (`cat`, `--csv /dev/stdout`) cannot move the cursor or forge a
line, and a cell is always one line; a cell starting with `=`, `+`, `-` or `@` gets a
leading `'` so that a spreadsheet never runs it as a formula. JSON keeps the exact values.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.model.units import host_port
from tlsprobe.report.escape import shown

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport, SuiteRow
    from tlsprobe.model.capture import BriefReport, ConnectionReport
    from tlsprobe.model.clients import ClientsReport

SCAN_COLUMNS = ("target", "section", "version", "rank", "name", "code", "status", "severity",
                "detail", "kx", "weak")
KIND = {"ec": "ECDHE", "ecx": "ECDHE", "ffdhe": "FFDHE", "mlkem": "ML-KEM",
        "hybrid": "hybrid PQ", "draft": "draft PQ"}
_FORMULA = ("=", "+", "-", "@")   # (a tab or CR is escaped by shown() first)


def check_writable(path: str, option: str) -> None:
    """A usage error (exit 2) before any work when `path` cannot be written: its directory
    is missing or not writable, or it is a directory."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no such directory {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and
                                          not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def cell(value: object) -> str:
    """A CSV cell: None empty; untrusted text escaped as the text table shows it; text that
    a spreadsheet would take for a formula quoted."""
    if value is None:
        return ""
    text = shown(str(value))
    return "'" + text if text.startswith(_FORMULA) and text != "-" else text


def _target(r: AuditReport) -> str:
    return host_port(r.host, r.port)


def _rank(order: object, i: int) -> int | None:
    """A place in the server's order, only where the server enforces one."""
    from tlsprobe.model.audit import ORDER_SERVER
    return i if order == ORDER_SERVER else None


def scan_rows(r: AuditReport) -> list[tuple[object, ...]]:
    """The rows of one target (without the target column)."""
    rows: list[tuple[object, ...]] = []
    if r.error and r.error_kind != "internal":
        return [("error", None, None, None, None, r.error_kind, None, r.error)]
    if r.rating is not None:      # first: the grade, the score, each cap, warning, unknown
        from tlsprobe.report.rating import rating_rows
        rows += [("rating", None, None, item, None, status, None,
                  detail + (f" [{evidence}]" if evidence else ""))
                 for item, status, detail, evidence in rating_rows(r.rating)]
    for v in r.versions:
        rows.append(("version", v.version.name, None, v.version.name, v.version.hex,
                     v.status, None, v.detail))
    for g in r.groups:
        from tlsprobe import registry
        for i, cp in enumerate(g.supported, 1):
            info = registry.group(cp.id)
            rows.append(("group", g.version.name, _rank(g.order, i), cp.name, cp.hex,
                         "supported", None,
                         KIND.get(info.kind, info.kind) if info else None))
        rows += [("group", g.version.name, None, cp.name, cp.hex, "inconclusive", None, None)
                 for cp in g.inconclusive]
    for s in r.suites:
        kx = {row.suite.id: row for row in s.rows}
        rows += [("suite", s.version.name, _rank(s.order, i), c.iana_name, c.hex, "supported",
                  None,
                  c.openssl_name, *_kx_cells(kx.get(c.id)))
                 for i, c in enumerate(s.supported, 1)]
    for a in r.signature_schemes:
        rows += [("signature_scheme", a.version.name, _rank(a.order, i), c.name, c.hex,
                  "supported", None, None) for i, c in enumerate(a.supported, 1)]
    for c in r.check_results:
        rows.append(("check", None, None, c.name, c.code, str(c.verdict), c.severity,
                     c.reason + (f" ({', '.join(c.evidence)})" if c.evidence else "")))
    if r.clients:
        from tlsprobe.report.client_cells import scan_client_rows
        rows += scan_client_rows(r.clients)
    for f in r.findings:    # section `inconclusive`: what gates nothing (Finding.gates)
        rows.append(("inconclusive" if f.inconclusive else "finding", f.version, None,
                     f.message, f.code, f.policy, f.severity, ", ".join(f.items)))
    for f in r.waived:      # status: the policy that waives it; detail: its reason
        rows.append(("waived", f.version, None, f.message, f.code, f.waived_by, f.severity,
                     f.waiver))
    if r.error:
        rows.append(("error", None, None, None, None, r.error_kind, None, r.error))
    return rows


def _kx_cells(row: SuiteRow | None) -> tuple[str | None, str | None]:
    """The kx and weak cells of a suite row (both empty when the audit recorded none)."""
    if row is None:
        return None, None
    return row.kx_label, "; ".join(row.weak_reasons) if row.weak else None


def write_scan_csv(path: str, reports: Iterable[AuditReport]) -> None:
    """`scan --csv FILE`: every target's rows in one file (see the module docstring)."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(SCAN_COLUMNS)
        for r in reports:
            target = _target(r)
            # every row as wide as the header (the kx and weak cells are the suites')
            writer.writerows([cell(target), *map(cell, row),
                              *[""] * (len(SCAN_COLUMNS) - 1 - len(row))]
                             for row in scan_rows(r))


def write_clients_csv(path: str, reports: Iterable[ClientsReport]) -> None:
    """`tlsprobe clients --csv FILE`: a row per target and profile (CSV_COLUMNS of
    report/client_cells.py); a target with an error has one "error" row."""
    from tlsprobe.report.client_cells import CSV_COLUMNS, client_row
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for r in reports:
            target = host_port(r.host, r.port)
            if r.error:
                writer.writerow([cell(target), "", "", "error", *[""] * 10, cell(r.error), ""])
            writer.writerows([cell(target), *map(cell, client_row(s))] for s in r.clients)


class PcapCsv:
    """`pcap --csv FILE`: a row per connection, written as connections are reported."""

    def __init__(self, path: str) -> None:
        from tlsprobe.report.offline_tables import COLUMNS
        # open while connections are reported; closed by close()
        self._fh = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._writer = csv.writer(self._fh)
        self._writer.writerow(("File", *COLUMNS))

    def add(self, file: str, report: ConnectionReport | BriefReport) -> None:
        """One connection of capture `file`, with the connection table's cells."""
        from tlsprobe.report.offline_tables import connection_row
        self._writer.writerow([cell(file), *map(cell, connection_row(report))])

    def close(self) -> None:
        self._fh.close()


__all__ = ["SCAN_COLUMNS", "PcapCsv", "cell", "check_writable", "scan_rows", "write_scan_csv"]
