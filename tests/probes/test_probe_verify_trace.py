"""The live probe's Verification line (codes with their own reasons, as `openssl s_client`
gives them; a missing subjectAltName only as a separate note; a self-signed leaf trusted as
itself; --no-verify; an unusable --cafile), --msg output on a refused connection, and the
shared trace labels (the server_name itself, encrypted TLS 1.2 Finished records by their outer
content type, the client's version label). Real servers on loopback, real captures."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.shared_data import shared_missing
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tlsprobe.engine.chain import verify_chain

REPO = Path(__file__).resolve().parents[2]
NOW = datetime.datetime.now(datetime.timezone.utc)


def _self_signed(folder: Path, stem: str, *, san: bool, ca: bool = False) -> tuple[Path, Path]:
    """A self-signed P-256 certificate for localhost (with or without subjectAltName)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW - datetime.timedelta(hours=1))
         .not_valid_after(NOW + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    cert = b.sign(key, hashes.SHA256())
    cert_path, key_path = folder / f"{stem}.pem", folder / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(
        serialization.Encoding.DER)


def _anchors(*paths: Path) -> tuple[x509.Certificate, ...]:
    return tuple(x509.load_pem_x509_certificate(p.read_bytes()) for p in paths)


def _verification(res: Any) -> str:
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("Verification")]
    assert len(lines) == 1, res.stdout + res.stderr
    return re.sub(r"^Verification\s+", "", lines[0])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- engine.chain on certificates made here ------------------------------------------------
def test_codes_state_their_own_reason(tmp_path, certs) -> None:
    bare, _ = _self_signed(tmp_path, "bare", san=False)
    named, _ = _self_signed(tmp_path, "named", san=True)
    other = certs["ecdsa"].cert  # a leaf of the test CA: an anchor unrelated to these chains
    r = verify_chain([_der(bare)], "localhost", _anchors(other))
    assert r.code == 18 and r.message.startswith(
        "18 (self-signed certificate): CN=localhost signed itself and is not in the trust "
        "store; note: the certificate has no subjectAltName"), r.message
    r = verify_chain([_der(named)], "localhost", _anchors(other))
    assert r.code == 18 and "subjectAltName" not in r.message, r.message
    # leaf + a root that is not in the store: 19, stated without the library's text
    r = verify_chain([_der(certs["rsa"].cert), _der(certs.ca)], "localhost", _anchors(other))
    assert r.message == ("19 (self-signed certificate in certificate chain): the server sent "
                         "the root CN=tlsprobe Test CA, which is not in the trust store")
    r = verify_chain([_der(certs["rsa"].cert)], "localhost", _anchors(other))
    assert r.message.startswith("20 (unable to get local issuer certificate): the server sent "
                                "no issuer of CN=localhost, and its issuer "), r.message
    assert "max depth" not in r.message


def test_self_signed_leaf_trusted_as_itself(tmp_path) -> None:
    named, _ = _self_signed(tmp_path, "named", san=True)
    bare, _ = _self_signed(tmp_path, "bare", san=False)
    r = verify_chain([_der(named)], "localhost", _anchors(named))
    assert (r.code, r.hostname_ok) == (0, True), r.message
    r = verify_chain([_der(named)], "127.0.0.1", _anchors(named))
    assert (r.code, r.hostname_ok) == (0, True), r.message
    r = verify_chain([_der(named)], "other.test", _anchors(named))
    assert (r.code, r.hostname_ok) == (62, False), r.message
    # no SAN: the subject CN is matched, as `openssl s_client -verify_hostname` does
    r = verify_chain([_der(bare)], "localhost", _anchors(bare))
    assert (r.code, r.hostname_ok) == (0, True), r.message
    assert "localhost matched by the subject CN" in r.message, r.message
    r = verify_chain([_der(bare)], "other.test", _anchors(bare))
    assert r.code == 62 and "note: the certificate has no subjectAltName" in r.message
    # Same name, another key in the store: not trusted as itself.
    again, _ = _self_signed(tmp_path, "again", san=True)
    assert verify_chain([_der(named)], "localhost", _anchors(again)).code == 18


# -- the live probe ----------------------------------------------------------------------
def test_probe_verification_lines(tls_server, run_cli, certs, tmp_path) -> None:
    bare, bare_key = _self_signed(tmp_path, "bare", san=False)
    named, named_key = _self_signed(tmp_path, "named", san=True)
    srv_bare = tls_server("pyssl", extra=["--chain-file", str(bare), "--key-file", str(bare_key)])
    srv_named = tls_server("pyssl", extra=["--chain-file", str(named), "--key-file", str(named_key)])
    other = certs["ecdsa"].cert
    line = _verification(run_cli(f"localhost:{srv_bare.port}", "--cafile", other))
    assert line.startswith("Verify return code: 18 (self-signed certificate): CN=localhost "
                           "signed itself"), line
    assert "(self-signed certificate): the certificate has no subjectAltName" not in line
    assert "; note: the certificate has no subjectAltName" in line
    res = run_cli(f"localhost:{srv_named.port}", "--cafile", named, "--json")
    ver = json.loads(res.stdout)["verification"]
    assert (ver["ok"], ver["code"], ver["hostname_ok"], ver["skipped"]) == (True, 0, True, False)
    assert ver["message"].startswith("0 (ok)")
    res = run_cli(f"localhost:{srv_named.port}", "--no-verify")
    assert res.returncode == 0 and _verification(res) == "skipped (--no-verify)"


