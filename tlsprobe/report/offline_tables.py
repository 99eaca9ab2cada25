"""Rich renderables for `tlsprobe pcap`: the connection table and the summary statistics
(per-connection details, the probe's labels, are in report/offline_details.py).

On a terminal the tables are rich tables; elsewhere (pipes, files, tests) they are plain
aligned columns without trailing blanks, written row by row, so a table of a hundred
thousand connections costs no more than its text (rich is imported only when used).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Final

from tlsprobe.model.capture import BriefReport, Codepoint, ConnectionReport
from tlsprobe.model.probe import AlertInfo, KeyExchange
from tlsprobe.model.units import host_port
from tlsprobe.report.escape import shown

if TYPE_CHECKING:
    from tlsprobe.report.fit import FitTable

COLUMNS: Final = ("#", "Client", "Server", "SNI", "Version", "Cipher suite", "Group", "Key S/C",
                  "ALPN", "JA4")
LEGEND: Final = ("Key S/C: bytes of the server's key share and of the client's (TLS 1.3 key_share, "
          "TLS 1.2 ServerKeyExchange / ClientKeyExchange)")


def _group(r: ConnectionReport | BriefReport) -> str:
    return _group_cell(r.key_exchange, r.hello_retry_request)


def _group_cell(kx: KeyExchange | None, hrr: Codepoint | None) -> str:
    """The Group cell of a key exchange and a HelloRetryRequest's group."""
    if kx is None:
        return f"HRR {hrr.name}" if hrr else "-"
    if kx.group is not None:
        text = kx.group.name
    elif kx.dh_group_name:
        text = f"DHE {kx.dh_group_name}"
    elif kx.kind == "RSA":
        text = "RSA key transport"
    else:
        text = kx.kind
    return text + (" (after HRR)" if hrr else "")


def _sizes(kx: KeyExchange | None) -> str:
    """The Key S/C cell: the server's and the client's key share sizes."""
    if kx is None:
        return "-"
    server, client = kx.server_share_bytes, kx.client_share_bytes
    if server is None and client is None:
        return "-"
    return f"{'-' if server is None else server}/{'-' if client is None else client}"


def connection_label(r: ConnectionReport | BriefReport) -> str:
    """The `#` of a connection: TCP connections by number ("3"), the others prefixed with
    their protocol ("quic/0", "dtls/1"): each transport counts from 0 in a capture."""
    return _label(r.id, r.transport, r.protocol)


def _label(cid: int, transport: str, protocol: str) -> str:
    return str(cid) if transport == "tcp" else f"{protocol}/{cid}"


_NOT_ERRORS: Final = (0, 90)  # close_notify, user_canceled: the closure alerts (RFC 8446 §6.1)


def failure_alert(r: ConnectionReport | BriefReport) -> AlertInfo | None:
    """The alert that ended the handshake: the first fatal one (any alert but a closure
    alert in TLS 1.3, where every error alert is fatal, RFC 8446 §6), None when there is
    none or both Finished messages were seen (decrypted) before it."""
    if not r.alerts or r.handshake_complete:
        return None
    tls13 = r.version is not None and r.version.id == 0x0304
    for a in r.alerts:
        # (an encrypted alert: one in place of the client's Finished, Facts.first_protected)
        if a.level == 2 or tls13 and a.description not in _NOT_ERRORS:
            return a
    return None


def failure_text(a: AlertInfo) -> str:
    """What ended the handshake, for the table ("failed: client alert unknown_ca")."""
    if a.encrypted:
        return f"failed: {a.direction} sent an encrypted alert (its description is encrypted)"
    return f"failed: {a.direction} alert {a.name}"


def unfinished(r: ConnectionReport | BriefReport) -> bool:
    """A TLS handshake (over TCP) whose ServerHello was seen but not both sides' switch to
    protected records: nothing in the capture says it completed."""
    return _unfinished(r.protocol, r.version, r.encrypted)


def _unfinished(protocol: str, chosen: Codepoint | None, encrypted: bool) -> bool:
    """`unfinished` from the fields a row has read already."""
    return protocol == "tls" and chosen is not None and not encrypted and chosen.id >= 0x0300


