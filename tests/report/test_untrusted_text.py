"""Text a server or a capture supplies reaches the terminal escaped (issue 10, item 9).

A certificate whose subject, issuer and subjectAltName hold an escape sequence, a newline
(forging a "Verify return code: 0 (ok)" line) and a bidi override, served by a real
openssl s_server on loopback; and a capture whose ClientHello offers such an SNI and ALPN
with that server's real answer. Text output must hold none of the raw characters (shown
as \\x1b, \\n, \\u202e); JSON keeps the exact values."""
from __future__ import annotations

import csv
import io
import json
import socket
from pathlib import Path

import pytest

from tests.helpers.servers import start_server
from tests.helpers.tls_answer import tls_answering
from tests.lab_servers.certs import CertSet, named_set
from tlsprobe.engine.client import ClientHandshake
from tlsprobe.engine.config import ClientConfig
from tlsprobe.report.escape import shown

from tests.helpers.capbuild import Conv, ether, pcap_bytes

CN = "evil\x1b[2J\nVerify return code: 0 (ok)\u202e"
SAN = "a\x1b[31m.example"
SNI = "sni\x1b]0;owned\x07\ntlsprobe"
ALPN = "h2\x1b[1A\x7fx"
RAW = ("\x1b", "\x07", "\u202e", "\x9b", "\x7f")


def _evil_certs(directory: Path) -> CertSet:
    return named_set(directory, CN, SAN, "evil")


@pytest.fixture
def evil_server(tmp_path):
    certs = _evil_certs(tmp_path)
    server = start_server("openssl", cert="ecdsa", certs=certs, workdir=tmp_path / "srv",
                          proto="tls1_2")   # TLS 1.2: the certificate is in clear in a capture
    yield server, certs
    server.stop()


def _no_raw(text: str) -> None:
    for c in RAW:
        assert c not in text, f"raw {c!r} in text output"


def test_shown_escapes_controls_c1_del_and_bidi_but_keeps_printable_text():
    assert shown("caf\u00e9 \u4e2d ok") == "caf\u00e9 \u4e2d ok"
    assert shown("a\x1b[2J\nb\r\t\x7f\x9b\u202e\u200b\U000e0001") == \
        "a\\x1b[2J\\nb\\r\\t\\x7f\\x9b\\u202e\\u200b\\U000e0001"


@pytest.mark.needs_impl("openssl")
def test_probe_text_escapes_certificate_names_json_keeps_them(evil_server, run_cli):
    server, _ = evil_server
    target = f"127.0.0.1:{server.port}"
    code, out, err = run_cli("probe", target, "--no-verify")
    assert code == 0, err
    _no_raw(out + err)
    lines = out.splitlines()
    assert not any(line.startswith("Verify return code") for line in lines)
    assert "0 s: CN=evil\\x1b[2J\\nVerify return code: 0 (ok)\\u202e" in out
    assert "SAN: a\\x1b[31m.example" in out
    code, out, err = run_cli("probe", target, "--no-verify", "--json")
    assert code == 0, err
    leaf = json.loads(out)["certificates"][0]
    assert leaf["subject"] == f"CN={CN}" and leaf["issuer"] == f"CN={CN}"
    assert leaf["san"] == [SAN]


@pytest.mark.needs_impl("openssl")
def test_probe_msg_trace_escapes_what_the_server_sent(evil_server, run_cli):
    server, _ = evil_server
    code, out, err = run_cli("probe", f"127.0.0.1:{server.port}", "--no-verify", "--msg")
    assert code == 0, err
    _no_raw(out + err)


