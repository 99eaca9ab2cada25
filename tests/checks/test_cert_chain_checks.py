"""The certificate checks of issue 32 against real loopback servers serving a test PKI
(tests/checks/pki.py: root -> A -> B -> leaf, built here with `cryptography`), each on both
sides: chain (order and completeness: openssl s_server -cert_chain in each order, nginx
with the leaf alone), sni_chain (openssl s_server -servername/-cert2), ocsp_response
(responses built with OCSPResponseBuilder, stapled with -status_file), client_auth
(s_server -verify / -Verify with -CAfile, and none); and the certificate facts the cert
phase shows (serial, fingerprints, extended key usage, CRL/OCSP/CA-issuer URIs)."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.checks.conftest import ScriptServer
from tests.checks.pki import Pki, make_pki
from tests.helpers.bercert import RESIGNED, Issued, mangled
from tests.helpers.servers import CertSet, Server, start_server
from tests.lab_servers.certs import CertFiles
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_details import (
    ChainDetails,
    ClientAuthDetails,
    OcspResponseDetails,
    SniChainDetails,
)
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.probes.checks.chain import MAX_PATH, chain_facts
from tlsprobe.probes.checks.ocsp_response import judge_response


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def audit(port: int, checks: str, pki: Pki, host: str = "127.0.0.1",
          server_name: str | None = None, anchor: str = "root") -> AuditReport:
    options = AuditOptions(checks=parse_checks(checks), cafile=str(pki.path(anchor)),
                           server_name=server_name)
    r = run_audit([Target(host, port)], options, Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    return r


def result(r: AuditReport, name: str) -> CheckResult:
    got = {c.name: c for c in r.check_results}
    return got[name]


def serve(pki: Pki, *rest: str, impl: str = "openssl", extra: list[str] | None = None,
          leaf: str = "leaf", proto: str = "both") -> Server:
    return start_server(impl, cert="ecdsa", certs=pki.cert_set(leaf, *rest), extra=extra,
                        proto=proto)


# -- chain ------------------------------------------------------------------------------

CHAINS = {   # what the server sends after its leaf -> (verdict, severity, words in the reason)
    "full": (("b", "a"), Verdict.not_vulnerable, None, "complete and in order: 3"),
    "anchor": (("b", "a", "root"), Verdict.not_vulnerable, "info",
               "also sends the root CN=Test Root"),
    "order": (("a", "b"), Verdict.vulnerable, "low", ("out of order: the path from the leaf "
              "is certificates 0, 2, 1")),
    "extra": (("b", "stray", "a"), Verdict.vulnerable, "low",
              "extra certificates not on the path: 2 CN=Stray Self-Signed"),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("case", list(CHAINS))
def test_chain_order_and_completeness(pki: Pki, case: str) -> None:
    rest, verdict, severity, words = CHAINS[case]
    with serve(pki, *rest) as server:
        r = audit(server.port, "chain", pki)
    c = result(r, "chain")
    assert c.verdict is verdict and c.severity == severity, c
    assert words in c.reason, c.reason
    assert isinstance(c.details, ChainDetails) and c.details.complete is True
    assert c.details.ordered is (case != "order")
    assert c.details.extra == ((2,) if case == "extra" else ())


@pytest.mark.needs_impl("openssl")
def test_root_sent_that_the_trust_store_lacks_is_no_clients_copy(pki: Pki) -> None:
    """The server sends its root, which the trust store does not hold: complete, info,
    without saying that clients use their own copy of it (they have none)."""
    with serve(pki, "b", "a", "root") as server:
        r = audit(server.port, "chain", pki, anchor="stray")
    c = result(r, "chain")
    assert c.verdict is Verdict.not_vulnerable and c.severity == "info", c
    assert "own copy" not in c.reason and "CN=Test Root (it is not in the trust store: " in \
        c.reason, c.reason


@pytest.mark.needs_impl("nginx")
def test_chain_missing_intermediate_names_the_issuer(pki: Pki) -> None:
    """nginx with a full-chain file holding the leaf alone: B, its issuer, is missing
    (openssl s_server cannot be given an empty -cert_chain)."""
    with serve(pki, impl="nginx") as server:
        r = audit(server.port, "chain", pki)
    c = result(r, "chain")
    assert c.verdict is Verdict.vulnerable and c.severity == "medium", c
    assert "whose issuer CN=Test Intermediate B is neither sent nor in the trust store" in \
        c.reason
    assert isinstance(c.details, ChainDetails) and c.details.complete is False
    assert c.details.missing_issuer == "CN=Test Intermediate B"
    assert r.trust is not None and r.trust.status == "untrusted"


MISSING_B = ("the server sent no issuer of CN=localhost, and its issuer CN=Test Intermediate B "
             "is not in the trust store")
TRUST = {   # sent after the leaf, the trust store -> the trust verdict's code and detail
    # (20: the leaf's issuer is nowhere, the first problem `openssl s_client
    # -verify_return_error` reports on the same servers; without the flag it ends with 21)
    "stray": (("stray",), "root", 20, MISSING_B),
    "lapsed": (("lapsed",), "root", 20, MISSING_B),
    "root first": (("root", "b", "a"), "stray", 19,
                   "the server sent the root CN=Test Root, which is not in the trust store"),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("case", list(TRUST))
def test_trust_verdict_names_the_path_not_a_certificate_beside_it(pki: Pki, case: str) -> None:
    """The trust verdict's code and reason come from the path the leaf builds, as OpenSSL's
    do: an unrelated self-signed or expired certificate the server sends is not the reason,
    and the end of the path is not the last certificate sent."""
    rest, anchor, code, detail = TRUST[case]
    with serve(pki, *rest) as server:
        r = audit(server.port, "cert", pki, host="localhost", anchor=anchor)
    assert r.trust is not None and (r.trust.status, r.trust.code, r.trust.detail) == (
        "untrusted", code, detail), r.trust


@pytest.mark.needs_impl("openssl")
def test_lifetime_of_a_leaf_never_valid(pki: Pki) -> None:
    """notAfter before notBefore: no lifetime "within" the limits, but never valid."""
    pki.openssl_leaf("inverted", "20270101000000Z", "20260101000000Z")
    with serve(pki, "b", "a", leaf="inverted") as server:
        r = audit(server.port, "cert_lifetime", pki)
    c = result(r, "cert_lifetime")
    assert c.verdict is Verdict.not_applicable, c
    assert c.reason.startswith("the leaf is never valid: its notAfter comes before its "
                               "notBefore"), c.reason
    assert "notAfter 2026-01-01T00:00:00+00:00" in c.evidence


@pytest.mark.needs_impl("openssl")
def test_long_chain_within_the_path_limit_is_trusted(tmp_path: Path) -> None:
    """Twelve intermediates (OpenSSL's limit is 100, the chain check's path 16): trusted,
    not "chain construction exceeds max depth" (the verifier's own default, 8)."""
    long = Pki(tmp_path)
    long.issue("root", "Long Root", None, ca=True)
    for i in range(12):
        long.issue(f"c{i}", f"Long CA {i}", f"c{i - 1}" if i else "root", ca=True)
    long.issue("leaf", "localhost", "c11", ca=False, san="localhost",
               eku=[ExtendedKeyUsageOID.SERVER_AUTH])
    with serve(long, *(f"c{i}" for i in reversed(range(12)))) as server:
        r = audit(server.port, "cert,chain", long, host="localhost")
    assert r.trust is not None and (r.trust.code, r.trust.hostname_ok) == (0, True), r.trust
    assert result(r, "chain").verdict is Verdict.not_vulnerable


@pytest.mark.needs_impl("openssl")
def test_sha1_signed_leaf_is_named_as_openssl_names_it(pki: Pki) -> None:
    """A SHA-1 signature on the path: 68 (CA signature digest algorithm too weak), naming
    the certificate, as `openssl s_client` says; not the library's internal repr."""
    pki.openssl_leaf("sha1", "20250101000000Z", "20991231000000Z", md="sha1")
    with serve(pki, "b", "a", leaf="sha1", extra=["-cipher", "DEFAULT:@SECLEVEL=0"]) as server:
        r = audit(server.port, "cert", pki, host="localhost")
    weak = "CN=localhost is signed with SHA-1, which the verifier refuses"
    assert r.trust is not None and (r.trust.code, r.trust.reason, r.trust.detail) == (
        68, "CA signature digest algorithm too weak", weak), r.trust


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("odd", ["printable-at", "algorithm-parameters"])
def test_leaf_that_does_not_parse_is_not_said_unsent(pki: Pki, odd: str) -> None:
    """A leaf `cryptography` refuses to read, which OpenSSL serves and reads. Its
    PrintableString holds '@': read through its DER twin (wire/dertwin.py), the checks
    judge it (cert_lifetime was inconclusive). Its signature algorithm has parameters no
    twin reads: the certificate checks are inconclusive without saying the server did not
    send a certificate. The handshake completes (its outline is a certificate's, OpenSSL
    reads it: tests/probes/test_probe_ber_certificates.py), so the reason is the leaf's."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost"), x509.NameAttribute(
        NameOID.ORGANIZATION_NAME, "PRINTABLEX", _ASN1Type.PrintableString)])
    der = (x509.CertificateBuilder().subject_name(name).issuer_name(pki.certs["b"].subject)
           .public_key(key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(pki.certs["b"].not_valid_before_utc)
           .not_valid_after(pki.certs["b"].not_valid_after_utc)
           .sign(pki.keys["b"], hashes.SHA256()).public_bytes(Encoding.DER))
    if odd == "printable-at":
        der = mangled(Issued(pki.keys["b"], b"", key, der.replace(b"PRINTABLEX", b"PRINT@BLEX")),
                      RESIGNED)
    else:
        der = mangled(Issued(pki.keys["b"], b"", key, der), "algorithm-parameters")
    leaf, key_file = pki.directory / "odd.crt", pki.directory / "odd.key"
    leaf.write_text("-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(der).decode() +
                    "-----END CERTIFICATE-----\n")
    key_file.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                           NoEncryption()))
    rest = pki.chain_file("b", "a")
    files = CertSet(pki.directory, rest, {"ecdsa": CertFiles(leaf, key_file, leaf)})
    with start_server("openssl", cert="ecdsa", certs=files) as server:
        r = audit(server.port, "cert_lifetime", pki)
    c = result(r, "cert_lifetime")
    if odd == "printable-at":
        assert c.verdict is not Verdict.inconclusive, c
        return
    assert c.verdict is Verdict.inconclusive, c
    assert "did not send" not in c.reason and "the leaf certificate does not parse" in \
        c.reason and "signature_alg" in c.reason, c.reason


@pytest.mark.needs_impl("openssl")
def test_expired_root_in_the_trust_store_is_named(tmp_path: Path) -> None:
    """The trust store's root the path reaches has expired: 10, naming it, as OpenSSL says
    ("error 10 at 2 depth lookup"), not the library's "cert is not valid at validation
    time" under code 1."""
    old = Pki(tmp_path)
    old.issue("root", "Old Root", None, ca=True, expired=True)
    old.issue("a", "Old Intermediate", "root", ca=True)
    old.issue("leaf", "localhost", "a", ca=False, san="localhost",
              eku=[ExtendedKeyUsageOID.SERVER_AUTH])
    with serve(old, "a") as server:
        r = audit(server.port, "cert", old, host="localhost")
    assert r.trust is not None and r.trust.code == 10, r.trust
    assert r.trust.detail.startswith("CN=Old Root (in the trust store) expired "), r.trust


@pytest.mark.needs_impl("openssl")
def test_root_sent_first_is_no_sha1_signed_certificate(tmp_path: Path) -> None:
    """A root whose own signature is SHA-1 (as old roots still in use have), sent before
    its intermediate: its signature is never checked (it is trusted as is), so no
    certificate.sha1_signature finding, wherever it comes in the chain."""
    old = Pki(tmp_path)
    old.openssl_root("root", "Old SHA-1 Root", "sha1")
    old.issue("a", "Inter A", "root", ca=True)
    old.issue("leaf", "localhost", "a", ca=False, san="localhost",
              eku=[ExtendedKeyUsageOID.SERVER_AUTH])
    with serve(old, "root", "a", extra=["-cipher", "DEFAULT:@SECLEVEL=0"]) as server:
        r = audit(server.port, "cert", old, host="localhost")
    assert r.trust is not None and r.trust.code == 0, r.trust
    assert "certificate.sha1_signature" not in [f.code for f in r.findings], r.findings


# -- the certificate facts shown ------------------------------------------------------------

@pytest.mark.needs_impl("openssl")
def test_certificate_facts_in_json_text_and_html(pki: Pki, tmp_path: Path) -> None:
    import io

    from tlsprobe.report.audit_tables import render_audit
    from tlsprobe.report.html import render_html
    with serve(pki, "b", "a") as server:
        r = audit(server.port, "cert", pki)
    leaf = r.certificates[0]
    der = pki.certs["leaf"].public_bytes(Encoding.DER)
    assert leaf.sha256 == hashlib.sha256(der).hexdigest()
    assert leaf.sha1 == hashlib.sha1(der).hexdigest()
    assert leaf.serial == f"{pki.certs['leaf'].serial_number:x}"
    assert leaf.extended_key_usage == ("serverAuth",)
    assert leaf.crl_urls == ("http://crl.test/b.crl",)
    assert leaf.ocsp_urls == ("http://ocsp.test/",)
    assert leaf.ca_issuer_urls == ("http://ca.test/b.crt",)
    assert r.certificates[1].extended_key_usage == () and r.certificates[1].ocsp_urls == ()
    doc = r.to_dict()["certificates"][0]
    assert doc["sha1"] == leaf.sha1 and doc["ocsp_urls"] == ["http://ocsp.test/"]
    out = io.StringIO()
    render_audit(r, out)
    text = out.getvalue()
    fingerprint = ":".join(leaf.sha256[i:i + 2] for i in range(0, 64, 2)).upper()
    assert f"0 serial {leaf.serial}\n" in text
    assert f"  SHA-256 {fingerprint}\n" in text
    assert "  extended key usage: serverAuth\n  CRL: http://crl.test/b.crl\n" \
        "  OCSP: http://ocsp.test/\n  CA issuers: http://ca.test/b.crt\n" in text
    page = render_html([r], 0, "ok")
    assert "SHA-1 (to compare with browsers)" in page and "OCSP: http://ocsp.test/" in page


# -- sni_chain --------------------------------------------------------------------------

@pytest.mark.needs_impl("openssl")
def test_sni_chain_the_same_leaf_with_and_without_sni(pki: Pki) -> None:
    with serve(pki, "b", "a") as server:
        r = audit(server.port, "sni_chain", pki, server_name="localhost")
    c = result(r, "sni_chain")
    assert c.verdict is Verdict.not_vulnerable and c.severity is None, c
    assert c.reason == "the same chain with and without SNI (CN=localhost)"
    assert c.connections == 2


@pytest.mark.needs_impl("openssl")
def test_sni_chain_another_leaf_without_sni(pki: Pki) -> None:
    """s_server serves `other` by default and the leaf to SNI localhost (-cert2)."""
    extra = ["-servername", "localhost", "-cert2", str(pki.path("leaf")),
             "-key2", str(pki.directory / "leaf.key")]
    with serve(pki, "b", "a", leaf="other", extra=extra) as server:
        r = audit(server.port, "sni_chain", pki, server_name="localhost")
    c = result(r, "sni_chain")
    assert c.verdict is Verdict.not_vulnerable and c.severity == "info", c
    assert "without SNI the server sends another certificate: CN=default.test, where " \
        "localhost gets CN=localhost" in c.reason


@pytest.mark.needs_impl("openssl")
def test_sni_chain_not_applicable_without_a_name(pki: Pki) -> None:
    with serve(pki, "b", "a") as server:
        r = audit(server.port, "sni_chain", pki)
    assert result(r, "sni_chain").verdict is Verdict.not_applicable


# -- ocsp_response ------------------------------------------------------------------------

RESPONSES = {
    "good": (Verdict.not_vulnerable, None, "status good, signed by the issuer"),
    "delegated": (Verdict.not_vulnerable, None, "signed by the delegated responder"),
    "revoked": (Verdict.vulnerable, "critical", "the leaf is REVOKED since"),
    "expired": (Verdict.vulnerable, "high", "it expired: nextUpdate"),
    "serial": (Verdict.vulnerable, "high", "it is about serial"),
    "badsig": (Verdict.vulnerable, "high", ("signature of the issuer: the signature does "
               "not verify")),
    "noeku": (Verdict.vulnerable, "high", "lacks the OCSPSigning extended key usage"),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("kind", list(RESPONSES))
def test_ocsp_response_checked(pki: Pki, kind: str) -> None:
    verdict, severity, words = RESPONSES[kind]
    staple = pki.ocsp(kind)
    with serve(pki, "b", "a", extra=["-status_file", str(staple)]) as server:
        r = audit(server.port, "ocsp_response", pki)
    c = result(r, "ocsp_response")
    assert c.verdict is verdict and c.severity == severity, c
    assert words in c.reason, c.reason
    assert isinstance(c.details, OcspResponseDetails)
    assert c.details.cert_status == ("revoked" if kind == "revoked" else "good")


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("kind, rest", [("revoked-badsig", ("b", "a")),
                                        ("revoked", ("stray",))])
def test_ocsp_revocation_is_a_fact_only_from_a_verified_response(pki: Pki, kind: str,
                                                                  rest: tuple[str, ...]) -> None:
    """A stapled response saying "revoked" whose signature does not verify, or whose
    issuer cannot be found (the server sends no B, which is not in the trust store):
    what it says is not established, never "the leaf is REVOKED" (critical)."""
    staple = pki.ocsp(kind)
    with serve(pki, *rest, extra=["-status_file", str(staple)]) as server:
        r = audit(server.port, "ocsp_response", pki)
    c = result(r, "ocsp_response")
    assert "REVOKED" not in c.reason and c.severity != "critical", c
    assert "it says the leaf is revoked since" in c.reason and "not established" in c.reason, c
    assert c.verdict is (Verdict.vulnerable if "b" in rest else Verdict.inconclusive), c


@pytest.mark.needs_impl("openssl")
def test_ocsp_response_not_applicable_without_a_staple(pki: Pki) -> None:
    with serve(pki, "b", "a") as server:
        r = audit(server.port, "ocsp_response", pki)
    assert result(r, "ocsp_response").verdict is Verdict.not_applicable


# -- client_auth ----------------------------------------------------------------------------

AUTH = {   # s_server options -> (requested, required)
    "none": ([], False, False),
    "optional": (["-verify", "1"], True, False),
    "required": (["-Verify", "1"], True, True),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("proto", ["tls1_3", "tls1_2"])
@pytest.mark.parametrize("mode", list(AUTH))
def test_client_auth(pki: Pki, mode: str, proto: str) -> None:
    options, requested, required = AUTH[mode]
    extra = options + (["-CAfile", str(pki.path("a"))] if options else [])
    with serve(pki, "b", "a", extra=extra, proto=proto) as server:
        r = audit(server.port, "client_auth", pki)
    c = result(r, "client_auth")
    assert isinstance(c.details, ClientAuthDetails), c
    assert (c.details.requested, c.details.required) == (requested, required), c
    if not requested:
        assert c.verdict is Verdict.not_supported and c.severity is None
        return
    assert c.verdict is Verdict.supported
    assert c.severity == ("info" if required else None)
    assert c.details.ca_names == ("CN=Test Intermediate A",)
    assert "CA names: CN=Test Intermediate A" in c.evidence
    assert ("requires" if required else "optional") in c.reason
    assert "accepting CN=Test Intermediate A" in c.reason


@pytest.mark.needs_impl("openssl")
def test_client_auth_ca_names_are_shown_escaped(pki: Pki) -> None:
    """A CA whose name holds a terminal escape and a comma: RFC 4514 text in the details,
    the escape inert in the text report."""
    import io

    from tlsprobe.report.audit_tables import render_audit
    pki.issue("evil", "Evil\x1b[31m, CA", None, ca=True)
    with serve(pki, "b", "a", extra=["-verify", "1", "-CAfile", str(pki.path("evil"))]) \
            as server:
        r = audit(server.port, "client_auth", pki)
    c = result(r, "client_auth")
    assert isinstance(c.details, ClientAuthDetails)
    assert c.details.ca_names == ("CN=Evil\x1b[31m\\, CA",), c.details
    out = io.StringIO()
    render_audit(r, out, width=300)
    assert "\x1b" not in out.getvalue()
    assert "accepting CN=Evil\\x1b[31m\\, CA" in out.getvalue(), out.getvalue()



def test_sni_chain_refused_without_sni(script_server: ScriptServer, certs: CertSet) -> None:
    """A server that answers a hello without server_name with unrecognized_name: said so
    (info), the versions hello with SNI answered as usual."""
    port = script_server("sni_required_server.py")
    options = AuditOptions(checks=parse_checks("sni_chain"), cafile=str(certs.ca),
                           server_name="localhost")
    r = run_audit([Target("127.0.0.1", port)], options, Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    c = result(r, "sni_chain")
    assert c.verdict is Verdict.not_vulnerable and c.severity == "info", c
    assert "the server refuses a hello without server_name (" in c.reason
    assert "unrecognized_name" in c.reason and "clients without SNI cannot connect" in c.reason
    assert isinstance(c.details, SniChainDetails) and c.details.without_sha256 is None


# -- chain_facts on its own: the sides a live server cannot easily show -----------------------

def test_chain_without_a_trust_store_rests_on_a_sent_root(pki: Pki) -> None:
    leaf, b, a, root = (pki.certs[n] for n in ("leaf", "b", "a", "root"))
    assert chain_facts([leaf, b, a, root], None).complete is True   # the root is sent
    unsure = chain_facts([leaf, b, a], None)
    assert unsure.complete is None and unsure.missing_issuer is None
    missing = chain_facts([leaf, a], (root,))
    assert missing.complete is False and missing.missing_issuer == "CN=Test Intermediate B"
    assert missing.extra == (1,)
    # B's issuer A is in the store, but OpenSSL anchors only at a self-signed certificate
    # (the trust verdict's code 2): complete only with A's issuer, the root, there too
    store_a = chain_facts([leaf, b], (a,))
    assert store_a.complete is False and store_a.store_top == "CN=Test Intermediate A"
    assert store_a.missing_issuer == "CN=Test Root"
    assert chain_facts([leaf, b], (a, root)).complete is True


def test_chain_of_certificates_certifying_one_another_is_followed_boundedly(
        tmp_path: Path) -> None:
    """A hostile chain of 40 intermediates: the path stops at MAX_PATH, says so, and does
    not claim an issuer missing."""
    p = Pki(tmp_path)
    p.issue("c0", "Hostile 0", None, ca=True)
    for i in range(1, 40):
        p.issue(f"c{i}", f"Hostile {i}", f"c{i - 1}", ca=True)
    chain = [p.certs[f"c{i}"] for i in range(39, -1, -1)]
    f = chain_facts(chain, ())
    assert len(f.path) == MAX_PATH and f.complete is None and f.missing_issuer is None, f
    assert f"the path was followed for {MAX_PATH} certificates only" in f.notes


def test_ocsp_response_without_its_issuer_is_judged_as_far_as_it_can_be(pki: Pki) -> None:
    """No issuer to check against: the serial, status and window are still judged; the
    signature is not claimed either way."""
    leaf = pki.certs["leaf"]
    good = judge_response(pki.ocsp("good").read_bytes(), leaf, None)
    assert good.problems == [] and good.details.signer is None
    assert good.unchecked is not None and "neither sent nor in the trust store" in \
        good.unchecked
    wrong = judge_response(pki.ocsp("serial").read_bytes(), leaf, None)
    assert [s for s, _ in wrong.problems] == ["high"] and "about serial" in wrong.problems[0][1]
    assert judge_response(b"\x30\x03\x0a\x01\x00junk", leaf, None).problems[0][0] == "high"
    assert judge_response(pki.ocsp("good").read_bytes(), leaf, pki.certs["b"]).unchecked \
        is None


@pytest.mark.needs_impl("gnutls")
@pytest.mark.parametrize("require", [False, True])
def test_client_auth_gnutls(pki: Pki, require: bool) -> None:
    """gnutls-serv asks for a client certificate by default (optional), and requires one
    with --require-client-cert; it names the CAs of --x509cafile."""
    extra = ["--x509cafile", str(pki.path("a"))] + (["--require-client-cert"] if require
                                                    else [])
    with serve(pki, "b", "a", impl="gnutls", extra=extra) as server:
        r = audit(server.port, "client_auth", pki)
    c = result(r, "client_auth")
    assert isinstance(c.details, ClientAuthDetails), c
    assert c.details.requested and c.details.required is require, c
    assert c.details.ca_names == ("CN=Test Intermediate A",), c.details


def test_ca_names_of_either_form_and_of_a_hostile_server() -> None:
    """TLS 1.2's list and TLS 1.3's extension read alike; a name that does not parse is
    its hex, a cut extension a reason (never an exception)."""
    from cryptography import x509 as cx509

    from tlsprobe.probes.checks.client_auth import ca_names
    from tlsprobe.wire.certificate import CertificateRequest
    from tlsprobe.wire.extensions import Extension
    name = cx509.Name.from_rfc4514_string("CN=Test CA,O=Example").public_bytes()
    tls12 = CertificateRequest(None, [], b"\x01", [0x0804], [name, b"\x30\x01"])
    assert ca_names(tls12) == ("CN=Test CA,O=Example", "(unparsable name 3001)")
    body = len(name).to_bytes(2, "big") + name
    tls13 = CertificateRequest(b"", [Extension(47, len(body).to_bytes(2, "big") + body)])
    assert ca_names(tls13) == ("CN=Test CA,O=Example",)
    cut = CertificateRequest(b"", [Extension(47, (len(body) + 9).to_bytes(2, "big") + body)])
    assert isinstance(ca_names(cut), str)
    inner = CertificateRequest(b"", [Extension(47, (4).to_bytes(2, "big") + b"\x00\x09ab")])
    assert ca_names(inner) == "a certificate_authorities extension with a cut or empty name"
    assert ca_names(CertificateRequest(b"", [])) == ()
