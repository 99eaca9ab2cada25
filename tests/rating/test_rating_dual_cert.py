"""The rating of a server with two certificates (openssl s_server -cert/-dcert, an RSA and
an ECDSA one): a client may get either chain, so every chain the scan established counts,
as SSL Labs rates every certificate a server presents: the worst chain's trust caps the
grade (T, M) and the weakest leaf key is the certificate's part of the key exchange score.
A chain the scan did not establish is unknown (provisional), never bad; a server with one
certificate is rated as before."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.helpers.servers import CertSet, Server
from tests.lab_servers.certs import named_set
from tests.rating.conftest import make_leaf
from tests.rating.test_rating_lab import caps, scan_json

ServerFactory = Callable[..., Server]
#: TLS 1.2 suites, the ECDSA one first (with -serverpref: the ECDSA chain is the default)
ECDSA_FIRST = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0"


def dcert(files: Any) -> list[str]:
    return ["-dcert", str(files.cert), "-dkey", str(files.key)]


@pytest.mark.needs_impl("openssl")
def test_self_signed_ecdsa_beside_a_trusted_rsa_chain_is_t(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet,
        tmp_path: Path) -> None:
    odd = named_set(tmp_path, "localhost", "localhost", "odd", ec.SECP256R1())["ecdsa"]
    srv = tls_server("openssl", proto="both", extra=dcert(odd))
    doc, code = scan_json(run_cli, srv.port, "versions,cert", ca=certs.ca)
    assert doc["trust"]["status"] == "trusted"
    assert [c["trust"]["status"] for c in doc["other_certificates"]] == ["untrusted"]
    rating = doc["rating"]
    assert caps(rating) == {"cert_self_signed": "T"} and rating["grade"] == "T"
    (cap,) = rating["caps"]
    assert cap["evidence"][0].startswith("certificate.self_signed: ECDSA certificate: ")
    assert rating["grade_ignoring_trust"] == "A"


@pytest.mark.needs_impl("openssl")
def test_a_small_rsa_key_on_the_other_chain_scores_the_key_exchange(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet,
        tmp_path: Path) -> None:
    """A trusted ECDSA P-256 chain (the default one: TLS 1.2, its suite preferred) and an
    RSA 1024 one (not trusted: OpenSSL's verification refuses a leaf key that small): the key
    exchange score is the RSA key's (80, weak_key B, the grade ignoring trust), as the
    finding certificate.weak_key names it; with the ECDSA chain alone, 100 and no cap."""
    small = make_leaf(certs, tmp_path, "small", bits=1024)["small"]
    srv = tls_server("openssl", proto="tls1_2", cert="ecdsa", serverpref=True,
                     ciphers=ECDSA_FIRST, extra=dcert(small))
    doc, _ = scan_json(run_cli, srv.port, "versions,cert", ca=certs.ca)
    assert doc["certificates"][0]["key_type"] == "EC secp256r1"
    (other,) = doc["other_certificates"]
    assert other["certificates"][0]["key_bits"] == 1024
    assert other["trust"]["code"] == 66     # OpenSSL's EE_KEY_TOO_SMALL: not trusted
    assert "certificate.weak_key" in {f["code"] for f in doc["findings"]}
    rating = doc["rating"]
    assert rating["key_exchange"]["score"] == 80, rating["key_exchange"]
    assert rating["key_exchange"]["detail"] == "weakest: certificate RSA 1024 bits (80)"
    assert caps(rating) == {"weak_key": "B", "cert_untrusted": "T"}, rating["caps"]
    assert rating["grade"] == "T" and rating["grade_ignoring_trust"] == "B"
    alone = tls_server("openssl", proto="tls1_2", cert="ecdsa", serverpref=True,
                       ciphers=ECDSA_FIRST)
    doc, _ = scan_json(run_cli, alone.port, "versions,cert", ca=certs.ca)
    assert doc["other_certificates"] == []
    assert doc["rating"]["key_exchange"]["score"] == 100 and caps(doc["rating"]) == {}
    assert doc["rating"]["grade"] == "A-"   # TLS 1.2 only: the no_tls13 warning


@pytest.mark.needs_impl("openssl")
def test_other_chains_not_established_make_the_grade_provisional(
        tls_server: ServerFactory, run_cli: Callable[..., Any], certs: CertSet) -> None:
    """The search for another key type's chain reset (every time, --retries 0): nothing is
    capped for a chain nobody saw, and the rating lists it as unknown (it could be T: the
    grade is provisional); the same server through no fault has no such unknown."""
    from tests.helpers.faultproxy import RESET, FaultProxy
    from tests.scan.test_scan_dual_cert import _no_rsa_suite
    srv = tls_server("openssl", proto="both")
    proxy = FaultProxy([(srv.host, srv.port)],
                       lambda _i, h: RESET if h is not None and _no_rsa_suite(h) else None)
    try:
        doc, _ = scan_json(run_cli, proxy.port, "versions,cert", "--retries", "0",
                           ca=certs.ca)
    finally:
        proxy.close()
    assert doc["other_certificates"] == [] and doc["other_certificates_note"]
    rating = doc["rating"]
    assert caps(rating) == {} and rating["grade"] == "A"
    (unknown,) = [u for u in rating["unknowns"] if u["rule"] == "cert_other_chains"]
    assert unknown["cap"] == "T" and unknown["detail"] == doc["other_certificates_note"]
    assert rating["provisional"] is True
    doc, _ = scan_json(run_cli, srv.port, "versions,cert", ca=certs.ca)
    assert doc["other_certificates_note"] is None
    assert doc["rating"]["grade"] == "A"
    assert "cert_other_chains" not in {u["rule"] for u in doc["rating"]["unknowns"]}
