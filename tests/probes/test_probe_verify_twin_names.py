"""Certificates of the chain and of the trust store whose names hold strings `cryptography`
refuses (a PrintableString holding '@'), which OpenSSL reads and compares with the same
name written as a UTF8String (X509_NAME_cmp's canonical encoding): the intermediate the
server sends, and the root in the trust store. The trust verdict was "not established"
(the certificate cannot be parsed by cryptography: OpenSSL may take it for the issuer);
they are now read through their DER twin (wire/dertwin.py), their signatures checked over
the bytes as sent: OpenSSL's verdict, 0 (20 with the root missing from the store)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
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


def _printable(der: bytes, signer: ec.EllipticCurvePrivateKey) -> bytes:
    """`der` with its issuer name's values as PrintableStrings, signed again by `signer`."""
    return mangled(Issued(signer, b"", signer, der), "issuer-printablestring")


#: (the intermediate sent in PrintableStrings, the root in the store in them, the root in
#: the store at all, OpenSSL's code)
CASES = {
    "intermediate": (True, False, True, 0),
    "intermediate-no-anchor": (True, False, False, 20),
    "store-root": (False, True, True, 0),
    "both": (True, True, True, 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_names_in_strings_cryptography_refuses_get_openssls_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        name: str) -> None:
    odd_inter, odd_root, anchored, expected = CASES[name]
    root_key, inter_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = signed_cert(cn_name("Twin@Root"), root_key, cn_name("Twin@Root"), root_key, True)
    inter = signed_cert(cn_name("Twin CA"), inter_key, cn_name("Twin@Root"), root_key, True)
    leaf = signed_cert(cn_name("localhost"), leaf_key, cn_name("Twin CA"), inter_key, False)
    leaf_files(tmp_path, leaf, leaf_key)
    (tmp_path / "chain.pem").write_bytes(pem(_printable(inter, root_key) if odd_inter else inter))
    store = tmp_path / "store.pem"
    store.write_bytes(pem(issued(ca_name="Elsewhere CA").ca_der) + (
        pem(_printable(root, root_key) if odd_root else root) if anchored else b""))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "chain.pem")])
    code, text = _openssl_verdict(srv.port, store, "localhost")   # the real tool first
    assert code == expected, (name, code, text)
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", store, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    ver = data["verification"]
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), ver
    assert "cannot parse" not in ver["message"], ver
    assert data["certificates"][1]["subject"] == "CN=Twin CA" and \
        data["certificates"][1]["issuer"] == "CN=Twin@Root", data["certificates"][1]
    # the scan's chain check reads the same certificates
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", store, "--sni", "localhost")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    (chain,) = [c for c in json.loads(res.stdout)["check_results"] if c["name"] == "chain"]
    assert not any("cannot parse" in e for e in chain["evidence"]), chain
    assert chain["details"]["complete"] is not None, chain["details"]
