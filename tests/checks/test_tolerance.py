"""Tolerance checks (large_hello, split_record, split_segment, grease, unknown_version,
tls13_intolerance, many_suites) against real loopback servers, which tolerate every variant (openssl
s_server, gnutls-serv, nginx), and against the same servers behind tests/checks/
intolerant_proxy.py, which refuses split, large, GREASE, unknown-version and TLS 1.3 hellos
the way intolerant middleboxes and servers do. A refusal is only "not tolerated" when it
happens twice and the plain hello is answered: a refusal seen once, or a plain hello refused
too, is inconclusive."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from tests.helpers.faultproxy import ALERT, RESET, FaultProxy, every, nth_matching
from tests.checks.intolerant_proxy import IntolerantProxy
from tests.helpers.servers import Server
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.checks.catalog import ALIASES
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks

ServerFactory = Callable[..., Server]
TOLERANCE = ("large_hello", "split_record", "split_segment", "grease", "unknown_version",
             "tls13_intolerance", "many_suites")


def audit(port: int, checks: str = "tolerance") -> dict[str, CheckResult]:
    r: AuditReport = run_audit([Target("127.0.0.1", port)],
                               AuditOptions(checks=parse_checks(checks)),
                               Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    for c in r.check_results:
        assert c.category == "tolerance" and c.method == "active"
        assert sum(n for phase, n in r.connections.items()
                   if phase == f"check {c.name}" or
                   phase.startswith(f"check {c.name} ")) == c.connections
    return {c.name: c for c in r.check_results}


@pytest.fixture
def proxies() -> Iterator[list[IntolerantProxy]]:
    made: list[IntolerantProxy] = []
    yield made
    for p in made:
        p.close()


def test_tolerance_alias_names_the_seven_checks() -> None:
    assert ALIASES["tolerance"] == TOLERANCE


@pytest.mark.needs_impl("openssl")
def test_openssl_tolerates_every_variant_as_sent_on_the_wire(
        server_cache: ServerFactory, proxies: list[IntolerantProxy]) -> None:
    srv = server_cache("openssl", proto="both")
    proxy = IntolerantProxy((srv.host, srv.port))   # no rule: forwards and logs
    proxies.append(proxy)
    got = audit(proxy.port)
    assert list(got) == list(TOLERANCE)
    assert all(c.verdict is Verdict.tolerated and c.code is None for c in got.values()), got
    assert {n: c.connections for n, c in got.items()} == {
        "large_hello": 2, "split_record": 1, "split_segment": 1, "grease": 1,
        "unknown_version": 2, "tls13_intolerance": 0, "many_suites": 1}
    assert "padded to 1800 bytes (1800 bytes): answered with ServerHello TLS 1.3" in \
        " ".join(got["large_hello"].evidence)
    assert "legacy_version 0x0305 and no supported_versions (512 bytes): answered with " \
        "ServerHello TLS 1.2" in " ".join(got["unknown_version"].evidence)
    # what the proxy saw: the sizes, one hello in two records, one in two segments
    seen = proxy.log
    assert {600, 1800} <= {s.hello for s in seen}
    assert any(s.first_record < s.hello == 512 for s in seen)
    assert any(s.first_segment < 5 + s.first_record and s.hello == 512 for s in seen)


@pytest.mark.needs_impl("gnutls")
def test_gnutls_tls12_answers_a_hello_offering_tls13(server_cache: ServerFactory) -> None:
    srv = server_cache("gnutls", proto="tls1_2")
    got = audit(srv.port)
    assert all(c.verdict is Verdict.tolerated for c in got.values()), got
    t13 = got["tls13_intolerance"]
    assert t13.connections == 1 and "answered with ServerHello TLS 1.2" in t13.reason
    assert "offering TLS 1.3 too" in t13.reason


@pytest.mark.needs_impl("nginx")
def test_nginx_tolerates_and_the_json_says_so(server_cache: ServerFactory,
                                               run_cli: Callable[..., object]) -> None:
    srv = server_cache("nginx", proto="both")
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "tolerance", "--json")
    assert res.returncode == 0, res.stderr   # type: ignore[attr-defined]
    d = json.loads(res.stdout)   # type: ignore[attr-defined]
    got = {c["name"]: c for c in d["check_results"]}
    assert list(got) == list(TOLERANCE)
    assert {c["verdict"] for c in got.values()} == {"tolerated"}, got
    assert not [f for f in d["findings"] if f["code"].startswith("check.")]


@pytest.mark.needs_impl("openssl")
def test_intolerant_box_is_not_tolerated_and_scan_shows_it(
        server_cache: ServerFactory, proxies: list[IntolerantProxy],
        run_cli: Callable[..., object]) -> None:
    srv = server_cache("openssl", proto="both")
    proxy = IntolerantProxy((srv.host, srv.port), "segment", "record", "max_hello=1500",
                            "grease", "unknown_version")
    proxies.append(proxy)
    got = audit(proxy.port)
    for name in ("large_hello", "split_record", "split_segment", "grease", "unknown_version"):
        c = got[name]
        assert c.verdict is Verdict.not_tolerated, c
        assert c.code == f"check.{name}" and c.severity == "medium"
        assert "and again on a second" in c.reason and "the plain hello, asked in " \
            "between, is answered" in c.reason
    assert "1800 bytes: the server reset the connection" in got["large_hello"].reason
    assert "padded to 600 bytes (600 bytes): answered" in " ".join(got["large_hello"].evidence)
    # 600, 1800; plain, 1800 again, plain, 1800 a third time and at once a fourth
    assert got["large_hello"].connections == 7
    assert "and again on a second, a third and a fourth connection" in \
        got["large_hello"].reason
    assert "two records: the server reset the connection" in got["split_record"].reason
    assert "two TCP segments: the server reset the connection" in got["split_segment"].reason
    assert "GREASE suite, extensions, group and version: the server closed the connection" \
        in got["grease"].reason
    assert "sent alert protocol_version (70), and again on a second, a third and a fourth " \
        "connection" in got["unknown_version"].reason
    assert got["split_record"].connections == got["split_segment"].connections == 6
    # two variants refused with an alert: each three times more, the plain hello before
    # the second and third asks, the fourth right after the third
    assert got["unknown_version"].connections == 12
    assert got["grease"].connections == 6            # three times more, two plain
    assert got["tls13_intolerance"].verdict is Verdict.tolerated
    assert sorted(set(proxy.refused())) == ["grease", "max_hello", "record", "segment",
                                            "unknown_version"]
    # the scan's tolerance section (issue 14: a server dropping split hellos shows as such)
    text = run_cli("scan", f"127.0.0.1:{proxy.port}", "--checks",
                   "split_record,split_segment").stdout   # type: ignore[attr-defined]
    assert "Tolerance checks (12 connections of their own)" in text, text
    for title in ("a ClientHello split over two TLS records", "a ClientHello split over two "
                  "TCP segments"):
        assert any(line.startswith(title) and "not tolerated" in line
                   for line in text.splitlines()), text
    assert "check.split_record" in text and "check.split_segment" in text


@pytest.mark.needs_impl("openssl")
def test_many_suites_on_both_sides(server_cache: ServerFactory,
                                   proxies: list[IntolerantProxy]) -> None:
    """150 suites (its own first): openssl answers (tolerated, one connection, 150 suites
    seen on the wire); behind a box that resets hellos listing more than 128 suites (the
    F5 bug): not tolerated, the reset seen three times, the plain hello answered between."""
    srv = server_cache("openssl", proto="both")
    fine = IntolerantProxy((srv.host, srv.port))
    proxies.append(fine)
    c = audit(fine.port, "many_suites")["many_suites"]
    assert c.verdict is Verdict.tolerated and c.code is None and c.connections == 1, c
    assert "listing 150 cipher suites (its own first)" in c.reason
    assert "answered with ServerHello TLS 1.3" in c.reason
    assert 150 in {s.suites for s in fine.log}
    f5 = IntolerantProxy((srv.host, srv.port), "max_suites=128")
    proxies.append(f5)
    c = audit(f5.port, "many_suites")["many_suites"]
    assert c.verdict is Verdict.not_tolerated, c
    assert c.code == "check.many_suites" and c.severity == "medium"
    assert "150 cipher suites (its own first): the server reset the connection without an " \
        "answer, and again on a second, a third and a fourth connection" in c.reason
    assert "the plain hello, asked in between, is answered" in c.reason
    assert c.connections == 6 and "max_suites" in f5.refused()
    assert isinstance(c.details, ToleranceDetails) and c.details.variants[0].confirmed


@pytest.mark.needs_impl("openssl")
def test_tls12_server_that_drops_tls13_offers(server_cache: ServerFactory,
                                              proxies: list[IntolerantProxy]) -> None:
    srv = server_cache("openssl", proto="tls1_2")
    proxy = IntolerantProxy((srv.host, srv.port), "tls13")
    proxies.append(proxy)
    got = audit(proxy.port, "tls13_intolerance,grease")
    t13 = got["tls13_intolerance"]
    assert t13.verdict is Verdict.not_tolerated and t13.severity == "high", t13
    assert "closed the connection without an answer, and again" in t13.reason
    assert "plain hello, asked in between, is answered with ServerHello TLS 1.2" in t13.reason
    # the GREASE hello of a TLS 1.2 server has no supported_versions: answered
    assert got["grease"].verdict is Verdict.tolerated
    assert "GREASE suite, extensions and group:" in got["grease"].reason


@pytest.mark.needs_impl("openssl")
def test_a_refusal_is_confirmed_and_set_against_the_plain_hello(
        server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="both")

    def size(n: int) -> Callable[[object], bool]:
        return lambda h: len(h.serialize()) + 4 == n   # type: ignore[attr-defined]

    # refused once only (a flaky network): not a verdict
    once = FaultProxy([(srv.host, srv.port)], nth_matching(size(600), RESET))
    try:
        c = audit(once.port, "large_hello")["large_hello"]
    finally:
        once.close()
    assert c.verdict is Verdict.inconclusive, c
    # the 600-byte hello, the 1800-byte one, the plain hello, the 600-byte one again
    assert "then on a second connection: answered" in c.reason and c.connections == 4
    # every 512-byte hello refused, the plain one too: the change is not shown to matter
    every = FaultProxy([(srv.host, srv.port)],
                       nth_matching(size(512), RESET, which=range(1, 100)))
    try:
        c = audit(every.port, "grease")["grease"]
    finally:
        every.close()
    assert c.verdict is Verdict.inconclusive and c.code is None, c
    assert "the plain hello is not answered either" in c.reason and c.connections == 2


@pytest.mark.needs_impl("tlslite")
def test_ssl3_only_server_is_not_applicable(script_server: Callable[..., int]) -> None:
    port = script_server("ssl3_server.py")     # SSL 3.0 only
    got = audit(port, "large_hello,grease,tls13_intolerance")
    assert {c.verdict for c in got.values()} == {Verdict.not_applicable}, got
    assert all(c.connections == 0 and "SSL 3.0 only" in c.reason for c in got.values())


@pytest.mark.needs_impl("openssl")
def test_a_flaky_path_gives_no_intolerance(server_cache: ServerFactory) -> None:
    """A path that resets every third connection (tests/helpers/faultproxy.py) in front of a server
    that tolerates everything: the resets fall on the tolerance checks' hellos too, and
    with the checks' connections in step the same check's hello was reset on every try
    ("split_segment: not tolerated", "grease: not tolerated" before). The audit's own
    hellos, reset and answered on a retry, show the path flaky: a reset proves nothing
    there. (The intolerant side, still "not tolerated" under the same rule:
    test_intolerant_box_is_not_tolerated_and_scan_shows_it.)"""
    srv = server_cache("openssl", proto="both")
    for _ in range(3):
        flaky = FaultProxy([(srv.host, srv.port)], every(3, RESET))
        try:
            got = audit(flaky.port)
        finally:
            flaky.close()
        assert flaky.faults()
        assert not [c for c in got.values() if c.verdict is Verdict.not_tolerated], got
        assert not [c for c in got.values() if c.code is not None], got
        for c in got.values():     # what is open says the reset it rests on
            assert c.verdict is not Verdict.inconclusive or "reset" in c.reason, c


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("period,offset", [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)])
@pytest.mark.parametrize("check", ["grease", "split_record", "unknown_version",
                                   "large_hello"])
def test_a_path_alerting_every_kth_connection_gives_no_intolerance(
        server_cache: ServerFactory, check: str, period: int, offset: int) -> None:
    """A rate limiter refusing every second or third connection with a handshake_failure
    alert, in front of a server that tolerates everything, one check alone, one connection
    at a time. An alert was the server's word after two asks (the variant, the plain
    hello, the variant again): every third connection made the 1800-byte hello (or the
    unknown-version one) 'not tolerated' (a medium finding); every second connection, the
    GREASE hello. Asked four times, the plain hello before the second and third asks and
    the fourth right after the third (two asks in a row: never both on a limiter's
    period), and nothing on a path that answered a hello it had refused with an alert
    (probes/audit/confirm.py)."""
    srv = server_cache("openssl", proto="both")
    limiter = FaultProxy([(srv.host, srv.port)], every(period, ALERT, offset))
    try:
        r = run_audit([Target("127.0.0.1", limiter.port)],
                      AuditOptions(checks=parse_checks(check)),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        limiter.close()
    assert limiter.faults()
    got = {c.name: c for c in r.check_results}
    assert got[check].verdict is not Verdict.not_tolerated, got[check]
