"""Rich renderables for `tlsprobe pcap`: the connection table, per-connection details (the
probe's labels) and the summary statistics.

On a terminal the tables are rich tables; elsewhere (pipes, files, tests) they are plain
aligned columns without trailing blanks, written row by row, so a table of a hundred
thousand connections costs no more than its text (rich is imported only when used).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Final

from tlsprobe.model.capture import BriefReport, Codepoint, ConnectionReport
from tlsprobe.model.probe import AlertInfo, CertificateInfo, KeyExchange
from tlsprobe.model.units import host_port
from tlsprobe.report.cert_facts import s_client_lines
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


Row = tuple[str, str]
#: the rows of one part of a connection's details
ConnectionRows = Callable[[ConnectionReport], list[Row]]

#: what a connection's TLS travels inside (the "Inside" row)
FRAMINGS: Final = {"openvpn": "OpenVPN control channel",
                   "tds": "MS-TDS (SQL Server) PRELOGIN packets",
                   "capwap": "CAPWAP (DTLS preamble)"}


def _where_rows(r: ConnectionReport) -> list[Row]:
    """The connection, its file, what came before or around the TLS, the SNI."""
    rows: list[Row] = [
        ("Connection", (f"#{connection_label(r)} {endpoint(r.client)} -> {endpoint(r.server)} "
                        f"({r.protocol}, "
                        f"frames {r.first_frame}-{r.last_frame})")),
        ("File", r.file)]
    if r.preamble:
        rows.append(("Before TLS", r.preamble))
    if r.framing:
        rdp = "RDP over UDP (reliable channel)" if r.protocol == "tls" else \
            "RDP over UDP (lossy channel)"
        rows.append(("Inside", rdp if r.framing == "rdp-udp" else
                     FRAMINGS.get(r.framing, r.framing)))
    if r.quic_version is not None:
        rows.append(("QUIC version", r.quic_version.label()))
    if r.midstream:
        rows.append(("Capture", "starts inside the connection"))
    rows.append(("SNI", r.sni or "(none)"))
    return rows


def _offer_rows(r: ConnectionReport) -> list[Row]:
    """The client's offer (SSL 2.0 cipher specs listed one by one)."""
    rows: list[Row] = []
    o = r.offer
    if o is not None:
        rows.append(("Offered versions", ", ".join(v.name for v in o.versions)))
        rows.append(("Offered groups", ", ".join(g.name for g in o.groups) or "(none)"))
        if o.key_share_groups:
            rows.append(("Offered key shares", ", ".join(g.name for g in o.key_share_groups)))
        if not r.sslv2_cipher_specs:  # else listed below, TLS suites included
            rows.append(("Offered suites", f"{len(o.cipher_suites)}"))
    if r.sslv2_cipher_specs:
        rows.append(("SSLv2 cipher specs", f"{len(r.sslv2_cipher_specs)} offered"))
        rows.extend(("", f"{c.iana_name} ({c.hex})") for c in r.sslv2_cipher_specs)
    if o is not None and o.alpn:
        rows.append(("Offered ALPN", ", ".join(o.alpn)))
    return rows


def _chosen_rows(r: ConnectionReport) -> list[Row]:
    """The server's choices: version and suite, then the key exchange."""
    rows: list[Row] = [("Protocol", r.version.label() if r.version else
                        "(unknown: see problems)" if r.cipher else "(none)")]
    if r.cipher:
        rows.append(("Cipher", f"{r.cipher.iana_name} ({r.cipher.hex})"))
        rows.append(("", f"OpenSSL name: {r.cipher.openssl_name or '(none)'}"))
    return rows + _key_exchange_rows(r)


