"""HTTP checks (hsts, breach, server_banner) over a completed handshake: nginx with a
Strict-Transport-Security header and gzip on (HSTS supported, compression = the BREACH
precondition, banner nginx/...), openssl s_server -www (no HSTS, no compression, no banner)
and a TLS server that is not HTTP (tests/checks/banner_server.py: not applicable, its
greeting shown escaped)."""
from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.helpers.servers import Server
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.checks._http import NotHttp, Response, parse_head
from tlsprobe.probes.checks.hsts import parse_hsts
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks

ServerFactory = Callable[..., Server]
NGINX_HTTP = ('add_header Strict-Transport-Security "max-age=31536000; includeSubDomains; '
              'preload" always;', "gzip on;", "gzip_types text/plain;", "gzip_min_length 1;")


def audit(port: int) -> dict[str, CheckResult]:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks("http")),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    got = {c.name: c for c in r.check_results}
    assert list(got) == ["hsts", "breach", "server_banner", "banners", "security_headers",
                         "cookies", "clock_skew"]
    assert r.connections["check hsts request"] == 1 == sum(c.connections for c in got.values())
    return got


@pytest.mark.needs_impl("nginx")
def test_nginx_with_hsts_and_gzip(server_cache: ServerFactory,
                                  run_cli: Callable[..., object]) -> None:
    srv = server_cache("nginx", proto="both", extra=NGINX_HTTP)
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "http", "--json")
    d = json.loads(res.stdout)   # type: ignore[attr-defined]
    got = {c["name"]: c for c in d["check_results"]}
    assert got["hsts"]["verdict"] == "supported", got["hsts"]
    assert got["hsts"]["reason"] == "max-age 31536000 s (365 days), includeSubDomains, preload"
    assert got["breach"]["verdict"] == "vulnerable" and got["breach"]["code"] == "check.breach"
    assert "Content-Encoding: gzip" in got["breach"]["evidence"]
    assert got["server_banner"]["verdict"] == "supported"
    assert got["server_banner"]["reason"].startswith("Server: nginx/")
    # nginx sends no other security header: that is a finding too
    assert [f["code"] for f in d["findings"] if f["code"].startswith("check.")] == \
        ["check.breach", "check.security_headers"]


@pytest.mark.needs_impl("openssl")
def test_openssl_www_has_no_hsts_no_compression_no_banner(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="both")
    got = audit(srv.port)
    assert got["hsts"].verdict is Verdict.not_supported and got["hsts"].code == "check.hsts"
    assert "no Strict-Transport-Security header (GET / answered HTTP/1.0 200 ok)" == \
        got["hsts"].reason
    assert got["breach"].verdict is Verdict.not_vulnerable and got["breach"].code is None
    assert got["server_banner"].verdict is Verdict.not_supported
    # s_server -www sets no cookie, sends no Date and no banner: nothing to judge or find
    assert got["cookies"].verdict is Verdict.not_applicable and got["cookies"].code is None
    assert got["clock_skew"].verdict is Verdict.not_applicable
    assert got["banners"].verdict is Verdict.not_supported and got["banners"].code is None
    assert got["security_headers"].code == "check.security_headers"


def test_not_http_server_is_not_applicable_and_shown_escaped(
        script_server: Callable[..., int], run_cli: Callable[..., object]) -> None:
    port = script_server("banner_server.py")
    got = audit(port)
    assert all(c.verdict is Verdict.not_applicable for c in got.values()), got
    assert "IMAP4rev1 test server ready" in got["hsts"].reason
    text = run_cli("scan", f"127.0.0.1:{port}", "--checks", "hsts").stdout  # type: ignore[attr-defined]
    assert "HTTP checks" in text and "not applicable" in text
    assert "\x1b" not in text and "IMAP4rev1" in text


def test_head_parsing_and_hsts_directives() -> None:
    r = parse_head(b"HTTP/1.1 200 OK\r\nServer: x\r\nStrict-Transport-Security: max-age=5\r\n"
                   b"\r\nbody")
    assert isinstance(r, Response) and r.get("server") == ["x"] and r.status == "HTTP/1.1 200 OK"
    assert isinstance(parse_head(b"* OK ready\r\n"), NotHttp)
    assert "did not end" in str(parse_head(b"HTTP/1.1 200 OK\r\nServer: x\r\n"))
    assert parse_hsts('max-age="600"; includeSubDomains') == (600, True, False)
    assert parse_hsts("includeSubDomains; preload") == (None, True, True)
    assert parse_hsts("max-age=abc") == (None, False, False)


@pytest.mark.needs_impl("nginx")
def test_hsts_max_age_is_written_as_a_duration(server_cache: ServerFactory) -> None:
    """Half a year (15768000 s) is '182 days 12 h', not '182.5 days'; nothing of the age is
    rounded away and no fraction reaches the text."""
    srv = server_cache("nginx", proto="both", extra=(
        'add_header Strict-Transport-Security "max-age=15768000" always;',))
    got = audit(srv.port)
    assert got["hsts"].reason == "max-age 15768000 s (182 days 12 h), no includeSubDomains, " \
        "no preload", got["hsts"]


#: a site with HSTS and the security headers (added, as nginx does without `always`, to 2xx
#: and 3xx answers only) whose answer to GET / is an error: a rate limiter's 429 or 503
NGINX_LIMITED = ('add_header Strict-Transport-Security "max-age=31536000";',
                 "add_header X-Content-Type-Options nosniff;",
                 "add_header Content-Security-Policy \"default-src 'self'\";")


@pytest.mark.needs_impl("nginx")
@pytest.mark.parametrize("code", [429, 503])
def test_a_rate_limited_answer_proves_no_missing_header(server_cache: ServerFactory,
                                                         code: int) -> None:
    """nginx with HSTS and the security headers whose GET / is answered 429 or 503 (what
    limit_req and an overloaded server send): the error page carries none of the site's
    headers, and "no HSTS", "none of the security headers" (low findings: --fail-on low
    failed), "no cookie" and "not compressed" were read off it. Now inconclusive, said why."""
    srv = server_cache("nginx", proto="both", extra=(*NGINX_LIMITED, f"return {code};"))
    got = audit(srv.port)
    for name in ("hsts", "security_headers", "cookies", "breach"):
        c = got[name]
        assert c.verdict is Verdict.inconclusive and c.code is None, c
        assert f"GET / answered HTTP/1.1 {code} " in c.reason, c
        assert "a rate limiter's or an overloaded server's answer" in c.reason, c
