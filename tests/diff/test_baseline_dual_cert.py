"""`scan --baseline` on a server with two certificates (openssl s_server -cert RSA -dcert
ECDSA), reconfigured on the same port: the changes of every chain both scans established
are listed, each other key type's named ("ECDSA certificate chain"), a server with one
certificate as before."""
from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from tests.diff.conftest import SamePort, cli
from tests.helpers.servers import CertSet
from tests.lab_servers.builders import ServerConfig
from tests.lab_servers.certs import named_set


def dual(cert: Path, key: Path) -> ServerConfig:
    return ServerConfig("openssl", extra=("-dcert", str(cert), "-dkey", str(key)))


def test_an_ecdsa_chain_gone_untrusted_is_a_regression_of_that_chain(
        same_port: SamePort, certs: CertSet, tmp_path: Path) -> None:
    def scan(port: int, *extra: object) -> tuple[int, str, str]:
        proc = cli("scan", f"127.0.0.1:{port}", "--no-progress", "--checks", "versions,cert",
                   "--cafile", certs.ca, *extra)
        return proc.returncode, proc.stdout, proc.stderr

    first = same_port(dual(certs["ecdsa"].cert, certs["ecdsa"].key))
    code, out, err = scan(first.port, "--json")
    assert code == 0 and err == "", err
    doc = json.loads(out)
    assert [c["trust"]["status"] for c in doc["other_certificates"]] == ["trusted"]
    base = tmp_path / "base.json"
    base.write_text(out)
    code, out, err = scan(first.port, "--baseline", base, "--fail-on-change", "--json")
    assert code == 0 and json.loads(out)["changes"] == [], out
    odd = named_set(tmp_path, "localhost", "localhost", "odd", ec.SECP256R1())["ecdsa"]
    same_port(dual(odd.cert, odd.key), first.port)     # the ECDSA chain now self-signed
    code, out, err = scan(first.port, "--baseline", base, "--json")
    assert code == 0 and err == "", err      # no gate given
    changes = {c["kind"]: c for c in json.loads(out)["changes"]}
    trust = changes["trust_changed"]
    assert (trust["what"], trust["old"], trust["new"], trust["direction"]) == (
        "ECDSA certificate chain", "trusted", "untrusted", "regression")
    renewed = changes["certificate_renewed"]
    assert renewed["reason"] == "the ECDSA leaf certificate's SHA-256 fingerprint changed"
    assert renewed["direction"] == "neutral" and renewed["what"] == "CN=localhost"
    code, out, err = scan(first.port, "--baseline", base)
    section = out[out.index(f"Changes since {base}"):]
    assert "[regression] ECDSA certificate chain: " in section, section
