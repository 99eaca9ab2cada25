"""Rich renderables for probe results (the only module of the probe path that imports rich)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO

from rich.table import Table
from rich.text import Text

from tlsprobe.model.describe import alpn_text, hello_retry_text
from tlsprobe.model.probe import CertificateInfo, Codepoint, KeyExchange, ProbeResult
from tlsprobe.model.units import host_port
from tlsprobe.report.cert_facts import s_client_lines
from tlsprobe.report.console import Console
from tlsprobe.report.escape import shown

SOURCES = {"key_share": "TLS 1.3 key_share", "hello_retry_request":
           "TLS 1.3 key_share after HelloRetryRequest", "server_key_exchange":
           "TLS 1.2 ServerKeyExchange", "dhe_parameters": "TLS 1.2 ServerKeyExchange DH parameters",
           "rsa": "RSA key transport (no ephemeral key)", "none": "no ServerKeyExchange",
           "not_reached": "not known: the handshake ended before the ServerKeyExchange",
           "not_captured": "ServerKeyExchange not captured (capture gap)",
           "malformed": "key_share extension malformed (group not known)"}
#: SubjectAltNames listed per certificate before "... N more"
MAX_SAN_SHOWN = 8

#: chain entries printed in the summary; a longer chain (see --max-chain) is cut with a note
MAX_CHAIN_SHOWN = 10


def _source(kx: KeyExchange, version: Codepoint | None) -> str:
    """Where the group was learnt; a ServerKeyExchange named with the version really spoken
    (TLS 1.0 and 1.1 have one too)."""
    text = SOURCES.get(kx.source, kx.source)
    if version is not None and version.id < 0x0304 and text.startswith("TLS 1.2 "):
        text = f"{version.name} {text[8:]}"
    return text


def key_exchange_head(kx: KeyExchange,
                      version: Codepoint | None = None) -> list[tuple[str, str]]:
    """The group (or key exchange kind), where it was learnt, and s_client's Temp Key line;
    shared by the live probe's summary and the pcap reader's details."""
    rows: list[tuple[str, str]] = []
    source = _source(kx, version)
    if kx.group is not None:
        rows.append(("Group", f"{kx.group.label()}, from {source}"))
    elif kx.dh_group_name:
        rows.append(("Group", f"DHE {kx.dh_group_name}, from {source}"))
    else:
        rows.append(("Key exchange", f"{kx.kind}, {source}"))
    if kx.server_temp_key:
        rows.append(("Server Temp Key", kx.server_temp_key))
    return rows


Row = tuple[str, str]
#: the rows of one part of the probe summary; `full`: every certificate and name, none cut
ProbeRows = Callable[[ProbeResult, bool], list[Row]]


def _target_rows(r: ProbeResult, full: bool) -> list[Row]:
    where = host_port(r.host, r.port)
    rows = [("Target", where + (f" ({r.address})" if r.address and r.address != r.host
                                else ""))]
    if r.starttls is not None:
        from tlsprobe.report.starttls import starttls_summary
        rows.append(("STARTTLS", starttls_summary(r.starttls)))
    rows.append(("Protocol", r.version.label() if r.version else "(none)"))
    if r.cipher:
        rows.append(("Cipher", f"{r.cipher.iana_name} ({r.cipher.hex})"))
        rows.append(("", f"OpenSSL name: {r.cipher.openssl_name or '(none)'}"))
    return rows


def _key_exchange_rows(r: ProbeResult, full: bool) -> list[Row]:
    kx = r.key_exchange
    if kx is None:
        return []
    rows = key_exchange_head(kx, r.version)
    sizes = []
    if kx.server_share_bytes is not None:
        sizes.append(f"server {kx.server_share_bytes} bytes")
    transport = kx.source == "rsa"   # the client's key is the encrypted premaster
    if kx.client_share_bytes is not None and not transport:
        sizes.append(f"client {kx.client_share_bytes} bytes")
    if sizes:
        rows.append(("Key share sizes", ", ".join(sizes)))
    if kx.client_share_bytes is not None and transport:
        rows.append(("ClientKeyExchange",
                     f"{kx.client_share_bytes} bytes (encrypted premaster secret)"))
    if kx.dh_prime_bits:
        weak = ("; WEAK: under 2048 bits (Logjam; openssl s_client refuses it: dh key "
                "too small)" if kx.dh_prime_bits < 2048 else "")
        rows.append(("DH prime", f"{kx.dh_prime_bits} bits ({kx.dh_group_name}){weak}"))
    if kx.problem:
        rows.append(("Key exchange problem", kx.problem))
    return rows


def _negotiated_rows(r: ProbeResult, full: bool) -> list[Row]:
    """HelloRetryRequest (TLS 1.3), signature scheme, ALPN, session ticket."""
    rows: list[Row] = []
    if r.version is not None and r.version.id >= 0x0304:
        rows.append(("HelloRetryRequest", hello_retry_text(r.hello_retry_request,
                                                           r.key_exchange)))
    if r.signature_scheme:
        rows.append(("Signature scheme", r.signature_scheme.label()))
    if r.version is not None:
        rows.append(("ALPN", alpn_text(r.version, r.alpn, r.messages)))
    if r.session_ticket_lifetime is not None:
        rows.append(("Session ticket", f"lifetime {r.session_ticket_lifetime} s"))
    return rows


def _san_row(c: CertificateInfo, first: bool, full: bool) -> list[Row]:
    if c.san:
        cut = not full and len(c.san) > MAX_SAN_SHOWN
        shown_names = c.san if full else c.san[:MAX_SAN_SHOWN]
        tail = f", ... {len(c.san) - MAX_SAN_SHOWN} more (--full shows all)" if cut else ""
        return [("", f"  SAN: {', '.join(shown_names)}{tail}")]
    if first:
        return [("", ("  SAN: none (no subjectAltName: host names are matched against the "
                     "subject CN)"))]
    return []


def certificate_rows(r: ProbeResult, full: bool) -> list[Row]:
    """The chain as s_client prints it (subject, issuer, key, validity, names); without
    `full`, MAX_CHAIN_SHOWN certificates and MAX_SAN_SHOWN names each."""
    chain_shown = len(r.certificates) if full else MAX_CHAIN_SHOWN
    rows: list[Row] = []
    for i, c in enumerate(r.certificates[:chain_shown]):
        rows.append(("Certificate chain" if i == 0 else "", f"{i} s: {c.subject}"))
        rows += [("", f"  {line}") for line in s_client_lines(c)]
        rows += _san_row(c, i == 0, full)
        if full:
            from tlsprobe.report.cert_facts import fact_lines
            rows += [("", f"  {line}") for line in fact_lines(c)]
    if len(r.certificates) > chain_shown:
        more = len(r.certificates) - chain_shown
        rows.append(("", (f"... {more} more certificates not shown (--full or --json shows "
                         "them all)")))
    return rows


def _verification_rows(r: ProbeResult, full: bool) -> list[Row]:
    if r.verification is None:
        return []
    return [("Verification", r.verification.message if r.verification.code is None
             else f"Verify return code: {r.verification.message}")]


def _proof_rows(r: ProbeResult, full: bool) -> list[Row]:
    """The server's signature and Finished, a CertificateRequest."""
    rows: list[Row] = []
    if r.signature_verified is not None or r.signature_detail:
        state = {True: "verified", False: "FAILED", None: "not checked"}[r.signature_verified]
        detail = f" ({r.signature_detail})" if r.signature_detail else ""
        rows.append(("Server signature", state + detail))
    if r.finished_verified is not None:
        rows.append(("Server Finished", "verified" if r.finished_verified else "FAILED"))
    if r.client_certificate_requested:
        types = ", ".join(t.id_label() for t in r.client_certificate_types)
        rows.append(("Client certificate", "requested by the server (CertificateRequest"
                     + (f"; certificate types {types}" if types else "") + "); none sent"))
    return rows


