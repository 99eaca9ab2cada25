"""`tlsprobe pcap --details`: one connection's details as (label, value) rows, labelled as
the probe's summary (report/tables.py renders them), from where the connection is to how
it ended. The connection table's cells (its label, endpoints, group, alerts) are
report/offline_tables.py's, so that a row and the details say one thing alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Final

from tlsprobe.model.capture import ConnectionReport
from tlsprobe.model.probe import CertificateInfo
from tlsprobe.report.cert_facts import s_client_lines
from tlsprobe.report.offline_tables import (
    connection_label,
    endpoint,
    failure_alert,
    failure_text,
)

__all__ = ["CONNECTION_ROWS", "ConnectionRows", "Row", "connection_rows", "render_details"]


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
