"""Redirects of GET / followed within the target (probes/checks/_http.py, _location.py),
against nginx with `return 301/302` configurations: a chain within the target (absolute and
relative Locations) is followed and the checks read its end, HSTS from the first answer
(RFC 6797: a redirect's header counts), cookies from every answer; a Location off the
target, a loop and a chain past 5 hops are not followed, and the checks say they read the
redirect itself and where it pointed. tests/checks/banner_server.py sends what nginx
cannot: a latin-1 Location (followed, percent-encoded), a hop answered with bytes that are
not HTTP, a Location holding escapes (not followed, shown escaped). Also the Location rules
without a server."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.servers import Server
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.probes.checks._http import Response, parse_head
from tlsprobe.probes.checks._location import follow

ServerFactory = Callable[..., Server]
ScriptServer = Callable[..., int]

#: / -> 301 (absolute, nginx's default) /app -> 302 (relative) /final; HSTS on the first
#: answer only, a cookie without Secure on the first, the security headers on the last
CHAIN = (
    "location = / { add_header Strict-Transport-Security \"max-age=600\" always;"
    " add_header Set-Cookie \"r=1; Path=/\" always; return 301 /app; }",
    "location = /app { absolute_redirect off; return 302 /final; }",
    "location = /final { add_header X-Content-Type-Options nosniff always;"
    " add_header X-Powered-By Final/1.0 always; return 200 \"final\\n\"; }",
)
OFF_TARGET = ("location = / { return 302 https://example.org:8443/elsewhere; }",)
LOOP = ("location = / { return 301 /a; }", "location = /a { return 302 /; }")
#: / -> /x -> /xx -> ... without end
ENDLESS = ("location = / { return 301 /x; }", "location ~ ^/(x+)$ { return 301 /$1x; }")


def audit(port: int, names: str = "http") -> tuple[AuditReport, dict[str, Any]]:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(names)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    return r, {c["name"]: c for c in json.loads(r.to_json())["check_results"]}


@pytest.mark.needs_impl("nginx")
def test_a_chain_within_the_target_is_followed(server_cache: ServerFactory) -> None:
    srv = server_cache("nginx", proto="both", extra=CHAIN)
    r, got = audit(srv.port)
    # three connections, all under the first check's phase
    assert {k: v for k, v in r.connections.items() if k.startswith("check")} == {
        "check hsts request": 1, "check hsts redirect": 2}
    hops = got["server_banner"]["details"]["redirects"]
    assert [(h["path"], h["status"].split()[1], h["location"], h["followed"]) for h in hops] \
        == [("/", "301", f"https://127.0.0.1:{srv.port}/app", True),
            ("/app", "302", "/final", True)], hops
    # the checks read the final answer and say so
    b = got["banners"]
    assert b["verdict"] == "supported" and b["details"]["status"].startswith("HTTP/1.1 200")
    assert b["reason"] == "X-Powered-By: Final/1.0 (GET /final answered HTTP/1.1 200 OK, " \
        "after 2 redirects from GET /)", b["reason"]
    assert b["evidence"][:3] == [
        f"GET / answered HTTP/1.1 301 Moved Permanently, Location: "
        f"https://127.0.0.1:{srv.port}/app",
        "GET /app answered HTTP/1.1 302 Moved Temporarily, Location: /final",
        "GET /final answered HTTP/1.1 200 OK"], b["evidence"]
    sh = got["security_headers"]
    assert sh["details"]["present"] == [{"name": "X-Content-Type-Options", "value": "nosniff"}]
    # no weak value, but no CSP and no clickjacking protection: an info finding
    assert (sh["verdict"], sh["severity"]) == ("not supported", "info"), sh
    assert sh["reason"].startswith("missing: Content-Security-Policy, X-Frame-Options or CSP "
                                   "frame-ancestors; present: X-Content-Type-Options"), sh
    # HSTS from the first answer, the redirect itself
    hsts = got["hsts"]
    assert hsts["verdict"] == "supported" and hsts["details"]["max_age"] == 600, hsts
    assert hsts["details"]["status"].startswith("HTTP/1.1 301"), hsts
    # a cookie set by the redirect counts, with the path whose answer set it
    c = got["cookies"]
    assert c["verdict"] == "vulnerable" and c["details"]["cookies"][0]["path"] == "/", c


@pytest.mark.needs_impl("nginx")
def test_a_redirect_off_the_target_is_not_followed(server_cache: ServerFactory,
                                                   run_cli: Callable[..., Any]) -> None:
    srv = server_cache("nginx", proto="both", extra=OFF_TARGET)
    r, got = audit(srv.port)
    assert {k: v for k, v in r.connections.items() if k.startswith("check")} == {
        "check hsts request": 1}
    hsts = got["hsts"]
    assert hsts["reason"] == "no Strict-Transport-Security header (GET / answered HTTP/1.1 " \
        "302 Moved Temporarily, a redirect to https://example.org:8443/elsewhere not " \
        "followed: it points off the target (another scheme, host or port))", hsts["reason"]
    assert hsts["details"]["redirects"] == [{
        "path": "/", "status": "HTTP/1.1 302 Moved Temporarily",
        "location": "https://example.org:8443/elsewhere", "followed": False}]
    assert "Location: https://example.org:8443/elsewhere" in hsts["evidence"][0]
    text = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "server_banner,hsts",
                   env={"COLUMNS": "300"}).stdout
    words = " ".join(text.split())   # the table wraps its cells
    assert "a redirect to https://example.org:8443/elsewhere not followed" in words, text


@pytest.mark.needs_impl("nginx")
@pytest.mark.parametrize("extra, connections, why", [
    (LOOP, 2, "not followed: a loop (GET / was asked before)"),
    (ENDLESS, 6, "not followed: 5 redirects followed already"),
])
def test_a_loop_and_an_endless_chain_stop(server_cache: ServerFactory,
                                          extra: tuple[str, ...], connections: int,
                                          why: str) -> None:
    srv = server_cache("nginx", proto="both", extra=extra)
    r, got = audit(srv.port, "server_banner")
    used = sum(v for k, v in r.connections.items() if k.startswith("check"))
    assert used == connections == got["server_banner"]["connections"], r.connections
    reason = got["server_banner"]["reason"]
    assert why in reason and reason.startswith("Server: nginx"), reason
    hops = got["server_banner"]["details"]["redirects"]
    assert len(hops) == connections and [h["followed"] for h in hops] == \
        [True] * (connections - 1) + [False], hops


def test_location_rules() -> None:
    """Which Locations stay on https://example.com:8443 and what is asked next."""
    def go(loc: str, asked: str = "/d/p") -> tuple[str, str | None]:
        f = follow(asked, loc, "Example.COM", 8443)
        return f.path, f.why
    assert go("q?x=1#frag") == ("/d/q?x=1", None)
    assert go("/a b/\xe9") == ("/a%20b/%E9", None)
    assert go("https://EXAMPLE.com:8443/z") == ("/z", None)
    assert go("//example.com:8443/n") == ("/n", None)
    assert go("  /t\r\n/u\t ") == ("/t/u", None)   # tabs and newlines removed (WHATWG)
    assert go("https://example.com/z")[1] == "it points off the target (another scheme, " \
        "host or port)"   # port 443
    assert go("https://evil.example:8443/")[1] is not None
    assert go("http://example.com:8443/")[1] == "it leaves HTTPS for plain http (off the " \
        "target)"
    assert go("https://u:p@example.com:8443/")[1] == "a Location with user information"
    assert go("https://example.com:99999/")[1] == "a Location that is not a URL (Port out " \
        "of range 0-65535)"
    assert go("/a\x00b")[1] == "a Location holding control characters"
    assert go("/" + "a" * 3000)[1] == "a Location of 3001 characters (over 2048)"
    assert go("")[1] == "an empty Location"
    assert follow("/", "https://[::1]:8443/v6", "::1", 8443).path == "/v6"


