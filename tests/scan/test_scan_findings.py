"""`tlsprobe scan` findings a user review asked for, against real loopback servers: the
certificate checks (trust, signature hash, subjectAltName, expiry), policy violations graded
medium, static RSA key exchange, structured finding items, no retry of a refused connect,
the exit-code precedence over several targets, the hostile server's SSLv2 answer and
oversized record, and the validation of scan's own values."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from tests.helpers.faultproxy import serve_loopback
from tests.helpers.servers import is_listening

from tests.hostile.catalog import all_scenarios
from tests.hostile.server import HostileServer


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _codes(report: dict) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in report["findings"]}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, never listening, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def weak_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """openssl s_server with a self-signed RSA-1024 sha1WithRSAEncryption certificate without
    subjectAltName that expires within 24 hours."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    wd = tmp_path_factory.mktemp("weak-cert")
    # The cryptography here (OpenSSL 4.0) refuses to sign with SHA-1: the openssl CLI does.
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:1024", "-sha1", "-nodes",
                           "-days", "1", "-subj", "/CN=weak.test", "-keyout",
                           str(wd / "key.pem"), "-out", str(wd / "cert.pem")],
                          capture_output=True, text=True, cwd=wd)
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a SHA-1 certificate: {made.stderr[-300:]}")
    cert = x509.load_pem_x509_certificate((wd / "cert.pem").read_bytes())
    assert cert.signature_algorithm_oid._name == "sha1WithRSAEncryption"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log = open(wd / "server.log", "w")
    proc = subprocess.Popen(
        ["openssl", "s_server", "-www", "-accept", f"127.0.0.1:{port}", "-cert",
         str(wd / "cert.pem"), "-key", str(wd / "key.pem"), "-cipher", "DEFAULT:@SECLEVEL=0"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=wd,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not is_listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"openssl s_server did not start: "
                            f"{(wd / 'server.log').read_text()[-500:]}")
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_weak_self_signed_certificate_findings(weak_server, run_cli):
    code, out, err = run_cli("scan", f"127.0.0.1:{weak_server}", "--checks", "cert", "--json",
                             "--no-progress", "--no-policy", "--fail-on", "high")
    assert code == 1, err
    report = _lines(out)[0]
    found = _codes(report)
    # OpenSSL judges the leaf's key before the rest of the chain: the trust verdict is 66
    # (EE certificate key too weak), an untrusted chain
    assert found["certificate.weak_key"] == "high"
    assert found["certificate.untrusted"] == "high"
    assert "certificate.self_signed" not in found
    assert found["certificate.sha1_signature"] == "medium"
    assert found["certificate.no_san"] == "medium"
    assert found["certificate.expires_soon"] == "medium"       # under 7 days
    assert report["trust"]["status"] == "untrusted" and report["trust"]["code"] == 66
    soon = next(f for f in report["findings"] if f["code"] == "certificate.expires_soon")
    assert "hour(s)" in soon["message"] and soon["items"] == ["CN=weak.test"]
    code, text, _ = run_cli("scan", f"127.0.0.1:{weak_server}", "--checks", "cert",
                            "--no-progress", "--no-policy")
    assert code == 0
    # the trust store goes with the verdict, the no-SAN note stays the detail's last part
    flat = " ".join(text.split())   # the line wraps at the console width
    trust = re.search(r"Trust: NOT trusted against \S+: 66 \(EE certificate key too weak\): "
                      r"(.*?)(?:Consistency|Findings)", flat)
    assert trust and trust.group(1).endswith("(browsers refuse it; OpenSSL matches a host "
                                             "name against its subject CN) "), flat
    assert "sha1WithRSAEncryption" in text and "Names (subjectAltName): none" in text


@pytest.mark.needs_impl("openssl")
def test_trust_against_cafile_and_hostname(server_cache, certs, run_cli):
    srv = server_cache("openssl", cert="ecdsa")
    target = f"127.0.0.1:{srv.port}"
    args = ("scan", target, "--checks", "cert", "--json", "--no-progress", "--no-policy")
    code, out, err = run_cli(*args, "--cafile", certs.ca, "--fail-on", "low")
    report = _lines(out)[0]
    assert code == 0, (err, report["findings"])
    assert report["trust"]["status"] == "trusted" and report["trust"]["hostname_ok"] is True
    # Against the system bundle the test CA the server sends is an unknown self-signed root.
    code, out, _ = run_cli(*args, "--fail-on", "high")
    assert code == 1 and _codes(_lines(out)[0])["certificate.self_signed"] == "high"
    assert _lines(out)[0]["trust"]["code"] == 19
    code, out, _ = run_cli(*args, "--cafile", certs.ca, "--sni", "other.example")
    report = _lines(out)[0]
    assert _codes(report)["certificate.hostname_mismatch"] == "high"
    assert report["trust"]["hostname"] == "other.example"
    code, text, _ = run_cli("scan", target, "--checks", "cert", "--no-progress", "--cafile",
                            certs.ca)
    assert f"Trust: chain verified against {certs.ca}, valid for 127.0.0.1" in text
    code, _, err = run_cli("scan", target, "--cafile", "/nonexistent/ca.pem")
    assert code == 2 and "--cafile" in err and err.count("\n") == 1


@pytest.mark.needs_impl("openssl")
def test_policy_violations_and_static_rsa_are_medium_with_items(server_cache, run_cli):
    ciphers = ("ECDHE-RSA-AES128-GCM-SHA256:AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA:"
               "AES256-SHA:AES128-SHA256:AES256-SHA256:ECDHE-RSA-AES128-SHA")
    srv = server_cache("openssl", ciphers=ciphers, serverpref=True, groups="X25519:P-384")
    args = ("scan", f"127.0.0.1:{srv.port}", "--checks", "versions,suites", "--json",
            "--no-progress")
    code, out, err = run_cli(*args, "--fail-on", "medium")
    assert code == 1, err
    report = _lines(out)[0]
    by_code = {f["code"]: f for f in report["findings"]}
    outside = by_code["suite.not_allowed"]
    assert outside["severity"] == "medium" and outside["version"] == "TLS 1.2"
    assert outside["policy"] == "mozilla-intermediate-6.0"
    assert sorted(outside["items"]) == sorted([
        "TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_RSA_WITH_AES_128_CBC_SHA", "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_RSA_WITH_AES_256_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"])
    assert "and 1 more" in outside["message"]                 # the message stays short
    no_fs = by_code["suite.no_forward_secrecy"]
    assert no_fs["severity"] == "medium" and no_fs["policy"] == "builtin"
    assert len(no_fs["items"]) == 6 and all(n.startswith("TLS_RSA_") for n in no_fs["items"])
    code, _, _ = run_cli(*args, "--fail-on", "high")
    assert code == 0


def test_refused_is_not_retried_and_the_summary_has_no_empty_parentheses(run_cli):
    port = _closed_port()
    # no backoff: the summary names no retry (judged by what it says, not by the clock);
    # the call's deadline only catches a hang
    code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--retries", "2", "--no-progress",
                             timeout=60)
    assert code == 3 and "refused" in err and err.count("\n") == 1
    line = next(ln for ln in out.splitlines() if ln.startswith("Connections:"))
    assert "()" not in line and "retr" not in line, line