def _negotiated_rows(r: ConnectionReport) -> list[Row]:
    """HelloRetryRequest, signature scheme, ALPN, resumption, session ticket."""
    rows: list[Row] = []
    if r.version is not None and r.version.id >= 0x0304 or r.hello_retry_request:
        from tlsprobe.model.describe import hello_retry_text
        unseen = r.hello_retry_request is None and r.key_exchange is not None and \
            r.key_exchange.source == "hello_retry_request" and \
            not any(m.startswith("<<< HelloRetryRequest") for m in r.messages)
        rows.append(("HelloRetryRequest", "yes, not captured (the client sent a second "
                     "ClientHello): its group is not known" if unseen else
                     hello_retry_text(r.hello_retry_request, r.key_exchange)))
    if r.signature_scheme:
        rows.append(("Signature scheme", r.signature_scheme.label()))
    if r.version is not None:
        rows.append(("ALPN", r.alpn or _no_alpn(r)))
    if r.resumption:
        rows.append(("Resumption", r.resumption))
    if r.session_ticket_lifetime is not None:
        rows.append(("Session ticket", f"lifetime {r.session_ticket_lifetime} s"))
    return rows


def _no_alpn(r: ConnectionReport) -> str:
    """The ALPN cell without a protocol: none chosen, or (TLS 1.3 not decrypted: the
    server's choice is in its EncryptedExtensions) not visible."""
    if r.version is None or r.version.id < 0x0304 or r.decrypted:
        from tlsprobe.model.describe import alpn_text
        return alpn_text(r.version, None, r.messages)
    if r.protocol == "quic":
        return "(not visible: TLS 1.3 encrypts it, in QUIC Handshake packets; --keylog " \
            "with this connection's secrets shows it)"
    return "(not visible: TLS 1.3 encrypts it; --keylog with this connection's secrets " \
        "shows it)"


def _chain_rows(label: str, chain: tuple[CertificateInfo, ...]) -> list[Row]:
    rows: list[Row] = []
    for i, c in enumerate(chain):
        rows.append((label if i == 0 else "", f"{i} s: {c.subject}"))
        rows += [("", f"  {line}") for line in s_client_lines(c)]
    return rows


def _certificate_rows(r: ConnectionReport) -> list[Row]:
    """The server's chain; client authentication when the capture shows any."""
    rows = _chain_rows("Certificate chain", r.certificates)
    auth = r.client_auth
    if auth is None:
        return rows
    if auth.requested:
        n, cas = len(auth.signature_schemes), auth.certificate_authorities
        schemes = f"{n} signature scheme{'' if n == 1 else 's'}, " if n else ""  # (< TLS 1.2)
        asked = f"requested ({schemes}{cas} certificate authorit{'y' if cas == 1 else 'ies'})"
    elif auth.requested is None:
        asked = "CertificateRequest not known (not captured: see the problems)"
    else:
        asked = "no CertificateRequest seen"
    sent = ("not seen" if auth.sent is None else "sent, empty (no certificate)"
            if not auth.certificates else f"sent, {len(auth.certificates)} certificate"
            + ("" if len(auth.certificates) == 1 else "s"))
    rows.append(("Client certificate", f"{asked}; {sent}"))
    if auth.certificate_types:
        rows.append(("Certificate types", ", ".join(t.id_label() for t in
                                                    auth.certificate_types)))
    rows.extend(("Acceptable CA" if i == 0 else "", name)
                for i, name in enumerate(auth.certificate_authority_names))
    rows.extend(_chain_rows("Client chain", auth.certificates))
    return rows


def _alert_rows(r: ConnectionReport) -> list[Row]:
    rows: list[Row] = []
    for a in r.alerts:
        if a.encrypted:
            rows.append(("Alert", (f"{a.direction} alert, encrypted (a protected record of an "
                         "alert's size; its level and description need the keys)")))
            continue
        level = "fatal" if a.level == 2 else "warning"
        rows.append(("Alert", f"{a.direction} {level} {a.name} ({a.description})"))
    return rows


