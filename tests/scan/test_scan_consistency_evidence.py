"""What `consistent` rests on. A proxy alternating connections between two openssl
s_server backends, one with an RSA certificate, one with an ECDSA one (otherwise alike):
`scan --checks versions,cert` compared two answers of the reference hello, the versions
check's and one at the end, with the cert phase's connections between them; both reached
the same backend and the target was "consistent". The final repeat is now two hellos in a
row (a round robin sends them to different backends) whenever other connections ran since
the last repeat, and "consistent" says what it rests on: no second configuration seen.
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


def scan(port: int, checks: tuple[str, ...], per_host: int) -> AuditReport:
    return run_audit([Target("127.0.0.1", port)],
                     AuditOptions(checks=checks, policies=(load_policy("intermediate"),)),
                     Scheduler(retries=0, timeout=5.0, per_host=per_host))[0]


def balanced(server_cache, certs: tuple[str, str]) -> FaultProxy:
    backends = [server_cache("openssl", cert=c) for c in certs]
    return FaultProxy([(s.host, s.port) for s in backends], choose=lambda i: i % 2)


@pytest.mark.parametrize("per_host", [1, 4])
@pytest.mark.parametrize("checks", [("versions", "cert"), ("versions", "cert", "etm")],
                         ids=["cert", "cert-and-a-check"])
def test_an_rsa_and_an_ecdsa_backend_are_not_called_consistent(server_cache, checks, per_host):
    proxy = balanced(server_cache, ("rsa", "ecdsa"))
    try:
        r = scan(proxy.port, checks, per_host)
    finally:
        proxy.close()
    c = r.consistency
    assert c is not None and c.status == "inconsistent", c
    assert any("RSA" in n and "ECDSA" in n for n in c.notes), c.notes
    assert any(f.code == "target.inconsistent" for f in r.findings), r.findings


def test_consistent_says_what_it_rests_on(server_cache):
    """Two backends alike (the same certificate): "consistent", with a note that it shows
    no second configuration, not that there is none; the final repeats are two in a row."""
    proxy = balanced(server_cache, ("rsa", "rsa"))
    try:
        r = scan(proxy.port, ("versions", "cert"), 1)
    finally:
        proxy.close()
    c = r.consistency
    assert c is not None and c.status == "consistent", c
    (note,) = c.notes
    assert note.startswith("no second configuration seen: 3 answers of the reference hello "
                           "agree (version, suite and group; the leaf certificate of the 2 "
                           "that read it), the last two from consecutive connections"), note
    assert "would not show here" in note
    assert [a.split(":")[0] for a in c.answers] == ["versions", "end of the audit",
                                                    "end of the audit"]


def full_tls13_versions_hello(hello) -> bool:
    """The versions check's full TLS 1.3 hello (TLS 1.3 and 1.2, two key shares), not its
    minimal one (TLS 1.3 alone, one share)."""
    return hello.supported_versions == [0x0304, 0x0303] and len(hello.key_shares) == 2


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_a_minimal_hellos_answer_is_compared_with_the_minimal_hello(server_cache, mode):
    """The versions check's full TLS 1.3 hello refused once (a limiter's alert, a dropped
    connection): its minimal hello, answered with x25519 (its one share), established
    TLS 1.3, and that answer became the reference's first, but the repeats sent the full
    hello, which openssl answers with secp256r1 (its shares' order): 'inconsistent'
    (target.inconsistent, medium) on one server. The repeats now send the hello whose
    answer the reference holds."""
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)],
                       nth_matching(full_tls13_versions_hello, mode, which=(1,)))
    try:
        r = scan(proxy.port, ("versions", "groups"), 1)
    finally:
        proxy.close()
    assert proxy.faults()
    v13 = next(v for v in r.versions if v.version.id == 0x0304)
    assert v13.status == "supported" and v13.minimal, v13
    assert r.consistency is not None and r.consistency.status == "consistent", r.consistency
    assert not any(f.code == "target.inconsistent" for f in r.findings), r.findings
