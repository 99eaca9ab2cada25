"""Every extension the client can receive, in every message that can carry it, well-formed
and malformed (empty body, truncated, trailing bytes), from the scripted hostile server.

A malformed one must end the probe with exit 6, one stderr line naming host:port, the
message and the extension, the client's decode_error alert, and no traceback; a well-formed
one must pass (so the checks do not refuse good servers). The rule violations of
scenarios_violations.py are run here with --json too, to check the alert the client sends
(the one OpenSSL's client sends). `scan` on a malformed target reports the error for that
target (exit 6), and with `scan -f` a good target beside it still gets its result.

One probe per test (a child process, as a user runs it), against a listener of its own.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest

from tlsprobe import registry
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.extensions import Extension

from .catalog import Scenario, all_scenarios
from .runner import ProbeOutcome, run_tlsprobe
from .scenarios_violations import (
    DECODE_ERROR,
    HANDSHAKE_FAILURE,
    ILLEGAL_PARAMETER,
    UNSUPPORTED_EXTENSION,
    hrr_with,
    tls12_hello_with,
    tls13_flight_with,
    tls13_hello_with,
    tls13_ticket_with,
)
from .server import HostileServer, Script
from .tls import SECP256R1, TLS13

TIMEOUT = "4"   # total limit 12 s from the command's start: room for a busy machine
HARD_TIMEOUT = 40.0
Body = Callable[[bytes], bytes]
MALFORMED: dict[str, Body] = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[:-1],
    "trailing": lambda b: b + b"\x00",
}
ALPN_H2 = b"\x00\x03\x02h2"
OCSP = b"\x01\x00\x00\x05\x30\x03\x0a\x01\x00"   # status_type ocsp, a 5-byte response
SIGALGS = b"\x00\x02\x04\x03"

#: (message label, extension type, a well-formed body) for every extension the client can
#: receive: the ServerHello (TLS 1.2 and 1.3) and HelloRetryRequest answer the ClientHello's,
#: EncryptedExtensions and CertificateEntry too; CertificateRequest and NewSessionTicket
#: carry the server's own.
CARRIED: list[tuple[str, str, int, bytes]] = [
    ("tls12", "ServerHello", 0, b""), ("tls12", "ServerHello", 5, b""),
    ("tls12", "ServerHello", 10, b"\x00\x02\x00\x1d"),
    ("tls12", "ServerHello", 11, b"\x01\x00"), ("tls12", "ServerHello", 16, ALPN_H2),
    ("tls12", "ServerHello", 22, b""), ("tls12", "ServerHello", 23, b""),
    ("tls12", "ServerHello", 35, b""), ("tls12", "ServerHello", 0xFF01, b"\x00"),
    ("tls13", "ServerHello", 43, b"\x03\x04"),
    ("tls13", "ServerHello", 51, b"\x00\x1d\x00\x01\x01"),  # (a sample; the real share)
    ("hrr", "HelloRetryRequest", 43, b"\x03\x04"),
    ("hrr", "HelloRetryRequest", 51, b"\x00\x17"),
    ("hrr", "HelloRetryRequest", 44, b"\x00\x02ab"),
    ("ee", "EncryptedExtensions", 0, b""),
    ("ee", "EncryptedExtensions", 10, b"\x00\x02\x00\x1d"),
    ("ee", "EncryptedExtensions", 16, ALPN_H2),
    ("cert", "Certificate", 5, OCSP),
    ("cr", "CertificateRequest", 13, SIGALGS), ("cr", "CertificateRequest", 50, SIGALGS),
    ("cr", "CertificateRequest", 47, b"\x00\x05\x00\x03abc"),
    ("cr", "CertificateRequest", 27, b"\x02\x00\x02"),
    ("nst", "NewSessionTicket", 42, b"\x00\x00\x40\x00"),
]
def _script(kind: str, ext_type: int, body: Body | None) -> Script:
    """The server for one (message, extension) case; `body` None: well-formed."""
    def one(valid: bytes) -> list[Extension]:
        return [Extension(ext_type, valid if body is None else body(valid))]
    if kind == "tls12":
        return tls12_hello_with(one(next(b for k, _, t, b in CARRIED
                                         if k == kind and t == ext_type)))
    if kind == "tls13":
        return tls13_hello_with(transform={ext_type: body} if body else {})
    if kind == "hrr":
        bodies = {43: ext.supported_versions_server(TLS13).data,
                  51: ext.key_share_hrr(SECP256R1).data, 44: b"\x00\x02ab"}
        if body is not None:
            bodies[ext_type] = body(bodies[ext_type])
        return hrr_with([Extension(t, d) for t, d in bodies.items()])
    valid = next(b for k, _, t, b in CARRIED if k == kind and t == ext_type)
    if kind == "ee":
        return tls13_flight_with(ee=one(valid))
    if kind == "cert":
        return tls13_flight_with(cert=one(valid))
    if kind == "cr":
        return tls13_flight_with(cr=[Extension(13, SIGALGS)] * (ext_type != 13) + one(valid))
    return tls13_ticket_with(one(valid))


def _cases() -> Iterator[object]:
    """Each malformation that is one (an empty body is the valid one for a flag; cutting a
    one-byte body is the same as emptying it), then one well-formed case per message."""
    for kind, label, ext_type, valid in CARRIED:
        name = registry.extension_name(ext_type)
        for variant, make in MALFORMED.items():
            if make(valid) == valid or (variant == "truncated" and len(valid) <= 1):
                continue
            yield pytest.param(kind, label, ext_type, make, id=f"{kind}-{name}-{variant}")
    for kind in ("tls12", "tls13", "hrr", "ee", "cert", "cr", "nst"):
        yield pytest.param(kind, "", 0, None, id=f"{kind}-well-formed")


@pytest.fixture
def server(hostile_server: HostileServer) -> HostileServer:
    """The session's scripted server (conftest), which closes every listener at the end."""
    return hostile_server


