"""`scan --baseline` against real loopback servers reconfigured on the same port: the
changes listed (text section and JSON member), `--fail-on-change` exit codes, and hostile
baselines (another tool's JSON, truncated, another target) as one-line usage errors."""
from __future__ import annotations

import json
from pathlib import Path

from tests.diff.conftest import CHECKS, SamePort, cli
from tests.helpers.servers import make_certs
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
        "binary.json": (b"\xff\xfe\x00garbage", "not UTF-8"),
    }
    for name, (content, says) in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        code, out, err = scan(port, "--baseline", path)
        _one_line_usage_error(code, err)
        assert f"--baseline {path}" in err and says in err, (name, err)
    code, out, err = scan(port, "--baseline", tmp_path / "missing.json")
    _one_line_usage_error(code, err)
    assert "cannot read it" in err
    code, out, err = scan(port, "--fail-on-change")
    _one_line_usage_error(code, err)
    assert "--fail-on-change needs --baseline FILE" in err
