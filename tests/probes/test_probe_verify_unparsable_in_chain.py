"""A certificate of the server's chain that `cryptography` cannot parse (OpenSSL reads it:
parameters in its signature's AlgorithmIdentifier that ecdsa-with-SHA256 does not take;
lengths in BER's other forms, strings of names such as a PrintableString holding '@', are
read through a DER twin now: wire/dertwin.py), other than the leaf, makes the trust verdict
"not established" only when OpenSSL's path may go through it. tlsprobe said "not
established" for any such certificate: an extra unrelated one, or a copy of the root past
the trust anchor, where `openssl s_client -verify_return_error` says 0 (or 20 for a chain
whose root is not in the store: the verdict it reaches without that certificate)."""
from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.helpers.bercert import (
    Issued,
    cn_name,
    issued,
    leaf_files,
    mangled,
    pem,
    signed_cert,
)
from tests.probes.test_probe_verify_openssl_codes import _openssl_verdict

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def _codes_chain() -> tuple[bytes, bytes, bytes, ec.EllipticCurvePrivateKey,
                               ec.EllipticCurvePrivateKey]:
    """(root, intermediate, leaf, the root's key, the leaf's): CN=Codes@Root, CN=Codes CA,
    CN=localhost (`_ber` makes one of them unparsable)."""
    root_key, inter_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = signed_cert(cn_name("Codes@Root"), root_key, cn_name("Codes@Root"), root_key, True)
    inter = signed_cert(cn_name("Codes CA"), inter_key, cn_name("Codes@Root"), root_key, True)
    leaf = signed_cert(cn_name("localhost"), leaf_key, cn_name("Codes CA"), inter_key, False)
    return root, inter, leaf, root_key, leaf_key


def _ber(der: bytes, signer: ec.EllipticCurvePrivateKey) -> bytes:
    """`der` with parameters in its signature's AlgorithmIdentifier (cryptography refuses
    them, and no DER twin reads them; OpenSSL reads them), signed again by `signer`."""
    return mangled(Issued(signer, b"", signer, der), "algorithm-parameters")


#: the sent chain after the leaf, and whether the store holds the chain's root: (what is
#: sent, root in the store, OpenSSL's code, tlsprobe's verdict established)
CASES = {
    "an-unrelated-certificate": (("inter", "unrelated"), True, 0, True),
    "a-copy-of-the-root-past-the-anchor": (("inter", "root-ber"), True, 0, True),
    "an-unrelated-certificate-no-anchor": (("inter", "unrelated"), False, 20, True),
    # on the path: OpenSSL reads it (0); cryptography cannot: not established
    "the-intermediate": (("inter-ber",), True, 0, False),
    "the-intermediate-no-anchor": (("inter-ber",), False, 20, False),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_an_unparsable_certificate_counts_only_on_the_path(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        name: str) -> None:
    sent, anchored, expected, established = CASES[name]
    root, inter, leaf, root_key, leaf_key = _codes_chain()
    other = issued(ca_name="Another@CA")
    made = {"inter": inter, "inter-ber": _ber(inter, root_key), "root-ber": _ber(root, root_key),
            "unrelated": mangled(other, "algorithm-parameters", ca=True)}
    leaf_files(tmp_path, leaf, leaf_key)
    (tmp_path / "chain.pem").write_bytes(b"".join(pem(made[k]) for k in sent))
    store = tmp_path / "store.pem"
    store.write_bytes(pem(root) if anchored else pem(issued(ca_name="Elsewhere CA").ca_der))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "chain.pem")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == expected, (name, code, text)
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert len(data["certificates"]) == 1 + len(sent), data["certificates"]
    ver = data["verification"]
    if not established:
        assert ver["code"] is None and ver["message"].startswith(
            "not established: certificate 1 of the chain cannot be parsed by cryptography"), ver
        assert "OpenSSL may take it for the issuer of CN=localhost" in ver["message"], ver
        return
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), ver
    assert "certificate 2 of the chain cannot be parsed by cryptography, and OpenSSL's path " \
        "does not go through it" in ver["message"], ver


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("named", [False, True])
def test_a_store_certificate_cryptography_cannot_parse_counts_only_by_its_name(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        named: bool) -> None:
    """The trust store holds a certificate cryptography cannot parse (OpenSSL reads it)
    and not the chain's root. Its name is not the leaf's issuer's: OpenSSL says 20, and
    tlsprobe now too (was not established); it is (another key): OpenSSL takes it for the
    issuer (7), which cannot be told here: not established."""
    chain = issued(ca_name="BER@Test CA")
    leaf_files(tmp_path, chain.leaf_der, chain.leaf_key)
    other = issued(ca_name="BER@Test CA" if named else "Unrelated@CA")   # another key
    store = tmp_path / "store.pem"
    store.write_bytes(pem(issued(ca_name="Elsewhere CA").ca_der) +
                      pem(mangled(other, "algorithm-parameters", ca=True)))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == (7 if named else 20), text
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    if named:
        assert ver["code"] is None and "an issuer OpenSSL takes may be among them" in ver["message"], ver
        return
    assert ver["code"] == 20 and ver["message"].startswith(f"20 ({text})"), ver
    assert "the trust store holds a certificate cryptography cannot parse, none of them " \
        "named as an issuer of a certificate the server sent" in ver["message"], ver


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("root_in_ber", [False, True])
def test_a_store_certificate_cryptography_cannot_parse_above_a_store_intermediate(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        root_in_ber: bool) -> None:
    """The store holds the leaf's issuer, an intermediate (no anchor alone), and a
    certificate cryptography cannot parse: that intermediate's root (OpenSSL reads it: 0)
    is no verdict here (not established; code 2 was said with 56ea951's names of sent
    certificates alone), an unrelated one leaves OpenSSL's 2 (unable to get issuer
    certificate) standing."""
    root, inter, leaf, root_key, leaf_key = _codes_chain()
    leaf_files(tmp_path, leaf, leaf_key)
    store = tmp_path / "store.pem"
    store.write_bytes(pem(inter) + pem(_ber(root, root_key) if root_in_ber else mangled(
        issued(ca_name="Unrelated@CA"), "algorithm-parameters", ca=True)))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == (0 if root_in_ber else 2), text
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    if root_in_ber:
        assert ver["code"] is None and "an issuer OpenSSL takes may be among them" in ver["message"], ver
    else:
        assert ver["code"] == 2 and ver["message"].startswith(f"2 ({text})"), ver
    # the scan's chain check: the root it could not read may be the issuer it found
    # missing (it said 'vulnerable: incomplete', medium, where OpenSSL completes the path)
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", store, "--sni", "localhost")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    (chain,) = [c for c in json.loads(res.stdout)["check_results"] if c["name"] == "chain"]
    if root_in_ber:   # (s_server also sends its lab CA: an extra certificate, low)
        assert "incomplete" not in chain["reason"] and chain["severity"] != "medium", chain
        assert any("cryptography cannot parse" in e for e in chain["evidence"]), chain
        assert chain["details"]["complete"] is None, chain["details"]
    else:
        assert chain["verdict"] == "vulnerable" and "incomplete" in chain["reason"], chain