def _handshake_state(r: ProbeResult) -> str:
    if r.handshake_complete:
        return "complete"
    if r.incomplete_reason:
        return f"stopped after the server's first flight: {r.incomplete_reason}"
    if r.error:
        return "failed" if r.finished_verified is None else \
            "refused by the server after our Finished"
    return "stopped after the server's first flight"


def _outcome_rows(r: ProbeResult, full: bool) -> list[Row]:
    """How far the handshake went, the HTTP answer, the times, the alerts, the error."""
    rows: list[Row] = []
    if r.version is not None:
        rows.append(("Handshake", _handshake_state(r)))
    if r.http_status:
        rows.append(("HTTP", r.http_status))
    t = r.timings
    parts = [f"{name} {v:.1f} ms" for name, v in (("connect", t.connect_ms),
             ("handshake", t.handshake_ms)) if v is not None]
    if parts:
        rows.append(("Timing", ", ".join(parts)))
    for a in r.alerts:
        level = "fatal" if a.level == 2 else "warning"
        rows.append(("Alert", f"{a.direction} {level} {a.name} ({a.description})"))
    if r.error:
        rows.append(("Error", r.error))
    return rows


def _session_rows(r: ProbeResult, full: bool) -> list[Row]:
    return session_rows(r)


#: the probe summary, part by part, in order
PROBE_ROWS: tuple[ProbeRows, ...] = (
    _target_rows, _key_exchange_rows, _negotiated_rows, certificate_rows, _verification_rows,
    _session_rows, _proof_rows, _outcome_rows)


def probe_rows(r: ProbeResult, full: bool = False) -> list[Row]:
    """The summary as (label, value) rows (PROBE_ROWS in order); plain strings so tests and
    JSON agree. `full` (--full, or stdout not a terminal): every certificate and
    subjectAltName, none cut."""
    return [row for part in PROBE_ROWS for row in part(r, full)]


def session_rows(r: ProbeResult) -> list[tuple[str, str]]:
    """Authentication, extended master secret, secure renegotiation, OCSP stapling."""
    rows: list[tuple[str, str]] = []
    if r.anonymous:
        rows.append(("Authentication", ("ANONYMOUS: no server authentication (anonymous "
                     "suite: no certificate, unsigned key exchange; anyone in the path can "
                     "impersonate the server)")))
    if r.extended_master_secret is not None:
        rows.append(("Master secret", "Extended master secret: yes (RFC 7627)"
                     if r.extended_master_secret else "Extended master secret: no"))
    if r.secure_renegotiation is not None:
        rows.append(("Renegotiation", "Secure Renegotiation IS supported (RFC 5746)"
                     if r.secure_renegotiation else "Secure Renegotiation IS NOT supported"))
    if r.ocsp_stapling is not None:
        text = {"stapled": f"response stapled ({r.ocsp_response_bytes} bytes)",
                "none": "OCSP response: no response sent"}.get(r.ocsp_stapling, r.ocsp_stapling)
        rows.append(("OCSP", text))
    return rows


def render_probe(r: ProbeResult, out: IO[str], full: bool = False) -> None:
    render_rows(probe_rows(r, full), out)


def render_rows(rows: list[tuple[str, str]], out: IO[str]) -> None:
    """Label / value rows as the probe summary prints them (also the pcap --details block)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")   # wraps between words; never cut with an ellipsis
    for label, value in rows:   # Text: no markup; escaped: what a peer wrote stays inert
        table.add_row(Text(shown(label)), Text(shown(value)))
    print_renderable(table, out)


def print_renderable(renderable: object, out: IO[str]) -> None:
    """Rich on a terminal; plain lines without trailing blanks everywhere else."""
    if out.isatty():
        Console(file=out, highlight=False).print(renderable)
        return
    console = Console(file=io.StringIO(), highlight=False, width=200, color_system=None)
    with console.capture() as capture:
        console.print(renderable)
    for line in capture.get().splitlines():
        print(line.rstrip(), file=out)
