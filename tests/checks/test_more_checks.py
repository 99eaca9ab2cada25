"""The hygiene checks of issue 32's "more checks" against real loopback servers, each on both
sides: tls_timestamp (openssl s_server and the scripted server's random ServerHello.random;
the scripted server with gmt_unix_time first, its clock on time and years off), alpn
(openssl s_server -alpn, nginx with http2, servers without ALPN) and npn (openssl s_server
-nextprotoneg, and without it)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.servers import Server, accepting
from tlsprobe.model.check_details import RandomKind, TimestampDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks

ServerFactory = Callable[..., Server]


def check(port: int, name: str) -> CheckResult:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(name)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    got = {c.name: c for c in r.check_results}
    c = got[name]
    assert c.method == "active" and c.category == "hygiene"
    assert c.connections == sum(n for phase, n in r.connections.items()
                                if phase == f"check {name}" or
                                phase.startswith(f"check {name} "))
    return c


@pytest.mark.needs_impl("openssl")
def test_tls_timestamp_random_on_openssl(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="both")
    c = check(srv.port, "tls_timestamp")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, TimestampDetails)
    assert [(s.version, s.kind) for s in c.details.samples] == [
        ("TLS 1.3", RandomKind.random), ("TLS 1.2", RandomKind.random)]
    assert c.details.skew_seconds is None and c.connections == 4
    assert all(len(s.values) == 2 for s in c.details.samples)


@pytest.mark.parametrize("skew", [0, 3600, -300_000_000])
def test_tls_timestamp_clock_on_a_scripted_server(script_server: Callable[..., int],
                                                 skew: int) -> None:
    """gmt_unix_time first (OpenSSL before 1.0.1f): a clock, with its skew, whatever its
    distance from ours (testssl.sh calls a clock more than a day off random)."""
    port = accepting(script_server("scripted_tls_server.py", "--mode", "plain", "--random",
                                   "clock", "--skew", str(skew)))
    c = check(port, "tls_timestamp")
    assert c.verdict is Verdict.not_supported, c
    assert c.code == "check.tls_timestamp" and c.severity == "info"
    assert isinstance(c.details, TimestampDetails)
    (sample,) = c.details.samples
    assert sample.version == "TLS 1.2" and sample.kind is RandomKind.clock
    assert sample.skew_seconds is not None and abs(sample.skew_seconds - skew) <= 2, sample
    assert c.details.skew_seconds == sample.skew_seconds
    assert c.connections in (2, 3) and "a clock" in c.evidence[0]
    assert f"TLS 1.2 ({sample.skew_seconds:+d} s from our clock)" in c.reason


def test_tls_timestamp_random_on_the_scripted_server(script_server: Callable[..., int]
                                                     ) -> None:
    port = accepting(script_server("scripted_tls_server.py", "--mode", "plain"))
    c = check(port, "tls_timestamp")
    assert c.verdict is Verdict.supported and c.code is None, c
    assert isinstance(c.details, TimestampDetails)
    assert [s.kind for s in c.details.samples] == [RandomKind.random]