def _outcome_rows(r: ConnectionReport) -> list[Row]:
    """Fingerprints, how far the handshake went, times, bytes, problems."""
    fp = r.fingerprints
    rows: list[Row] = [(label, value) for label, value in
                       (("JA3", fp.ja3), ("JA3S", fp.ja3s), ("JA4", fp.ja4)) if value]
    rows.append(("Handshake", _state(r)))
    t = r.timings
    # a TCP connection without its close was reported when its handshake was decided (a
    # live capture, stdin, --follow): its time and bytes are those until then
    so_far = " so far (open when reported)" if r.close is None and r.transport == "tcp" \
        else ""
    parts = [f"{name} {v:.1f} ms" for name, v in (("to ServerHello", t.server_hello_ms),
             ("handshake", t.handshake_ms), ("connection", t.duration_ms)) if v is not None]
    if parts:
        rows.append(("Timing", ", ".join(parts) + (so_far if t.duration_ms is not None
                                                   else "")))
    rows.append(("Bytes", f"client {r.client_bytes}, server {r.server_bytes}"
                 + (f", {r.gap_bytes} not captured" if r.gap_bytes else "") + so_far))
    rows.extend(("Problem", p) for p in r.problems)
    return rows


#: a connection's details, part by part, in order
CONNECTION_ROWS: Final[tuple[ConnectionRows, ...]] = (
    _where_rows, _offer_rows, _chosen_rows, _negotiated_rows, _certificate_rows, _alert_rows,
    _outcome_rows)


def connection_rows(r: ConnectionReport) -> list[Row]:
    """Per-connection details as (label, value) rows, labelled as the probe's summary
    (CONNECTION_ROWS in order)."""
    return [row for part in CONNECTION_ROWS for row in part(r)]


def _key_exchange_rows(r: ConnectionReport) -> list[tuple[str, str]]:
    from tlsprobe.report.tables import key_exchange_head
    kx = r.key_exchange
    if kx is None:
        return []
    rows = key_exchange_head(kx)
    sizes = []
    if kx.server_share_bytes is not None:
        sizes.append(f"server {kx.server_share_bytes} bytes")
    if kx.client_share_bytes is not None and r.version is not None and r.version.id >= 0x0304:
        sizes.append(f"client {kx.client_share_bytes} bytes")
    if sizes:
        rows.append(("Key share sizes", ", ".join(sizes)))
    if kx.client_share_bytes is not None and (r.version is None or r.version.id < 0x0304):
        what = {"ECDHE": "ECDH public key", "DHE": "DH public value",
                "RSA": "encrypted premaster secret"}.get(kx.kind, "key")
        rows.append(("ClientKeyExchange", f"{kx.client_share_bytes} bytes ({what})"))
    if kx.dh_prime_bits:
        rows.append(("DH prime", f"{kx.dh_prime_bits} bits ({kx.dh_group_name})"))
    if kx.problem:
        rows.append(("Key exchange problem", kx.problem))
    return rows


def _state(r: ConnectionReport) -> str:
    if r.handshake_complete:
        return "complete (both Finished decrypted)"
    failed = failure_alert(r)
    if failed is not None:
        if failed.encrypted:
            return failure_text(failed)
        return f"failed: {failed.direction} sent fatal alert {failed.name}"
    if r.encrypted:
        return "both sides encrypting" + (" (resumed)" if r.resumption else "")
    if (r.version is not None or r.cipher is not None) and r.protocol == "quic" and \
            not r.decrypted:
        return "ServerHello seen; the rest is in QUIC Handshake packets (--keylog with " \
            "this connection's secrets reads them)"
    if r.version is not None or r.cipher is not None:
        return "ServerHello seen, not finished in the capture"
    return "no ServerHello in the capture"


def render_details(r: ConnectionReport, out: IO[str]) -> None:
    # a name of its own: compiled, a function's import binds the module's global
    # (tests/project/test_compiled_shapes.py), and this module has its own render_rows
    from tlsprobe.report.tables import render_rows as render_label_rows
    render_label_rows(connection_rows(r), out)


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