def _answers(tmp_path: Path, *answers: bytes) -> list[str]:
    args = []
    for i, answer in enumerate(answers):
        path = tmp_path / f"answer{i}"
        path.write_bytes(answer)
        args += ["--answer", str(path)]
    return args


def test_a_latin1_location_is_followed_percent_encoded_and_a_hop_without_http_said(
        script_server: ScriptServer, tmp_path: Path) -> None:
    """tests/checks/banner_server.py answering a redirect to "/caf\xe9 x" (latin-1, a
    space), then a redirect whose target answers with bytes that are not HTTP: the first is
    asked as /caf%E9%20x, the second is not followed and the checks read it, saying why."""
    port = script_server("banner_server.py", *_answers(
        tmp_path, b"HTTP/1.1 301 Moved\r\nLocation: /caf\xe9 x\r\n\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: /next\r\nServer: hop\r\n\r\n",
        b"* OK not HTTP\r\n"))
    r, got = audit(port, "server_banner")
    assert sum(v for k, v in r.connections.items() if k.startswith("check")) == 3
    hops = got["server_banner"]["details"]["redirects"]
    assert [(h["path"], h["location"], h["followed"]) for h in hops] == [
        ("/", "/caf\\xe9 x", True), ("/caf%E9%20x", "/next", False)], hops   # as network text
    assert got["server_banner"]["reason"] == "Server: hop (GET /caf%E9%20x answered HTTP/1.1 " \
        "302 Found, after 1 redirect from GET /, a redirect to /next not followed: GET /next " \
        "was not answered with HTTP)", got["server_banner"]["reason"]


