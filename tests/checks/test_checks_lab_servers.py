"""The issue's "done when" for the checks: a default `tlsprobe scan` (the audit and every
check) of each lab server implementation prints every check with a verdict, and finds
nothing vulnerable on these patched servers except what the implementation really does
(gnutls-serv accepts client-initiated renegotiation, the DoS concern the check is about).
Each server in its default lab configuration (TLS 1.2 and 1.3)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tlsprobe.probes.checks.catalog import ALIASES

#: what each implementation is known to do that a check calls vulnerable (or not tolerated);
#: besides, the test PKI's leaves (tests/helpers/servers.py make_certs) are valid for more than 398
#: days, which cert_lifetime rightly reports on every one of them
EXPECTED_PROBLEMS = {"gnutls": {"client_renegotiation"},
                     "tlslite": {"sweet32"}}     # tlslite-ng still enables 3DES by default
LONG_LIVED_TEST_LEAF = {"cert_lifetime"}
#: what stays open, and why (the reason must say so): nothing (gnutls-serv asks for a
#: client certificate, which ROBOT left open until it answered with an empty Certificate)
EXPECTED_OPEN: dict[str, dict[str, str]] = {}
#: open on every lab server: each accepts CBC suites in TLS 1.2 by default, which LUCKY13
#: states as "potentially vulnerable" (inconclusive: no timing is measured)
OPEN_EVERYWHERE = {"lucky13": "potentially vulnerable: the server accepts CBC suites in TLS "
                   "1.0-1.2"}


@pytest.mark.parametrize("impl", ["openssl", "gnutls", "nginx", "pyopenssl", "tlslite"])
def test_default_scan_gives_every_check_a_verdict(impl: str, server_cache: Callable[..., Any],
                                                  run_cli: Callable[..., Any]) -> None:
    from tests.helpers.servers import missing_reason, peer_unavailable
    reason = missing_reason(impl)
    if reason:
        peer_unavailable(reason)
    srv = server_cache(impl, proto="both")
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--json", "--no-verify", "--no-progress",
                  "--timeout", "5", timeout=120)
    assert res.returncode in (0, 1), res.stderr
    report = json.loads(res.stdout)
    got = {c["name"]: c for c in report["check_results"]}
    assert list(got) == list(ALIASES["all"]), sorted(set(ALIASES["all"]) ^ set(got))
    problems = {n for n, c in got.items() if c["verdict"] in ("vulnerable", "not tolerated")}
    assert problems == EXPECTED_PROBLEMS.get(impl, set()) | LONG_LIVED_TEST_LEAF, \
        {n: got[n] for n in problems}
    unsure = {n: c["reason"] for n, c in got.items() if c["verdict"] == "inconclusive"}
    expected_open = {**OPEN_EVERYWHERE, **EXPECTED_OPEN.get(impl, {})}
    assert set(unsure) == set(expected_open), unsure
    assert all(expected_open[n] in why for n, why in unsure.items()), unsure
    # the connection count covers the checks' own connections
    assert report["total_connections"] == sum(report["connections"].values())
    assert sum(c["connections"] for c in got.values()) <= sum(
        n for phase, n in report["connections"].items() if phase.startswith("check "))