@pytest.mark.needs_impl("openssl")
def test_exit_precedence_over_two_targets(server_cache, run_cli):
    """Findings at --fail-on give 1 even when another target is unreachable; without
    findings at the threshold the error code (3) stands; both errors reach stderr."""
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    good, dead = f"127.0.0.1:{srv.port}", f"127.0.0.1:{_closed_port()}"
    args = ("scan", dead, good, "--checks", "versions,groups", "--json", "--no-progress")
    code, out, err = run_cli(*args, "--fail-on", "medium")    # ffdhe2048 is outside: medium
    assert code == 1, err
    reports = {r["port"]: r for r in _lines(out)}
    assert reports[srv.port]["error"] is None and reports[int(dead.split(":")[1])]["error"]
    assert f"tlsprobe: {dead}: connection refused" in err
    code, _, _ = run_cli(*args, "--fail-on", "critical")
    assert code == 3
    code, _, _ = run_cli(*args)
    assert code == 3


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("name, needle", [
    ("sslv2_answer", "the server answered in SSLv2"),
    ("record_length_over_limit", "record length 65535 over"),
])
def test_scan_names_sslv2_and_oversized_records_like_the_probe(hostile, run_cli, name, needle):
    sc = next(s for s in all_scenarios() if s.name == name)
    listener = hostile.serve(sc.script)
    code, out, err = run_cli("scan", f"127.0.0.1:{listener.port}", "--checks", "versions",
                             "--retries", "0", "--timeout", "2", "--no-progress")
    assert code == 6, err
    assert needle in err and "not a TLS server" not in err and "''" not in err, err
    assert err.count("\n") == 1


def test_non_tls_binary_answer_shows_bytes_not_an_empty_quote(run_cli):
    def answer(conn: socket.socket) -> None:
        conn.recv(4096)
        conn.sendall(bytes([0x00, 0x01, 0x02, 0xfe, 0xff, 0x00]))
        conn.close()
    srv, port = serve_loopback(answer)
    try:
        code, _, err = run_cli("scan", f"127.0.0.1:{port}", "--checks",
                               "versions", "--retries", "0", "--timeout", "2", "--no-progress")
    finally:
        srv.close()
    assert code == 4 and r"('\x00\x01\x02\xfe\xff\x00')" in err and "''" not in err, err


@pytest.mark.parametrize("args, needle", [
    (("--timeout", "nan"), "--timeout"),
    (("--timeout", "inf"), "--timeout"),
    (("--delay", "inf"), "--delay"),
    (("--delay", "nan"), "--delay"),
    (("--checks", "suites", "--groups-only"), "--groups-only"),
    (("--sni", "a.example", "--no-sni"), "--no-sni"),
])
def test_scan_values_are_validated(run_cli, args, needle):
    code, _, err = run_cli("scan", "127.0.0.1:1", *args, timeout=20)
    assert code == 2 and needle in err and err.count("\n") == 1, err


@pytest.mark.needs_impl("openssl")
def test_a_bad_targets_file_line_is_reported_and_skipped(server_cache, run_cli,
                                                         tmp_path: Path):
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    path = tmp_path / "targets.txt"
    path.write_text(f"# lab\n127.0.0.1:99999\n127.0.0.1:{srv.port}\n")
    code, out, err = run_cli("scan", "-f", path, "--groups-only", "--json", "--no-progress")
    assert code == 2, err
    assert err.strip() == (f"tlsprobe: {path}:2: bad port '99999' in '127.0.0.1:99999': "
                           "expected 1-65535")
    reports = _lines(out)
    assert [r["error_kind"] for r in reports] == ["usage", None]
    assert reports[1]["port"] == srv.port and reports[1]["groups"]
    # Findings at --fail-on still win over the bad line (exit 1, see docs/POLICY.md).
    code, _, _ = run_cli("scan", "-f", path, "--groups-only", "--no-progress", "--fail-on",
                         "medium")
    assert code == 1
