"""The key exchange of each accepted suite and the weak marks of the suites table (issue 32,
section 3 "Suites"), against real openssl s_server and pyOpenSSL servers on loopback whose
key exchange is known from their configuration: DHE with a 1024-bit (RFC 5114) prime and
with an odd-sized 1025-bit prime, ECDHE over x25519 and over secp384r1 only, static RSA with
a 2048-bit and a 1024-bit key, TLS 1.3 over X25519MLKEM768 only (reached through a
HelloRetryRequest). Each suite's row must say exactly what its connection established, in
JSON, the text table, CSV and HTML, and mark weak exactly the weak rows."""
from __future__ import annotations

import base64
import csv
import datetime
import json
import random
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.helpers.servers import (CertSet, Server, missing_reason, peer_unavailable,
                                   start_server)
from tests.lab_servers.certs import CertFiles, _der_integer, _der_length

ECDHE, DHE, RSA = ("ECDHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES128-GCM-SHA256",
                   "AES128-GCM-SHA256")
ADH = "ADH-AES128-GCM-SHA256"   # anonymous DH: weak by itself as well


def _openssl(**options: Any) -> Server:
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    return start_server("openssl", **options)


def _scan(run_cli: Any, server: Server, tmp_path: Path) -> tuple[dict[str, Any], str,
                                                                    list[dict[str, str]], str]:
    """JSON, text, CSV rows and HTML of one `scan --checks suites` of `server`."""
    target = f"127.0.0.1:{server.port}"
    code, out, err = run_cli("scan", target, "--checks", "suites", "--json", "--no-progress",
                             "--csv", str(tmp_path / "s.csv"), "--html",
                             str(tmp_path / "s.html"))
    assert code == 0, err
    code, text, err = run_cli("scan", target, "--checks", "suites", "--no-progress")
    assert code == 0, err
    with (tmp_path / "s.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return json.loads(out), text, rows, (tmp_path / "s.html").read_text("utf-8")


def _rows(report: dict[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """The suite rows of one version by OpenSSL name."""
    (audit,) = [s for s in report["suites"] if s["version"]["name"] == version]
    assert [r["suite"]["id"] for r in audit["rows"]] == [c["id"] for c in audit["supported"]]
    return {r["suite"]["openssl_name"]: r for r in audit["rows"]}


def _kx(row: dict[str, Any]) -> tuple[str, int | None, str, bool]:
    return row["kx_kind"], row["kx_bits"], row["kx_label"], row["weak"]


def _section(text: str, version: str) -> str:
    start = text.index(f"Cipher suites, {version} (")
    end = text.find("\n\n", start)
    return text[start:end]


def _table_line(section: str, openssl_name: str) -> str:
    (line,) = [ln for ln in section.splitlines() if f" {openssl_name} " in f" {ln} "]
    return line


def test_dhe_1024_ecdhe_x25519_and_rsa_2048_as_testssl_shows_them(
        run_cli: Any, tmp_path: Path) -> None:
    """openssl s_server with the RFC 5114 1024-bit prime, x25519 only and a 2048-bit RSA
    key: ECDHE suites are ECDH 253 (TLS 1.2 and 1.3), the DHE suite DH 1024 and weak for it,
    the anonymous DH suite DH 1024 and weak for both reasons, static RSA RSA 2048; the weak
    rows, and only they, are marked in the text table ("!", a "weak:" line), CSV and HTML."""
    server = _openssl(groups="X25519", ciphers=f"{ECDHE}:{DHE}:{RSA}:{ADH}:@SECLEVEL=0",
                      ciphersuites="TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384",
                      dhparam="rfc5114_1024_160", workdir=tmp_path / "srv")
    try:
        report, text, csv_rows, page = _scan(run_cli, server, tmp_path)
    finally:
        server.stop()
    t12, t13 = _rows(report, "TLS 1.2"), _rows(report, "TLS 1.3")
    assert {name: _kx(r) for name, r in t13.items()} == {
        "TLS_AES_128_GCM_SHA256": ("ECDHE", 253, "ECDH 253", False),
        "TLS_AES_256_GCM_SHA384": ("ECDHE", 253, "ECDH 253", False)}
    assert {name: _kx(r) for name, r in t12.items()} == {
        ECDHE: ("ECDHE", 253, "ECDH 253", False), DHE: ("DHE", 1024, "DH 1024", True),
        RSA: ("RSA", 2048, "RSA 2048", False), ADH: ("DHE", 1024, "DH 1024", True)}
    assert t12[DHE]["weak_reasons"] == ["DH 1024: under 2048 bits"]
    assert t12[ADH]["weak_reasons"] == ["anon", "DH 1024: under 2048 bits"]
    assert t12[DHE]["kx_strength"] == "weak" and t12[RSA]["kx_strength"] == "ok"
    assert t12[ECDHE]["kx_group"]["name"] == "x25519"
    assert t12[ECDHE]["kx_source"] == "server_key_exchange"
    assert t12[RSA]["kx_source"] == "certificate"
    assert t13["TLS_AES_128_GCM_SHA256"]["kx_source"] == "key_share"
    # the text table: a Kx column, "!" on the weak rows only, the reasons under the table
    s12 = _section(text, "TLS 1.2")
    for name, row in t12.items():
        line = _table_line(s12, name)
        assert line.rstrip().endswith(row["kx_label"]), line
        assert line.split()[0].endswith("!") == row["weak"], line
    assert "Kx" in s12.splitlines()[1]
    weak_line = next(ln for ln in s12.splitlines() if ln.startswith("weak: "))
    assert "DH 1024: under 2048 bits" in weak_line and "anon" in weak_line
    assert "!" not in _section(text, "TLS 1.3") and "weak:" not in _section(text, "TLS 1.3")
    # CSV: the kx and weak cells of each suite row
    got = {(r["version"], r["detail"]): (r["kx"], r["weak"]) for r in csv_rows
           if r["section"] == "suite"}
    assert got[("TLS 1.2", DHE)] == ("DH 1024", "DH 1024: under 2048 bits")
    assert got[("TLS 1.2", RSA)] == ("RSA 2048", "")
    assert got[("TLS 1.3", "TLS_AES_128_GCM_SHA256")] == ("ECDH 253", "")
    # HTML: the weak rows carry the class, the others not
    assert page.count('<tr class="weak">') == 2
    assert f'<tr class="weak"><td>' in page and "DH 1024: under 2048 bits" in page


def _rsa1024_certs(directory: Path) -> CertSet:
    """A self-signed 1024-bit RSA leaf as the "rsa" identity."""
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=2))
            .sign(key, hashes.SHA256()))
    files = CertFiles(directory / "rsa1024.crt", directory / "rsa1024.key",
                      directory / "rsa1024.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return CertSet(directory, files.cert, {"rsa": files})


def test_ecdhe_secp384r1_and_a_1024_bit_rsa_key(run_cli: Any, tmp_path: Path) -> None:
    """secp384r1 only and a 1024-bit RSA key: ECDH 384 in TLS 1.2 (ServerKeyExchange) and
    in TLS 1.3 (the HelloRetryRequest the x25519/P-256 shares get), RSA 1024 weak; the
    ECDHE rows are not weak (their RSA signature is no key exchange)."""
    server = _openssl(groups="P-384", ciphers=f"{ECDHE}:{RSA}:@SECLEVEL=0",
                      certs=_rsa1024_certs(tmp_path / "certs"), workdir=tmp_path / "srv")
    try:
        report, text, _, _ = _scan(run_cli, server, tmp_path)
    finally:
        server.stop()
    t12, t13 = _rows(report, "TLS 1.2"), _rows(report, "TLS 1.3")
    assert {name: _kx(r) for name, r in t12.items()} == {
        ECDHE: ("ECDHE", 384, "ECDH 384", False), RSA: ("RSA", 1024, "RSA 1024", True)}
    assert t12[RSA]["weak_reasons"] == ["RSA 1024: under 2048 bits"]
    assert t13 and all(_kx(r) == ("ECDHE", 384, "ECDH 384", False) for r in t13.values())
    assert {r["kx_source"] for r in t13.values()} == {"hello_retry_request"}
    s12 = _section(text, "TLS 1.2")
    assert _table_line(s12, RSA).split()[0].endswith("!")
    assert not _table_line(s12, ECDHE).split()[0].endswith("!")
    assert "weak: " in s12 and "RSA 1024: under 2048 bits" in s12


def _odd_prime(bits: int, seed: int) -> int:
    """A prime of exactly `bits` bits (Miller-Rabin, 32 rounds; not a safe prime)."""
    rng = random.Random(seed)

    def probable(n: int) -> bool:
        if any(n % p == 0 for p in (3, 5, 7, 11, 13, 17, 19, 23, 29, 31)):
            return False
        d, r = n - 1, 0
        while d % 2 == 0:
            d, r = d // 2, r + 1
        for _ in range(32):
            x = pow(rng.randrange(2, n - 2), d, n)
            if x in (1, n - 1):
                continue
            for _ in range(r - 1):
                x = pow(x, 2, n)
                if x == n - 1:
                    break
            else:
                return False
        return True
    while True:
        n = rng.getrandbits(bits) | (1 << (bits - 1)) | 1
        if probable(n):
            return n


def _dhparam(path: Path, p: int, g: int = 2) -> Path:
    body = _der_integer(p) + _der_integer(g)
    der = b"\x30" + _der_length(len(body)) + body
    b64 = base64.encodebytes(der).decode()
    path.write_text("-----BEGIN DH PARAMETERS-----\n" + b64 + "-----END DH PARAMETERS-----\n")
    return path


def test_an_odd_sized_dh_prime_is_shown_as_it_is(run_cli: Any, tmp_path: Path) -> None:
    """A hostile-ish server: DHE with a 1025-bit prime (no standard size, not a safe prime;
    OpenSSL refuses to load one under 1024 bits) is "DH 1025" and weak, never rounded to a
    standard size or named as a known group."""
    p = _odd_prime(1025, seed=32)
    assert p.bit_length() == 1025
    server = _openssl(ciphers=f"{DHE}:@SECLEVEL=0", proto="tls1_2",
                      dhparam=_dhparam(tmp_path / "dh1025.pem", p), workdir=tmp_path / "srv")
    try:
        report, text, _, _ = _scan(run_cli, server, tmp_path)
    finally:
        server.stop()
    row = _rows(report, "TLS 1.2")[DHE]
    assert _kx(row) == ("DHE", 1025, "DH 1025", True)
    assert row["kx_strength"] == "weak"
    assert row["weak_reasons"] == ["DH 1025: under 2048 bits"]
    assert row["kx_group"] is None
    assert _table_line(_section(text, "TLS 1.2"), DHE).rstrip().endswith("DH 1025")


@pytest.mark.needs_impl("pyopenssl")
def test_tls13_post_quantum_hybrid_is_named(server_cache: Any) -> None:
    """TLS 1.3 with X25519MLKEM768 alone (pyOpenSSL on OpenSSL 3.5): the suites' hellos
    carry x25519 and P-256 shares, so the server asks for its group with a
    HelloRetryRequest; each TLS 1.3 row names that hybrid (kind hybrid, no size: named, not
    sized) and is not weak."""
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.audit.run import AuditOptions, run_audit
    from tlsprobe.probes.audit.scheduler import Scheduler
    srv = server_cache("pyopenssl", groups="X25519MLKEM768")
    (report,) = run_audit([Target(srv.host, srv.port)], AuditOptions(checks=("suites",)),
                          Scheduler(timeout=5.0))
    audit = report.suite_audit(0x0304)
    assert audit is not None and audit.rows
    for row in audit.rows:
        assert (row.kx_kind, row.kx_bits, row.kx_label, row.weak) == \
            ("hybrid", None, "X25519MLKEM768", False), row
        assert row.kx_group is not None and row.kx_group.id == 0x11EC
        assert row.kx_source == "hello_retry_request" and row.kx_strength == "ok"
