"""Client certificates in captures (mutual TLS), against what tshark shows of the same
recordings: the project's own captures tls12_client_auth (the server requires a client
certificate, the client sends its ECDSA leaf and the test CA), tls12_client_auth_empty (the
server asks, the client has none) and tls13_client_auth (seen only with the key log),
recorded on loopback from openssl s_server -Verify/-verify and s_client -cert."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.capbuild import TSHARK, Conv, ether, pcap_bytes
from tests.helpers.own_captures import CAPTURES, chunks
from tlsprobe.engine.keylog import KeyLog, load_keylog
from tlsprobe.model.capture import ConnectionReport
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis

CASES = ("tls12_client_auth", "tls12_client_auth_empty", "tls13_client_auth")


def reports(name: str, keys: bool = False, flow: bool = False) -> list[ConnectionReport]:
    keylog = load_keylog(CAPTURES / f"{name}.keys") if keys else \
        KeyLog(session_ids={b"\x35" * 32: b"\x00" * 48}) if flow else None  # (Flow reader)
    with CaptureAnalysis(str(CAPTURES / name) + ".pcap", AnalyzerOptions(keylog=keylog)) as a:
        return [r for r, _ in a]


def tshark_view(name: str) -> dict[str, object]:
    """What tshark (given the key log) shows of the CertificateRequest and the client's
    Certificate: schemes, distinguished names, the client chain's SHA-256 fingerprints."""
    assert TSHARK, "tshark is needed"
    pcap = CAPTURES / f"{name}.pcap"
    text = subprocess.run(
        [TSHARK, "-r", str(pcap), "-o", f"tls.keylog_file:{CAPTURES / name}.keys", "-Y",
         "tls.handshake.type == 13", "-V"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    request = text.split("Handshake Type: Certificate Request (13)")[1].split(
        "Handshake Protocol:")[0]
    schemes = re.findall(r"Signature Algorithm: .* \((0x[0-9a-f]{4})\)", request)
    names = re.search(r"Distinguished Names \((\d+) bytes\)", request)
    chain = subprocess.run(
        [TSHARK, "-r", str(pcap), "-o", f"tls.keylog_file:{CAPTURES / name}.keys", "-Y",
         "tls.handshake.type == 11 && tcp.dstport == " + str(_server_port(name)), "-T",
         "fields", "-e", "tls.handshake.certificate"],
        capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    return {"schemes": [int(s, 16) for s in schemes],
            "authorities": None if names and names.group(1) != "0" else 0,
            "chain": [hashlib.sha256(bytes.fromhex(c.replace(":", ""))).hexdigest()
                      for c in chain.split(",") if c]}


def _server_port(name: str) -> int:
    expected = json.loads((CAPTURES / "expected.json").read_text())
    return int(expected[f"{name}.pcap"]["server_port"])


@pytest.mark.parametrize("name", CASES)
def test_client_auth_as_tshark_shows_it(name: str) -> None:
    """The request's schemes and CA count and the client's chain (subject, SHA-256) are
    tshark's; TLS 1.3 shows them only with the key log."""
    (r,) = reports(name, keys=True)
    auth = r.client_auth
    assert auth is not None and auth.requested and auth.sent
    want = tshark_view(name)
    assert [s.id for s in auth.signature_schemes] == want["schemes"]
    assert auth.certificate_authorities == want["authorities"] == 0
    assert [c.sha256 for c in auth.certificates] == want["chain"]
    if name != "tls12_client_auth_empty":
        assert [c.subject for c in auth.certificates] == ["CN=localhost",
                                                           "CN=tlsprobe Test CA"]
        assert auth.certificates[0].key_type == "RSA"
    else:
        assert auth.certificates == ()
    assert r.certificates[0].key_type == "EC secp256r1"  # the server chain: the server's


def test_without_keys_tls12_shows_it_tls13_cannot() -> None:
    (r12,) = reports("tls12_client_auth")
    assert r12.client_auth is not None and len(r12.client_auth.certificates) == 2
    (r13,) = reports("tls13_client_auth")
    assert r13.client_auth is None   # encrypted: not known, never "not requested"
    (plain,) = reports("tls12_x25519")
    assert plain.client_auth is None


@pytest.mark.parametrize("name", CASES)
def test_fast_and_flow_readers_agree_on_client_auth(name: str) -> None:
    fast = reports(name)
    flow = reports(name, flow=True)
    assert [r.client_auth for r in fast] == [r.client_auth for r in flow]
    assert fast == flow


def test_a_malformed_client_certificate_is_a_problem_in_both_readers(tmp_path: Path) -> None:
    """The client's Certificate cut inside its list: a problem named, no chain, in both
    readers alike."""
    parts = chunks("tls12_client_auth.pcap")
    c = Conv()
    frames = c.handshake()
    for direction, data in parts:
        if direction == 0 and data[:1] == b"\x16" and data[5:6] == b"\x0b":
            data = data[:9] + b"\x00\xff\xff" + data[12:]  # certificate_list length wrong
        frames.append(c.c(data) if direction == 0 else c.s(data))
    path = tmp_path / "bad.pcap"
    path.write_bytes(pcap_bytes([ether(f) for f in frames]))
    got = []
    for keylog in (None, KeyLog(session_ids={b"\x35" * 32: b"\x00" * 48})):
        with CaptureAnalysis(str(path), AnalyzerOptions(keylog=keylog)) as a:
            got.append([json.loads(r.to_json()) for r, _ in a])
    assert got[0] == got[1]
    (r,) = got[0]
    assert r["client_auth"]["requested"] and r["client_auth"]["sent"] is None
    assert any("malformed Certificate from the client" in p for p in r["problems"])


def test_text_and_json_outputs(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("pcap", str(CAPTURES / "tls12_client_auth.pcap"), "--details",
                             "--no-progress")
    assert code == 0, err
    assert "Client certificate  requested (20 signature schemes, 0 certificate " \
        "authorities); sent, 2 certificates" in out
    assert "Client chain        0 s: CN=localhost" in out
    code, out, err = run_cli("pcap", str(CAPTURES / "tls12_client_auth_empty.pcap"),
                             "--jsonl", "--no-progress")
    assert code == 0, err
    conn = json.loads(out.splitlines()[0])
    assert conn["client_auth"]["sent"] is True and conn["client_auth"]["certificates"] == []
    code, out, err = run_cli("pcap", str(CAPTURES / "tls13_client_auth.pcap"), "--keylog",
                             str(CAPTURES / "tls13_client_auth.keys"), "--json",
                             "--no-progress")
    assert code == 0, err
    (conn,) = json.loads(out)["connections"]
    assert [c["subject"] for c in conn["client_auth"]["certificates"]] == [
        "CN=localhost", "CN=tlsprobe Test CA"]


def _ca_files(folder: Path) -> list[str]:
    """Two self-signed CAs (one name with a terminal escape and a comma) in one PEM file,
    a server certificate and key; the CA names as RFC 4514 writes them, in file order."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    start = datetime.datetime(2026, 1, 1)

    def cert(name: x509.Name) -> bytes:
        return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(1).not_valid_before(start)
                .not_valid_after(start + datetime.timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    cas = [x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Lab"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "tlsprobe CA One")]),
           x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "evil\x1b[31m, CA")])]
    (folder / "cas.pem").write_bytes(b"".join(cert(n) for n in cas))
    (folder / "srv.pem").write_bytes(cert(x509.Name([x509.NameAttribute(
        NameOID.COMMON_NAME, "localhost")])))
    (folder / "srv.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return ["CN=tlsprobe CA One,O=Lab", "CN=evil\x1b[31m\\, CA"]


def _recorded_handshake(folder: Path, version: str) -> list[tuple[int, bytes]]:
    """openssl s_server (asking for a client certificate, naming the CAs of cas.pem) and
    s_client (without one) through a loopback relay that records each side's bytes."""
    import select
    import socket
    import threading
    server = subprocess.Popen(
        ["openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", "srv.pem", "-key",
         "srv.key", "-verify", "1", "-CAfile", "cas.pem", version, "-www"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = ""
        while server.stdout and not line.startswith("ACCEPT"):  # (after a DH note)
            line = server.stdout.readline()
            assert line, "s_server did not start"
        port = int(line.rsplit(":", 1)[1])
        relay = socket.create_server(("127.0.0.1", 0))
        parts: list[tuple[int, bytes]] = []

        def run() -> None:
            conn, _ = relay.accept()
            up = socket.create_connection(("127.0.0.1", port))
            ends = {conn: (up, 0), up: (conn, 1)}
            while ends:
                for sock in select.select(list(ends), [], [], 10)[0]:
                    data = sock.recv(65536)
                    other, direction = ends[sock]
                    if not data:
                        ends.clear()
                        break
                    parts.append((direction, data))
                    other.sendall(data)
            conn.close()
            up.close()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        subprocess.run(["openssl", "s_client", "-connect",
                        f"127.0.0.1:{relay.getsockname()[1]}", version, "-keylogfile",
                        "keys.txt"], cwd=folder, input=b"Q\n", capture_output=True,
                       timeout=30, check=False)
        thread.join(20)
        relay.close()
    finally:
        server.kill()
        server.wait()
    return parts


@pytest.mark.parametrize("version", ["-tls1_2", "-tls1_3"])
def test_the_certificate_authorities_a_server_names(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                    version: str) -> None:
    """The distinguished names of the CertificateRequest (TLS 1.2: its list; TLS 1.3: its
    certificate_authorities extension, read with the key log), in order, as s_client
    lists them and as many as tshark shows; escaped in the details view."""
    want = _ca_files(tmp_path)
    c = Conv()
    frames = c.handshake()
    for direction, data in _recorded_handshake(tmp_path, version):
        frames.append(c.c(data) if direction == 0 else c.s(data))
    path = tmp_path / "ca_names.pcap"
    path.write_bytes(pcap_bytes([ether(f) for f in frames]))
    keys = ["--keylog", str(tmp_path / "keys.txt")] if version == "-tls1_3" else []
    code, out, err = run_cli("pcap", str(path), "--json", "--no-progress", *keys)
    assert code == 0, err
    (conn,) = json.loads(out)["connections"]
    auth = conn["client_auth"]
    assert auth["requested"] and auth["certificate_authority_names"] == want
    assert auth["certificate_authorities"] == 2
    assert TSHARK, "tshark is needed"
    text = subprocess.run(
        [TSHARK, "-r", str(path), "-o", f"tls.keylog_file:{tmp_path / 'keys.txt'}", "-Y",
         "tls.handshake.type == 13", "-V"], capture_output=True, text=True, timeout=60,
        check=True).stdout
    assert text.count("Distinguished Name: (") == 2
    assert "id-at-commonName=tlsprobe CA One" in text
    code, out, err = run_cli("pcap", str(path), "--details", "--no-progress", *keys)
    assert code == 0, err
    assert "Acceptable CA       CN=tlsprobe CA One,O=Lab" in out
    assert "CN=evil\\x1b[31m\\, CA" in out and "\x1b" not in out
    # the certificate_types (TLS 1.2 only), by name and id, as tshark lists them
    shown = [int(t) for t in re.findall(r"Certificate type: .* \((\d+)\)", text)]
    assert [t["id"] for t in auth["certificate_types"]] == shown
    assert (shown == [1, 2, 64]) is (version == "-tls1_2"), shown   # s_server's list
    if version == "-tls1_2":
        assert [t["name"] for t in auth["certificate_types"]] == ["rsa_sign", "dss_sign",
                                                                   "ecdsa_sign"]
        assert "Certificate types   rsa_sign (1), dss_sign (2), ecdsa_sign (64)" in out
    else:
        assert "Certificate types" not in out
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress", *keys)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    auths = [line["client_auth"] for line in lines if line.get("client_auth")]
    assert [[t["id"] for t in a["certificate_types"]] for a in auths] == [shown]
