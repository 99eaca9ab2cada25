"""A real server (openssl s_server -dhparam) offering DHE parameters the shared modulus
check (kex/dhprime.py) judges: a composite modulus is "not prime" for the probe (exit 6) and
a high `dh.not_prime` finding for scan; an RFC 5114 group (well known, not a safe prime)
is still used (it went through cryptography before, and takes the pow path now)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.lab_servers.certs import dh_numbers

#: composite, 3482 bits, no factor under 2000: the product of two Mersenne primes
COMPOSITE = (2**1279 - 1) * (2**2203 - 1)
CIPHERS = "DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0"


def _dhparam(path: Path, p: int, g: int) -> Path:
    """A PKCS#3 'DH PARAMETERS' PEM (SEQUENCE { p, g }) written by hand: OpenSSL and
    cryptography would refuse to make one with a composite p."""
    def integer(n: int) -> bytes:
        raw = n.to_bytes(n.bit_length() // 8 + 1, "big")
        return b"\x02" + length(len(raw)) + raw

    def length(n: int) -> bytes:
        if n < 0x80:
            return bytes([n])
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        return bytes([0x80 | len(raw)]) + raw

    body = integer(p) + integer(g)
    b64 = base64.b64encode(b"\x30" + length(len(body)) + body).decode()
    lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
    path.write_text(f"-----BEGIN DH PARAMETERS-----\n{lines}\n-----END DH PARAMETERS-----\n")
    return path


def test_composite_modulus_is_not_prime_for_probe_and_scan(run_cli, tls_server,  # type: ignore[no-untyped-def]
                                                            tmp_path: Path) -> None:
    srv = tls_server("openssl", ciphers=CIPHERS, proto="tls1_2",
                     dhparam=_dhparam(tmp_path / "composite.pem", COMPOSITE, 2))
    target = f"{srv.host}:{srv.port}"
    res = run_cli(target, "--tls1_2", "--timeout", "5", "--no-verify")
    assert res.returncode == 6, res.stderr
    assert "p (3482 bits) is not prime" in res.stderr, res.stderr
    assert "NOT PRIME" in res.stdout, res.stdout
    res = run_cli("scan", target, "--timeout", "5", "--no-progress", "--json",
                  "--checks", "groups,dh")
    assert res.returncode in (0, 1), res.stderr
    report = json.loads(res.stdout.splitlines()[0])
    codes = {f["code"]: f for f in report["findings"]}
    assert codes["dh.not_prime"]["severity"] == "high", report["findings"]
    assert "3482-bit modulus that is not prime" in codes["dh.not_prime"]["message"]
    # the dh row says the same as the finding beside it ("not vulnerable" before)
    dh = next(c for c in report["check_results"] if c["name"] == "dh")
    assert dh["verdict"] == "vulnerable", dh
    assert "3482-bit DH modulus that is not prime" in dh["reason"]


@pytest.mark.parametrize("name", ["rfc5114_2048_256"])
def test_a_well_known_group_that_is_not_a_safe_prime_is_used(run_cli, tls_server,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path, name: str) -> None:
    p, g = dh_numbers(name)
    srv = tls_server("openssl", ciphers=CIPHERS, proto="tls1_2",
                     dhparam=_dhparam(tmp_path / f"{name}.pem", p, g))
    res = run_cli(f"{srv.host}:{srv.port}", "--tls1_2", "--timeout", "5", "--no-verify")
    assert res.returncode == 0, res.stderr
    assert "Handshake" in res.stdout and "complete" in res.stdout, res.stdout
    assert "dh_2048_256" in res.stdout, res.stdout