@pytest.mark.needs_impl("openssl")
def test_scan_text_escapes_certificate_names_and_trust_detail(evil_server, run_cli, tmp_path):
    server, certs = evil_server
    target = f"127.0.0.1:{server.port}"
    args = ("scan", target, "--checks", "cert", "--no-progress", "--cafile", certs.ca)
    code, out, err = run_cli(*args)
    _no_raw(out + err)
    assert "CN=evil\\x1b[2J\\nVerify" in out and "a\\x1b[31m.example" in out
    code, out, err = run_cli(*args, "--csv", str(tmp_path / "scan.csv"))
    text = (tmp_path / "scan.csv").read_text(encoding="utf-8")
    _no_raw(text)
    assert "CN=evil\\x1b[2J\\nVerify" in text
    code, out, err = run_cli(*args, "--json")
    report = json.loads(out)
    assert report["certificates"][0]["subject"] == f"CN={CN}"
    assert report["certificates"][0]["san"] == [SAN]


def _capture(server_port: int) -> bytes:
    """A real exchange: our ClientHello offering the hostile SNI and ALPN, and the server's
    whole first flight (TLS 1.2, certificate in clear), as a pcap of one TCP connection."""
    hello = ClientHandshake(ClientConfig(server_name=SNI, alpn=(ALPN.encode(),),
                                         versions=(0x0303,))).start()
    flight = b""
    with socket.create_connection(("127.0.0.1", server_port), timeout=10) as sock:
        sock.sendall(hello)
        while b"\x0e\x00\x00\x00" not in flight:    # ServerHelloDone
            data = sock.recv(65536)
            if not data:
                break
            flight += data
    assert b"\x0e\x00\x00\x00" in flight, flight[:20]
    conv = Conv(client=("127.0.0.1", 40000), server=("127.0.0.1", server_port))
    frames = conv.handshake() + [conv.c(hello), conv.s(flight)]
    return pcap_bytes(ether(f) for f in frames)


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("mode", [(), ("--details",), ("--msg",)])
def test_pcap_text_escapes_sni_alpn_and_names_json_keeps_them(evil_server, run_cli, tmp_path,
                                                                mode):
    server, _ = evil_server
    path = tmp_path / "evil.pcap"
    path.write_bytes(_capture(server.port))
    code, out, err = run_cli("pcap", path, "--no-progress", *mode)
    assert code == 0, err
    _no_raw(out + err)
    if mode in ((), ("--details",)):
        assert shown(SNI) in out
    if mode == ("--details",):
        assert shown(ALPN) in out and "CN=evil\\x1b[2J\\nVerify" in out
    code, out, err = run_cli("pcap", path, "--no-progress", "--jsonl")
    assert code == 0, err
    conn = [json.loads(line) for line in out.splitlines() if '"sni"' in line][0]
    assert conn["sni"] == SNI and conn["offer"]["alpn"] == [ALPN]
    assert conn["certificates"][0]["subject"] == f"CN={CN}"


@pytest.mark.needs_impl("openssl")
def test_pcap_csv_and_stats_escape_what_the_capture_holds(evil_server, run_cli, tmp_path):
    """`--csv` is text as much as the table: a file someone `cat`s or opens in a terminal
    (and `--csv /dev/stdout` is the terminal), so its cells are shown escaped too."""
    server, _ = evil_server
    path = tmp_path / "evil.pcap"
    path.write_bytes(_capture(server.port))
    sheet = tmp_path / "conns.csv"
    code, out, err = run_cli("pcap", path, "--no-progress", "--stats", "--csv", sheet)
    assert code == 0, err
    _no_raw(out + err)
    text = sheet.read_text(encoding="utf-8")
    _no_raw(text)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == len(text.splitlines()) == 2     # no line break inside a cell
    assert shown(SNI) in text


