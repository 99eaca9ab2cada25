"""`tlsprobe scan` on a path that drops connections (a bare close, no answer), in front of
one openssl s_server (tests/helpers/faultproxy.py). A bare close is asked twice before it
counts as a refusal; a dropper whose drops fall on both sendings of one question (others'
connections come between them) made the group the server would have picked, and every
group after it, "not supported" (a `group.missing` finding of a policy that wants it).
Once a close was answered when asked again the path is known to drop connections, and two
closes prove nothing more on it: inconclusive, said why (TargetRunner.flaky).
"""
from __future__ import annotations

import threading

import pytest

from tests.helpers.faultproxy import DROP, FaultProxy
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")
SERVER_13 = {0x001D, 0x0017, 0x001E, 0x0019, 0x0018, 0x0100, 0x0101, 0x0102, 0x0103, 0x0104}


def share_less_13(hello) -> bool:
    return hello is not None and hello.supported_versions == [0x0304] and not hello.key_shares


def dropper():
    """Drops the first share-less TLS 1.3 group offer once (answered when asked again: the
    path drops connections), then both sendings of the offer whose only group the server
    has is `last` (the elimination's last pick)."""
    seen = {"first": 0, "last": 0}
    lock = threading.Lock()

    def fault(_index, hello):
        if not share_less_13(hello):
            return None
        mine = set(hello.supported_groups) & SERVER_13
        with lock:
            if len(mine) == len(SERVER_13):
                seen["first"] += 1
                return DROP if seen["first"] == 1 else None
            if len(mine) == 1:
                seen["last"] += 1
                return DROP if seen["last"] <= 2 else None
        return None
    return fault


def _audit_through(server_cache, fault):
    """The versions and groups audit of an openssl s_server behind a relay applying
    `fault`, one connection at a time, no retries: (the report, the relay's faults)."""
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)], fault)
    try:
        report = run_audit([Target("127.0.0.1", proxy.port)],
                           AuditOptions(checks=("versions", "groups"),
                                        policies=(load_policy("intermediate"),)),
                           Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    return report, proxy.faults()


def test_two_drops_on_a_dropping_path_make_no_group_unsupported(server_cache):
    r, faults = _audit_through(server_cache, dropper())
    # the last offer's first drop already proves nothing on this path: not sent again
    assert len(faults) == 2, faults
    g13 = r.group_audit(0x0304)
    assert g13 is not None
    refused = {c.id for c in g13.not_supported}
    assert not refused & SERVER_13, g13.not_supported
    last = SERVER_13 - {c.id for c in g13.supported}
    assert len(last) == 1 and last <= {c.id for c in g13.inconclusive}, g13
    assert any("closed without an answer was answered when asked again" in n
               for n in g13.notes), g13.notes


def group_offers_dropped_twice():
    """Drops the first two sendings of every hello of the TLS 1.3 group audit (share-less
    offers of several groups, and the key-share route's offers: a share for every group
    listed), as a path dropping every third connection did when the scan's other
    connections came between them (one connection at a time)."""
    seen: dict[tuple, int] = {}
    lock = threading.Lock()

    def fault(_index, hello):
        if hello is None or hello.supported_versions != [0x0304]:
            return None
        groups = tuple(hello.supported_groups)
        shares = tuple(k.group for k in hello.key_shares)
        if not (shares == groups or (not shares and len(groups) > 2)):
            return None
        with lock:
            seen[(groups, shares)] = n = seen.get((groups, shares), 0) + 1
        return DROP if n <= 2 else None
    return fault


def test_drops_on_both_sendings_of_the_key_share_route_make_no_group_unsupported(
        server_cache):
    """The HelloRetryRequest route's first offer dropped twice sends the group audit to
    the key-share route; each of its offers dropped on both sendings made the groups it
    offered 'not supported' (nine groups openssl has: x25519, secp256r1, ...; group.missing
    can fail CI). An elimination's ending refusal now holds by confirm_refusal's rule
    (confirm.refusal_stands: the last offer answered asked in between, a close three
    times, nothing on a path that dropped hellos it answered when asked again)."""
    r, faults = _audit_through(server_cache, group_offers_dropped_twice())
    assert len(faults) >= 4, faults
    g13 = r.group_audit(0x0304)
    assert g13 is not None
    assert not {c.id for c in g13.not_supported} & SERVER_13, g13
    assert any("not confirmed" in n for n in g13.notes), g13.notes