def test_a_hostile_location_is_not_followed_and_shown_escaped(
        script_server: ScriptServer, tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    port = script_server("banner_server.py", *_answers(
        tmp_path, b"HTTP/1.1 302 Found\r\nLocation: /\x1b[2J\x9b31m" + b"z" * 400 +
        b"\r\n\r\n"))
    r, got = audit(port, "hsts")
    assert sum(v for k, v in r.connections.items() if k.startswith("check")) == 1
    hsts = got["hsts"]
    assert hsts["details"]["redirects"][0]["location"] == "/\x1b[2J\\x9b31m" + "z" * 400
    assert "not followed: a Location holding control characters" in hsts["reason"], hsts
    assert "(412 characters)" in hsts["reason"]
    text = run_cli("scan", f"127.0.0.1:{port}", "--checks", "hsts",
                   env={"COLUMNS": "300"}).stdout
    assert "\x1b" not in text and "\x9b" not in text and "\\x1b[2J\\x9b31m" in text, text


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=0xFF), max_size=60), st.sampled_from(
    ["/", "/a/b?q"]), st.sampled_from(["127.0.0.1", "::1", "Example.COM"]))
def test_any_location_is_followed_as_one_safe_path_or_said_why(location: str, asked: str,
                                                               host: str) -> None:
    """For any latin-1 Location (what a server's header can hold): either the reason it is
    not followed, or a path of printable ASCII starting with "/" (nothing that could end our
    request line or add a header); never an exception."""
    f = follow(asked, location, host, 8443)
    assert f.why is not None or (f.path.startswith("/") and
                                 all("!" <= c <= "~" for c in f.path)), (location, f)


def test_a_status_code_is_three_ascii_digits() -> None:
    """A latin-1 superscript digit is a digit to str.isdigit, not to int(): no redirect."""
    got = parse_head(b"HTTP/1.1 \xb201 Moved\r\nLocation: /x\r\n\r\n")
    assert isinstance(got, Response) and got.code is None and got.location is None
    got = parse_head(b"HTTP/1.1 308 Permanent Redirect\r\nLocation: /x\r\n\r\n")
    assert isinstance(got, Response) and got.code == 308 and got.location == "/x"