@pytest.fixture
def hostile_http(certs):
    """A Python ssl server on loopback whose HTTP status line holds ESC, CSI (C1) and BEL."""
    import ssl
    import threading
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs["rsa"].chain, certs["rsa"].key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        try:
            raw, _ = listener.accept()
            with ctx.wrap_socket(raw, server_side=True) as conn:
                conn.recv(4096)
                conn.sendall(STATUS.encode("latin-1") + b"\r\nContent-Length: 0\r\n\r\n")
        except (OSError, ssl.SSLError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()
    thread.join(10)


STATUS = "HTTP/1.1 200 \x1b[2J\x9b1;1HVerify\x07"


def test_probe_text_escapes_the_http_status_line_json_keeps_it(hostile_http, run_cli):
    code, out, err = run_cli("probe", f"127.0.0.1:{hostile_http}", "--http-get", "/",
                             "--no-verify")
    assert code == 0, err
    _no_raw(out + err)
    assert "HTTP/1.1 200 \\x1b[2J\\x9b1;1HVerify\\x07" in out


def test_probe_json_keeps_the_http_status_line(hostile_http, run_cli):
    code, out, err = run_cli("probe", f"127.0.0.1:{hostile_http}", "--http-get", "/",
                             "--no-verify", "--json")
    assert code == 0, err
    # a network value as every other: C0 controls kept (JSON escapes them), a byte outside
    # ASCII as \xNN (it was latin-1 text: U+009B)
    assert json.loads(out)["http_status"] == "HTTP/1.1 200 \x1b[2J\\x9b1;1HVerify\x07"


@pytest.fixture
def tls_smtp(certs):
    """A Python ssl server on loopback that answers any request with an SMTP banner (an
    implicit-TLS mail port), ESC included."""
    with tls_answering(certs["rsa"].chain, certs["rsa"].key,
                       b"220 mx.test ESMTP \x1b[2J\r\n") as port:
        yield port


def test_probe_http_get_answered_by_another_protocol_is_no_http_status(tls_smtp, run_cli):
    """--http-get to a TLS port of another protocol: its answer is no HTTP status line (it
    was reported as one, "220 mx.test ESMTP", raw in JSON); it is said so, escaped."""
    want = "not HTTP: the server answered '220 mx.test ESMTP \\x1b[2J'"
    code, out, err = run_cli("probe", f"127.0.0.1:{tls_smtp}", "--http-get", "/",
                             "--no-verify")
    assert code == 0, err
    _no_raw(out + err)
    assert want in out
    code, out, err = run_cli("probe", f"127.0.0.1:{tls_smtp}", "--http-get", "/",
                             "--no-verify", "--json")
    assert code == 0, err
    assert json.loads(out)["http_status"] == want


def _strings(value: object) -> list[str]:
    """Every string of a decoded JSON document (keys and values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_scan_report_files_escape_the_certificate_and_the_policy_file(evil_server, run_cli,
                                                                      tmp_path):
    """Every report file of one scan (SARIF, JUnit, HTML, CSV) shows a policy file's name
    and waiver and the server's certificate names escaped. SARIF is read by code-scanning
    views, not kept as exact data like --json: its policy property held the raw name."""
    import xml.etree.ElementTree as ET
    server, certs = evil_server
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"name": "ours\x1b[2J]]><b>\x07", "versions": ["TLS 1.3"],
                                  "waive": {"certificate.*": "ok \x1b[31m ]]> <i>"}}))
    files = {k: tmp_path / f"scan.{k}" for k in ("sarif", "xml", "html", "csv")}
    code, out, err = run_cli("scan", f"127.0.0.1:{server.port}", "--checks", "versions,cert",
                             "--no-progress", "--policy", policy, "--fail-on", "high",
                             "--sarif", files["sarif"], "--junit", files["xml"],
                             "--html", files["html"], "--csv", files["csv"])
    assert code == 0, err
    _no_raw(out + err)
    sarif = json.loads(files["sarif"].read_text(encoding="utf-8"))
    for text in _strings(sarif):
        _no_raw(text)
    results = sarif["runs"][0]["results"]
    assert {r["properties"]["policy"] for r in results} >= {"ours\\x1b[2J]]><b>\\x07"}
    junit = ET.parse(files["xml"]).getroot()
    for node in junit.iter():
        _no_raw(" ".join([node.text or "", *node.attrib.values()]))
    for kind in ("html", "csv"):
        text = files[kind].read_text(encoding="utf-8")
        _no_raw(text)
        assert "ours\\x1b[2J" in text
    assert "<b>" not in files["html"].read_text(encoding="utf-8")
