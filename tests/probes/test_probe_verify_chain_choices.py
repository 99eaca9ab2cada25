"""Which of several sent certificates OpenSSL takes for an issuer (find_issuer: of those its
issuer check accepts by names, key identifier and key family, not by signature, the first
within its dates, else the one that expires last), and the trust store's intermediates
taken first. Served by openssl s_server in the order given; `openssl s_client
-verify_return_error` first.

tlsprobe took the first sent issuer whose key verified the signature, dates aside: an
expired copy of the intermediate sent before a valid one was '10 (certificate has
expired)' (OpenSSL 0: a false untrusted verdict), and a leaf without an
authorityKeyIdentifier sent with an intermediate of its issuer's name and another key
first was 0 (OpenSSL takes that one: 7). cryptography's verifier was given the sent
certificates alone: an expired sent intermediate whose valid copy is in the trust store
(OpenSSL 0) was 'not established'."""
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
from cryptography.x509.oid import NameOID

from tests.helpers.bercert import children, leaf_files, pem, tlv
from tests.probes.test_probe_verify_openssl_codes import _openssl_verdict

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
Key = ec.EllipticCurvePrivateKey


def _cert(cn: str, key: Key, issuer: str, signer: Key, ca: bool, *, days: tuple[int, int] = (-1, 30),
          aki: bool = True) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + days[0] * DAY).not_valid_after(NOW + days[1] * DAY)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    if aki:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            signer.public_key()), critical=False)
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost")]), critical=False)
    return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


#: what is sent after the leaf, what the store holds besides the root, the leaf's kind,
#: OpenSSL's code
CASES = {
    "expired-copy-sent-before-the-valid-one": (("expired", "inter"), (), "leaf", 0),
    "expired-intermediate-valid-copy-in-the-store": (("expired",), ("inter",), "leaf", 0),
    "issuer-name-of-another-key-first-no-aki": (("other", "inter"), (), "leaf-no-aki", 7),
    # controls (tlsprobe agreed before)
    "valid-one-sent-first": (("inter", "expired"), (), "leaf", 0),
    "only-the-expired-one": (("expired",), (), "leaf", 10),
    "the-valid-one-of-the-right-key-first-no-aki": (("inter", "other"), (), "leaf-no-aki", 0),
    "the-intermediate-twice": (("inter", "inter"), (), "leaf", 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_the_issuer_openssl_takes(tls_server: Callable[..., Any], run_cli: Callable[..., Any],
                                  tmp_path: Path, name: str) -> None:
    sent, stored, kind, expected = CASES[name]
    root_key, inter_key, other_key, leaf_key = (ec.generate_private_key(ec.SECP256R1())
                                                for _ in range(4))
    made = {"root": _cert("Choice Root", root_key, "Choice Root", root_key, True),
            "inter": _cert("Choice CA", inter_key, "Choice Root", root_key, True),
            "expired": _cert("Choice CA", inter_key, "Choice Root", root_key, True,
                             days=(-40, -10)),
            "other": _cert("Choice CA", other_key, "Choice Root", root_key, True),
            "leaf": _cert("localhost", leaf_key, "Choice CA", inter_key, False),
            "leaf-no-aki": _cert("localhost", leaf_key, "Choice CA", inter_key, False,
                                 aki=False)}
    leaf_files(tmp_path, made[kind], leaf_key)
    (tmp_path / "chain.pem").write_bytes(b"".join(pem(made[k]) for k in sent))
    store = tmp_path / "store.pem"
    store.write_bytes(b"".join(pem(made[k]) for k in ("root", *stored)))
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
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), ver


@pytest.mark.needs_impl("openssl")
def test_a_validity_that_ends_before_it_begins_is_9(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """A leaf valid from five days ahead until five days ago: OpenSSL's check_cert_time
    reads notBefore first, 9 (certificate is not yet valid); tlsprobe said 10."""
    root_key, inter_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = _cert("Choice Root", root_key, "Choice Root", root_key, True)
    inter = _cert("Choice CA", inter_key, "Choice Root", root_key, True)
    later = _cert("localhost", leaf_key, "Choice CA", inter_key, False, days=(5, 30))
    earlier = _cert("localhost", leaf_key, "Choice CA", inter_key, False, days=(-30, -5))
    tbs, algorithm, _ = children(later)
    fields = children(tbs)
    fields[4] = tlv(0x30, children(fields[4])[0] + children(children(children(earlier)[0])[4])[1])
    new_tbs = tlv(0x30, b"".join(fields))
    leaf = tlv(0x30, new_tbs + algorithm + tlv(0x03, b"\x00" + inter_key.sign(
        new_tbs, ec.ECDSA(hashes.SHA256()))))
    (tmp_path / "leaf.pem").write_bytes(pem(leaf))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (tmp_path / "chain.pem").write_bytes(pem(inter))
    (tmp_path / "store.pem").write_bytes(pem(root))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "chain.pem")])
    code, text = _openssl_verdict(srv.port, tmp_path / "store.pem", "localhost")
    assert code == 9, text   # the real tool first
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile",
                  tmp_path / "store.pem", "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    assert ver["code"] == 9 and ver["message"].startswith(f"9 ({text})"), ver
