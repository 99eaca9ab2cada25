"""A server whose leaf certificate is in a BER form OpenSSL reads but `cryptography` refuses
as a whole (a length in the long form where DER wants the short one: serial number, issuer,
subjectPublicKeyInfo, the RSA key inside it; a UTCTime without seconds; a PrintableString
holding '@'), served by openssl
s_server and signed again by its CA over the bytes as sent.

`openssl s_client` completes each handshake (verify 0, or 13 for the time it cannot read).
tlsprobe refused each leaf as "not a parsable DER certificate" (exit 6, a protocol error the
server did not commit), and `scan` lost every answer for the server. Now the handshake
completes with the server's signature checked with the key read from the certificate's
subjectPublicKeyInfo (wire/spki.py). A certificate refused for its lengths alone is read
as OpenSSL reads it, through a copy in DER (wire/spki.der_certificate), its signature
checked over the bytes as sent: the trust verdict is OpenSSL's (it was "not established"),
its fields are shown; one whose time OpenSSL cannot compare (a UTCTime without seconds)
is OpenSSL's 13 (it was not established), its fields shown with that time as sent (the
summary said "(unparsable certificate)"). Strings of a name cryptography refuses (a
PrintableString holding '@', an IA5String holding a byte above 0x7F) and a version
written out as v1 are read through the DER twin too (wire/dertwin.py): OpenSSL's
verdict, where it was "not established"; so is a v2 or v4 certificate (read as v3, as
OpenSSL checks it), which ended the handshake ("not a parsable DER certificate", exit 6)
and, in the trust store, the run (internal error, exit 70). One refused for another value (parameters in
its signature's AlgorithmIdentifier) keeps the verdict "not established" with the reason
(no code: never "untrusted", never "trusted"), the certificate's unread fields say so, a
scan's certificate.not_verified is inconclusive, and a capture of the handshake shows the
key.

The same root in the trust store (--cafile), in BER lengths, was dropped, then made the
verdict not established: it is now read (OpenSSL's 0), alone in the store too.
"""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.helpers.bercert import (
    Issued,
    children,
    contents,
    issued,
    mangled,
    pem,
    tlv,
    write,
)

#: (the leaf's edit, tlsprobe's version flag, s_client's flag, OpenSSL's verify code,
#: tlsprobe's --ciphers or None, the key tlsprobe reads)
CASES = {
    "serial-tls13": ("serial-long-length", "--tls1_3", "-tls1_3", 0, None, "EC secp256r1"),
    "issuer-tls12-ske": ("issuer-long-length", "--tls1_2", "-tls1_2", 0, None, "EC secp256r1"),
    "spki-tls13": ("spki-long-length", "--tls1_3", "-tls1_3", 0, None, "EC secp256r1"),
    "utctime-tls12-ske": ("utctime-without-seconds", "--tls1_2", "-tls1_2", 13, None,
                          "EC secp256r1"),
    "rsa-key-tls13": ("rsa-key-long-lengths", "--tls1_3", "-tls1_3", 0, None, "RSA"),
    "rsa-key-tls12-ske": ("rsa-key-long-lengths", "--tls1_2", "-tls1_2", 0, None, "RSA"),
    "rsa-key-tls12-transport": ("rsa-key-long-lengths", "--tls1_2", "-tls1_2", 0,
                                "TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA"),
    "printablestring-tls13": ("subject-printablestring-at", "--tls1_3", "-tls1_3", 0, None,
                              "EC secp256r1"),
    "ia5string-tls13": ("subject-ia5string-latin1", "--tls1_3", "-tls1_3", 0, None,
                        "EC secp256r1"),
    "version-v1-tls13": ("version-v1-written-out", "--tls1_3", "-tls1_3", 0, None,
                         "EC secp256r1"),
    "version-v2-tls13": ("version-v2", "--tls1_3", "-tls1_3", 0, None, "EC secp256r1"),
    "version-v4-tls12-ske": ("version-v4", "--tls1_2", "-tls1_2", 0, None, "EC secp256r1"),
    "algorithm-parameters-tls13": ("algorithm-parameters", "--tls1_3", "-tls1_3", 0, None,
                                   "EC secp256r1"),
    "issuer-indefinite-tls13": ("issuer-indefinite-length", "--tls1_3", "-tls1_3", 0, None,
                                "EC secp256r1"),
}


