"""Certificate checks (cert_lifetime, sct, key_usage, must_staple) against openssl s_server
serving leaves generated here with `cryptography`, signed by the test CA:

- a good leaf: 90 days, keyUsage digitalSignature only (the server does ECDHE_RSA and
  TLS 1.3 only, so that is right), OCSP must-staple with a stapled response (-status_file,
  an OCSP response generated here), one SCT embedded (a structurally valid SCT list);
- a bad leaf: 500 days, keyUsage digitalSignature only while the server also accepts RSA key
  exchange (which needs keyEncipherment), must-staple with nothing stapled, no SCT.
"""
from __future__ import annotations

import datetime
import ipaddress
import re
import struct
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.lab_servers.certs import CertFiles, CertSet
from tests.helpers.servers import start_server
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.checks.cert_lifetime import lifetime_verdict
from tlsprobe.probes.checks.key_usage import ENCIPHER, SIGN, needed_use
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks

NOW = datetime.datetime.now(datetime.timezone.utc) - timedelta(hours=1)
SCT_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def sct_list() -> bytes:
    """A SignedCertificateTimestampList (RFC 6962 3.3) holding one v1 SCT, as the DER
    OCTET STRING the extension's value is."""
    sct = (b"\x00" + bytes(range(32)) + struct.pack(">Q", int(NOW.timestamp() * 1000)) +
           b"\x00\x00" + b"\x04\x03" + struct.pack(">H", 8) + b"\x30\x06\x02\x01\x01\x02\x01\x01")
    body = struct.pack(">H", len(sct)) + sct
    data = struct.pack(">H", len(body)) + body
    return b"\x04" + bytes([len(data)]) + data


def make_leaf(certs: CertSet, out: Path, name: str, days: int, *, must_staple: bool,
              sct: bool | bytes) -> tuple[CertFiles, x509.Certificate]:
    """A leaf of the test CA; `sct`: one SCT embedded (True), none (False), or the bytes
    of the SCT list extension's value."""
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
         .issuer_name(ca.subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(NOW).not_valid_after(NOW + timedelta(days=days))
         .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False,
                                      False), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
         .add_extension(x509.SubjectAlternativeName(
             [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
             False))
    if must_staple:
        b = b.add_extension(x509.TLSFeature([x509.TLSFeatureType.status_request]), False)
    if sct:
        b = b.add_extension(x509.UnrecognizedExtension(
            SCT_OID, sct if isinstance(sct, bytes) else sct_list()), False)
    cert = b.sign(ca_key, hashes.SHA256())   # type: ignore[arg-type]
    files = CertFiles(out / f"{name}.crt", out / f"{name}.key", out / f"{name}_chain.crt")
    pem = cert.public_bytes(serialization.Encoding.PEM)
    files.cert.write_bytes(pem)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.chain.write_bytes(pem + certs.ca.read_bytes())
    return files, cert


def ocsp_response(certs: CertSet, leaf: x509.Certificate) -> bytes:
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    resp = (ocsp.OCSPResponseBuilder()
            .add_response(leaf, ca, hashes.SHA1(), ocsp.OCSPCertStatus.GOOD, NOW,
                          NOW + timedelta(days=7), None, None)
            .responder_id(ocsp.OCSPResponderEncoding.HASH, ca)
            .sign(ca_key, hashes.SHA256()))   # type: ignore[arg-type]
    return resp.public_bytes(serialization.Encoding.DER)


def audit(port: int) -> dict[str, CheckResult]:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks("certs")),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    got = {c.name: c for c in r.check_results}
    assert list(got) == ["cert_lifetime", "sct", "key_usage", "must_staple", "chain",
                         "sni_chain", "ocsp_response", "client_auth"]
    assert all(c.category == "certificate" for c in got.values())
    mine = sum(n for phase, n in r.connections.items() if phase.startswith("check "))
    assert mine == sum(c.connections for c in got.values())
    return got


@pytest.fixture(scope="module")
def leaf_servers(certs: CertSet, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[int, int]]:
    out = tmp_path_factory.mktemp("leaves")
    good, good_cert = make_leaf(certs, out, "good", 90, must_staple=True, sct=True)
    bad, _ = make_leaf(certs, out, "bad", 500, must_staple=True, sct=False)
    (out / "good.ocsp").write_bytes(ocsp_response(certs, good_cert))
    mine = CertSet(certs.directory, certs.ca, {"good": good, "bad": bad})
    with start_server("openssl", proto="both", cert="good", certs=mine,
                      ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                      extra=["-status_file", str(out / "good.ocsp")]) as g, \
            start_server("openssl", proto="tls1_2", cert="bad", certs=mine, serverpref=True,
                         ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA") as b:
        yield g.port, b.port


@pytest.mark.needs_impl("openssl")
def test_good_leaf_passes_every_certificate_check(leaf_servers: tuple[int, int]) -> None:
    got = audit(leaf_servers[0])
    assert got["cert_lifetime"].verdict is Verdict.not_vulnerable, got["cert_lifetime"]
    assert "valid for 90 days 1 s (notBefore to notAfter inclusive)" in \
        got["cert_lifetime"].reason
    assert got["sct"].verdict is Verdict.supported and "1 SCT embedded in the leaf" in \
        got["sct"].reason
    ku = got["key_usage"]
    assert ku.verdict is Verdict.not_vulnerable and ku.code is None, ku
    assert "a TLS 1.2 hello offering only suites that need keyEncipherment: refused" in \
        ku.evidence
    assert got["must_staple"].verdict is Verdict.not_vulnerable, got["must_staple"]
    assert "stapling: stapled" in got["must_staple"].evidence
    # one connection for the chain, one for the RSA key exchange question, refused, and one
    # asking the TLS 1.2 hello again: the refusal is a fact while the server answers
    assert got["cert_lifetime"].connections + got["key_usage"].connections == 3


def rsa_kx_only(hello) -> bool:
    """key_usage's hello: TLS 1.2, only suites of RSA key transport (keyEncipherment)."""
    from tlsprobe import registry
    kx = {s.kx for c in hello.cipher_suites if (s := registry.cipher_suite(c)) is not None}
    return "RSA" in kx and kx - {"SCSV"} <= {"RSA", "RSA_PSK"}


@pytest.mark.needs_impl("openssl")
def test_key_usage_refused_by_a_limiter_is_not_a_fact(leaf_servers: tuple[int, int]) -> None:
    """The good leaf (digitalSignature only) on a server that refuses RSA key transport;
    a limiter starts at key_usage's RSA key transport hello: its refusal was read as "the
    server does not use the key for keyEncipherment" (not vulnerable). Now the hello that
    established TLS 1.2 is asked again right after; refused too, inconclusive."""
    from tests.helpers.faultproxy import ALERT, FaultProxy
    started = [False]

    def fault(_index: int, hello: object) -> str | None:
        started[0] = started[0] or (hello is not None and rsa_kx_only(hello))
        return ALERT if started[0] else None
    proxy = FaultProxy([("127.0.0.1", leaf_servers[0])], fault)
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=parse_checks("key_usage")),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    assert proxy.faults(), "the limiter never started"
    (ku,) = r.check_results
    assert ku.verdict is Verdict.inconclusive and "rate limiting" in ku.reason, ku


