"""`tlsprobe HOST:PORT` completing handshakes through the CLI: the issue's acceptance cases,
the trace of the whole handshake, --first-flight-only, --http-get, --keylog, --pcap-out
(opened with tshark), certificate verification (--cafile, hostname, --no-verify), IPv6.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.engine.keylog import load_keylog


def target(srv: Any) -> str:
    return f"[{srv.host}]:{srv.port}" if ":" in srv.host else f"{srv.host}:{srv.port}"


def message_block(out: str, header_regex: str) -> list[str]:
    """The lines of the first trace entry whose header matches, header included."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if re.search(header_regex, line):
            block = [line]
            for nxt in lines[i + 1:]:
                if nxt.startswith(("<<<", ">>>", "---")):
                    break
                block.append(nxt)
            return block
    raise AssertionError(f"no trace entry matches {header_regex!r}")


def test_acceptance_tls12_x25519_msg(run_cli, server_cache, certs) -> None:
    """The issue's first 'done when': SKE x25519 at +6, CKE 0x20 at +4, both Finished,
    verified."""
    srv = server_cache("openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                       proto="tls1_2")
    res = run_cli(target(srv), "--tls1_2", "--msg", "--timeout", "5", "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    ske = message_block(out, r"^<<< TLS 1\.2, Handshake \[length [0-9a-f]{4}\], "
                             r"ServerKeyExchange$")
    assert "      named_curve x25519 (0x001d) at +6 (bytes +5..+6)" in ske
    assert ske[1].split()[5:7] == ["00", "1d"]
    cke = message_block(out, r"^>>> TLS 1\.2, Handshake \[length 0025\], ClientKeyExchange$")
    assert "      ecdh_Yc_length 32 (0x20) at +4" in cke
    assert cke[1].split()[:5] == ["10", "00", "00", "21", "20"]
    # our CCS, then our Finished (decrypted), then the server's CCS and Finished (decrypted)
    order = [ln for ln in out.splitlines() if re.match(
        r"^(<<<|>>>) TLS 1\.2, (ChangeCipherSpec|Handshake \[length 0010\], Finished)", ln)]
    assert order == [">>> TLS 1.2, ChangeCipherSpec [length 0001]",
                     ">>> TLS 1.2, Handshake [length 0010], Finished (decrypted)",
                     "<<< TLS 1.2, ChangeCipherSpec [length 0001]",
                     "<<< TLS 1.2, Handshake [length 0010], Finished (decrypted)"]
    fin = message_block(out, r"^<<< TLS 1\.2, Handshake \[length 0010\], Finished")
    assert fin[1].split()[:4] == ["14", "00", "00", "0c"]
    assert "<<< TLS 1.2, Handshake [length" in out and "NewSessionTicket" in out
    assert re.search(r"^Server Finished\s+verified$", out, re.MULTILINE)
    assert re.search(r"^Server signature\s+verified \(rsa_pss_rsae_sha256 \(0x0804\) "
                     r"ServerKeyExchange\)$", out, re.MULTILINE)
    assert re.search(r"^Handshake\s+complete$", out, re.MULTILINE)
    assert re.search(r"^Verification\s+Verify return code: 0 \(ok\)$", out, re.MULTILINE)
    assert re.search(r"^Key share sizes\s+server 32 bytes, client 32 bytes$", out, re.MULTILINE)


def test_acceptance_tls13_pyopenssl_x25519mlkem768(run_cli, server_cache, certs) -> None:
    """The issue's second 'done when': the hybrid handshake completes and the certificate
    is shown decrypted."""
    srv = server_cache("pyopenssl", groups=["X25519MLKEM768"], proto="tls1_3")
    res = run_cli(target(srv), "--msg", "--json", "--timeout", "5", "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    trace, data = res.stderr, json.loads(res.stdout)   # with --json the trace is on stderr
    assert data["handshake_complete"] is True and data["finished_verified"] is True
    assert data["signature_verified"] is True
    assert data["key_exchange"]["group"]["name"] == "X25519MLKEM768"
    assert data["verification"]["ok"] is True
    for name in ("EncryptedExtensions", "Certificate", "CertificateVerify", "Finished"):
        assert re.search(rf"^<<< TLS 1\.3, Handshake \[length [0-9a-f]{{4}}\], {name} "
                         r"\(decrypted\)$", trace, re.MULTILINE), name
    cert = message_block(trace, r"^<<< TLS 1\.3, Handshake .*, Certificate \(decrypted\)$")
    dump = bytes.fromhex("".join("".join(ln.split()) for ln in cert[1:]
                                 if re.fullmatch(r"    ([0-9a-f]{2} ?)+", ln)))
    der = Path(certs["rsa"].cert).read_text()
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    leaf = x509.load_pem_x509_certificate(der.encode()).public_bytes(Encoding.DER)
    assert leaf in dump  # the decrypted Certificate really carries the server's leaf
    assert re.search(r"^>>> TLS 1\.3, Handshake \[length 0024\], Finished \(decrypted\)$",
                     trace, re.MULTILINE)


def test_first_flight_only(run_cli, server_cache) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    res = run_cli(target(srv), "--first-flight-only", "--json", "--no-verify", "--msg")
    assert res.returncode == 0, res.stderr
    trace, data = res.stderr, json.loads(res.stdout)   # with --json the trace is on stderr
    assert data["handshake_complete"] is False and data["finished_verified"] is True
    assert ">>> TLS 1.3, Handshake" not in trace.split("ServerHello", 1)[1]  # we sent nothing
    res = run_cli(target(srv), "--first-flight-only", "--tls1_2", "--json", "--no-verify")
    data = json.loads(res.stdout)
    assert data["handshake_complete"] is False and data["finished_verified"] is None
    assert data["signature_verified"] is True
    assert data["messages"][-1] == "<<< ServerHelloDone"


def test_http_get_nginx_and_keylog(run_cli, server_cache, certs, tmp_path) -> None:
    srv = server_cache("nginx", groups=["X25519", "P-256"], proto="both")
    keylog = tmp_path / "keys.log"
    for flag in ("--tls1_3", "--tls1_2"):
        res = run_cli(target(srv), flag, "--http-get", "/x", "--keylog", keylog, "--json",
                      "--cafile", certs.ca)
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert data["http_status"] == "HTTP/1.1 200 OK"
        assert data["alpn"] == "http/1.1"
    log = load_keylog(keylog)
    assert len(log.sessions) == 2
    labels = sorted(sorted(s) for s in log.sessions.values())
    assert ["CLIENT_RANDOM"] in labels
    assert ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "EXPORTER_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"] in labels


def test_http_get_path_beyond_ascii_and_a_broken_request_line(run_cli, server_cache,
                                                              certs) -> None:
    # '/€' ended as an internal error after the handshake (UnicodeEncodeError, exit 70);
    # now it is percent-encoded as a browser sends it; a space or control character
    # (which would break the request line, or add a header) is a usage error before any
    # connection (port 9: nothing listens, so exit 2 and not 3 says so)
    srv = server_cache("nginx", groups=["X25519", "P-256"], proto="both")
    res = run_cli(target(srv), "--http-get", "/€?q=é", "--json", "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["http_status"] == "HTTP/1.1 200 OK"
    from tlsprobe.probes.probe import http_request
    from tlsprobe.requests.names import CLI
    from tlsprobe.requests.probe import http_path
    assert http_request(http_path("/€?q=é", CLI), "h", 443).startswith(
        b"GET /%E2%82%AC?q=%C3%A9 HTTP/1.1\r\n")
    for path in ("/a b", "/\r\nX-Injected: 1", "/\x1b[2J"):
        res = run_cli("127.0.0.1:9", "--http-get", path)
        assert res.returncode == 2, res.stderr
        line, = res.stderr.splitlines()
        assert line.startswith("tlsprobe: error: --http-get: ") and "percent-encode" in line
        assert "\x1b" not in line and "\r" not in line


def test_certificate_verification_outcomes(run_cli, server_cache, certs, tmp_path) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_3")
    cases = [(("--cafile", certs.ca), True, "0 (ok)"),
             (("--cafile", certs.ca, "--sni", "other.example"), False,
              "62 (hostname mismatch)"),
             (("--cafile", certs["ecdsa"].cert), False,
              "19 (self-signed certificate in certificate chain)")]
    for args, ok, words in cases:
        res = run_cli(target(srv), "--json", *args)
        assert res.returncode == 0, res.stderr  # not fatal, as in s_client
        ver = json.loads(res.stdout)["verification"]
        assert ver["ok"] is ok and words in ver["message"], ver
    res = run_cli(target(srv), "--json", "--no-verify")
    ver = json.loads(res.stdout)["verification"]  # present, and marked as skipped
    assert ver["skipped"] is True and ver["message"] == "skipped (--no-verify)", ver
    res = run_cli(target(srv), "--cafile", tmp_path / "missing.pem")
    assert res.returncode == 2 and "no such file" in res.stderr


@pytest.mark.parametrize("flag", ["--tls1_2", "--tls1_3"])
def test_server_closing_first_leaves_the_result(run_cli, server_cache, certs, flag) -> None:
    """A server that answers at once and closes with our request unread resets the
    connection, so our close_notify cannot be sent: the handshake and what came of the
    request were established all the same (exit 0, no error), as with `openssl s_client`;
    it was exit 3, 'send failed: broken pipe'."""
    srv = server_cache("pyssl", proto="both", extra=["--reply-unread"])
    for _ in range(3):   # the reset must have arrived before our close_notify: repeat
        res = run_cli(target(srv), flag, "--http-get", "/", "--json", "--cafile", certs.ca)
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert data["handshake_complete"] is True and data["error"] is None, data["error"]
        # TLS 1.3: the reply can sit behind the tickets when the reset discards it
        assert re.fullmatch(r"HTTP/1\.0 200 OK|no response \(.*: connection reset by peer\)",
                            data["http_status"]), data["http_status"]
        assert res.stderr == ""


def test_ipv6_complete(run_cli, server_cache, certs) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_3", host="::1")
    res = run_cli(target(srv), "--json", "--http-get", "/", "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["handshake_complete"] and data["http_status"].startswith("HTTP/1.0 200")
    assert data["verification"]["ok"] is True  # the leaf names ::1


# -- --pcap-out read back by tshark --------------------------------------------------------
def tshark_fields(pcap: Path, port: int, fields: list[str], keylog: Path | None = None,
                  display: str | None = None, options: tuple[str, ...] = ()) -> list[list[str]]:
    argv = ["tshark", "-r", str(pcap), "-d", f"tcp.port=={port},tls", "-T", "fields",
            "-E", "separator=|", "-E", "aggregator=,"]
    for option in options:
        argv += ["-o", option]
    if keylog is not None:  # and show HTTP bodies without waiting for their end
        argv += ["-o", f"tls.keylog_file:{keylog}", "-o", "http.desegment_body:FALSE"]
    if display:
        argv += ["-Y", display]
    for f in fields:
        argv += ["-e", f]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return [line.split("|") for line in proc.stdout.splitlines()]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("flag", ["--tls1_2", "--tls1_3"])
def test_pcap_out_dissected_by_tshark(run_cli, server_cache, certs, tmp_path, flag) -> None:
    srv = server_cache("openssl", groups=["X25519", "P-256"], proto="both")
    pcap, keylog = tmp_path / "probe.pcap", tmp_path / "keys.log"
    res = run_cli(target(srv), flag, "--groups", "P-256", "--json", "--http-get", "/",
                  "--pcap-out", pcap, "--keylog", keylog, "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = tshark_fields(pcap, srv.port, ["tcp.srcport", "tcp.dstport", "tcp.flags.str",
                                          "tcp.checksum.status", "ip.checksum.status",
                                          "tcp.analysis.flags"],
                         options=("tcp.check_checksum:TRUE", "ip.check_checksum:TRUE"))
    assert rows[0][2].replace("·", "") == "S" and rows[1][2].replace("·", "") == "AS"
    assert rows[-2][2].replace("·", "") == "AF"
    assert {r[0] for r in rows} == {str(srv.port), rows[0][0]} and rows[0][1] == str(srv.port)
    assert {(r[3], r[4]) for r in rows} == {("1", "1")}  # TCP and IP checksums good
    assert not any(r[5] for r in rows)  # no retransmission, gap or window warnings
    hello = tshark_fields(pcap, srv.port, ["tls.handshake.ciphersuite",
                                           "tls.handshake.extensions.supported_version",
                                           "tls.handshake.extensions_key_share_group",
                                           "tls.handshake.server_named_curve"],
                          display="tls.handshake.type == 2 || tls.handshake.type == 12")
    # the ServerHello and ServerKeyExchange may sit in different frames: merge the columns
    suite, version, share_group, curve = (",".join(filter(None, col)) for col in zip(*hello))
    assert int(suite, 16) == data["cipher"]["id"]
    if flag == "--tls1_3":
        assert int(version, 16) == data["version"]["id"] == 0x0304
        assert int(share_group) == data["key_exchange"]["group"]["id"] == 0x0017
    else:
        assert data["version"]["id"] == 0x0303 and not version
        assert int(curve, 16) == data["key_exchange"]["group"]["id"] == 0x0017
    # with our key log tshark decrypts the exchange: Finished both ways and the HTTP answer
    decrypted = tshark_fields(pcap, srv.port, ["tls.handshake.type", "http.response.code",
                                               "http.request.method"], keylog=keylog)
    types = ",".join(r[0] for r in decrypted if r[0]).split(",")
    assert types.count("20") == 2
    if flag == "--tls1_3":
        assert {"8", "11", "15"} <= set(types)
    assert any(r[1] == "200" for r in decrypted) and any(r[2] == "GET" for r in decrypted)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_writer_ipv6_segments(tmp_path) -> None:
    """Large payloads are cut to the MSS; seq/ack numbers line up; IPv6 addresses kept."""
    from tlsprobe.capture.writer import Segment, write_connection_pcap
    c2s, s2c = bytes(range(256)) * 12, b"\x16\x03\x03" + bytes(5000)
    pcap = tmp_path / "v6.pcap"
    count = write_connection_pcap(pcap, ("::1", 50000), ("::1", 4433),
                                  [Segment(True, c2s, 100.0), Segment(False, s2c, 100.5)])
    rows = tshark_fields(pcap, 4433, ["ipv6.src", "tcp.srcport", "tcp.seq", "tcp.ack",
                                      "tcp.len", "tcp.payload", "tcp.checksum.status"],
                         options=("tcp.check_checksum:TRUE", "tcp.desegment_tcp_streams:FALSE"))
    assert len(rows) == count == 3 + 3 + 1 + 4 + 1 + 3
    assert {r[0] for r in rows} == {"::1"} and {r[6] for r in rows} == {"1"}
    sent = b"".join(bytes.fromhex(r[5].replace(":", "")) for r in rows if r[1] == "50000")
    got = b"".join(bytes.fromhex(r[5].replace(":", "")) for r in rows if r[1] == "4433")
    assert sent == c2s and got == s2c
    assert max(int(r[4]) for r in rows) == 1460
    fin = [r for r in rows if r[1] == "50000"][-2]  # the client's FIN
    assert int(fin[2]) == 1 + len(c2s) and int(fin[3]) == 1 + len(s2c)


@pytest.mark.parametrize("proto,alert", [("tls1_3", "certificate_required (116)"),
                                         ("tls1_2", "handshake_failure (40)")])
def test_server_that_requires_a_client_certificate(run_cli, server_cache, proto, alert) -> None:
    """TLS 1.3 servers check our (empty) Certificate only after our Finished: the alert that
    follows takes the handshake back, and the probe says why (exit 5, not 0)."""
    srv = server_cache("openssl", groups=["X25519"], proto=proto, extra=["-Verify", "1"])
    res = run_cli(f"127.0.0.1:{srv.port}", "--json", "--timeout", "5")
    assert res.returncode == 5, res.stderr
    data = json.loads(res.stdout)
    assert data["client_certificate_requested"] is True and data["handshake_complete"] is False
    assert data["error_kind"] == "alert" and alert in data["error"]
    (line,) = res.stderr.strip().splitlines()
    assert alert in line and "requires a client certificate" in line
    text = run_cli(f"127.0.0.1:{srv.port}", "--timeout", "5")
    assert text.returncode == 5
    types = "; certificate types rsa_sign (1), dss_sign (2), ecdsa_sign (64)" \
        if proto == "tls1_2" else ""   # (TLS 1.3's request has none)
    assert f"requested by the server (CertificateRequest{types}); none sent" in text.stdout
    assert "stopped after the server's first flight" not in text.stdout
