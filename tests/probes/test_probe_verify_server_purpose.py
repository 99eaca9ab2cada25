"""OpenSSL's sslserver purpose accepts an extendedKeyUsage of Server Gated Crypto (Microsoft's
1.3.6.1.4.1.311.10.3.3, Netscape's 2.16.840.1.113730.4.1) as serverAuth, in the leaf and in
a CA: s_client says 0 (read first for each chain). tlsprobe said 26 (unsuitable certificate
purpose), a chain OpenSSL trusts reported untrusted; cryptography's verifier, told the rule
of OpenSSL's purpose, verifies these chains too (0, not "not established")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.probes.test_probe_verify_openssl_codes import Case, _build, served_verdicts

MS_SGC = x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3")
NS_SGC = x509.ObjectIdentifier("2.16.840.1.113730.4.1")

CASES = {
    "leaf-microsoft-sgc": (Case(eku=(MS_SGC,)), 0),
    "leaf-netscape-sgc": (Case(eku=(NS_SGC,)), 0),
    "intermediate-microsoft-sgc": (Case(inter_extra=((x509.ExtendedKeyUsage([MS_SGC]), False),)),
                                   0),
    # the rule's other side: neither serverAuth nor SGC (OpenSSL: 26)
    "leaf-code-signing": (Case(eku=(ExtendedKeyUsageOID.CODE_SIGNING,)), 26),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_server_purpose_is_openssls(tls_server: Callable[..., Any], run_cli: Callable[..., Any],
                                    tmp_path: Path, name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver
