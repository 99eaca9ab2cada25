"""`tlsprobe scan` behind a limiter that refuses one connection with a fatal
handshake_failure alert (tests/helpers/faultproxy.py, in front of one openssl s_server):
the reference hello's repeat refused once, or a hello of the group audit refused once and
answered when asked again, made the target "inconsistent" (the medium finding
target.inconsistent, "likely several configurations behind one name"), which fails
`--fail-on medium`. An alert among the same answers is what a rate limiter gives as well
as a second configuration: the consistency check says it could not tell, and no finding.
Two different answers to the reference hello still make it inconsistent
(tests/scan/test_scan_flaky.py).
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, FaultProxy, nth_matching
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")


def reference(hello) -> bool:
    """The versions check's TLS 1.3 hello (TLS 1.3 and 1.2 offered), which the consistency
    check repeats after each family of phases: the versions check sends it twice (the
    second time to see that the server still answers after its refusals), so its 3rd and
    4th sending are the repeats after the groups and after the suites."""
    return {0x0304, 0x0303} <= set(hello.supported_versions)


def group_offer(hello) -> bool:
    """A share-less TLS 1.3 offer of the group audit (the HelloRetryRequest route)."""
    return hello.supported_versions == [0x0304] and not hello.key_shares and \
        len(hello.supported_groups) > 3


def scan(server_cache, fault) -> tuple[AuditReport, FaultProxy]:
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)], fault)
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=("versions", "groups", "suites"),
                                   policies=(load_policy("intermediate"),)),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    return r, proxy


@pytest.mark.parametrize("which", [3, 4], ids=["groups-repeat", "suites-repeat"])
def test_one_refused_repeat_is_no_second_configuration(server_cache, which):
    r, proxy = scan(server_cache, nth_matching(reference, ALERT, which=(which,)))
    assert len(proxy.faults()) == 1
    c = r.consistency
    assert c is not None and c.status == "not_checked", c
    assert any("alert handshake_failure" in a for a in c.answers), c.answers
    assert any(n.startswith("not established: the reference hello got an alert 1 time(s)")
               and "rate limiter" in n for n in c.notes), c.notes
    assert not any(f.code == "target.inconsistent" for f in r.findings), r.findings


def test_a_group_offer_refused_once_is_no_second_configuration(server_cache):
    r, proxy = scan(server_cache, nth_matching(group_offer, ALERT, which=(1,)))
    assert len(proxy.faults()) == 1
    c = r.consistency
    assert c is not None and c.status == "not_checked", c
    assert any("then HelloRetryRequest" in n for n in c.notes), c.notes
    assert any("1 hello(s) got an alert, then an answer when asked again" in n
               for n in c.notes), c.notes
    assert not any(f.code == "target.inconsistent" for f in r.findings), r.findings
    assert r.group_audit(0x0304).supported, r.group_audit(0x0304)