def endpoint(text: str) -> str:
    """A report's endpoint ('ip:port' as tshark prints it, in its JSON) as people write it:
    an IPv6 address in brackets, '[2001:db8::1]:443', so that its colons are not read as
    the port's (the probe's and scan's style: model/units.host_port)."""
    if text.count(":") < 2:   # IPv4: as it is
        return text
    ip, port = text.rsplit(":", 1)
    return host_port(ip, int(port))


def connection_row(r: ConnectionReport | BriefReport) -> tuple[str, ...]:
    """One table row of plain strings; a handshake ended by an alert says "failed" and
    the alert in the Version cell, one not seen to finish says so."""
    # each field read once (a report's attribute is a generic lookup, once a connection;
    # a BriefReport, the table's usual report, unpacked at once)
    if type(r) is BriefReport:
        (cid, transport, protocol, client, server, _, sni, offer, chosen, cipher, kx, hrr,
         alpn, _, alerts, prints, encrypted, violation, _, quic) = r
    else:
        cid, transport, protocol, client, server = (r.id, r.transport, r.protocol, r.client,
                                                    r.server)
        sni, offer, chosen, cipher, kx, hrr = (r.sni, r.offer, r.version, r.cipher,
                                               r.key_exchange, r.hello_retry_request)
        alpn, alerts, prints, encrypted, violation = (r.alpn, r.alerts, r.fingerprints,
                                                      r.encrypted, r.violation)
        quic = r.quic_version
    version = chosen.name if chosen else "(unknown)" if cipher else (
        "(no ServerHello)" if offer else "-")
    if quic is not None:
        version += f" (QUIC {quic.name})"
    failed = failure_alert(r) if alerts else None
    if failed is not None:
        version += ", " + failure_text(failed)
    elif alerts and chosen is None:
        version += f", {alerts[-1].direction} alert {alerts[-1].name}"
    elif _unfinished(protocol, chosen, encrypted):
        version += ", not finished in the capture"
    if violation is not None:
        version += ("; " if ", " in version else ", ") + violation
    if client.count(":") > 1:   # IPv6 (one flow, one family: the client's tells)
        client, server = endpoint(client), endpoint(server)
    return (_label(cid, transport, protocol), client, server, sni or "-", version,
            cipher.iana_name if cipher else "-", _group_cell(kx, hrr), _sizes(kx),
            alpn or "-", prints.ja4 or "-")


