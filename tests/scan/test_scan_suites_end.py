"""The refusal that ends a cipher-suite elimination makes the list complete (every suite
not picked "not supported": a policy's and the rating's input, and the derived checks'
"not vulnerable"). It was read from one connection: a limiter's alert on one hello in the
middle of openssl s_server's TLS 1.2 elimination made a complete list of 4 of its 20
suites. It now holds by confirm_refusal's rule, the hello of the last pick asked between
the refusal and its confirmation (confirm.refusal_stands): not answered, the list is not
complete, said why.
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy, nth_matching
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")


def suites_12(hello) -> bool:
    """A hello of the TLS 1.2 suite elimination (the suites phase offers x25519 and
    secp256r1 first; the versions check's and the group audit's hellos do not)."""
    return not hello.supported_versions and hello.legacy_version == 0x0303 and \
        hello.supported_groups[:2] == [0x001D, 0x0017]


def scan(port: int) -> AuditReport:
    return run_audit([Target("127.0.0.1", port)],
                     AuditOptions(checks=("versions", "suites"),
                                  policies=(load_policy("intermediate"),)),
                     Scheduler(retries=0, timeout=5.0, per_host=1))[0]


def through(server_cache, fault) -> AuditReport:
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)], fault)
    try:
        return scan(proxy.port)
    finally:
        proxy.close()


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_one_refusal_mid_elimination_is_asked_again(server_cache, mode):
    clean = scan(server_cache("openssl").port).suite_audit(0x0303)
    assert clean is not None and clean.complete and len(clean.supported) > 8
    got = through(server_cache, nth_matching(suites_12, mode, which=(5,))).suite_audit(0x0303)
    assert got is not None
    assert got.complete and got.supported == clean.supported, got


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_two_refusals_in_a_row_mid_elimination_make_no_complete_list(server_cache, mode):
    """The 5th and 6th hellos of the elimination refused (a path refusing every third
    connection does so when the scan's other connections come between): the two asks of
    the 5th were read as the server's refusal and the list was complete with 4 of its 20
    suites. The hello of the last pick is asked in between now: a list said complete is
    the whole list."""
    clean = scan(server_cache("openssl").port).suite_audit(0x0303)
    assert clean is not None and clean.complete
    got = through(server_cache, nth_matching(suites_12, mode, which=(5, 6))).suite_audit(
        0x0303)
    assert got is not None
    assert not got.complete or got.supported == clean.supported, got


def test_a_limiter_from_mid_elimination_leaves_the_list_incomplete(server_cache):
    """From the 5th hello of the elimination on, every hello gets an alert: the last
    pick's hello, asked between the refusal and its confirmation, is not answered."""
    fifth = nth_matching(suites_12, ALERT, which=(5,))
    started = [False]

    def limiter(index, hello):
        started[0] = started[0] or fifth(index, hello) is not None
        return ALERT if started[0] else None
    got = through(server_cache, limiter).suite_audit(0x0303)
    assert got is not None and not got.complete, got
    assert any(n.startswith("stopped, not established: alert handshake_failure (40), but "
                            "the hello of the last pick, answered before, was not answered "
                            "right after") and "rate limiting" in n
               for n in got.notes), got.notes