@pytest.mark.needs_impl("openssl")
def test_a_store_certificate_cryptography_cannot_parse_counts_for_every_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """The server sends its intermediate expired; the trust store holds the root and a
    valid copy of that intermediate (its key and name) that cryptography cannot parse.
    OpenSSL takes the store's copy first (trusted first): 0. tlsprobe, blind to it, judged
    the sent one: '10 (certificate has expired)', a false untrusted verdict (an unparsable
    store certificate counted only for the verdicts of an issuer not found). Now not
    established, naming the store's certificates."""
    root_key, inter_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = signed_cert(cn_name("Codes@Root"), root_key, cn_name("Codes@Root"), root_key, True)
    expired = x509.load_der_x509_certificate(signed_cert(cn_name("Codes CA"), inter_key, cn_name("Codes@Root"), root_key, True))
    sent = (x509.CertificateBuilder().subject_name(expired.subject)
            .issuer_name(expired.issuer).public_key(inter_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - 30 * DAY).not_valid_after(NOW - DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(root_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER))
    valid_copy = _ber(signed_cert(cn_name("Codes CA"), inter_key, cn_name("Codes@Root"), root_key, True), root_key)
    leaf = signed_cert(cn_name("localhost"), leaf_key, cn_name("Codes CA"), inter_key, False)
    leaf_files(tmp_path, leaf, leaf_key)
    (tmp_path / "chain.pem").write_bytes(pem(sent))
    store = tmp_path / "store.pem"
    store.write_bytes(pem(root) + pem(valid_copy))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "chain.pem")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == 0, text
    alone = tmp_path / "root.pem"
    alone.write_bytes(pem(root))
    assert _openssl_verdict(srv.port, alone, "localhost")[0] == 10   # without the copy
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    assert ver["code"] is None and ver["message"].startswith("not established: 10 ("), ver
    assert "an issuer OpenSSL takes may be among them" in ver["message"], ver


@pytest.mark.needs_impl("openssl")
def test_the_note_on_many_unparsable_certificates_is_capped(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """A server sends 300 certificates cryptography cannot parse after its chain, off
    OpenSSL's path (0). The note named each position: a 1.6 kB line for 300. It names six
    and says how many more."""
    root, inter, leaf, root_key, leaf_key = _codes_chain()
    unrelated = pem(mangled(issued(ca_name="Another@CA"), "algorithm-parameters", ca=True))
    leaf_files(tmp_path, leaf, leaf_key)
    (tmp_path / "chain.pem").write_bytes(pem(inter) + unrelated * 300)
    store = tmp_path / "store.pem"
    store.write_bytes(pem(root))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "chain.pem")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == 0, text
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json",
                  "--max-chain", "400", "--max-message", "1000000")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert len(data["certificates"]) == 302, len(data["certificates"])
    ver = data["verification"]
    assert ver["code"] == 0, ver
    assert "certificates 2, 3, 4, 5, 6, 7 and 294 more of the chain cannot be parsed by " \
        "cryptography, and OpenSSL's path does not go through them" in ver["message"], ver
    assert len(ver["message"]) < 300, ver["message"]