def _probe(port: int, *flags: str) -> ProbeOutcome:
    # --sni: an IP address target sends no server_name, and the server's must answer one
    return run_tlsprobe(f"127.0.0.1:{port}", "--timeout", TIMEOUT, "--json", "--sni",
                        "hostile.test", *flags, hard_timeout=HARD_TIMEOUT)


def _context(out: ProbeOutcome, log: list[str]) -> str:
    return (f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr[-1500:]}\n"
            f"stdout: {out.stdout[-600:]}\nserver log: {log[-6:]}")


def _sent_alerts(out: ProbeOutcome) -> list[int]:
    result = json.loads(out.stdout)
    return [a["description"] for a in result["alerts"] if a["direction"] == "sent"]


@pytest.mark.parametrize("kind,label,ext_type,make", list(_cases()))
def test_extension_in_message(server: HostileServer, kind: str, label: str, ext_type: int,
                              make: Body | None) -> None:
    listener = server.serve(_well_formed(kind) if make is None
                            else _script(kind, ext_type, make))
    flags = () if kind == "nst" else ("--first-flight-only",)
    out = _probe(listener.port, *flags)
    context = _context(out, listener.log)
    assert out.returncode is not None, f"hung{context}"
    assert "Traceback" not in out.stderr + out.stdout, context
    if make is None:  # well-formed: the handshake goes on
        if kind == "hrr":  # accepted: the client retried, the server's alert ended it
            assert out.returncode == 5 and "ClientHello #2" in listener.log, context
        else:
            assert out.returncode == 0 and out.stderr_lines == [], context
        return
    name = registry.extension_name(ext_type)
    assert out.returncode == 6, context
    assert len(out.stderr_lines) == 1, context
    line = out.stderr_lines[0]
    assert re.match(rf"tlsprobe: 127\.0\.0\.1:{listener.port}: server sent a malformed "
                    rf"{label}: \S*{name}", line), context
    assert DECODE_ERROR in _sent_alerts(out), context


def _well_formed(kind: str) -> Script:
    """Each message with every extension it can carry well-formed, at once."""
    rows = [(t, b) for k, _, t, b in CARRIED if k == kind]
    exts = [Extension(t, b) for t, b in rows]
    if kind == "tls12":
        return tls12_hello_with(exts)
    if kind == "tls13":
        return tls13_flight_with()
    if kind == "hrr":
        return hrr_with(exts)
    if kind == "ee":
        return tls13_flight_with(ee=exts)
    if kind == "cert":
        return tls13_flight_with(cert=exts)
    if kind == "cr":
        return tls13_flight_with(cr=exts + [Extension(5, b"")])
    return tls13_ticket_with(exts)


