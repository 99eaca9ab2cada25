"""`scan --baseline` against real loopback servers reconfigured on the same port: the
changes listed (text section and JSON member), `--fail-on-change` exit codes, and hostile
baselines (another tool's JSON, truncated, another target) as one-line usage errors."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.diff.conftest import CHECKS, SamePort, cli
from tests.helpers.servers import make_certs
from tests.lab_servers.certs import CertSet
from tests.lab_servers.builders import ServerConfig

BOTH = ServerConfig("openssl", ("X25519", "P-256"), serverpref=True)
TLS12_P256 = ServerConfig("openssl", ("P-256",), proto="tls1_2", serverpref=True)


def scan(port: int, *extra: object) -> tuple[int, str, str]:
    proc = cli("scan", f"127.0.0.1:{port}", "--no-progress", "--checks", CHECKS, *extra)
    return proc.returncode, proc.stdout, proc.stderr


def baseline_of(port: int, path: Path) -> Path:
    code, out, err = scan(port, "--json")
    assert code == 0, err
    path.write_text(out)
    return path


def test_a_reconfigured_server_lists_its_changes_and_fails_the_gate(
        same_port: SamePort, tmp_path: Path) -> None:
    first = same_port(BOTH)
    base = baseline_of(first.port, tmp_path / "base.json")
    # the same server unchanged: no regression, the gate passes
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change")
    assert code == 0, err + out
    assert f"Changes since {base}" in out
    assert "[regression]" not in out
    # reconfigured: TLS 1.2 only, secp256r1 only
    same_port(TLS12_P256, first.port)
    code, out, err = scan(first.port, "--baseline", base)
    assert code == 0, err      # without --fail-on-change the changes do not set the code
    section = out[out.index(f"Changes since {base}"):]
    assert "[regression] TLS 1.3: version lost (TLS 1.3): supported -> not supported" in section
    assert "x25519: group removed (TLS 1.2)" in section
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change")
    assert code == 1, err + out
    code, out, err = scan(first.port, "--baseline", base, "--json")
    doc = json.loads(out)
    kinds = {(c["kind"], c["what"], c["direction"]) for c in doc["changes"]}
    assert ("version_lost", "TLS 1.3", "regression") in kinds
    assert ("group_removed", "x25519", "neutral") in kinds
    assert doc["baseline"]["file"] == str(base)


def test_a_group_audit_alone_still_sees_a_version_lost(
        same_port: SamePort, tmp_path: Path) -> None:
    """`--checks groups` (a survey's default) runs no versions phase, but its group audit
    of TLS 1.3 and 1.2 establishes whether each is spoken: a version lost between two such
    scans is the regression it is (it was no change at all)."""
    first = same_port(BOTH)
    proc = cli("scan", f"127.0.0.1:{first.port}", "--no-progress", "--checks", "groups",
               "--json")
    assert proc.returncode == 0, proc.stderr
    base = tmp_path / "groups.json"
    base.write_text(proc.stdout)
    assert not json.loads(proc.stdout)["versions"]     # no versions phase in this scan
    same_port(TLS12_P256, first.port)
    proc = cli("scan", f"127.0.0.1:{first.port}", "--no-progress", "--checks", "groups",
               "--baseline", base, "--fail-on-change", "--json")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    kinds = {(c["kind"], c["what"], c["direction"]) for c in json.loads(proc.stdout)["changes"]}
    assert ("version_lost", "TLS 1.3", "regression") in kinds


def test_a_renewed_certificate_is_a_change_not_a_regression(
        same_port: SamePort, tmp_path: Path) -> None:
    first = same_port(BOTH)
    base = baseline_of(first.port, tmp_path / "base.json")
    renewed = make_certs(tmp_path / "renewed")     # same names, new keys and fingerprints
    same_port(BOTH, first.port, renewed)
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change", "--json")
    assert code == 0, err
    changes = json.loads(out)["changes"]
    renewal = [c for c in changes if c["kind"] == "certificate_renewed"]
    assert len(renewal) == 1 and renewal[0]["direction"] == "neutral"
    assert renewal[0]["old"] != renewal[0]["new"] and "not after" in renewal[0]["new"]
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change=any")
    assert code == 1, err + out


def test_a_provisional_baseline_grade_is_no_regression_of_the_gate(
        same_port: SamePort, tmp_path: Path) -> None:
    # the baseline's audit checked no certificate: its grade A is provisional (trust not
    # established, it could be T); the full scan finds the chain untrusted (no --cafile):
    # T is not a regression the baseline established, and --fail-on-change passes
    server = same_port(BOTH)
    target = f"127.0.0.1:{server.port}"
    proc = cli("scan", target, "--no-progress", "--checks", "versions,groups", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["rating"]["provisional"] is True and doc["trust"] is None, doc["rating"]
    base = tmp_path / "base.json"
    base.write_text(proc.stdout)
    proc = cli("scan", target, "--no-progress", "--checks", "versions,groups,cert",
               "--baseline", base, "--fail-on-change", "--json")
    doc = json.loads(proc.stdout)
    assert doc["rating"]["grade"] == "T", doc["rating"]
    rating = [c for c in doc["changes"] if c["kind"] == "rating_changed"]
    assert len(rating) == 1 and rating[0]["direction"] == "neutral", rating
    assert "provisional" in rating[0]["reason"]
    assert proc.returncode == 0, proc.stderr


def _one_line_usage_error(proc_code: int, err: str) -> None:
    assert proc_code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tlsprobe: "), err
    assert "Traceback" not in err


def test_hostile_baselines_are_one_line_usage_errors(tmp_path: Path) -> None:
    # nothing listens on the target: a usage error is found before any connection (2, not 3)
    port = 9
    golden = json.loads((Path(__file__).parents[1] / "golden" / "data" /
                         "scan_openssl_rsa.json").read_text())["stdout"][0]
    cases = {   # file -> (content, what the error says)
        "other-tool.json": (json.dumps({"tool": "sslyze", "server_scan_results": []}),
                            "not a tlsprobe scan document (tool 'sslyze'"),
        "testssl.json": (json.dumps([{"id": "engine_problem", "severity": "WARN"}]),
                         "not a tlsprobe scan document"),
        "truncated.json": (json.dumps(dict(golden, port=port))[:500], ":1: not JSON"),
        "other-target.json": (json.dumps(dict(golden, port=4433)) + "\n",
                              "holds 127.0.0.1:4433, none of the targets scanned"),
        "empty.json": ("", "empty file"),
        "probe.json": (json.dumps({"schema": 1, "tool": "tlsprobe", "kind": "probe"}),
                       "no scan document in it"),
        "binary.json": (b"\xff\xfe\x00garbage", "not UTF-8"),
    }
    for name, (content, says) in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        code, _out, err = scan(port, "--baseline", path)
        _one_line_usage_error(code, err)
        assert f"--baseline {path}" in err and says in err, (name, err)
    code, _out, err = scan(port, "--baseline", tmp_path / "missing.json")
    _one_line_usage_error(code, err)
    assert "cannot read it" in err
    code, _out, err = scan(port, "--fail-on-change")
    _one_line_usage_error(code, err)
    assert "--fail-on-change needs --baseline FILE" in err


def test_a_baseline_of_several_targets_is_matched_by_host_and_port(
        same_port: SamePort, tmp_path: Path) -> None:
    a, b = same_port(BOTH), same_port(BOTH)
    targets = [f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"]
    proc = cli("scan", *targets, "--no-progress", "--checks", CHECKS, "--json")
    assert proc.returncode == 0, proc.stderr
    base = tmp_path / "base.jsonl"
    base.write_text("".join(reversed(proc.stdout.splitlines(keepends=True))))  # any order,
    with base.open("a") as fh:      # and another tlsprobe record (a summary line) is skipped
        fh.write(json.dumps({"tool": "tlsprobe", "kind": "scan_summary", "targets": 2}) + "\n")
    same_port(TLS12_P256, b.port)
    c = same_port(TLS12_P256)        # not in the baseline
    targets.append(f"127.0.0.1:{c.port}")
    json_out = tmp_path / "out.jsonl"
    proc = cli("scan", *targets, "--no-progress", "--checks", CHECKS, "--baseline", base,
               "--fail-on-change", "--json-out", json_out)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    # the summary names the target that failed the change gate, and why
    failed = out[out.index("Gate: 2 of 3 target(s) passed"):]
    assert f"Failed: {targets[1]}" in failed and "regression(s) since the baseline " \
        "(--fail-on-change regression): version_lost" in failed
    assert f"Failed: {targets[0]}" not in failed and f"Failed: {targets[2]}" not in failed
    # --json-out beside the text holds the changes and each target's gate verdict
    written = {f"{d['host']}:{d['port']}": d for d in map(json.loads,
                                                        json_out.read_text().splitlines())}
    assert any(c["kind"] == "version_lost" for c in written[targets[1]]["changes"])
    assert written[targets[1]]["gate"]["passed"] is False
    assert written[targets[0]]["gate"] == {"passed": True, "reasons": []}

    def section(target: str) -> str:
        start = out.index(f"Changes since {base} (")
        start = out.index(f"for {target}\n", start)
        return out[start:out.index("\n\n", start)]
    assert section(targets[0]).endswith("no change")
    assert "[regression] TLS 1.3: version lost" in section(targets[1])
    assert section(targets[2]).endswith("not in the baseline: nothing to compare")
    assert "1 target(s) with regressions since the baseline (--fail-on-change regression)" \
        in out
    proc = cli("scan", *targets, "--no-progress", "--checks", CHECKS, "--baseline", base,
               "--json")
    docs = {f"{d['host']}:{d['port']}": d for d in map(json.loads, proc.stdout.splitlines())}
    assert docs[targets[0]]["changes"] == []
    assert any(c["kind"] == "version_lost" for c in docs[targets[1]]["changes"])
    assert docs[targets[2]]["changes"] is None


def test_a_target_gone_since_the_baseline_is_a_regression(
        same_port: SamePort, tmp_path: Path) -> None:
    server = same_port(BOTH)
    base = baseline_of(server.port, tmp_path / "base.json")
    server.stop()
    code, out, err = scan(server.port, "--baseline", base)
    assert code == 3, err           # the network error's code without the gate
    assert "[regression] target: unreachable: reachable -> " in out
    code, out, err = scan(server.port, "--baseline", base, "--fail-on-change")
    assert code == 1, err           # 1 wins, as for --fail-on


def test_a_change_to_or_from_inconclusive_is_listed_but_fails_no_gate(
        same_port: SamePort, tmp_path: Path) -> None:
    """A baseline whose check was inconclusive (saved from a run that could not establish
    it) and a scan that establishes it: the change is listed as "not established on one
    side", and `--fail-on-change=any` (a configuration freeze) does not fail on it, as no
    gate fails on what tlsprobe could not establish. Before, it exited 1."""
    first = same_port(BOTH)
    base = baseline_of(first.port, tmp_path / "base.json")
    doc = json.loads(base.read_text())
    ems = next(c for c in doc["check_results"] if c["name"] == "ems")
    assert ems["verdict"] == "supported", ems
    ems.update(verdict="inconclusive", reason="the hello was reset (twice)")
    base.write_text(json.dumps(doc) + "\n")
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change=any")
    section = out[out.index(f"Changes since {base}"):]
    assert "[changed] ems: check changed: inconclusive -> supported (not established on one " \
           "side)" in section, section
    assert code == 0, err + out
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change=any", "--json")
    assert json.loads(out).get("gate") in (None, {"passed": True, "reasons": []}), out


def test_junit_shows_the_change_gate(same_port: SamePort, tmp_path: Path) -> None:
    """`--fail-on-change --junit FILE`: the scan exits 1 on a regression, and the JUnit
    has a failing `changes` test case saying why (it had none: every test passed beside a
    failed job); unchanged, the case passes."""
    import xml.etree.ElementTree as ET
    first = same_port(BOTH)
    base = baseline_of(first.port, tmp_path / "base.json")

    def changes_case(path: Path) -> ET.Element:
        found = [c for c in ET.parse(path).getroot().iter("testcase")
                 if c.get("name") == "changes"]
        assert len(found) == 1, path.read_text()
        assert found[0].get("classname") == "tlsprobe.baseline"
        return found[0]
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change", "--junit",
                          tmp_path / "same.xml")
    assert code == 0, err + out
    assert changes_case(tmp_path / "same.xml").find("failure") is None
    same_port(TLS12_P256, first.port)
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change", "--junit",
                          tmp_path / "lost.xml")
    assert code == 1, err + out
    failure = changes_case(tmp_path / "lost.xml").find("failure")
    assert failure is not None
    assert "regression(s) since the baseline (--fail-on-change regression): version_lost" \
        in failure.get("message", ""), failure.attrib
    # without --fail-on-change there is no gate and no such case
    code, out, err = scan(first.port, "--baseline", base, "--junit", tmp_path / "no.xml")
    names = [c.get("name") for c in ET.parse(tmp_path / "no.xml").getroot().iter("testcase")]
    assert code == 0 and "changes" not in names, err


def test_an_ed25519_chain_added_beside_an_ecdsa_one_is_a_change(
        same_port: SamePort, certs: CertSet, tmp_path: Path) -> None:
    """openssl s_server with an ECDSA certificate, then with an Ed25519 one beside it
    (-dcert): both serve TLS 1.2's ECDSA suites, but this tlsprobe's search tells them apart
    by signature schemes (the documents say so: other_certificates_search), so the Ed25519
    chain is certificate_added (neutral). It was no change; it still is against a baseline
    of an earlier tlsprobe (no other_certificates_search), whose search could not tell."""
    ecdsa = ServerConfig("openssl", ("X25519", "P-256"), cert="ecdsa")
    first = same_port(ecdsa)
    base = baseline_of(first.port, tmp_path / "base.json")
    ed = certs["ed25519"]
    same_port(replace(ecdsa, extra=("-dcert", str(ed.chain), "-dkey", str(ed.key))), first.port)
    code, out, err = scan(first.port, "--baseline", base, "--json")
    assert code == 0 and err == "", err
    doc = json.loads(out)
    added = [c for c in doc["changes"] if c["kind"] == "certificate_added"]
    assert [(c["what"], c["direction"]) for c in added] == [
        ("Ed25519 certificate chain", "neutral")], doc["changes"]
    earlier = json.loads(base.read_text())
    assert earlier.pop("other_certificates_search") == "signature schemes", earlier
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    code, out, err = scan(first.port, "--baseline", tmp_path / "earlier.json", "--json")
    assert code == 0 and err == "", err
    assert not [c for c in json.loads(out)["changes"] if c["kind"] == "certificate_added"], out