def fit_rows(rows: Sequence[tuple[str, ...]], *, title: str | None = None,
             columns: Sequence[str] = COLUMNS) -> FitTable:
    """The rich table of `rows` (escaped already): addresses, suite names and JA4 values
    are never split; on a console too narrow for the columns, one record per row."""
    from rich.text import Text

    from tlsprobe.report.fit import FitTable
    table = FitTable(*columns, title=title, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


#: the ASCII characters str.isprintable refuses (C0 controls and DEL)
_ASCII_CONTROLS: Final = bytes(range(0x20)) + b"\x7f"


def printable(text: str) -> bool:
    """`text.isprintable()`, faster for ASCII text (the usual row): its bytes with the
    control characters deleted are as long as before (a table lookup per byte, where
    isprintable looks up each character's Unicode category)."""
    if not text.isascii():
        return text.isprintable()
    raw = text.encode("ascii")
    return len(raw.translate(None, _ASCII_CONTROLS)) == len(raw)


def render_rows(rows: Sequence[tuple[str, ...]], out: IO[str], *, title: str | None = None,
                columns: Sequence[str] = COLUMNS) -> None:
    """A table of plain-string rows: rich on a terminal, aligned text elsewhere; what a
    capture holds (SNI, ALPN, names) is escaped."""
    # a row whose text is all printable is shown as it is (one check per row, not per cell)
    rows = [row if printable("".join(row)) else tuple(map(shown, row)) for row in rows]
    if out.isatty():
        from rich.console import Console
        Console(file=out, highlight=False).print(fit_rows(rows, title=title, columns=columns))
        return
    every = (tuple(columns), *rows)
    widths = [max(map(len, column)) for column in zip(*every)]
    if title:
        out.write(title + "\n")
    # each cell padded to its width; printf-style: str.format's "{:<w}" parses a format
    # spec per cell, "%-ws" does not (the same text for str cells)
    line = "  ".join(f"%-{w}s" for w in widths)
    for i in range(0, len(every), 1024):  # a block at a time: flat memory, few writes
        out.write("\n".join([(line % row).rstrip() for row in every[i:i + 1024]]) + "\n")


def render_connections(rows: Sequence[tuple[str, ...]], out: IO[str], *,
                       with_file: bool = False) -> None:
    """The connection table; `with_file`: each row starts with its capture's name (rows
    of `connection_row` with the file name put in front)."""
    render_rows(rows, out, columns=("File", *COLUMNS) if with_file else COLUMNS)
    if rows:
        print(LEGEND, file=out)


#: the streamed table's column widths (`StreamedTable`): a row is printed when its
#: connection's handshake is decided, before the widths of the others are known, so each
#: column has the width of its usual values; a longer value wraps inside its column, onto
#: the row's next lines (between words, as the terminal table wraps a cell; a word longer
#: than the column is cut into pieces of its width), so every column stays under its
#: header. The cipher suite's fits every ECDHE AEAD suite's IANA name (the longest, 45
#: characters: TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256), the group's a group after a
#: HelloRetryRequest ("secp256r1 (after HRR)"), the version's an alert's "TLS 1.2, failed:"
STREAM_WIDTHS: Final = (7, 21, 21, 24, 16, 45, 21, 9, 8, 36)


def _wrapped(cell: str, width: int) -> list[str]:
    """The lines of a streamed cell: the cell when it fits, else wrapped to `width`. A cell
    with escapes (text from the capture, `shown`: `\\x1b`, `\\n`, `\\xe2`) is cut
    between them, never inside one, and keeps its spaces: "\\xa" then "ename" on the
    next line read as other bytes than "\\xae" "name"."""
    if len(cell) <= width:
        return [cell]
    if "\\" in cell:
        import re
        lines = [""]
        for piece in re.findall(_ESCAPE_OR_CHAR, cell):
            if len(lines[-1]) + len(piece) > width:
                lines.append("")
            lines[-1] += piece
        return lines
    import textwrap
    return textwrap.wrap(cell, width, break_on_hyphens=False) or [cell[:width]]


#: one escape of `shown` (or a doubled backslash), else one character
_ESCAPE_OR_CHAR: Final = r"(?s)\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)|."


class StreamedTable:
    """The connection table written a row at a time as connections are reported (live
    capture, stdin, --follow): fixed column widths (a longer value wraps inside its
    column), each row flushed, what the capture holds escaped; the legend under the last
    row."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.rows = 0
        self._line = "  ".join(f"%-{w}s" for w in STREAM_WIDTHS)  # as render_rows'

    def header(self) -> None:
        self.out.write((self._line % COLUMNS).rstrip() + "\n")
        self.out.flush()

    def row(self, row: tuple[str, ...]) -> None:
        if not printable("".join(row)):
            row = tuple(map(shown, row))
        self.rows += 1
        if all(len(cell) <= w for cell, w in zip(row, STREAM_WIDTHS)):
            self.out.write((self._line % row).rstrip() + "\n")
        else:
            cells = [_wrapped(cell, w) for cell, w in zip(row, STREAM_WIDTHS)]
            lines = max(map(len, cells))
            self.out.write("".join((self._line % tuple(
                c[n] if n < len(c) else "" for c in cells)).rstrip() + "\n"
                for n in range(lines)))
        self.out.flush()

    def end(self) -> None:
        if self.rows:
            print(LEGEND, file=self.out)


def render_stats(tables: list[tuple[str, list[tuple[str, int]]]], total: int,
                 out: IO[str]) -> None:
    for title, counts in tables:
        rows = [(name, str(n), f"{100 * n / total:.1f}%" if total else "-")
                for name, n in counts]
        render_rows(rows, out, title=f"{title} ({plural(total, 'connection')})",
                    columns=(title.rstrip("s").capitalize() if title != "Cipher suites"
                             else "Cipher suite", "Connections", "Share"))


def plural(n: int, word: str) -> str:
    """'1 connection', '2 connections'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
