"""`tlsprobe scan --checks pq` alone against a rate limiter: a real server behind a loopback
proxy (tests/helpers/faultproxy.py) that refuses one hello, or every hello from some point
on, with a fatal handshake_failure alert or a bare close. The post-quantum "capability" and
"browser_like" answers were NO on one such refusal; a refusal is now asked again and holds
only while the server still answers (probes/audit/confirm.py still_answered), else the
answer is inconclusive and says why. A server without the group still gets its NO.
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy, at
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

PQ_SERVER = {"groups": ["X25519MLKEM768", "X25519", "P-256"]}


def scan_pq(port: int) -> AuditReport:
    return run_audit([Target("127.0.0.1", port)], AuditOptions(checks=("pq",)),
                     Scheduler(retries=0, timeout=5.0, per_host=1))[0]


def verdicts(r: AuditReport) -> dict[str, tuple[str, str]]:
    return {v.check: (v.verdict, v.detail) for v in r.post_quantum
            if v.check in ("capability", "browser_like")}


def through(srv, fault) -> AuditReport:
    proxy = FaultProxy([(srv.host, srv.port)], fault)
    try:
        return scan_pq(proxy.port)
    finally:
        proxy.close()


@pytest.mark.needs_impl("pyopenssl")
@pytest.mark.parametrize("mode", [ALERT, DROP])
@pytest.mark.parametrize("which", [1, 2], ids=["capability", "browser_like"])
def test_one_refusal_of_a_pq_hello_is_asked_again(server_cache, mode, which):
    """The limiter refuses only the `which`-th connection (the capability hello, or the
    browser-like one): asked again, the server answers, so the answer is YES (an alert made
    it NO, "a real share offered alone: alert handshake_failure")."""
    srv = server_cache("pyopenssl", **PQ_SERVER)
    got = verdicts(through(srv, at([which], mode)))
    assert got["capability"][0] == "yes", got
    assert got["browser_like"][0] == "yes", got


@pytest.mark.needs_impl("pyopenssl")
@pytest.mark.parametrize("mode", [ALERT, DROP])
@pytest.mark.parametrize("start", [1, 2], ids=["from-capability", "from-browser_like"])
def test_a_limiter_makes_the_pq_answers_inconclusive_not_no(server_cache, mode, start):
    """The limiter refuses every hello from the `start`-th connection on: whatever it
    refused is inconclusive with the reason (the control hello is not answered either),
    never NO."""
    srv = server_cache("pyopenssl", **PQ_SERVER)
    got = verdicts(through(srv, lambda i, _h: mode if i >= start else None))
    for check, (verdict, detail) in got.items():
        assert verdict != "no", (check, detail)
    assert got["browser_like"][0] == "inconclusive", got
    assert "rate limiting" in got["browser_like"][1], got
    if start == 1:
        assert got["capability"][0] == "inconclusive", got
        assert "an ordinary TLS 1.3 hello (x25519) was not answered either" in \
            got["capability"][1], got


@pytest.mark.needs_impl("openssl")
def test_a_server_without_the_group_still_gets_no(server_cache):
    """openssl s_server on OpenSSL 3.0 has no X25519MLKEM768: the capability hello is
    refused twice while an ordinary TLS 1.3 hello is answered, so NO stands; the
    browser-like hello is answered with x25519 (NO, as before)."""
    srv = server_cache("openssl")
    got = verdicts(scan_pq(srv.port))
    assert got["capability"][0] == "no", got
    assert "(on two connections)" in got["capability"][1], got
    assert got["browser_like"] == ("no", "the server picked x25519"), got


@pytest.mark.needs_impl("openssl")
def test_a_server_without_tls13_still_gets_no(server_cache):
    """A TLS 1.2-only s_server refuses every TLS 1.3 hello with protocol_version, the
    server's word that it does not speak TLS 1.3 (no limiter sends it): NO stands, with no
    control hello (asking an ordinary TLS 1.3 hello would be refused the same way)."""
    srv = server_cache("openssl", proto="tls1_2")
    r = scan_pq(srv.port)
    got = verdicts(r)
    assert got["capability"] == ("no", "a real share offered alone: alert protocol_version "
                                 "(70) (on two connections)"), got
    assert got["browser_like"] == ("no", "alert protocol_version (70) (on two connections)"), got
    assert "post-quantum control" not in r.connections, r.connections