@pytest.mark.needs_impl("openssl")
def test_bad_leaf_fails_every_certificate_check(leaf_servers: tuple[int, int]) -> None:
    got = audit(leaf_servers[1])
    life = got["cert_lifetime"]
    assert life.verdict is Verdict.vulnerable and life.severity == "medium", life
    assert "valid for 500 days 1 s (notBefore to notAfter inclusive): over the 398 days" in \
        life.reason
    assert got["sct"].verdict is Verdict.not_supported and got["sct"].code == "check.sct"
    ku = got["key_usage"]
    assert ku.verdict is Verdict.vulnerable and ku.code == "check.key_usage", ku
    assert "negotiated: TLS 1.2 TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (needs " \
        "digitalSignature)" in ku.evidence
    assert "answers a TLS 1.2 hello offering only suites that need keyEncipherment" in ku.reason
    ms = got["must_staple"]
    assert ms.verdict is Verdict.vulnerable and ms.severity == "high", ms
    assert "on two connections" in ms.reason and ms.connections == 1


@pytest.mark.needs_impl("openssl")
def test_empty_sct_lists_hold_no_sct(certs: CertSet, tmp_path: Path) -> None:
    """An SCT list extension in the leaf that lists none, and a signed_certificate_timestamp
    TLS extension that is empty (openssl s_server -serverinfo): no SCT, not 'supported'."""
    empty, _ = make_leaf(certs, tmp_path, "empty", 90, must_staple=False,
                         sct=b"\x04\x02\x00\x00")
    info = tmp_path / "sct.pem"   # ServerHello extension 18 with no data (RFC 6962 3.3)
    info.write_text("-----BEGIN SERVERINFO FOR CT-----\nABIAAA==\n"
                    "-----END SERVERINFO FOR CT-----\n")
    mine = CertSet(certs.directory, certs.ca, {"empty": empty})
    with start_server("openssl", proto="tls1_2", cert="empty", certs=mine,
                      extra=["-serverinfo", str(info)]) as server:
        got = audit(server.port)
    sct = got["sct"]
    assert sct.verdict is Verdict.not_supported and sct.code == "check.sct", sct
    assert sct.reason.startswith("no SCT: none embedded in the leaf, none in the TLS "
                                 "extension"), sct.reason


def test_lifetime_thresholds_count_the_validity_period_inclusively() -> None:
    second = timedelta(seconds=1)
    assert lifetime_verdict(timedelta(days=90))[0] is Verdict.not_vulnerable
    assert lifetime_verdict(timedelta(days=366))[0] is Verdict.not_vulnerable
    assert lifetime_verdict(timedelta(days=366) + second)[1] == "low"
    assert lifetime_verdict(timedelta(days=398))[1] == "low"
    assert lifetime_verdict(timedelta(days=398) + second)[1] == "medium"


def test_lifetime_reason_is_written_as_people_write_durations() -> None:
    """An ACME-style leaf (notAfter = notBefore + 31 days - 1 s) is valid for 31 days
    inclusive: said so, not "30.99998843 days"; a second past a limit is said, not rounded
    away (the verdict counts it)."""
    second = timedelta(seconds=1)
    assert "the leaf is valid for 31 days (notBefore to notAfter inclusive):" in \
        lifetime_verdict(timedelta(days=31))[2]
    assert "valid for 398 days 1 s (notBefore" in lifetime_verdict(timedelta(days=398) +
                                                                   second)[2]
    for days in (1, 7, 90, 366, 398, 825):
        for period in (timedelta(days=days), timedelta(days=days) + second):
            assert not re.search(r"\d\.\d+ days", lifetime_verdict(period)[2]), period


def test_key_usage_needed_per_key_exchange() -> None:
    assert needed_use(0x002F, 0x0303) == ENCIPHER     # TLS_RSA_WITH_AES_128_CBC_SHA
    assert needed_use(0xC02F, 0x0303) == SIGN         # ECDHE_RSA
    assert needed_use(0x009E, 0x0303) == SIGN         # DHE_RSA
    assert needed_use(0x1301, 0x0304) == SIGN         # TLS 1.3
    assert needed_use(0xC018, 0x0303) is None         # ECDH_anon: no certificate key