def _serve(tls_server: Callable[..., Any], tmp_path: Path, edit: str) -> tuple[Any, Path]:
    chain = issued(rsa.generate_private_key(65537, 2048) if edit.startswith("rsa") else None)
    ca, leaf, key = write(chain, mangled(chain, edit), tmp_path)
    return tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key)]), ca


def _s_client(port: int, ca: Path, version: str, cipher: str | None) -> int:
    """OpenSSL's verify code for the server; the handshake must complete."""
    extra = ["-cipher", "AES128-GCM-SHA256"] if cipher else []
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", version,
                           *extra, "-CAfile", str(ca), "-servername", "localhost"],
                          input="", capture_output=True, text=True, timeout=30, check=False)
    assert re.search(r"Cipher is (?!\(NONE\))", proc.stdout), proc.stdout + proc.stderr
    found = re.findall(r"Verify return code: (\d+)", proc.stdout)
    assert found, proc.stdout
    return int(found[-1])


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_a_leaf_openssl_reads_completes_the_handshake(tls_server: Callable[..., Any],
                                                      run_cli: Callable[..., Any],
                                                      tmp_path: Path, name: str) -> None:
    edit, version, flag, code, cipher, key_type = CASES[name]
    srv, ca = _serve(tls_server, tmp_path, edit)
    assert _s_client(srv.port, ca, flag, cipher) == code   # the real tool first
    ciphers = ("--ciphers", cipher) if cipher else ()
    res = run_cli(f"127.0.0.1:{srv.port}", version, *ciphers, "--sni", "localhost",
                  "--cafile", ca, "--json", "--timeout", "10")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert data["handshake_complete"] is True and data["finished_verified"] is True, data
    assert data["signature_verified"] is (None if cipher else True), data
    verification = data["verification"]
    leaf = data["certificates"][0]
    assert leaf["key_type"] == key_type and leaf["key_bits"] in (256, 2048), leaf
    if edit != "algorithm-parameters":   # read as OpenSSL reads it: its verdict, fields shown
        subject = {"subject-printablestring-at": "CN=local@host",
                   "subject-ia5string-latin1": "CN=loc\u00e9l"}.get(edit, "CN=localhost")
        assert leaf["subject"] == subject and leaf["issuer"] == "CN=BER Test CA" and \
            leaf["san"] == ["localhost", "127.0.0.1"] and leaf["serial"] == "1234", leaf
        assert verification["code"] == code, verification
        if not edit.startswith("utctime"):
            assert verification["ok"] is True, verification
            return   # read through a copy whose time is never current: 13, shown as sent
        assert verification["message"].startswith(
            f"{code} (format error in certificate's notBefore field)"), verification
        assert re.fullmatch(r"\(format error: \d{10}Z\)", leaf["not_before"]), leaf
        assert leaf["not_after"].startswith("20"), leaf
        return
    assert verification["code"] is None and verification["ok"] is False, verification
    assert verification["message"].startswith("not established: the leaf cannot be "
                                              "parsed by cryptography"), verification
    assert leaf["subject"].startswith("(unparsable certificate") and \
        leaf["issuer"].startswith("(not read") and leaf["san"][0].startswith("(not read"), leaf


