"""A version the server does not speak makes `version.missing` when a policy requires it
(TLS 1.2, TLS 1.3): "not spoken" rested on the full offer and the minimal hello refused
once each, and the hello that established the highest spoken version answered after them.
A limiter refusing two connections in a row (or every k-th one, when the scan's other
connections come between) made openssl's TLS 1.2 "not spoken" (the checks reading TLS 1.2
then "not applicable"). The minimal hello's refusal now holds by an elimination end's rule
(confirm.refusal_stands): the established hello answered, then the minimal hello twice in
a row.
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy, nth_matching
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")


def tls12_only(hello) -> bool:
    return not hello.supported_versions and hello.legacy_version == 0x0303


@pytest.mark.parametrize("mode,which", [(ALERT, (1, 2)), (DROP, (1, 2, 3))],
                         ids=["two-alerts", "three-drops"])
def test_two_refusals_in_a_row_make_no_version_unspoken(server_cache, mode, which):
    """The versions check's full TLS 1.2 offer and its minimal hello refused (a dropped
    minimal hello is asked twice already: three drops)."""
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)], nth_matching(tls12_only, mode, which=which))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=("versions",),
                                   policies=(load_policy("intermediate"),)),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    assert len(proxy.faults()) == len(which), proxy.faults()
    v12 = next(v for v in r.versions if v.version.id == 0x0303)
    assert v12.status != "not_supported", v12
    assert not any(f.code == "version.missing" for f in r.findings), r.findings
