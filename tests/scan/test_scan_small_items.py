"""Smaller `scan`/`probe` fixes of issue 10, item 10, against real openssl s_server on loopback:
`scan --no-verify`, findings of the requested checks only, `--full` (and whole lists when
stdout is no terminal), the summary of a multi-target run, and a non-UTF-8 targets line.
(The Trust line wording is tested in test_scan_findings.py.)"""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers.servers import start_server
from tests.lab_servers.certs import CertFiles, CertSet

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def openssl(server_cache):
    return server_cache("openssl", groups="X25519:P-384")


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _codes(report: dict) -> set[str]:
    return {f["code"] for f in report["findings"]}


def _pty_run(args: tuple[object, ...], columns: int, both: bool
             ) -> tuple[int, str, bytes]:
    """`python -m tlsprobe *args` with stdout on a pseudo-terminal (stderr too when `both`,
    else piped): the exit code, what the terminal showed, what stderr got."""
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS=str(columns), NO_COLOR="1",
               PYTHONIOENCODING="utf-8")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", *map(str, args)], stdout=slave,
                            stderr=slave if both else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:     # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    err = proc.communicate(timeout=60)[1] or b""
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(), err


def run_on_terminal(*args: object) -> tuple[int, str, str]:
    """`python -m tlsprobe *args` with stdout on a pseudo-terminal (a user at a terminal)."""
    code, shown, err = _pty_run(args, 200, both=False)
    return code, shown, err.decode()


@pytest.mark.needs_impl("openssl")
def test_scan_no_verify_skips_the_trust_check_and_says_so(openssl, run_cli):
    target = f"127.0.0.1:{openssl.port}"
    args = ("scan", target, "--checks", "cert", "--no-progress", "--no-policy")
    code, out, err = run_cli(*args, "--json")
    report = _lines(out)[0]
    # against the system bundle the test CA is unknown: a high finding, exit 1 with --fail-on
    assert report["trust"]["status"] == "untrusted" and "certificate.self_signed" in \
        _codes(report)
    code, out, err = run_cli(*args, "--json", "--no-verify", "--fail-on", "low")
    assert code == 0, err
    report = _lines(out)[0]
    assert report["trust"]["status"] == "not_checked"
    assert report["trust"]["detail"] == "skipped (--no-verify)"
    assert _codes(report) == {"certificate.not_verified"}
    assert report["certificates"][0]["subject"] == "CN=localhost"
    code, out, err = run_cli(*args, "--no-verify")
    assert code == 0, err
    assert "Trust: not checked: skipped (--no-verify)" in out


@pytest.mark.needs_impl("openssl")
def test_checks_cert_reports_no_version_findings(server_cache, run_cli, tmp_path):
    tls12 = server_cache("openssl", proto="tls1_2")
    target = f"127.0.0.1:{tls12.port}"
    code, out, err = run_cli("scan", target, "--checks", "versions,cert", "--json",
                             "--no-progress", "--no-verify")
    assert "version.missing" in _codes(_lines(out)[0])       # intermediate wants TLS 1.3
    code, out, err = run_cli("scan", target, "--checks", "cert", "--json", "--no-progress")
    report = _lines(out)[0]
    assert report["versions"]      # still probed, to find the certificate
    assert report["findings"] and all(c.startswith("certificate.") for c in _codes(report)), \
        report["findings"]


