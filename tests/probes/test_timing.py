"""Handshake timing (issue 6, item 3): statistics, ranking, and real servers on loopback.

The servers are chosen so the ranking is robust: finite-field groups cost the server (and
us) far more than x25519 (ffdhe4096 about ten times on this machine), so only such large
differences are asserted, never the order of close groups.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import random
import re
import socket
import threading

import pytest

from tlsprobe.commands import timing as timing_cmd
from tlsprobe.engine.config import TLS12, TLS13
from tlsprobe.net.tcp import Target
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.timing import (FAILING, MEASURED, MISMATCH, REFUSED, EntryTiming, Stats,
                                   median_ci_ranks, percentile, rank)
from tlsprobe.probes.timing.run import TimingOptions, measure_timing

X25519, P256, P384, P521, FFDHE3072, FFDHE4096, HYBRID = (0x001D, 0x0017, 0x0018, 0x0019,
                                                          0x0101, 0x0102, 0x11EC)

# the timing probe runs in this process: the collections it runs between its rounds walk
# only what the test made (conftest.py own_heap)
pytestmark = pytest.mark.usefixtures("own_heap")

# -- statistics --------------------------------------------------------------------------------
def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


@pytest.mark.parametrize("n", [1, 5, 6, 10, 20, 50, 101])
def test_median_ci_is_the_narrowest_interval_with_enough_coverage(n):
    got = median_ci_ranks(n, 0.95)
    if n < 6:   # even (min, max) covers the median with only 1 - 2 / 2**n < 95 %
        assert got is None
        return
    lo, hi, level = got
    assert hi == n - 1 - lo                       # symmetric ranks
    assert level == pytest.approx(1 - 2 * _binom_cdf(lo, n))
    assert level >= 0.95
    assert 1 - 2 * _binom_cdf(lo + 1, n) < 0.95   # one rank narrower would not do
    if n == 20:   # the textbook table: x(6)..x(15), 95.86 %
        assert (lo + 1, hi + 1, round(level, 4)) == (6, 15, 0.9586)


def test_median_ci_covers_the_true_median_as_often_as_it_says():
    rng = random.Random(6)
    n, trials, covered = 20, 3000, 0
    for _ in range(trials):
        stats = Stats.of([rng.expovariate(1.0) for _ in range(n)])
        covered += stats.ci_low <= math.log(2) <= stats.ci_high   # median of Exp(1)
    assert abs(covered / trials - 0.9586) < 0.02


def test_stats_of_known_samples():
    s = Stats.of([5.0, 1.0, 4.0, 2.0, 3.0, 10.0])
    assert (s.n, s.min, s.max, s.median) == (6, 1.0, 10.0, 3.5)
    assert s.p90 == pytest.approx(percentile([1, 2, 3, 4, 5, 10], 0.9)) == 7.5
    assert (s.ci_low, s.ci_high) == (1.0, 10.0) and s.ci_level == pytest.approx(0.96875, abs=1e-4)
    assert Stats.of([]) is None


def _entry(label: str, samples: list[float], version: int = TLS13) -> EntryTiming:
    return EntryTiming(version=Codepoint.version(version), group=None, label=label,
                       status=MEASURED, runs=len(samples), handshake_ms=Stats.of(samples))


def test_rank_by_median_flags_overlap_and_writes_the_verdict():
    fast = _entry("x25519 (0x001d)", [1.0 + i / 100 for i in range(20)])
    close = _entry("secp256r1 (0x0017)", [1.05 + i / 100 for i in range(20)])
    slow = _entry("ffdhe2048 (0x0100)", [2.0 + i / 100 for i in range(20)])
    other = _entry("secp384r1 (0x0018)", [3.0] * 8, TLS12)
    refused = EntryTiming(version=Codepoint.version(TLS13), group=None, label="X448 (0x001e)",
                          status=REFUSED, detail="alert")
    entries, rankings = rank([slow, refused, other, close, fast])
    assert [(e.label, e.rank) for e in entries] == [
        ("x25519 (0x001d)", 1), ("secp256r1 (0x0017)", 2), ("ffdhe2048 (0x0100)", 3),
        ("X448 (0x001e)", None), ("secp384r1 (0x0018)", 1)]
    assert [e.ci_overlaps_previous for e in entries[:3]] == [None, True, False]
    r13, r12 = rankings
    assert r13.order == ("x25519 (0x001d)", "secp256r1 (0x0017)", "ffdhe2048 (0x0100)")
    assert r13.ratio == round(2.095 / 1.095, 2) and r13.distinct is False   # medians
    # x25519's interval overlaps secp256r1's: no "cheapest" is claimed, only the lowest
    # median; the ratio to ffdhe2048 is established (their intervals are apart)
    assert r13.cheapest is None
    assert r13.verdict == ("TLS 1.3: lowest median: x25519 (0x001d), 1.9x faster than "
                           "ffdhe2048 (not established as cheapest: not distinguishable from "
                           "secp256r1 at this confidence: their intervals overlap)")
    assert r12.verdict == "TLS 1.2: only secp384r1 (0x0018) measured (3.00 ms median handshake)"


def test_rank_claims_only_what_the_intervals_establish():
    """"cheapest on this server" and "N.Nx faster than" are said only where the intervals
    are apart: too few runs for an interval claim neither (the table's rank~ note says the
    order is not established; the verdict under it must not say otherwise)."""
    few = rank([_entry("x25519 (0x001d)", [3.3, 3.2, 3.4, 3.3, 3.5], TLS12),
                _entry("secp256r1 (0x0017)", [4.0, 3.9, 4.1, 4.2, 4.0], TLS12)])[1][0]
    assert few.cheapest is None and few.distinct is False
    assert few.verdict == ("TLS 1.2: lowest median: x25519 (0x001d), median 1.2x lower than "
                           "secp256r1's (not established as cheapest: not distinguishable "
                           "from secp256r1 at this confidence: too few runs for a confidence "
                           "interval)")
    apart = rank([_entry("x25519 (0x001d)", [1.0 + i / 100 for i in range(20)]),
                  _entry("ffdhe2048 (0x0100)", [2.5 + i / 100 for i in range(20)])])[1][0]
    assert apart.cheapest == "x25519 (0x001d)" and apart.distinct is True
    assert apart.verdict == "TLS 1.3: cheapest on this server: x25519 (0x001d), 2.4x faster " \
        "than ffdhe2048"
    # the runner-up is clearly slower, the slowest too uncertain to state its ratio
    wide = rank([_entry("x25519 (0x001d)", [1.0 + i / 100 for i in range(20)]),
                 _entry("secp256r1 (0x0017)", [2.0 + i / 100 for i in range(20)]),
                 _entry("ffdhe2048 (0x0100)", [1.1, 1.15, 2.2, 2.3, 2.4, 9, 9.5, 10])])[1][0]
    assert wide.cheapest == "x25519 (0x001d)"
    assert wide.verdict.startswith("TLS 1.3: cheapest on this server: x25519 (0x001d), median ")
    assert wide.verdict.endswith("(the ratio is not established at this confidence: their "
                                 "intervals overlap)")


# -- real servers ------------------------------------------------------------------------------
def _by(report, version):
    return {e.group.id: e for e in report.entries if e.version.id == version and e.group}


def _check_figures(e: EntryTiming, runs: int) -> None:
    assert e.status == MEASURED and e.runs == runs == len(e.samples_ms), e.detail
    hs = e.handshake_ms
    assert 0 < hs.min <= hs.median <= hs.p90 <= hs.max
    if runs >= 6:
        assert hs.ci_low <= hs.median <= hs.ci_high and hs.ci_level >= 0.95
    else:   # too few runs for a 95 % interval: none is claimed
        assert hs.ci_low is hs.ci_high is hs.ci_level is None
    assert e.connect_ms.median > 0 and e.total_ms.median >= hs.median
    assert e.handshakes_per_s == pytest.approx(1000 / e.total_ms.median, rel=0.01)
    # our CPU is part of the wall time; what is left is the wait for the server
    assert 0 < e.client_cpu_ms.median <= hs.median * 1.05
    assert e.wait_ms.median >= 0 and e.client_kex_ms > 0
    # Every figure can be recomputed from the run's raw data (per run, in order).
    assert len(e.connect_samples_ms) == len(e.cpu_samples_ms) == runs
    per_run = list(zip(e.connect_samples_ms, e.samples_ms, e.cpu_samples_ms))
    for name, values in (("handshake_ms", e.samples_ms),
                         ("connect_ms", e.connect_samples_ms),
                         ("client_cpu_ms", e.cpu_samples_ms),
                         ("total_ms", [c + h for c, h, _ in per_run]),
                         ("wait_ms", [max(0.0, h - u) for _, h, u in per_run])):
        again, given = Stats.of(values), getattr(e, name)
        for field in ("n", "median", "p90", "min", "max", "mean", "ci_low", "ci_high"):
            assert getattr(given, field) == pytest.approx(getattr(again, field), abs=3e-4), \
                (name, field)


def test_openssl_groups_found_measured_and_ranked(server_cache):
    srv = server_cache("openssl", groups=["X25519", "P-256", "P-521", "ffdhe4096"], proto="both")
    report = measure_timing(Target("127.0.0.1", srv.port), TimingOptions(runs=8, warmup=1))
    assert report.discovery == "audit" and report.stopped is None and report.error is None
    t13, t12 = _by(report, TLS13), _by(report, TLS12)
    assert set(t13) == {X25519, P256, P521, FFDHE4096}
    assert set(t12) == {X25519, P256, P521}       # TLS 1.2 DHE: s_server's fixed parameters
    fixed = [e for e in report.entries if e.version.id == TLS12 and "fixed" in e.label]
    assert len(fixed) == 1 and fixed[0].status == MEASURED
    for e in [*t13.values(), *t12.values()]:
        _check_figures(e, 8)
        assert e.cipher_suite is not None and e.hello_retry is False
    r13 = next(r for r in report.rankings if r.version.id == TLS13)
    assert r13.slowest == "ffdhe4096 (0x0102)" and r13.ratio > 2
    assert t13[X25519].rank < t13[FFDHE4096].rank == 4
    assert t13[FFDHE4096].client_kex_ms > 5 * t13[X25519].client_kex_ms
    if r13.distinct:
        assert r13.verdict.startswith(f"TLS 1.3: cheapest on this server: {r13.cheapest}, ")
    else:   # the two lowest too close to call in 8 runs: no winner claimed
        assert r13.cheapest is None
        assert r13.verdict.startswith(f"TLS 1.3: lowest median: {r13.order[0]}, ")
        assert "not established as cheapest" in r13.verdict


def test_explicit_groups_refusal_mismatch_and_pinned_suites(server_cache):
    srv = server_cache("openssl", groups=["X25519", "P-256"], proto="both")
    options = TimingOptions(runs=3, warmup=0, groups=(X25519, P384, FFDHE3072),
                            suites=(0x1301, 0x1303, 0xC02F))
    report = measure_timing(Target("127.0.0.1", srv.port), options)
    assert report.discovery == "explicit"
    rows = {(e.version.id, e.group.id, e.offered_suite.id if e.offered_suite else None): e
            for e in report.entries}
    for suite in (0x1301, 0x1303):
        e = rows[(TLS13, X25519, suite)]
        _check_figures(e, 3)
        assert e.cipher_suite.id == suite
    assert rows[(TLS12, X25519, 0xC02F)].cipher_suite.id == 0xC02F
    refused = rows[(TLS13, P384, 0x1301)]
    assert refused.status == REFUSED and "alert" in refused.detail and refused.rank is None
    # TLS 1.2 DHE: s_server sends its own parameters whatever group is asked for
    dhe = rows[(TLS12, FFDHE3072, None)]
    assert dhe.status == MISMATCH and "offered ffdhe3072 (0x0101) alone" in dhe.detail


def test_tls12_with_an_ecdsa_certificate_lists_its_curve_after_the_timed_group(server_cache):
    # OpenSSL uses an ECDSA certificate in TLS 1.2 only when the client lists its curve
    # (P-256 here), which this server does not accept for key exchange.
    srv = server_cache("openssl", groups=["X25519", "P-384"], proto="tls1_2", cert="ecdsa")
    report = measure_timing(Target("127.0.0.1", srv.port),
                            TimingOptions(runs=3, warmup=0, versions=(TLS12,)))
    t12 = _by(report, TLS12)
    assert set(t12) == {X25519, P384}
    for e in t12.values():
        _check_figures(e, 3)
    # Offered alone, the same group is refused: the certificate's curve is what was missing.
    alone = measure_timing(Target("127.0.0.1", srv.port), TimingOptions(
        runs=2, warmup=0, versions=(TLS12,), groups=(X25519,)))
    (refused,) = alone.entries
    assert refused.status == REFUSED and "handshake_failure" in refused.detail
    assert "TLS 1.2 needs its curve offered too" in refused.detail


def test_a_version_the_server_does_not_speak_is_not_blamed_on_the_group(server_cache):
    # A TLS 1.3-only server answers a TLS 1.2 hello with protocol_version: the version is
    # refused, whatever the group; no hint about an ECDSA certificate's curve.
    srv = server_cache("openssl", groups=["X25519", "P-256"], proto="tls1_3")
    report = measure_timing(Target("127.0.0.1", srv.port), TimingOptions(
        runs=2, warmup=0, versions=(TLS13, TLS12), groups=(X25519, P256)))
    for e in report.entries:
        if e.version.id == TLS13:
            _check_figures(e, 2)
            continue
        assert e.status == REFUSED and "protocol_version (70)" in e.detail, e.detail
        assert "the server refuses TLS 1.2 itself, whatever the group" in e.detail
        assert "curve" not in e.detail


def test_pyopenssl_hybrid_and_classic_groups(server_cache):
    srv = server_cache("pyopenssl", groups=["X25519MLKEM768", "X25519", "ffdhe4096"],
                       proto="tls1_3")
    report = measure_timing(Target("127.0.0.1", srv.port),
                            TimingOptions(runs=6, warmup=1, versions=(TLS13,)))
    t13 = _by(report, TLS13)
    assert set(t13) == {HYBRID, X25519, FFDHE4096}
    for e in t13.values():
        _check_figures(e, 6)
    assert t13[HYBRID].label == "X25519MLKEM768 (0x11ec)"
    # ranked by median (one slow x25519 run on a busy machine can put it behind ffdhe4096,
    # so the order itself is not asserted); our own ffdhe4096 key exchange is the costly one
    ranked = sorted(t13.values(), key=lambda e: e.rank)
    medians = [e.handshake_ms.median for e in ranked]
    assert [e.rank for e in ranked] == [1, 2, 3] and medians == sorted(medians)
    assert t13[FFDHE4096].client_kex_ms > 5 * t13[X25519].client_kex_ms
    assert not [e for e in report.entries if e.version.id == TLS12]


def _stopped_run(tls_server):
    """A run of 10 per group whose server stops after five handshakes."""
    srv = tls_server("openssl", groups=["X25519", "P-256"], proto="tls1_3")

    def kill_after_five(done: int, planned: int, label: str) -> None:
        if done == 5:
            srv.stop()
    return measure_timing(Target("127.0.0.1", srv.port),
                          TimingOptions(runs=10, warmup=0, groups=(X25519, P256),
                                        versions=(TLS13,)), on_progress=kill_after_five)


def test_a_server_that_stops_ends_the_run_with_a_message(tls_server):
    report = _stopped_run(tls_server)
    assert report.stopped.startswith("the server stopped completing handshakes after 8 of 20")
    assert report.error_kind == "network"
    assert {e.status for e in report.entries} == {FAILING}
    assert all(1 <= e.runs < 10 for e in report.entries)
    # The table's title says "10 runs per group": each entry cut short says how many it has.
    from tlsprobe.report.timing_tables import render_timing
    out = io.StringIO()
    render_timing(report, out)
    text = " ".join(out.getvalue().split())
    assert "10 runs per group" in text
    for e in report.entries:
        assert (f"note: {e.name} (TLS 1.3): failing: only {e.runs} of 10 runs measured; "
                f"{e.failures} failed handshake(s), last: ") in text


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib, the plot extra, is not installed")
def test_the_plot_names_the_entries_cut_short(tls_server):
    from tlsprobe.report.plots import timing_figure
    report = _stopped_run(tls_server)
    fig = timing_figure(report)
    title = fig.axes[0].get_title(loc="left")
    assert "10 runs per group" in title
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"TLS 1.3 {e.name} (only {e.runs} of 10 runs)" for e in report.entries]


def test_silent_server_times_out_per_handshake():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)   # the kernel completes connects; nobody ever answers
        port = listener.getsockname()[1]
        report = measure_timing(Target("127.0.0.1", port),
                                TimingOptions(runs=3, timeout=0.3, groups=(X25519,)))
        listener.setblocking(False)
        connections = 0
        while True:     # what the backlog holds: every connection the run opened
            try:
                listener.accept()[0].close()
            except BlockingIOError:
                break
            connections += 1
    # the preflight's handshake (and its one retry after a network error) ends the run at
    # the first limit: not an enumeration of 3 runs (counted, not timed: a busy machine)
    assert 1 <= connections <= 2
    assert report.entries == () and report.error_kind == "network"
    assert report.error == "timed out waiting for the server (0.3 s)"


# -- the command functions ---------------------------------------------------------------------
def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    timing_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_run_timing_json_and_table(server_cache):
    srv = server_cache("openssl", groups=["X25519", "ffdhe4096"], proto="tls1_3")
    argv = (f"127.0.0.1:{srv.port}", "--timing-runs", "6", "--timing-warmup", "1",
            "--timing-groups", "x25519:ffdhe4096", "--timing-versions", "1.3")
    out, err = io.StringIO(), io.StringIO()
    assert timing_cmd.run_timing(argv[0], _parse(*argv, "--json"), out=out, err=err) == 0
    data = json.loads(out.getvalue())
    assert data["schema"] == "tlsprobe.timing/1" and data["runs"] == 6 and err.getvalue() == ""
    entries = {e["group"]["id"]: e for e in data["entries"]}
    assert set(entries) == {X25519, FFDHE4096}
    assert [entries[X25519]["rank"], entries[FFDHE4096]["rank"]] == [1, 2]
    assert set(entries[X25519]["handshake_ms"]) == {"n", "median", "p90", "min", "max", "mean",
                                                    "ci_low", "ci_high", "ci_level"}
    (ranking,) = data["rankings"]
    assert ranking["order"][0] == "x25519 (0x001d)" and ranking["ratio"] > 2
    # named the cheapest only when the intervals are apart (one slow run on a busy machine
    # can make them overlap: then no winner is claimed)
    assert ranking["cheapest"] == ("x25519 (0x001d)" if ranking["distinct"] else None)
    out = io.StringIO()
    assert timing_cmd.run_timing(argv[0], _parse(*argv), out=out, err=err) == 0
    text = out.getvalue()
    assert "95% CI" in text and "hs/s" in text and "client CPU" in text
    assert re.search(r"TLS 1\.3: (cheapest on this server|lowest median): x25519 \(0x001d\), "
                     r"(\d+\.\dx faster than ffdhe4096|median \d+\.\dx lower than ffdhe4096's)",
                     text), text


@pytest.mark.parametrize("extra, message", [
    (("--timing-groups", "nosuchgroup"), "--timing-groups: unknown group"),
    (("--timing-versions", "1.1"), "--timing-versions: unknown version '1.1'"),
    (("--timing-suites", "TLS_FOO"), "--timing-suites:"),
    (("--timing-groups", "0x9999"), "none of the groups given can be timed (0x9999: no key "
                                    "share can be computed here)"),
])
def test_run_timing_usage_errors_are_one_line(extra, message):
    err = io.StringIO()
    assert timing_cmd.run_timing("127.0.0.1:1", _parse("127.0.0.1:1", *extra),
                                 out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and message in err.getvalue()
    assert err.getvalue().startswith("tlsprobe: error: ")


@pytest.mark.parametrize("extra, message", [
    (("--timing-runs", "0"), "argument --timing-runs: must be from 1 to 10000"),
    (("--timing-warmup", "-1"), "argument --timing-warmup: must be from 0 to 1000"),
    (("--timing-timeout", "-1"), "argument --timing-timeout: expected seconds > 0"),
    (("--timeout", "inf"), "argument --timeout: expected seconds > 0"),
])
def test_timing_number_options_are_checked_when_parsed(extra, message, capsys):
    from tlsprobe.cli import build_parser
    with pytest.raises(SystemExit) as exc:
        build_parser("timing").parse_args(["127.0.0.1:1", *extra])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and message in err


def test_run_timing_against_a_non_tls_server_says_so():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]

        def answer() -> None:
            conn, _ = listener.accept()   # the address check
            conn.close()
            conn, _ = listener.accept()   # the first handshake
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
            conn.close()
        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        err = io.StringIO()
        code = timing_cmd.run_timing(f"127.0.0.1:{port}", _parse(f"127.0.0.1:{port}"),
                                     out=io.StringIO(), err=err)
        thread.join(5)
    assert code == 4
    assert err.getvalue() == (f"tlsprobe: 127.0.0.1:{port}: not a TLS server: it sent an "
                              "HTTP response ('HTTP/1.0 400 Bad Request\\r\\n')\n")


def test_run_timing_connection_refused_is_a_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again: nobody listens there
    err = io.StringIO()
    code = timing_cmd.run_timing(f"127.0.0.1:{port}", _parse(f"127.0.0.1:{port}"),
                                 out=io.StringIO(), err=err)
    assert code == 3 and err.getvalue() == f"tlsprobe: 127.0.0.1:{port}: connection refused\n"


def test_timing_options_fit_beside_the_probe_options():
    """`tlsprobe HOST --timing`: the --timing-* options are part of the probe's parser."""
    from tlsprobe.commands import probe
    parser = argparse.ArgumentParser()
    probe.add_arguments(parser)
    args = parser.parse_args(["127.0.0.1:4433", "--timing-runs", "7", "--timeout", "2",
                              "--groups", "x25519", "--timing-groups", "P-256"])
    options = timing_cmd.options_from_args(args, "127.0.0.1")
    assert (options.runs, options.timeout, options.groups) == (7, 2.0, (P256,))
    assert options.server_name is None   # no SNI for an IP address
