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