def test_probe_untrusted_root_and_missing_issuer(server_cache, tls_server, run_cli,
                                                 certs) -> None:
    chain_srv = server_cache("openssl", groups=["X25519"], proto="tls1_3")  # leaf + test CA
    other = certs["ecdsa"].cert
    line = _verification(run_cli(f"localhost:{chain_srv.port}", "--cafile", other))
    assert line == ("Verify return code: 19 (self-signed certificate in certificate chain): "
                    "the server sent the root CN=tlsprobe Test CA, which is not in the trust "
                    "store")
    leaf_only = tls_server("pyssl", extra=["--chain-file", str(certs["rsa"].cert)])
    line = _verification(run_cli(f"localhost:{leaf_only.port}", "--cafile", other))
    assert line == ("Verify return code: 20 (unable to get local issuer certificate): the "
                    "server sent no issuer of CN=localhost, and its issuer CN=tlsprobe Test CA "
                    "is not in the trust store")   # as s_client -verify_return_error says


def _pki(folder: Path) -> dict[str, Path]:
    """root -> I1 -> I2 -> leaf (localhost, 127.0.0.1), P-256, each CA with keyUsage; the
    PEM files by name, and the leaf's key as "key"."""
    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    out: dict[str, Path] = {}
    issuer_key, issuer = None, None
    for cn in ("root", "I1", "I2", "leaf"):
        key = ec.generate_private_key(ec.SECP256R1())
        ca = cn != "leaf"
        b = (x509.CertificateBuilder().subject_name(name("localhost" if not ca else cn))
             .issuer_name(name(issuer or cn)).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(NOW - datetime.timedelta(hours=1))
             .not_valid_after(NOW + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                              False, False), critical=True)
        else:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        signer = issuer_key or key
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                            critical=False).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False)
        cert = b.sign(signer, hashes.SHA256())
        out[cn] = folder / f"{cn}.pem"
        out[cn].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issuer_key, issuer = key, cn
        out["key"] = folder / "leaf.key"
        out["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    return out


def _openssl_code(port: int, cafile: Path) -> int:
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
                           str(cafile), "-verify_return_error"], input="", capture_output=True, text=True, timeout=30,
                          check=False)
    found = re.findall(r"Verify return code: (\d+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    return int(found[-1])


@pytest.mark.parametrize("sent, code", [
    (("leaf",), 20), (("leaf", "I1"), 20), (("leaf", "I2"), 20), (("leaf", "I1", "I2"), 0)])
def test_incomplete_chain_codes_as_openssl(tls_server, run_cli, tmp_path, sent, code) -> None:
    """A chain with its intermediates missing or out of order: the code `openssl s_client
    -verify_return_error` gives (20, the first problem: without that flag s_client goes on
    and ends with 21 when the leaf's issuer is nowhere), the issuer named; it was 1
    ('unspecified ... candidates exhausted') when an unrelated intermediate was sent, and
    21 where the first problem is 20."""
    pki = _pki(tmp_path)
    chain = tmp_path / "chain.pem"
    chain.write_bytes(b"".join(pki[n].read_bytes() for n in sent))
    srv = tls_server("pyssl", extra=["--chain-file", str(chain), "--key-file", str(pki["key"])])
    assert _openssl_code(srv.port, pki["root"]) == code   # the real tool, same server
    res = run_cli(f"127.0.0.1:{srv.port}", "--cafile", pki["root"], "--json")
    assert res.returncode == 0, res.stderr
    ver = json.loads(res.stdout)["verification"]
    assert ver["code"] == code, ver
    if code == 20 and sent[-1] != "I2":
        assert ver["message"] == ("20 (unable to get local issuer certificate): the server "
                                  "sent no issuer of CN=localhost, and its issuer CN=I2 is "
                                  "not in the trust store"), ver
    elif code == 20:
        assert ver["message"] == ("20 (unable to get local issuer certificate): issuer CN=I1 "
                                  "of CN=I2 is not in the trust store"), ver


def test_unusable_cafile_is_a_usage_error_before_connecting(run_cli, tmp_path) -> None:
    text = tmp_path / "passwd"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    port = _closed_port()  # a connection attempt would end in exit 3, not 2
    res = run_cli(f"127.0.0.1:{port}", "--cafile", text)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"tlsprobe: error: --cafile {text}: no certificates found (a PEM bundle or one DER "
        "certificate is expected)"]
    res = run_cli(f"127.0.0.1:{port}", "--cafile", tmp_path)  # a directory
    assert res.returncode == 2 and "--cafile" in res.stderr


