"""The summary of a multi-target scan names the targets that failed the gate and why
(--fail-on, --fail-under, an error), in the text and in each target's JSON `gate` (issue 33
section 3), against real loopback servers: a modern one that passes, a weak gnutls one
(TLS 1.0, RC4, 3DES) that fails both gates, and a refused port."""
from __future__ import annotations

import json
from pathlib import Path

CHECKS = "versions,suites,cert"


def test_the_summary_names_each_failed_target_and_why(server_cache, certs, run_cli,
                                                      tmp_path: Path) -> None:
    good = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    weak = server_cache("gnutls", proto="all", ciphers="NORMAL:+3DES-CBC:+ARCFOUR-128:+RSA")
    targets = [f"127.0.0.1:{good.port}", f"127.0.0.1:{weak.port}", "127.0.0.1:1"]
    code, out, err = run_cli("scan", *targets, "--checks", CHECKS, "--no-progress",
                             "--retries", "0", "--cafile", certs.ca, "--fail-on", "high",
                             "--fail-under", "B", "--json-out", tmp_path / "s.json",
                             timeout=120)
    assert code == 1, err
    docs = {d["port"]: d for d in map(json.loads, (tmp_path / "s.json").read_text(
        encoding="utf-8").splitlines())}
    # the JSON: each target's verdict and reasons
    assert docs[good.port]["gate"] == {"passed": True, "reasons": []}, docs[good.port]["findings"]
    weak_gate = docs[weak.port]["gate"]
    assert weak_gate["passed"] is False
    high = [f["code"] for f in docs[weak.port]["findings"] if f["severity"] in ("high",
                                                                                  "critical")]
    assert high and len(set(high)) <= 5 and weak_gate["reasons"][0].startswith(
        f"{len(high)} finding(s) at or above --fail-on high: ")
    named = weak_gate["reasons"][0].split(": ", 1)[1]
    assert all(code in named for code in high) and named.count(high[0]) == 1
    grade = docs[weak.port]["rating"]["grade"]
    assert f"rated {grade}, below --fail-under B" in weak_gate["reasons"]
    refused = docs[1]["gate"]
    assert refused["passed"] is False and refused["reasons"][0].startswith("error (network, exit 3)")
    # the text summary: one line per failed target, with the same reasons
    summary = out[out.rindex("Summary"):]
    assert "Gate: 1 of 3 target(s) passed" in summary
    lines = summary.splitlines()
    failed = [n for n, line in enumerate(lines) if line.startswith("Failed: ")]
    assert [lines[n] for n in failed] == [f"Failed: 127.0.0.1:{weak.port}", "Failed: 127.0.0.1:1"]
    weak_text = " ".join(lines[failed[0] + 1:failed[1]])
    assert weak_text.startswith("  - ") and "--fail-on high: " in weak_text
    assert f"rated {grade}, below --fail-under B" in weak_text
    assert lines[failed[1] + 1].startswith("  - error (network, exit 3)")


def test_no_gate_no_gate_member(server_cache, run_cli) -> None:
    """Without --fail-on or --fail-under the JSON is as before: no `gate` member."""
    good = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    code, out, err = run_cli("scan", f"127.0.0.1:{good.port}", "--checks", "versions",
                             "--json", "--no-progress")
    assert code == 0, err
    assert "gate" not in json.loads(out)


def test_one_target_that_fails_a_gate_says_why(server_cache, certs, run_cli) -> None:
    """One target: no summary of targets and findings, but a gate's verdict and the exit
    code's reason (an exit 1 used to come with no word of which gate failed)."""
    good = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    target = f"127.0.0.1:{good.port}"
    code, out, err = run_cli("scan", target, "--checks", CHECKS, "--no-progress",
                             "--cafile", certs.ca, "--fail-under", "A+", timeout=120)
    assert code == 1, err
    tail = out[out.rindex("Summary"):].splitlines()
    assert tail[1:3] == ["Gate: 0 of 1 target(s) passed", f"Failed: {target}"], tail
    assert tail[3].startswith("  - rated ") and tail[3].endswith("below --fail-under A+")
    assert tail[4].startswith("Exit code 1: 1 target(s) rated below --fail-under A+")
    assert "Targets:" not in out and "Findings: " not in out
    code, out, err = run_cli("scan", target, "--checks", "versions", "--no-progress",
                             "--fail-on", "critical", timeout=120)
    assert code == 0, err
    assert out[out.rindex("Summary"):].splitlines()[1:] == [
        "Gate: 1 of 1 target(s) passed",
        "Exit code 0: no error and no finding at or above --fail-on critical"]
    code, out, err = run_cli("scan", target, "--checks", "versions", "--no-progress")
    assert code == 0 and "Summary" not in out and "Exit code" not in out, err