def test_status_request_in_certificate_request_cut(server: HostileServer) -> None:
    """A CertificateRequest's status_request is empty (RFC 8446 4.4.2.1) or a request; a
    cut request is malformed."""
    listener = server.serve(tls13_flight_with(cr=[Extension(13, SIGALGS),
                                                  Extension(5, b"\x01\x00")]))
    out = _probe(listener.port, "--first-flight-only")
    assert out.returncode == 6, _context(out, listener.log)
    assert re.search(r"malformed CertificateRequest: status_request", out.stderr)


#: violation scenario -> the alert OpenSSL's client sends for it
VIOLATION_ALERTS = {
    "duplicate_extension_tls12": ILLEGAL_PARAMETER, "duplicate_extension_tls13": ILLEGAL_PARAMETER,
    "unsolicited_extension_tls12": UNSUPPORTED_EXTENSION,
    "unsolicited_extension_ee": UNSUPPORTED_EXTENSION,
    "key_share_in_ee": ILLEGAL_PARAMETER, "supported_versions_in_ee": ILLEGAL_PARAMETER,
    "alpn_not_offered_tls13": ILLEGAL_PARAMETER, "alpn_not_offered_tls12": ILLEGAL_PARAMETER,
    "alpn_two_protocols": DECODE_ERROR, "tls13_legacy_version": ILLEGAL_PARAMETER,
    "renegotiation_info_not_empty": HANDSHAKE_FAILURE, "alert_level_3": ILLEGAL_PARAMETER,
    "dhe_prime_refused": HANDSHAKE_FAILURE,
}
VIOLATIONS = [sc for sc in all_scenarios() if sc.name in VIOLATION_ALERTS]


def test_every_violation_has_a_scenario() -> None:
    assert sorted(sc.name for sc in VIOLATIONS) == sorted(VIOLATION_ALERTS)


@pytest.mark.parametrize("sc", VIOLATIONS, ids=[sc.name for sc in VIOLATIONS])
def test_violation_alert(server: HostileServer, sc: Scenario) -> None:
    listener = server.serve(sc.script)
    out = _probe(listener.port, *(() if sc.full else ("--first-flight-only",)))
    context = _context(out, listener.log)
    assert out.returncode == 6 and len(out.stderr_lines) == 1, context
    assert re.search(sc.verdict, out.stderr_lines[0]), context
    assert _sent_alerts(out) == [VIOLATION_ALERTS[sc.name]], context


def _scan(*args: str) -> ProbeOutcome:
    return run_tlsprobe("scan", "--timeout", TIMEOUT, "--no-progress", "--retries", "0",
                        *args, hard_timeout=120.0)


def test_scan_reports_a_malformed_target(server: HostileServer) -> None:
    listener = server.serve(hrr_with([ext.supported_versions_server(TLS13),
                                      Extension(51, b"\x00\x17"), Extension(44, b"")]))
    out = _scan(f"127.0.0.1:{listener.port}")
    context = _context(out, listener.log)
    assert out.returncode == 6 and "Traceback" not in out.stderr, context
    assert len(out.stderr_lines) == 1, context
    assert re.match(rf"tlsprobe: 127\.0\.0\.1:{listener.port}: .*malformed "
                    r"HelloRetryRequest: cookie", out.stderr_lines[0]), context


@pytest.mark.needs_impl("openssl")
def test_scan_file_keeps_the_good_target(  # type: ignore[no-untyped-def]
        server: HostileServer, server_cache, tmp_path) -> None:
    good = server_cache("openssl")
    bad = server.serve(hrr_with([ext.supported_versions_server(TLS13),
                                 Extension(51, b"\x00\x17"), Extension(44, b"")]))
    path = tmp_path / "targets.txt"
    path.write_text(f"127.0.0.1:{bad.port}\n127.0.0.1:{good.port}\n")
    out = _scan("-f", str(path), "--checks", "versions", "--json")
    context = _context(out, bad.log)
    assert out.returncode == 6 and "Traceback" not in out.stderr, context
    reports = {r["port"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert set(reports) == {bad.port, good.port}, context
    assert "malformed HelloRetryRequest: cookie" in reports[bad.port]["error"], context
    assert reports[good.port]["error"] is None, context
    assert any(v["status"] == "supported" for v in reports[good.port]["versions"]), context
