"""The refusal that ends the TLS 1.3 group elimination makes every group not picked "not
supported" (`group.missing` when a policy recommends one). In a scan with the versions
check it rested on the refusal asked twice and the family's repeat of the reference hello
at the end: a limiter refusing a few connections in a row (the offer with the server's last
group, its second sending and the next ones) made that group "not supported" although the
repeat, later (after the post-quantum verdicts' connections), was answered. The first offer is now asked again right after the refusal in
every scan (confirm.still_answered), as with the group audit alone.
"""
from __future__ import annotations

import threading

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")
SERVER_13 = {0x001D, 0x0017, 0x001E, 0x0019, 0x0018, 0x0100, 0x0101, 0x0102, 0x0103, 0x0104}
WINDOW = 5


def window_from_last_offer(mode: str):
    """Refuses `WINDOW` connections in a row from the first share-less TLS 1.3 offer whose
    only group the server has is its last pick; answers every other."""
    start = [0]
    lock = threading.Lock()

    def fault(index, hello):
        with lock:
            if not start[0] and hello is not None and hello.supported_versions == [0x0304] \
                    and not hello.key_shares and len(set(hello.supported_groups) & SERVER_13) == 1:
                start[0] = index
            return mode if start[0] and index < start[0] + WINDOW else None
    return fault


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_a_few_refusals_in_a_row_make_no_group_unsupported(server_cache, mode):
    srv = server_cache("openssl")
    proxy = FaultProxy([(srv.host, srv.port)], window_from_last_offer(mode))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=("versions", "groups", "pq"),
                                   policies=(load_policy("intermediate"),)),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    assert len(proxy.faults()) >= 3, proxy.faults()
    g13 = r.group_audit(0x0304)
    assert g13 is not None
    assert not {c.id for c in g13.not_supported} & SERVER_13, g13.not_supported
    assert any("answered before, was not answered right after" in n for n in g13.notes), g13.notes
    assert not any(f.code == "group.missing" for f in r.findings), r.findings
