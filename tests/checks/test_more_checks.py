"""The hygiene checks of issue 32's "more checks" against real loopback servers, each on both
sides: tls_timestamp (openssl s_server and the scripted server's random ServerHello.random;
the scripted server with gmt_unix_time first, its clock on time and years off), alpn
(openssl s_server -alpn, nginx with http2, servers without ALPN) and npn (openssl s_server
-nextprotoneg, and without it)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.servers import Server, accepting
from tlsprobe.model.check_details import AlpnDetails, NpnDetails, RandomKind, TimestampDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks
from tlsprobe.probes.checks.npn import protocols

ServerFactory = Callable[..., Server]


def check(port: int, name: str) -> CheckResult:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(name)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    got = {c.name: c for c in r.check_results}
    c = got[name]
    assert c.method == "active" and c.category == "hygiene"
    assert c.connections == sum(n for phase, n in r.connections.items()
                                if phase == f"check {name}" or
                                phase.startswith(f"check {name} "))
    return c


@pytest.mark.needs_impl("openssl")
def test_tls_timestamp_random_on_openssl(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="both")
    c = check(srv.port, "tls_timestamp")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, TimestampDetails)
    assert [(s.version, s.kind) for s in c.details.samples] == [
        ("TLS 1.3", RandomKind.random), ("TLS 1.2", RandomKind.random)]
    assert c.details.skew_seconds is None and c.connections == 4
    assert all(len(s.first_bytes) == 2 for s in c.details.samples)


@pytest.mark.parametrize("skew", [0, 3600, -300_000_000])
def test_tls_timestamp_clock_on_a_scripted_server(script_server: Callable[..., int],
                                                 skew: int) -> None:
    """gmt_unix_time first (OpenSSL before 1.0.1f): a clock, with its skew, whatever its
    distance from ours (testssl.sh calls a clock more than a day off random)."""
    port = accepting(script_server("scripted_tls_server.py", "--mode", "plain", "--random",
                                   "clock", "--skew", str(skew)))
    c = check(port, "tls_timestamp")
    assert c.verdict is Verdict.not_supported, c
    assert c.code == "check.tls_timestamp" and c.severity == "info"
    assert isinstance(c.details, TimestampDetails)
    (sample,) = c.details.samples
    assert sample.version == "TLS 1.2" and sample.kind is RandomKind.clock
    # the server's clock is ours cut to the second, plus `skew`: exactly that skew (a right
    # clock answering late in a second was -1 s, our clock's fractions rounded)
    assert sample.skew_seconds == skew, sample
    assert c.details.skew_seconds == sample.skew_seconds
    assert c.connections in (2, 3) and "a clock" in c.evidence[0]
    assert f"TLS 1.2 ({sample.skew_seconds:+d} s from our clock)" in c.reason


def test_tls_timestamp_random_on_the_scripted_server(script_server: Callable[..., int]
                                                     ) -> None:
    port = accepting(script_server("scripted_tls_server.py", "--mode", "plain"))
    c = check(port, "tls_timestamp")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, TimestampDetails)
    assert [s.kind for s in c.details.samples] == [RandomKind.random]


def test_tls_timestamp_fixed_bytes_are_not_a_clock(script_server: Callable[..., int]) -> None:
    """The same first 4 bytes on every connection agree with a clock within one second: a
    third connection, 1.5 s later, shows they do not move (no clock: supported)."""
    port = accepting(script_server("scripted_tls_server.py", "--mode", "plain", "--random",
                                   "fixed"))
    c = check(port, "tls_timestamp")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, TimestampDetails)
    (sample,) = c.details.samples
    assert sample.kind is RandomKind.fixed and sample.first_bytes == (0x5F5F5F5F,) * 3
    assert c.connections == 3 and "the same bytes each time, not a clock" in c.evidence[0]


@pytest.mark.needs_impl("openssl")
def test_alpn_lists_openssl_s_server_protocols_in_its_order(server_cache: ServerFactory
                                                            ) -> None:
    """openssl s_server -alpn chooses by its own list (SSL_select_next_proto over the
    server's order): the enumeration gives that order, the reversed offer confirms it; a
    list sharing nothing is refused with no_application_protocol."""
    srv = server_cache("openssl", proto="both", extra=("-alpn", "http/1.1,acme-tls/1,h2"))
    c = check(srv.port, "alpn")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, AlpnDetails)
    assert c.details.accepted == ("http/1.1", "acme-tls/1", "h2"), c
    assert c.details.preference == "server" and c.details.version == "TLS 1.3"
    assert c.details.refuses_unknown is True
    assert "the server accepts http/1.1, acme-tls/1, h2, the server's preference" in c.reason
    assert c.connections == 5          # three chosen, one refused, one for the order


@pytest.mark.needs_impl("openssl")
def test_the_new_rows_in_text_json_and_html(server_cache: ServerFactory, tmp_path: Any,
                                            run_cli: Callable[..., Any]) -> None:
    """One scan asking for the five checks: a row each in the text report's sections, an
    object each in JSON with its details, and a row each in the HTML page (the LUCKY13
    finding in its findings)."""
    srv = server_cache("openssl", proto="both", extra=("-alpn", "h2,http/1.1",
                                                      "-nextprotoneg", "http/1.1"))
    page = tmp_path / "r.html"
    names = "lucky13,many_suites,tls_timestamp,alpn,npn"
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", names, "--no-verify",
                  "--json", "--html", str(page))
    assert res.returncode == 0, res.stderr
    got = {c["name"]: c for c in json.loads(res.stdout)["check_results"]}
    assert {n: c["verdict"] for n, c in got.items()} == {
        "lucky13": "inconclusive", "many_suites": "tolerated", "tls_timestamp": "supported",
        "alpn": "supported", "npn": "supported"}, got
    assert got["alpn"]["details"]["accepted"] == ["h2", "http/1.1"]
    assert got["npn"]["details"]["protocols"] == ["http/1.1"]
    assert got["many_suites"]["details"]["variants"][0]["answer"] == "answered"
    assert [s["kind"] for s in got["tls_timestamp"]["details"]["samples"]] == ["random"] * 2
    html = page.read_text()
    for c in got.values():
        assert c["title"].replace("'", "&#x27;") in html, c["title"]
    assert "check.lucky13" in html and "Tolerance checks" in html
    text = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", names, "--no-verify").stdout
    for section in ("Vulnerability checks", "Hygiene checks", "Tolerance checks"):
        assert section in text, text
    assert "potentially vulnerable" in text and "advertises NPN: http/1.1" in text


@pytest.mark.needs_impl("openssl")
def test_alpn_not_supported_by_a_server_without_it(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_2")
    c = check(srv.port, "alpn")
    assert c.verdict is Verdict.not_supported and c.code is None, c
    assert isinstance(c.details, AlpnDetails)
    assert c.details.accepted == () and c.details.refuses_unknown is None
    assert c.details.version == "TLS 1.2" and c.connections == 1
    assert "answered without ALPN" in c.reason


@pytest.mark.needs_impl("nginx")
def test_alpn_on_nginx_with_http2(server_cache: ServerFactory,
                                  run_cli: Callable[..., Any]) -> None:
    """nginx answers what it serves in its own order: h2 first with http2 on, then its
    HTTP/1 versions; a list it shares nothing with gets no_application_protocol."""
    srv = server_cache("nginx", proto="both", extra=("listen-options http2",))
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "alpn,npn", "--json",
                  "--no-verify")
    assert res.returncode == 0, res.stderr
    got = {c["name"]: c for c in json.loads(res.stdout)["check_results"]}
    alpn = got["alpn"]
    assert alpn["verdict"] == "supported", alpn
    assert alpn["details"]["accepted"] == ["h2", "http/1.1", "http/1.0", "http/0.9"], alpn
    assert alpn["details"]["preference"] == "server" and alpn["details"]["refuses_unknown"]
    assert got["npn"]["verdict"] == "not supported", got["npn"]
    assert got["npn"]["details"] == {"version": "TLS 1.2", "advertised": False,
                                     "protocols": []}
    text = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "alpn", "--no-verify").stdout
    line = next(x for x in text.splitlines() if x.startswith("application protocols"))
    assert "supported" in line and "h2, http/1.1" in text, text


@pytest.mark.needs_impl("openssl")
def test_npn_on_both_sides(server_cache: ServerFactory) -> None:
    """openssl s_server -nextprotoneg lists its protocols in the ServerHello; without the
    option it sends no NPN; a TLS 1.3-only server is not applicable."""
    srv = server_cache("openssl", proto="both", extra=("-nextprotoneg", "spdy/3,http/1.1"))
    c = check(srv.port, "npn")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert c.details == NpnDetails("TLS 1.2", True, ("spdy/3", "http/1.1"))
    assert c.connections == 1 and "advertises NPN: spdy/3, http/1.1" in c.reason
    plain = server_cache("openssl", proto="both")
    c = check(plain.port, "npn")
    assert c.verdict is Verdict.not_supported, c
    assert c.details == NpnDetails("TLS 1.2", False, ())
    only13 = server_cache("openssl", proto="tls1_3")
    c = check(only13.port, "npn")
    assert c.verdict is Verdict.not_applicable and c.connections == 0, c


def test_npn_list_parser_refuses_malformed_bytes() -> None:
    assert protocols(b"\x02h2\x08http/1.1") == ["h2", "http/1.1"]
    assert protocols(b"") == []
    assert protocols(b"\x05h2") is None and protocols(b"\x00") is None
    assert protocols(b"\x03a\xffb") == ["a\\xffb"]      # escaped, as the reports show it


@pytest.mark.needs_impl("gnutls")
def test_alpn_client_order_on_gnutls(server_cache: ServerFactory) -> None:
    """gnutls-serv (without GNUTLS_ALPN_SERVER_PRECEDENCE) chooses by the client's order:
    the enumeration gives ours, the reversed offer shows the client's order is followed."""
    srv = server_cache("gnutls", proto="both", extra=("--alpn=http/1.1", "--alpn=h2"))
    c = check(srv.port, "alpn")
    assert c.verdict is Verdict.supported, c
    assert isinstance(c.details, AlpnDetails)
    assert c.details.accepted == ("h2", "http/1.1") and c.details.preference == "client", c
    assert "chosen in the client's order" in c.reason


def test_many_suites_list_is_its_own_first_then_defined_then_unassigned() -> None:
    from tlsprobe import registry
    from tlsprobe.probes.checks.many_suites import SUITES, suite_list
    from tlsprobe.wire.ext_decoders import is_grease
    for version, own in ((0x0304, (0x1301, 0x1302)), (0x0303, (0xC02F, 0x009C)),
                         (0x0300, (0x002F,))):
        got = suite_list(own, version)
        assert len(got) == len(set(got)) == SUITES > 128
        assert tuple(got[:len(own)]) == own
        assert not [c for c in got if is_grease(c) or c in (0x00FF, 0x5600)]
        defined = [c for c in got if registry.cipher_suite(c) is not None]
        assert got[:len(defined)] == defined      # every unassigned one after the defined
    assert len(suite_list((0x0303,) * 3, 0x0303)) == SUITES


def _alpn_count(h: Any) -> int:
    """The number of protocols a ClientHello's ALPN extension lists (0: none)."""
    ext = h.extension(16)
    if ext is None:
        return 0
    data, n, at = ext.data[2:], 0, 0
    while at < len(data):
        at += 1 + data[at]
        n += 1
    return n


@pytest.mark.needs_impl("openssl")
def test_alpn_a_failed_connection_is_said(server_cache: ServerFactory) -> None:
    """Every first ALPN hello (all 37 protocols) reset: inconclusive, saying so; only the
    second (36) reset: the one protocol seen, the list said to be possibly incomplete."""
    from tests.helpers.faultproxy import RESET, FaultProxy, nth_matching
    from tlsprobe.probes.checks.alpn import PROTOCOLS
    srv = server_cache("openssl", proto="both", extra=("-alpn", "http/1.1,h2"))
    for count, verdict, said in (
            (len(PROTOCOLS), Verdict.inconclusive, "a TLS 1.3 hello offering ALPN: "
             "connection 1: "),
            (len(PROTOCOLS) - 1, Verdict.supported, "the server accepts http/1.1 (the list "
             "may be incomplete: connection 2: ")):
        proxy = FaultProxy([(srv.host, srv.port)], nth_matching(
            lambda h, n=count: _alpn_count(h) == n, RESET, which=range(1, 100)))
        try:
            c = check(proxy.port, "alpn")
        finally:
            proxy.close()
        assert c.verdict is verdict and said in c.reason, c
        assert "reset" in c.reason


def test_checks_reach_a_server_whose_groups_exclude_the_default_offer(
        server_cache: Callable[..., Server], run_cli: Callable[..., Any]) -> None:
    """A server that accepts only secp521r1 and x448 (Prosody's `curveslist`, any OpenSSL
    `Groups`) refuses a hello of tlsprobe's default groups: the checks' hellos must add the
    groups the audit found, or every TLS 1.3 check was 'inconclusive: ... handshake_failure'
    (resumption had no TLS 1.3 ticket, early_data, ocsp_stapling and the HTTP checks none
    at all), and the tolerance checks' plain hello too ('the plain hello is not answered
    either')."""
    srv = server_cache("openssl", groups=("P-521", "X448"))
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks",
                  "groups,resumption,early_data,ocsp_stapling,hsts,server_banner,grease,"
                  "split_record,large_hello", "--json",
                  "--no-progress", "--no-verify", timeout=240)
    assert res.returncode in (0, 1), res.stderr
    report = json.loads(res.stdout)
    audit13 = next(g for g in report["groups"] if g["version"]["name"] == "TLS 1.3")
    assert [g["name"] for g in audit13["supported"]] == ["secp521r1", "x448"]
    got = {c["name"]: c for c in report["check_results"]}
    for name, check in got.items():
        assert check["verdict"] != "inconclusive", (name, check["reason"])
    assert "TLS 1.3 ticket" in got["resumption"]["reason"], got["resumption"]
    assert got["server_banner"]["verdict"] in ("supported", "not supported"), got["server_banner"]
    for name in ("grease", "split_record", "large_hello"):
        assert got[name]["verdict"] == "tolerated", got[name]


def test_tls_timestamp_skew_counts_whole_seconds() -> None:
    """A clock that ticks in whole seconds against ours read before and after the
    connection: 0 when it is one of the seconds ours read, else the distance to the nearest
    (it was the gap to the middle of our reads rounded: -1 s for a right clock whose answer
    came late in a second)."""
    from tlsprobe.probes.checks.tls_timestamp import _Sample, clock_skew
    assert clock_skew(_Sample(1000, 1000.85, 1000.95)) == 0
    assert clock_skew(_Sample(1000, 999.9, 1000.2)) == 0
    assert clock_skew(_Sample(999, 999.9, 1000.2)) == 0
    assert clock_skew(_Sample(1003, 1000.85, 1000.95)) == 3
    assert clock_skew(_Sample(995, 999.9, 1000.2)) == -4
