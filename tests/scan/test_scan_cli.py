"""`tlsprobe scan` as a command: many targets, JSON lines, policies, --fail-on exit codes,
usage and network errors as one line."""
from __future__ import annotations

import json
import socket

import pytest

from tests.helpers.faultproxy import serve_loopback

ACCEPTANCE = {"groups": "X25519:P-384:ffdhe2048", "serverpref": True}


@pytest.fixture
def openssl(server_cache):
    return server_cache("openssl", **ACCEPTANCE)


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.needs_impl("openssl", "nginx")
def test_many_targets_from_file_and_stdin_as_json_lines(openssl, server_cache, run_cli,
                                                         tmp_path):
    nginx = server_cache("nginx", groups="P-384:X25519", serverpref=True)
    targets = [f"127.0.0.1:{openssl.port}", f"127.0.0.1:{nginx.port}"]
    path = tmp_path / "targets.txt"
    path.write_text(f"# lab servers\n{targets[0]}\n\n{targets[1]}  # nginx\n")
    code, out, err = run_cli("scan", "-f", path, "--groups-only", "--json", "--no-progress")
    assert code == 0, err
    reports = {r["port"]: r for r in _lines(out)}
    assert set(reports) == {openssl.port, nginx.port}
    assert [g["name"] for g in reports[nginx.port]["groups"][0]["supported"]] == \
        ["secp384r1", "x25519"]
    assert reports[openssl.port]["checks"] == ["groups"]
    assert all(r["kind"] == "audit" and r["error"] is None for r in reports.values())
    # lines come as targets finish; `index` is each target's place in the input
    assert {r["index"]: r["port"] for r in reports.values()} == {1: openssl.port,
                                                                  2: nginx.port}
    code, out, err = run_cli("scan", "-f", "-", "--groups-only", "--json", "--no-progress",
                             input="\n".join(targets) + "\n")
    assert code == 0, err
    assert sorted(r["port"] for r in _lines(out)) == sorted([openssl.port, nginx.port])


@pytest.mark.needs_impl("openssl")
def test_fail_on_threshold_and_user_policy(openssl, run_cli, tmp_path):
    target = f"127.0.0.1:{openssl.port}"
    args = ("scan", target, "--checks", "versions,groups,pq", "--json", "--no-progress")
    # Mozilla intermediate 6.0 recommends X25519MLKEM768, which this server lacks: "low".
    code, out, _ = run_cli(*args, "--fail-on", "low")
    findings = {f["code"]: f for f in _lines(out)[0]["findings"]}
    assert code == 1 and findings["group.missing"]["severity"] == "low"
    assert findings["group.missing"]["policy"] == "mozilla-intermediate-6.0"
    code, _, _ = run_cli(*args, "--fail-on", "high")
    assert code == 0
    policy = tmp_path / "ours.toml"
    policy.write_text('extends = "intermediate"\ngroups = ["x25519", "secp384r1"]\n'
                      '[severity]\n"group.not_allowed" = "high"\n')
    code, out, err = run_cli(*args, "--policy", policy, "--fail-on", "high")
    assert code == 1, err
    report = _lines(out)[0]
    assert report["policies"] == ["ours"]
    high = [f for f in report["findings"] if f["severity"] == "high"]
    # TLS 1.2 ECDHE has no ffdhe2048 (DHE is reported apart): only the TLS 1.3 list breaks it.
    assert [(f["code"], f["message"], f["items"], f["version"]) for f in high] == \
        [("group.not_allowed", "TLS 1.3: 1 group(s) outside the policy: ffdhe2048",
          ["ffdhe2048"], "TLS 1.3")]
    code, out, err = run_cli(*args, "--no-policy", "--fail-on", "low")
    assert code == 0 and all(f["policy"] == "builtin" for f in _lines(out)[0]["findings"])


def test_usage_errors_are_one_line(run_cli, tmp_path):
    code, out, err = run_cli("scan", "127.0.0.1:1", "--checks", "groups,bogus")
    assert code == 2 and err.strip().count("\n") == 0 and "bogus" in err
    assert "Traceback" not in err
    code, _, err = run_cli("scan")
    assert code == 2 and "no target" in err
    # an -f FILE without a target line: the error said to give the -f FILE just given
    empty = tmp_path / "targets.txt"
    empty.write_text("# none yet\n\n")
    code, _, err = run_cli("scan", "-f", empty)
    assert code == 2 and err == f"tlsprobe: error: no target in {empty} (-f): give one " \
        "HOST[:PORT] per line ('#' starts a comment)\n", err
    bad = tmp_path / "p.json"
    bad.write_text('{"groups": ["x25519"], "curvez": []}')
    code, _, err = run_cli("scan", "127.0.0.1:1", "--policy", bad)
    assert code == 2 and "curvez" in err and "Traceback" not in err
    code, _, err = run_cli("scan", "127.0.0.1:1", "--policy", "nonsense")
    assert code == 2 and "unknown policy" in err
    code, _, err = run_cli("scan", "127.0.0.1:1", "--policy", str(tmp_path / "none" / "p"))
    assert code == 2 and "policy file" in err and "cannot read it" in err and "no such file" in err
    code, out, _ = run_cli("scan", "--list-policies")
    assert code == 0 and "mozilla-intermediate-6.0" in out and "mozilla-old-5.7" in out
    # with --json a JSON line a policy (it printed the text lines)
    code, out, err = run_cli("scan", "--list-policies", "--json")
    assert code == 0, err
    listed = {d["name"]: d for d in map(json.loads, out.splitlines())}
    assert "mozilla-old-5.7" in listed and "intermediate" in \
        listed["mozilla-intermediate-6.0"]["aliases"]
    assert listed["mozilla-modern-6.0"]["title"].startswith("Mozilla modern")


#: check selections, including those without the versions check (which used to exit 0
#: with "not established" notes when no connection was ever answered)
SELECTIONS = [(), ("--groups-only",), ("--checks", "pq"), ("--checks", "groups,pq")]


@pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: " ".join(s) or "default")
def test_unreachable_and_not_tls_targets(run_cli, selection):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--json", "--retries", "0",
                                 "--timeout", "1", *selection)
    assert code == 3 and "refused" in err, (out, err)
    assert _lines(out)[0]["error_kind"] == "network"
    assert not _lines(out)[0]["findings"]
    def answer(conn: socket.socket) -> None:
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()
    http, port = serve_loopback(answer)
    try:
        code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--retries",
                                 "0", "--timeout", "2", *selection)
    finally:
        http.close()
    assert code == 4, (out, err)
    assert "Error:" in out and err.startswith("tlsprobe: 127.0.0.1:")
    assert "not a TLS server: it sent an HTTP response" in err