@pytest.mark.needs_impl("openssl")
def test_the_text_view_says_what_was_not_read(tls_server: Callable[..., Any],
                                              run_cli: Callable[..., Any],
                                              tmp_path: Path) -> None:
    srv, ca = _serve(tls_server, tmp_path, "algorithm-parameters")
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", ca,
                  "--timeout", "10")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    out = res.stdout
    assert re.search(r"^Verification +not established: the leaf cannot be parsed", out, re.MULTILINE), out
    assert re.search(r"^Handshake +complete$", out, re.MULTILINE), out
    assert "  a: EC secp256r1 256 bits; (not read)" in out and "  v: (not read)" in out, out
    assert "no subjectAltName" not in out, out   # it has one: it was not read
    full = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", ca, "--full",
                   "--timeout", "10").stdout
    assert "  serial (not read)" in full, full


@pytest.mark.needs_impl("openssl")
def test_scan_says_the_trust_verdict_is_not_established(tls_server: Callable[..., Any],
                                                       run_cli: Callable[..., Any],
                                                       tmp_path: Path) -> None:
    srv, ca = _serve(tls_server, tmp_path, "algorithm-parameters")
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", ca,
                  "--json", "--no-progress", "--no-policy", "--timeout", "10", timeout=180)
    assert res.stderr == "", res.stderr
    data = json.loads(res.stdout)
    assert data["error"] is None, data["error"]
    assert data["trust"]["status"] == "not_checked" and data["trust"]["code"] is None, \
        data["trust"]
    codes = {f["code"]: f for f in data["findings"]}
    assert codes["certificate.not_verified"].get("inconclusive") is True, codes
    assert "certificate.untrusted" not in codes and "certificate.no_san" not in codes, codes
    # every answer is had (they were all inconclusive: each handshake failed on the leaf)
    assert "audit.inconclusive" not in codes, codes["audit.inconclusive"]
    assert data["certificates"][0]["key_type"] == "EC secp256r1", data["certificates"]
    verdicts = {c["name"]: c["verdict"] for c in data["check_results"]}
    assert verdicts["heartbleed"] == "not vulnerable" and verdicts["resumption"] == \
        "supported", verdicts


def _captured_leaf(tls_server: Callable[..., Any], run_cli: Callable[..., Any],
                   tmp_path: Path, edit: str) -> tuple[dict[str, Any], Path]:
    """The leaf `pcap --json` reads from a TLS 1.2 probe's --pcap-out of the server serving
    the `edit`ed leaf, and the capture."""
    srv, ca = _serve(tls_server, tmp_path, edit)
    pcap = tmp_path / f"{edit}.pcap"
    res = run_cli(f"127.0.0.1:{srv.port}", "--tls1_2", "--sni", "localhost", "--cafile", ca,
                  "--pcap-out", pcap, "--timeout", "10")
    assert pcap.is_file(), res.stderr
    res = run_cli("pcap", pcap, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    leaf: dict[str, Any] = data.get("connections", [data])[0]["certificates"][0]
    return leaf, pcap


@pytest.mark.needs_impl("openssl")
def test_a_capture_of_the_handshake_shows_the_key(tls_server: Callable[..., Any],
                                                  run_cli: Callable[..., Any],
                                                  tmp_path: Path) -> None:
    leaf = _captured_leaf(tls_server, run_cli, tmp_path, "algorithm-parameters")[0]
    assert leaf["key_type"] == "EC secp256r1" and leaf["issuer"].startswith("(not read"), leaf


@pytest.mark.needs_impl("openssl")
def test_a_root_in_ber_lengths_in_the_trust_store(tls_server: Callable[..., Any],
                                                 run_cli: Callable[..., Any],
                                                 tmp_path: Path) -> None:
    chain = issued()
    _, leaf, key = write(chain, chain.leaf_der, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key)])
    root = pem(mangled(chain, "serial-long-length", ca=True))
    bundle, alone = tmp_path / "bundle.pem", tmp_path / "alone.pem"
    bundle.write_bytes(pem(issued(ca_name="Another CA").ca_der) + root)
    alone.write_bytes(root)
    assert _s_client(srv.port, bundle, "-tls1_3", None) == 0   # OpenSSL reads the root
    assert _s_client(srv.port, alone, "-tls1_3", None) == 0
    for store in (bundle, alone):
        res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store,
                      "--json", "--timeout", "10")
        assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
        verification = json.loads(res.stdout)["verification"]
        assert verification["code"] == 0 and verification["message"] == "0 (ok)", verification


