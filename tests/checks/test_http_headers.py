"""The HTTP header checks (security_headers, cookies, clock_skew, banners) on both sides,
against real loopback servers: nginx with add_header / Set-Cookie configurations (good
headers and Secure cookies; weak values, banners and a cookie without Secure), and
tests/checks/banner_server.py answering a fixed head nginx cannot send (a Date of 2001, no
Date, a Date that is no date, hostile values: an ANSI escape, latin-1 and C1 bytes, a lone
CR, a 10 KB value), whose text output must show every value escaped."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.helpers.servers import Server
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.check_details import (
    BannersDetails,
    ClockSkewDetails,
    CookiesDetails,
    SecurityHeadersDetails,
)
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.probes.checks.clock_skew import parse_date
from tlsprobe.probes.checks.cookies import parse_cookie
from tlsprobe.probes.checks.security_headers import csp_weaknesses

ServerFactory = Callable[..., Server]
ScriptServer = Callable[..., int]

GOOD = (
    'add_header Content-Security-Policy "default-src \'self\'; frame-ancestors \'none\'" always;',
    'add_header X-Frame-Options DENY always;',
    'add_header X-Content-Type-Options nosniff always;',
    'add_header Referrer-Policy strict-origin-when-cross-origin always;',
    'add_header Permissions-Policy "geolocation=()" always;',
    'add_header Cross-Origin-Opener-Policy same-origin always;',
    'add_header Cross-Origin-Embedder-Policy require-corp always;',
    'add_header Cross-Origin-Resource-Policy same-origin always;',
    'add_header Set-Cookie "sid=1; Path=/; Secure; HttpOnly; SameSite=Strict" always;',
)
WEAK = (
    'add_header Content-Security-Policy "default-src * \'unsafe-inline\' \'unsafe-eval\'" '
    'always;',
    'add_header X-Frame-Options ALLOWALL always;',
    'add_header X-Content-Type-Options sniff always;',
    'add_header Referrer-Policy unsafe-url always;',
    'add_header X-Powered-By "PHP/8.1.2" always;',
    'add_header Via "1.1 varnish (Varnish/7.1)" always;',
    'add_header X-Cache-Status HIT always;',
    'add_header Set-Cookie "sid=abc; Path=/; HttpOnly" always;',
    'add_header Set-Cookie "pref=1; Secure; SameSite=Lax" always;',
)


def audit(port: int, names: str = "http") -> dict[str, CheckResult]:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(names)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    return {c.name: c for c in r.check_results}


T = TypeVar("T")


def det(c: CheckResult, kind: type[T]) -> T:
    """The check's typed details (an API user's view)."""
    assert isinstance(c.details, kind), c
    return c.details


@pytest.mark.needs_impl("nginx")
def test_good_headers_and_secure_cookies_pass(server_cache: ServerFactory) -> None:
    srv = server_cache("nginx", proto="both", extra=GOOD)
    got = audit(srv.port)
    sh = got["security_headers"]
    assert sh.verdict is Verdict.supported and sh.code is None, sh
    assert det(sh, SecurityHeadersDetails).missing == () == det(sh, SecurityHeadersDetails).weak
    assert "Content-Security-Policy: default-src 'self'; frame-ancestors 'none'" in sh.evidence
    c = got["cookies"]
    assert c.verdict is Verdict.not_vulnerable and c.code is None, c
    assert c.reason == "1 cookie set, each Secure (GET / answered HTTP/1.1 200 OK)", c.reason
    assert [(k.name, k.secure, k.http_only, k.same_site)
            for k in det(c, CookiesDetails).cookies] == [("sid", True, True, "Strict")]
    skew = got["clock_skew"]
    assert skew.verdict is Verdict.not_vulnerable and skew.code is None, skew
    sd = det(skew, ClockSkewDetails)
    assert sd.skew_seconds is not None and abs(sd.skew_seconds) <= 2, sd
    assert "within 60 s" in skew.reason and (sd.date or "").endswith(" GMT"), sd
    b = got["banners"]
    assert b.verdict is Verdict.not_supported and b.code is None, b


@pytest.mark.needs_impl("nginx")
def test_weak_headers_banners_and_a_cookie_without_secure_are_findings(
        server_cache: ServerFactory, run_cli: Callable[..., Any]) -> None:
    srv = server_cache("nginx", proto="both", extra=WEAK)
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "http", "--json")
    d = json.loads(res.stdout)
    got = {c["name"]: c for c in d["check_results"]}
    sh = got["security_headers"]
    assert (sh["verdict"], sh["severity"], sh["code"]) == \
        ("not supported", "low", "check.security_headers"), sh
    assert {(w["name"], w["why"]) for w in sh["details"]["weak"]} == {
        ("X-Content-Type-Options", "not nosniff"),
        ("X-Frame-Options", "not DENY or SAMEORIGIN (ignored by browsers: no protection)"),
        ("Content-Security-Policy", "'unsafe-inline' in its script sources"),
        ("Content-Security-Policy", "'unsafe-eval' in its script sources"),
        ("Content-Security-Policy", "'*' as a source of default-src or script-src"),
        ("Referrer-Policy", "unsafe-url sends the full URL to every origin, plain http "
                            "included")}, sh["details"]["weak"]
    assert "Permissions-Policy" in sh["details"]["missing"]
    c = got["cookies"]
    assert (c["verdict"], c["severity"]) == ("vulnerable", "low"), c
    assert c["reason"].startswith("2 cookies set, without Secure: sid (sent over plain http "
                                  "too); without HttpOnly: pref; without SameSite: sid"), c
    b = got["banners"]
    assert (b["verdict"], b["severity"], b["code"]) == ("supported", "info", "check.banners")
    assert [(h["name"], h["value"]) for h in b["details"]["application"]] == \
        [("X-Powered-By", "PHP/8.1.2")]
    assert [(h["name"], h["value"]) for h in b["details"]["proxy"]] == \
        [("Via", "1.1 varnish (Varnish/7.1)"), ("X-Cache-Status", "HIT")]
    codes = {f["code"] for f in d["findings"]}
    assert {"check.security_headers", "check.cookies", "check.banners"} <= codes
    text = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "security_headers,cookies"
                   ).stdout
    assert "HTTP checks" in text and "X-Frame-Options: not DENY or SAMEORIGIN" in text


def _head(*lines: bytes) -> bytes:
    return b"\r\n".join(lines) + b"\r\n\r\n"


def test_a_stale_clock_and_hostile_values_shown_escaped(
        script_server: ScriptServer, tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    """A Date of 2001 (Age one day): a skew of more than 25 years, an info finding. The values hold an
    ANSI escape, latin-1 and C1 bytes, a lone CR and 10 KB: JSON keeps them as every network
    value (a byte outside ASCII as \\xNN, controls as JSON escapes them), text shows them
    escaped (no raw ESC, CR or CSI reaches the terminal) and cut."""
    answer = tmp_path / "answer"
    answer.write_bytes(_head(
        b"HTTP/1.1 200 OK", b"Date: Mon, 01 Jan 2001 00:00:00 GMT", b"Age: 86400",
        b"X-Powered-By: \x1b[31mEvil/1.0 \xe9\x9b2J",
        b"Set-Cookie: \x1b]0:pwn\x07sid=1; HttpOnly",
        b"Content-Security-Policy: default-src 'self' " + b"x" * 10000,
        b"X-Frame-Options: DENY\rX-Injected: 1"))
    port = script_server("banner_server.py", "--answer", str(answer))
    got = audit(port)
    skew = got["clock_skew"]
    assert (skew.verdict, skew.severity, skew.code) == \
        (Verdict.vulnerable, Severity.info, "check.clock_skew"), skew
    sd = det(skew, ClockSkewDetails)
    # a cached answer's Date is the origin's: its Age is added (as testssl.sh does)
    assert sd.server_time == "2001-01-02T00:00:00Z" and sd.age == 86400, sd
    assert sd.skew_seconds is not None and sd.skew_seconds < -25 * 365 * 86400, sd
    assert "over the 60 s tolerance" in skew.reason and "behind ours" in skew.reason
    b = got["banners"]
    # bytes outside ASCII as \xNN, as every network value (was latin-1 text: 'é', U+009B)
    assert det(b, BannersDetails).application[0].value == "\x1b[31mEvil/1.0 \\xe9\\x9b2J"
    assert det(got["cookies"], CookiesDetails).cookies[0].name == "\x1b]0:pwn\x07sid"
    sh = got["security_headers"]
    assert ("X-Frame-Options", "DENY\rX-Injected: 1") in \
        [(h.name, h.value) for h in det(sh, SecurityHeadersDetails).present]
    assert any(e.endswith("... (10019 characters)") for e in sh.evidence), sh.evidence
    text = run_cli("scan", f"127.0.0.1:{port}", "--checks", "http",
                   env={"COLUMNS": "400"}).stdout
    assert "\x1b" not in text and "\x9b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b[31mEvil/1.0 \\xe9\\x9b2J" in text and "é" not in text, text
    data = json.loads(run_cli("scan", f"127.0.0.1:{port}", "--checks", "http", "--json").stdout)
    banners = next(c for c in data["check_results"] if c["name"] == "banners")
    assert banners["details"]["application"][0]["value"] == "\x1b[31mEvil/1.0 \\xe9\\x9b2J", \
        banners["details"]
    assert "\\x1b]0:pwn\\x07sid" in text and "x" * 10001 not in text


@pytest.mark.parametrize("date, verdict, says", [
    (None, Verdict.not_applicable, "no Date header: the server states no time"),
    (b"Date: \x1b[2Jyesterday", Verdict.inconclusive, "Date: \x1b[2Jyesterday is not an "
                                                       "HTTP date"),
])
def test_no_date_is_not_applicable_and_a_bad_date_inconclusive(
        script_server: ScriptServer, tmp_path: Path, date: bytes | None, verdict: Verdict,
        says: str) -> None:
    answer = tmp_path / "answer"
    answer.write_bytes(_head(b"HTTP/1.1 200 OK", *([date] if date else []), b"Server: x"))
    got = audit(script_server("banner_server.py", "--answer", str(answer)), "clock_skew")
    skew = got["clock_skew"]
    assert skew.verdict is verdict and skew.code is None, skew
    assert skew.reason.startswith(says), skew.reason
    assert det(skew, ClockSkewDetails).skew_seconds is None


def test_parsers() -> None:
    """The rules the checks rest on, on values no lab server sends."""
    assert parse_date("Sunday, 06-Nov-94 08:49:37 GMT") == parse_date(
        "Sun Nov  6 08:49:37 1994") == parse_date("Sun, 06 Nov 1994 08:49:37 GMT")
    assert parse_date("Mon, 32 Jan 2001 00:00:00 GMT") is None
    assert parse_date("Mon, 01 Jan 2001 00:00:00 GMT" + " " * 60) is None
    # a nonce or 'strict-dynamic' makes browsers ignore 'unsafe-inline'; a policy without
    # script-src reads default-src
    assert csp_weaknesses("script-src 'self' 'unsafe-inline' 'nonce-abc'") == set()
    assert csp_weaknesses("default-src 'self'; script-src 'unsafe-inline'") == \
        {"'unsafe-inline' in its script sources"}
    assert csp_weaknesses("default-src 'self'; style-src 'unsafe-inline'") == set()
    # a value that holds "secure" is not the Secure attribute (testssl.sh counts it)
    c = parse_cookie("/", "insecure=secure; HttpOnly; samesite=None; SECURE=1")
    assert (c.name, c.secure, c.http_only, c.same_site) == ("insecure", True, True, "None")
    c = parse_cookie("/", "token=secure-value; Path=/secure")
    assert (c.secure, c.http_only, c.same_site) == (False, False, None)


def test_a_date_of_this_second_is_no_skew(script_server: ScriptServer, tmp_path: Path,
                                          run_cli: Callable[..., Any]) -> None:
    """A Date is cut to the second; our clock is not. A Date of the second the answer came
    in (sent 0.6 to 0.9 s into it) is no skew: '0 s apart', never '1 s behind ours' beside
    two equal times."""
    answer = tmp_path / "answer"
    answer.write_bytes(_head(b"HTTP/1.1 200 OK", b"Date: @NOW@", b"Server: x"))
    port = script_server("banner_server.py", "--answer", str(answer))
    skew = audit(port, "clock_skew")["clock_skew"]
    sd = det(skew, ClockSkewDetails)
    assert sd.server_time == sd.our_time and sd.skew_seconds == 0, sd
    assert skew.verdict is Verdict.not_vulnerable and " 0 s apart, within 60 s" in \
        skew.reason, skew.reason
    text = " ".join(run_cli("scan", f"127.0.0.1:{port}", "--checks", "clock_skew").stdout.split())
    assert "0 s apart, within 60 s" in text and "behind ours" not in text, text