def _many_san_certs(directory: Path, count: int) -> CertSet:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    sans = [x509.DNSName(f"name{i}.example") for i in range(count)]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(
                sans + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    files = CertFiles(directory / "many.crt", directory / "many.key", directory / "many.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return CertSet(directory, files.cert, {"ecdsa": files})


@pytest.mark.needs_impl("openssl")
def test_probe_full_and_piped_output_list_every_san(tmp_path, run_cli):
    server = start_server("openssl", cert="ecdsa", certs=_many_san_certs(tmp_path, 20),
                          workdir=tmp_path / "srv")
    try:
        target = f"127.0.0.1:{server.port}"
        code, out, err = run_on_terminal("probe", target, "--no-verify")
        assert code == 0, err
        assert "name7.example, ... 13 more (--full shows all)" in out
        assert "name8.example" not in out
        code, out, err = run_on_terminal("probe", target, "--no-verify", "--full")
        assert code == 0, err
        assert "name19.example" in out and "more" not in out
        code, out, err = run_cli("probe", target, "--no-verify")     # piped: whole
        assert code == 0, err
        assert "name19.example, 127.0.0.1" in out and "more" not in out
    finally:
        server.stop()


@pytest.mark.needs_impl("openssl")
def test_scan_full_and_piped_output_list_every_group(openssl, run_cli):
    args = ("scan", f"127.0.0.1:{openssl.port}", "--groups-only", "--no-progress")
    code, out, err = run_on_terminal(*args)
    assert code == 0, err
    assert "Not supported:" in out and " more" in out
    code, out, err = run_on_terminal(*args, "--full")
    assert code == 0, err
    assert "Not supported:" in out and " more" not in out
    code, piped, err = run_cli(*args)
    assert code == 0, err
    assert "Not supported:" in piped and " more" not in piped


@pytest.mark.needs_impl("openssl")
def test_multi_target_text_run_ends_with_a_summary(openssl, run_cli, tmp_path):
    good = f"127.0.0.1:{openssl.port}"
    (tmp_path / "t.txt").write_text(f"{good}\n127.0.0.1:1\nbad..name\n")
    code, out, err = run_cli("scan", "-f", "t.txt", "--checks", "versions,groups",
                             "--no-progress")
    assert code == 3, err
    tail = out.rstrip().splitlines()[-5:]
    assert tail[0] == "Summary"
    assert tail[1] == "Targets: 3; audited 1; with an error 2 (network 1, usage 1)"
    assert tail[2].startswith("Findings: ") and tail[2] != "Findings: none"
    # the one target rated; provisional: its suites and checks were not run
    assert tail[3].startswith("Ratings: ") and tail[3].endswith(" 1 (1 provisional)"), tail
    assert tail[4] == "Exit code 3: 2 target(s) with an error, the highest code for network"
    code, out, err = run_cli("scan", good, "--groups-only", "--no-progress", "--fail-on",
                             "info")
    assert code == 1 and "Summary" not in out      # one target: its report says it all
    code, out, err = run_cli("scan", good, good.replace("127.0.0.1", "localhost"),
                             "--groups-only", "--no-progress", "--fail-on", "info")
    assert code == 1
    assert out.rstrip().splitlines()[-1] == ("Exit code 1: 2 target(s) with findings at or "
                                             "above --fail-on info")
    code, out, err = run_cli("scan", "-f", "t.txt", "--groups-only", "--no-progress",
                             "--json")
    assert "Summary" not in out and len(_lines(out)) == 3


@pytest.mark.needs_impl("openssl")
def test_a_non_utf8_line_is_an_error_of_its_own(openssl, run_cli, tmp_path):
    good = f"127.0.0.1:{openssl.port}"
    (tmp_path / "t.txt").write_bytes(b"# caf\xe9 list in latin-1, a comment\n"
                                     b"h\xf4te.example:443\n" + good.encode() + b"\n")
    code, out, err = run_cli("scan", "-f", "t.txt", "--groups-only", "--no-progress", "--json")
    assert code == 2, err
    reports = {r["index"]: r for r in _lines(out)}
    assert reports[1]["error"] == \
        r"t.txt:2: not UTF-8 text (byte 0xf4 at column 2): 'h\xf4te.example:443'"
    assert reports[1]["error_kind"] == "usage"
    assert reports[2]["error"] is None and reports[2]["groups"][0]["supported"]
    assert r"tlsprobe: t.txt:2: not UTF-8 text (byte 0xf4 at column 2): 'h\xf4" in err


@pytest.mark.needs_impl("openssl")
def test_scan_full_lists_a_findings_items_the_message_cuts(server_cache, run_cli):
    ciphers = ("ECDHE-RSA-AES128-GCM-SHA256:AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA:"
               "AES256-SHA:AES128-SHA256:AES256-SHA256:ECDHE-RSA-AES128-SHA")
    srv = server_cache("openssl", ciphers=ciphers, serverpref=True, groups="X25519:P-384")
    args = ("scan", f"127.0.0.1:{srv.port}", "--checks", "versions,suites", "--no-progress")
    last = "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"     # the 7th item outside the policy
    code, out, err = run_on_terminal(*args)
    flat = " ".join(out.split())
    assert "and 1 more" in flat and "all 7:" not in flat
    code, out, err = run_on_terminal(*args, "--full")
    flat = " ".join(out.split())
    assert "all 7: TLS_RSA_WITH_AES_128_GCM_SHA256" in flat and last in flat.split("all 7:")[1]
    code, out, err = run_cli(*args)
    assert "all 7: TLS_RSA_WITH_AES_128_GCM_SHA256" in " ".join(out.split())


def test_pcap_full_names_every_problem_of_a_damaged_capture(run_cli, tmp_path):
    from tests.helpers.capbuild import Conv, ether, pcap_bytes
    conv = Conv(client=("127.0.0.1", 40000), server=("127.0.0.1", 443))
    frames = [ether(f) for f in conv.handshake() + [conv.c(b"\x16\x03\x01\x00\x05hello"),
                                                    conv.s(b"\x16\x03\x03\x00\x05world")]]
    cut = [(1003.0, frames[3][:60], len(frames[3])), (1004.0, frames[4][:60], len(frames[4]))]
    (tmp_path / "d.pcap").write_bytes(pcap_bytes(frames[:3] + cut) + b"\x01\x02\x03")
    code, _, err = run_cli("pcap", "d.pcap", "--no-progress")
    assert code == 7 and "(+1 more; --full names them)" in err and "snaplen" not in err
    code, _, err = run_cli("pcap", "d.pcap", "--no-progress", "--full")
    assert code == 7 and "more" not in err
    assert "truncated pcap record header" in err and "2 packets cut short by the capture's " \
        "snaplen" in err


def _on_one_terminal(*args: object) -> tuple[int, str]:
    """`python -m tlsprobe *args` with stdout and stderr on one pseudo-terminal, as a user
    at a terminal sees them: the exit code and everything shown."""
    code, shown, _ = _pty_run(args, 120, both=True)
    return code, shown.replace("\r\n", "\n")


def test_scan_error_is_said_once_on_a_terminal(tmp_path):
    """A refused target on a terminal where stdout and stderr are one: the error once (the
    report's "Error:" line), with and without the progress bar; piped, stderr still has it
    as the documented one line, and the report has it too."""
    import socket
    with socket.socket() as s:     # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for extra in ((), ("--no-progress",)):
        code, seen = _on_one_terminal("scan", f"127.0.0.1:{port}", *extra)
        assert code == 3, seen
        assert seen.count("connection refused") == 1, seen
        assert f"Error: 127.0.0.1:{port}: connection refused" in seen
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    piped = subprocess.run([sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert piped.returncode == 3
    assert piped.stderr == f"tlsprobe: 127.0.0.1:{port}: connection refused\n"
    assert f"Error: 127.0.0.1:{port}: connection refused" in piped.stdout
