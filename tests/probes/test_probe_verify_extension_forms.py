"""Extensions whose form `cryptography` refuses but OpenSSL reads (measured with `openssl
s_client -verify_return_error`, read first for each chain): the verdict is OpenSSL's where
its rule is known here, else "not established" with the reason, never an untrusted verdict
OpenSSL does not give.

A name constraint whose IP address base is 4 bytes (no mask; cryptography raises TypeError
for it) made the probe say "1 (unspecified certificate verification error)", an untrusted
verdict (certificate.untrusted fails `--fail-on high`), and the scan's chain check
"internal error: TypeError", where OpenSSL says 0."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.probes.test_probe_verify_openssl_codes import Case, _build, served_verdicts


def _raw(oid: str, value: str) -> x509.UnrecognizedExtension:
    return x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), bytes.fromhex(value))


#: nameConstraints permitting the IP address base 127.0.0.1 of 4 bytes (no mask)
NC_IP_4 = _raw("2.5.29.30", "300aa00830068704" + "7f000001")


@pytest.mark.needs_impl("openssl")
def test_a_name_constraint_address_of_four_bytes_is_no_untrusted_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    case = Case(inter_extra=((NC_IP_4, True),))
    chain = _build(case, tmp_path)
    code, text, ver = served_verdicts(tls_server, run_cli, case, chain)
    assert code == 0, text
    assert ver["code"] in (None, 0) and "unspecified" not in ver["message"], ver
    root, leaf, key, inter = chain
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert,chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host)
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    assert "internal error" not in res.stdout, res.stdout
    report = json.loads(res.stdout)
    assert report["trust"]["code"] in (None, 0), report["trust"]
    assert "certificate.untrusted" not in {f["code"] for f in report["findings"]}
