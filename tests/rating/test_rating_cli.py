"""The rating on the command line: `scan --fail-under GRADE` (exit 1 below it, 0 at or above,
2 with one line for a grade that does not exist), the "Rating:" line that opens each
target's text and HTML report, the rating section, the CSV `rating` rows and the summary of
a run over several targets; against openssl s_server with TLS 1.0 and 1.1 (B) and a modern
one (A)."""
from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import CertSet, Server

ServerFactory = Callable[..., Server]
CHECKS = ("--checks", "versions,groups,suites,cert")


@pytest.fixture
def legacy(tls_server: ServerFactory) -> int:
    return tls_server("openssl", proto="all", ciphers="DEFAULT:@SECLEVEL=0").port


@pytest.mark.needs_impl("openssl")
def test_fail_under_exits_1_below_the_grade_and_0_at_it(
        legacy: int, run_cli: Callable[..., Any], certs: CertSet) -> None:
    base = ("scan", f"127.0.0.1:{legacy}", "--no-progress", "--cafile", certs.ca, *CHECKS,
            "--json")
    below = run_cli(*base, "--fail-under", "A")
    assert below.returncode == 1, below.stderr
    assert json.loads(below.stdout.splitlines()[0])["rating"]["grade"] == "B"
    at = run_cli(*base, "--fail-under", "b")          # any case
    assert at.returncode == 0, at.stderr
    assert run_cli(*base, "--fail-under", "C").returncode == 0
    assert run_cli(*base).returncode == 0             # no gate: the grade sets no exit code


def test_a_grade_that_does_not_exist_is_a_one_line_usage_error(
        run_cli: Callable[..., Any]) -> None:
    res = run_cli("scan", "127.0.0.1:1", "--fail-under", "Z")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--fail-under" in lines[0], res.stderr
    assert "expected a grade (A+, A, A-, B, C, D, E, F), got 'Z'" in lines[0]


@pytest.mark.needs_impl("openssl")
def test_text_html_and_csv_open_with_the_rating(legacy: int, run_cli: Callable[..., Any],
                                                certs: CertSet, tmp_path: Path) -> None:
    html, table = tmp_path / "r.html", tmp_path / "r.csv"
    res = run_cli("scan", f"127.0.0.1:{legacy}", "--no-progress", "--cafile", certs.ca,
                  *CHECKS, "--html", html, "--csv", table)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("Audit of 127.0.0.1:")
    assert lines[1].startswith("Rating: B (capped: TLS 1.0 offered; TLS 1.1 offered; "
                               "provisional: "), lines[1]
    section = res.stdout[res.stdout.index("\nRating\n"):]
    assert "Cap B: TLS 1.0 offered (SSL Labs 2020; " in section
    assert "[versions: TLS 1.0 ServerHello TLS 1.0]" in section
    assert "Not applied: heartbleed not run (could cap at F)" in section
    page = html.read_text()
    first = page.index('<p class="rating">')
    assert first < page.index("<h3>") and "Rating: B (capped: TLS 1.0 offered" in \
        page[first:first + 300]
    rows = [r for r in csv.DictReader(table.open()) if r["section"] == "rating"]
    assert rows[0]["name"] == "grade" and rows[0]["status"] == "B"
    assert rows[0]["detail"].startswith("B (capped: TLS 1.0 offered")
    assert {"cap tls10_offered", "cap tls11_offered", "unknown heartbleed"} <= \
        {r["name"] for r in rows}


@pytest.mark.needs_impl("openssl")
def test_the_summary_counts_the_grades_and_names_the_targets_below_the_gate(
        legacy: int, tls_server: ServerFactory, run_cli: Callable[..., Any],
        certs: CertSet) -> None:
    modern = tls_server("openssl", proto="both").port
    res = run_cli("scan", f"127.0.0.1:{legacy}", f"127.0.0.1:{modern}", "--no-progress",
                  "--cafile", certs.ca, *CHECKS, "--fail-under", "A")
    assert res.returncode == 1
    assert "Ratings: A 1, B 1 (2 provisional)" in res.stdout
    assert (f"Exit code 1: 1 target(s) rated below --fail-under A (127.0.0.1:{legacy} B)"
            in res.stdout), res.stdout[-600:]


@pytest.mark.needs_impl("openssl")
def test_a_provisional_grade_keeps_an_established_warning(
        server_cache: ServerFactory, run_cli: Callable[..., Any], certs: CertSet) -> None:
    """`--checks heartbleed` on a TLS 1.2-only server: the versions phase it reads
    establishes TLS 1.3 refused (the no_tls13 warning, A-); the suites and groups were not
    run, so the grade is provisional, at most A-. It said "A (provisional: ...)" above a
    Rating section listing "Warning (A-): TLS 1.3 not offered"."""
    srv = server_cache("openssl", proto="tls1_2", groups="X25519")
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--cafile", certs.ca,
                  "--checks", "heartbleed", "--json")
    assert res.returncode == 0, res.stderr
    rating = json.loads(res.stdout)["rating"]
    assert [w["rule"] for w in rating["warnings"]] == ["no_tls13"], rating["warnings"]
    assert rating["score"] is None and rating["provisional"] is True, rating
    assert rating["grade"] == "A-" and rating["label"].startswith(
        "A- (warnings: TLS 1.3 not offered; provisional: "), rating
    # with TLS 1.3 as well: no warning, A (provisional)
    both = server_cache("openssl", proto="both", groups="X25519")
    res = run_cli("scan", f"127.0.0.1:{both.port}", "--no-progress", "--cafile", certs.ca,
                  "--checks", "heartbleed", "--json")
    rating = json.loads(res.stdout)["rating"]
    assert rating["warnings"] == [] and rating["grade"] == "A", rating
