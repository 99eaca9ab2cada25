"""Which trust store certificate OpenSSL takes for an issuer (X509_STORE_CTX_get1_issuer): of
those of the issuer's name its issuer check accepts (names, key identifier, key family; not
the signature), the first in the store within its dates. A store holding two roots of one
name, the first of another key, gives 7 in s_client (read first here); tlsprobe took the
root whose key signed the intermediate: 0. The root that signed first in the store, or
after one out of its dates, stays 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.probes.test_probe_verify_openssl_codes import CA_USAGE, Case, _build, _cert, served_verdicts


def _other_root(days: tuple[int, int] = (-1, 30)) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    return _cert("Codes Root", key, "Codes Root", key, [
        (x509.BasicConstraints(ca=True, path_length=None), True), (CA_USAGE, True)], days)


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("order", "expected"), [("other-first", 7), ("signer-first", 0),
                                                 ("other-expired-first", 0)])
def test_store_issuer_is_openssls_choice(tls_server: Callable[..., Any],
                                         run_cli: Callable[..., Any], tmp_path: Path,
                                         order: str, expected: int) -> None:
    case = Case()
    root, leaf, key, inter = _build(case, tmp_path)
    signer = x509.load_pem_x509_certificate(root.read_bytes())
    other = _other_root((-30, -1) if order == "other-expired-first" else (-1, 30))
    store = [signer, other] if order == "signer-first" else [other, signer]
    root.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in store))
    code, text, ver = served_verdicts(tls_server, run_cli, case, (root, leaf, key, inter))
    assert code == expected, (code, text)
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), ver


@pytest.mark.needs_impl("openssl")
def test_chain_check_names_no_issuer_missing_that_the_store_holds(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """The scan's chain check on the same chain (store: another root of the name first): the
    trust verdict says 7, and the chain check said the root was "neither sent nor in the
    trust store" (incomplete); it is complete, with a note on the store's root."""
    case = Case()
    root, leaf, key, inter = _build(case, tmp_path)
    signer = x509.load_pem_x509_certificate(root.read_bytes())
    root.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM)
                              for c in (_other_root(), signer)))
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host)
    assert res.stderr == "", res.stderr
    report = json.loads(res.stdout.splitlines()[0])
    assert report["trust"]["code"] == 7, report["trust"]
    check = next(c for c in report["check_results"] if c["name"] == "chain")
    assert check["details"]["complete"] is True and check["details"]["missing_issuer"] is None, \
        check
    assert any("did not sign it (the trust verdict says 7)" in e for e in check["evidence"]), \
        check