def _fifo_with(tmp_path: Path, data: bytes) -> tuple[Path, threading.Thread]:
    """A named pipe that a thread fills with `data` once a reader opens it."""
    fifo = tmp_path / "store.fifo"
    os.mkfifo(fifo)

    def fill() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)
    writer = threading.Thread(target=fill, daemon=True)
    writer.start()
    return fifo, writer


def _release(fifo: Path, writer: threading.Thread) -> None:
    """Let a writer that no reader came for end (open for reading without blocking)."""
    if writer.is_alive():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join(5)
        os.close(fd)


def test_cafile_from_a_pipe_and_from_a_device(tls_server, run_cli, certs, tmp_path) -> None:
    """`--cafile <(cat a.pem b.pem)` is a pipe: read once, it serves the whole run (as with
    openssl s_client -CAfile), in probe and scan (trust verdict and chain check alike); a
    device that never ends is refused after a bounded read."""
    srv = tls_server("pyssl")   # the test CA's RSA leaf, with the CA
    fifo, writer = _fifo_with(tmp_path, certs.ca.read_bytes())
    try:
        line = _verification(run_cli(f"localhost:{srv.port}", "--cafile", fifo))
    finally:
        _release(fifo, writer)
    assert line == "Verify return code: 0 (ok)", line
    fifo.unlink()
    fifo, writer = _fifo_with(tmp_path, certs.ca.read_bytes())
    try:
        res = run_cli("scan", f"localhost:{srv.port}", "--checks", "cert,chain", "--cafile",
                      fifo, "--json", "--no-policy")
    finally:
        _release(fifo, writer)
    doc = json.loads(res.stdout)
    assert (doc["trust"]["status"], doc["trust"]["code"]) == ("trusted", 0), doc["trust"]
    assert [c["verdict"] for c in doc["check_results"] if c["name"] == "chain"] == [
        "not vulnerable"], doc["check_results"]
    res = run_cli(f"127.0.0.1:{_closed_port()}", "--cafile", "/dev/zero")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "tlsprobe: error: --cafile /dev/zero: larger than 64 MiB: not a trust store"], res.stderr


def test_msg_on_refused_connection_prints_nothing(run_cli) -> None:
    res = run_cli(f"127.0.0.1:{_closed_port()}", "--msg")
    assert res.returncode == 3 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_msg_shows_the_server_name(server_cache, run_cli) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_3")
    res = run_cli(f"localhost:{srv.port}", "--msg", "--no-verify")
    assert res.returncode == 0, res.stderr
    assert re.search(r"server_name_list\[0\]\.name_type host_name \(0\) at \+\d+\n",
                     res.stdout)
    assert re.search(r"server_name_list\[0\]\.host_name 'localhost' \(9 bytes\) at "
                     r"\+\d+\.\.\+\d+\n", res.stdout)


# -- trace labels on real captures -------------------------------------------------------
def test_tls12_encrypted_finished_named_by_outer_type(run_cli) -> None:
    """tshark: frames 8 and 10 of tls12_x25519.pcap are content type 22 (Handshake), 40
    bytes each, sent after ChangeCipherSpec; application data records stay ApplicationData."""
    res = run_cli("pcap", REPO / "captures" / "tls12_x25519.pcap", "--msg")
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if "encrypted" in ln]
    assert [ln for ln in lines if "0028" in ln] == [
        ">>> TLS 1.2, Handshake [length 0028], encrypted (not decrypted)",
        "<<< TLS 1.2, Handshake [length 0028], encrypted (not decrypted)"]
    assert ">>> TLS 1.2, ApplicationData [length 002a] (encrypted, not decrypted)" in lines


def test_tls13_client_records_labelled_by_final_version(run_cli, captures_dir) -> None:
    """The RFC 8446 capture's ClientHello offers 0x0304 and 0x7f1c (draft 28): its records
    are TLS 1.3, not the numerically higher draft."""
    pcap = captures_dir / "wireshark" / "test-captures" / "tls13-rfc8446.pcap"
    if not pcap.is_file():
        shared_missing("a capture of the corpus", pcap, "TLSPROBE_CAPTURES")
    res = run_cli("pcap", pcap, "--msg")
    assert res.returncode == 0, res.stderr
    labels = [ln for ln in res.stdout.splitlines() if ln.startswith((">>>", "<<<"))]
    assert labels and not [ln for ln in labels if "draft" in ln]
    hello = [ln for ln in res.stdout.splitlines() if ln.endswith(", ClientHello")]
    assert hello and all(ln.startswith(">>> TLS 1.3, Handshake") for ln in hello), hello
    assert any(ln.startswith(">>> TLS 1.3, ApplicationData") for ln in res.stdout.splitlines())
