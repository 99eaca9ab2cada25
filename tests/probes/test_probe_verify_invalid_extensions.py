"""A certificate with an extension OpenSSL cannot cache (x509v3_cache_extensions sets
EXFLAG_INVALID) has no issuer for OpenSSL and issues nothing: `openssl s_client
-verify_return_error` says 20, read first here for each chain. tlsprobe said 26 for a
leaf with an empty keyUsage, and 79 for a CA whose nameConstraints or basicConstraints were
not of their ASN.1 type (cryptography refuses the whole extension list, which read as no
basicConstraints). A certificatePolicies that cryptography cannot decode is ignored by
OpenSSL (0): tlsprobe said 79 (untrusted); that verdict is now not established."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509

from tests.probes.test_probe_verify_openssl_codes import CA_USAGE, Case, _build, _openssl_verdict


def _raw(oid: str, value: bytes) -> x509.UnrecognizedExtension:
    return x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), value)


EMPTY_KU = x509.KeyUsage(False, False, False, False, False, False, False, False, False)
NOT_A_SEQUENCE_NC = _raw("2.5.29.30", b"\x04\x00")
NEGATIVE_PATH_LENGTH = _raw("2.5.29.19", b"\x30\x06\x01\x01\xff\x02\x01\xff")
NETSCAPE_NOT_BITS = _raw("2.16.840.1.113730.1.1", b"\x04\x00")
POLICIES_GARBAGE = _raw("2.5.29.32", b"\x04\x00")

CASES = {
    "leaf-empty-keyusage": (Case(leaf_extra=((EMPTY_KU, True),)), 20),
    "leaf-netscape-type-not-a-bit-string": (Case(leaf_extra=((NETSCAPE_NOT_BITS, False),)), 20),
    "intermediate-nameconstraints-not-a-sequence": (
        Case(inter_extra=((NOT_A_SEQUENCE_NC, True),)), 20),
    "root-negative-path-length": (
        Case(root_exts=((NEGATIVE_PATH_LENGTH, True), (CA_USAGE, True))), 20),
    # OpenSSL ignores it (no policy checking): cryptography cannot read the CA's extensions
    "intermediate-policies-unreadable": (Case(inter_extra=((POLICIES_GARBAGE, False),)), 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_invalid_extension_code_is_openssls(tls_server: Callable[..., Any],
                                            run_cli: Callable[..., Any], tmp_path: Path,
                                            name: str) -> None:
    case, expected = CASES[name]
    root, leaf, key, inter = _build(case, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    code, text = _openssl_verdict(srv.port, root, case.host)   # the real tool first
    assert code == expected, (name, code, text)
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", case.host, "--cafile", root, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    if code == 0:
        assert ver["code"] is None and ver["ok"] is False, (name, ver)
        assert ver["message"].startswith("not established: cannot read the extensions of "
                                         "CN=Codes CA"), ver
        return
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text}): "), (name, ver)
    assert "has an extension OpenSSL refuses" in ver["message"], ver