@pytest.mark.needs_impl("openssl")
def test_a_v2_root_in_the_trust_store(tls_server: Callable[..., Any],
                                      run_cli: Callable[..., Any], tmp_path: Path) -> None:
    chain = issued()
    _, leaf, key = write(chain, chain.leaf_der, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key)])
    store = tmp_path / "v2.pem"
    store.write_bytes(pem(mangled(chain, "version-v2", ca=True)))
    assert _s_client(srv.port, store, "-tls1_3", None) == 0   # OpenSSL reads the root
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store,
                  "--json", "--timeout", "10")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    verification = json.loads(res.stdout)["verification"]
    assert verification["code"] == 0 and verification["message"] == "0 (ok)", verification


def _generalized_not_before(chain: Issued) -> bytes:
    """The leaf with its notBefore as a GeneralizedTime (RFC 5280 4.1.2.5 asks a UTCTime
    before 2050), signed again by the CA."""
    tbs, algorithm, _ = children(chain.leaf_der)
    fields = children(tbs)
    not_before, not_after = children(fields[4])
    fields[4] = tlv(0x30, tlv(0x18, b"20" + contents(not_before)) + not_after)
    new_tbs = tlv(0x30, b"".join(fields))
    signature = chain.ca_key.sign(new_tbs, ec.ECDSA(hashes.SHA256()))
    return tlv(0x30, new_tbs + algorithm + tlv(0x03, b"\x00" + signature))


@pytest.mark.needs_impl("openssl")
def test_a_generalized_time_before_2050_gets_openssls_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """cryptography reads the leaf but its verifier refuses a GeneralizedTime before 2050;
    OpenSSL reads it (0): the verdict was 'not established' (the library's refusal), it is
    now OpenSSL's, the link checked here (its key and signature of kinds every verifier
    accepts)."""
    chain = issued()
    ca, leaf, key = write(chain, _generalized_not_before(chain), tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key)])
    assert _s_client(srv.port, ca, "-tls1_3", None) == 0   # the real tool first
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", ca, "--json",
                  "--timeout", "10")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    verification = json.loads(res.stdout)["verification"]
    assert verification["code"] == 0 and verification["message"] == "0 (ok)", verification


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("edit", ["utctime-without-seconds", "subject-printablestring-at"])
def test_a_capture_shows_the_fields_the_trust_verdict_read(tls_server: Callable[..., Any],
                                                          run_cli: Callable[..., Any],
                                                          tmp_path: Path, edit: str) -> None:
    """`tlsprobe pcap` summarises the leaf as the probe does: its fields, a time OpenSSL
    cannot compare as sent (it showed "(unparsable certificate: ...)")."""
    leaf, pcap = _captured_leaf(tls_server, run_cli, tmp_path, edit)
    assert leaf["issuer"] == "CN=BER Test CA" and leaf["serial"] == "1234", leaf
    assert leaf["subject"] == ("CN=local@host" if "printable" in edit else "CN=localhost"), leaf
    assert leaf["not_before"].startswith("(format error: " if "utctime" in edit else "20"), leaf
    text = run_cli("pcap", pcap).stdout
    assert "unparsable" not in text, text


@pytest.mark.needs_impl("openssl")
def test_scan_html_shows_a_time_openssl_cannot_compare_whole(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """The chain table cut each time to the minute: "(format error: 2" for a notBefore
    OpenSSL cannot compare (13). It shows that one whole."""
    srv, ca = _serve(tls_server, tmp_path, "utctime-without-seconds")
    html = tmp_path / "scan.html"
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", ca,
                  "--checks", "chain", "--no-progress", "--no-policy", "--html", html)
    assert res.stderr == "" and html.is_file(), (res.returncode, res.stderr)
    page = html.read_text()
    assert re.search(r"<td>\(format error: \d{10}Z\)</td>", page), page
