"""The refusal that ends a signature-scheme elimination makes the list complete (the
schemes not picked are not signed with). It was read from one connection: a limiter's
alert, or a dropped connection, on one hello in the middle of openssl s_server's
elimination made a list of fewer schemes, stated complete (status established). It now
holds by confirm_refusal's rule (confirm.refusal_stands): the last offer answered asked
in between, the refusal asked again (a close three times).
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy, nth_matching
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler, broad_sigalgs

pytestmark = pytest.mark.needs_impl("openssl")


def sigalgs_offer(version: int):
    """A hello of the `version` signature-scheme elimination after its first (the only
    hellos that offer fewer schemes than every audit hello)."""
    every = set(broad_sigalgs())

    def pred(hello) -> bool:
        tls13 = hello.supported_versions == [0x0304]
        return tls13 == (version == 0x0304) and \
            set(hello.signature_algorithms) != every and bool(hello.signature_algorithms)
    return pred


def scan(port: int) -> AuditReport:
    return run_audit([Target("127.0.0.1", port)],
                     AuditOptions(checks=("versions", "sigalgs")),
                     Scheduler(retries=0, timeout=5.0, per_host=1))[0]


def schemes(r: AuditReport, version: int):
    return next(s for s in r.signature_schemes if s.version.id == version)


@pytest.mark.parametrize("version", [0x0304, 0x0303], ids=["tls13", "tls12"])
@pytest.mark.parametrize("mode,which", [(ALERT, (1,)), (DROP, (1, 2))],
                         ids=["one-alert", "two-drops"])
def test_one_refusal_mid_elimination_is_no_list_end(server_cache, mode, which, version):
    """One alert (a close is asked twice already: two drops, the second on its repeat)
    on the hello after the first pick."""
    srv = server_cache("openssl")
    clean = schemes(scan(srv.port), version)
    assert clean.status == "established" and len(clean.supported) > 2, clean
    proxy = FaultProxy([(srv.host, srv.port)],
                       nth_matching(sigalgs_offer(version), mode, which=which))
    try:
        got = schemes(scan(proxy.port), version)
    finally:
        proxy.close()
    assert proxy.faults()
    assert got.status != "established" or got.supported == clean.supported, got
