"""OpenSSL finds an issuer by its name as X509_NAME_cmp compares names: canonically, the
case and the runs of white space of the string types aside, a PrintableString equal to a
UTF8String. A leaf naming its issuer "CN=codes ca" under an intermediate "CN=Codes CA"
(or an intermediate naming "CN=CODES ROOT") is trusted by `openssl s_client
-verify_return_error` (0); tlsprobe compared names exactly and said "20 (unable to get
local issuer certificate)", an untrusted verdict (certificate.untrusted, high: fails
`--fail-on high`). cryptography's verifier compares them exactly, so the verdict was then
not established; the link so named is now checked here alone (its signature, its keys and
algorithm of kinds every verifier accepts) and the library checks the path above it: 0,
as OpenSSL says. A link of another kind (a brainpool CA key the library would judge its own
way) keeps the verdict not established, never 20."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from tests.helpers.bercert import leaf_files, pem, signed_cert
from tests.probes.test_probe_verify_openssl_codes import _openssl_verdict


def _name(cn: str, kind: _ASN1Type = _ASN1Type.UTF8String) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn, kind)])


#: (the intermediate's subject, the leaf's issuer, the intermediate's issuer)
CASES: dict[str, tuple[x509.Name, x509.Name, x509.Name]] = {
    "leaf-issuer-in-lower-case": (_name("Codes CA"), _name("codes ca"), _name("Codes Root")),
    "leaf-issuer-with-more-spaces": (_name("Codes CA"), _name("  Codes   CA "),
                                     _name("Codes Root")),
    "leaf-issuer-printablestring": (_name("Codes CA"),
                                    _name("Codes CA", _ASN1Type.PrintableString),
                                    _name("Codes Root")),
    "intermediate-issuer-in-upper-case": (_name("Codes CA"), _name("Codes CA"),
                                          _name("CODES ROOT")),
    # the intermediate's key on brainpoolP256r1 (OpenSSL: 0): a link the library judges
    # its own way, not established
    "leaf-issuer-in-lower-case-brainpool": (_name("Codes CA"), _name("codes ca"),
                                            _name("Codes Root")),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_an_issuer_named_in_another_case_is_no_untrusted_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        name: str) -> None:
    inter_subject, leaf_issuer, inter_issuer = CASES[name]
    odd = name.endswith("brainpool")
    root_key, inter_key, leaf_key = (ec.generate_private_key(
        ec.BrainpoolP256R1() if odd and i == 1 else ec.SECP256R1()) for i in range(3))
    root = signed_cert(_name("Codes Root"), root_key, _name("Codes Root"), root_key, True)
    inter = signed_cert(inter_subject, inter_key, inter_issuer, root_key, True)
    leaf = signed_cert(_name("localhost"), leaf_key, leaf_issuer, inter_key, False)
    for file, der in (("root.pem", root), ("inter.pem", inter)):
        (tmp_path / file).write_bytes(pem(der))
    leaf_files(tmp_path, leaf, leaf_key)
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"), "-key",
                                       str(tmp_path / "leaf.key"), "-cert_chain",
                                       str(tmp_path / "inter.pem")])
    code, text = _openssl_verdict(srv.port, tmp_path / "root.pem", "localhost")
    assert code == 0, text   # the real tool first
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile",
                  tmp_path / "root.pem", "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    if odd:
        assert ver["code"] is None and ver["message"].startswith("not established: "), ver
    else:   # OpenSSL's verdict (was not established)
        assert ver["code"] == 0 and ver["ok"] is True, ver
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", tmp_path / "root.pem", "--sni",
                  "localhost")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    report = json.loads(res.stdout)
    assert report["trust"]["code"] == (None if odd else 0), report["trust"]
    codes = {f["code"] for f in report["findings"]}
    assert "certificate.untrusted" not in codes, codes
    (chain,) = [c for c in report["check_results"] if c["name"] == "chain"]
    assert chain["details"]["path"] == [0, 1], chain   # the intermediate is on the path
