"""A certificate whose EC key gives its curve by explicit parameters (an ECParameters
SEQUENCE, not a named curve OID): OpenSSL 3.0's check_curve stops at it with 94
("Certificate public key has explicit ECC parameters") in a chain of two or more, at its
place among each certificate's extension checks (before the purpose, 26, and the host name,
62). s_client's code is read first. tlsprobe said 0 (trusted): cryptography reads the key
as its named curve, and its verifier accepts the chain."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.probes.test_probe_verify_openssl_codes import Case, _build, served_verdicts


def _explicit_leaf(case: Case, folder: Path) -> tuple[Path, Path, Path, Path]:
    """`_build`'s chain, its leaf issued again by `openssl x509 -req` for a P-256 key of
    explicit parameters (`openssl ecparam -param_enc explicit`)."""
    root, leaf, key, inter = _build(case, folder)   # leaf_serial: inter.key is written

    def run(*argv: str) -> None:
        subprocess.run(argv, capture_output=True, timeout=30, check=True, cwd=folder)
    run("openssl", "ecparam", "-name", "prime256v1", "-param_enc", "explicit", "-genkey",
        "-noout", "-out", str(key))
    run("openssl", "req", "-new", "-key", str(key), "-subj", "/CN=localhost", "-out", "x.csr")
    usage = "clientAuth" if ExtendedKeyUsageOID.CLIENT_AUTH in case.eku else "serverAuth"
    (folder / "x.ext").write_text("subjectAltName=DNS:localhost\nbasicConstraints=critical,"
                                  f"CA:FALSE\nextendedKeyUsage={usage}\n")
    run("openssl", "x509", "-req", "-in", "x.csr", "-CA", str(inter), "-CAkey", "inter.key",
        "-set_serial", "9", "-days", "30", "-extfile", "x.ext", "-out", str(leaf))
    text = subprocess.run(["openssl", "x509", "-in", str(leaf), "-noout", "-text"],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert "Field Type: prime-field" in text, text   # the curve's parameters, not its name
    return root, leaf, key, inter


CASES = {
    "leaf": (Case(leaf_serial=1), 94),
    # the curve is checked before the purpose and the host name
    "leaf-eku-client": (Case(leaf_serial=1, eku=(ExtendedKeyUsageOID.CLIENT_AUTH,)), 94),
    "leaf-of-another-name": (Case(leaf_serial=1, host="other.test"), 94),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_explicit_curve_code_is_openssls(tls_server: Callable[..., Any],
                                         run_cli: Callable[..., Any], tmp_path: Path,
                                         name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case,
                                      _explicit_leaf(case, tmp_path))
    assert code == expected, (name, code, text)
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text}): "), (name, ver)
    assert "explicit parameters" in ver["message"], ver
