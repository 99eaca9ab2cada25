"""Key size rules a client's hello does not show (profiles' `key_minimums`): against a TLS
1.2 server whose DHE prime has 1024 bits, and one whose RSA leaf has 1024 bits, the
packaged Debian 12 OpenSSL profiles fail as the real programs do (checked here with the real
curl and Python beside the simulation), and the Node.js, Java and GnuTLS profiles, which have
no such rule, still connect."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.helpers.servers import Server, make_certs, start_server

#: the Debian 12 OpenSSL profiles (security level 2: DH and RSA keys of 2048 bits at least)
STRICT = ("curl-7.88-openssl-3.0-debian12", "openssl-3.0-debian12",
          "python-3.11-urllib-openssl-3.0-debian12", "pyopenssl-26-openssl-4.0-debian12")
#: clients checked here to accept both (no rule known: none set)
LENIENT = ("nodejs-20-debian12", "openjdk-17-debian12", "gnutls-cli-3.7-debian12")
PYTHON = "/usr/bin/python3"   # Debian's Python, on Debian's OpenSSL 3.0
URLOPEN = ("import ssl, sys, urllib.request\ntry:\n urllib.request.urlopen(sys.argv[1], "
           "context=ssl.create_default_context(cafile=sys.argv[2]), timeout=5)\n"
           "except Exception as e:\n print(e)\nelse:\n print('OK')")


def _simulated(run_cli, port: int, *extra: object) -> dict[str, dict[str, object]]:
    code, out, err = run_cli("clients", f"localhost:{port}", "--json", "--profiles",
                             ",".join(STRICT + LENIENT), *extra)
    assert code == 0 and not err, err
    return {c["profile"]: c for c in json.loads(out)["clients"]}


def _real(port: int, ca: Path) -> tuple[int, str]:
    """(curl's exit code, what Python's urlopen said) against localhost:port, with `ca`."""
    assert shutil.which("curl") and Path(PYTHON).exists(), "curl, python3 (Debian's)"
    url = f"https://localhost:{port}/"
    curl = subprocess.run(["curl", "-s", "-m", "10", "-o", "/dev/null", "--cacert", str(ca),
                           url], check=False, capture_output=True, timeout=30)
    py = subprocess.run([PYTHON, "-c", URLOPEN, url, str(ca)], check=False,
                        capture_output=True, text=True, timeout=30)
    return curl.returncode, py.stdout.strip()


def test_dh_prime_under_the_clients_minimum(tls_server, run_cli, certs) -> None:
    """DHE with a 1024-bit prime: the strict profiles fail, "dh key too small", trusted
    chain or not checked (curl -k fails alike); the others connect with dh_bits 1024."""
    server: Server = tls_server("openssl", proto="tls1_2", dhparam="rfc5114_1024_160",
                                ciphers="DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0")
    curl_code, py_said = _real(server.port, certs.ca)
    assert curl_code == 35 and "DH_KEY_TOO_SMALL" in py_said, (curl_code, py_said)
    for extra in (("--cafile", certs.ca), ("--no-verify",)):
        sims = _simulated(run_cli, server.port, *extra)
        for name in STRICT:
            sim = sims[name]
            assert (sim["status"], sim["reason"], sim["dh_bits"]) == \
                ("failed", "dh key too small", 1024), sim
            assert "requires at least 2048" in str(sim["detail"]), sim
        for name in LENIENT:
            assert (sims[name]["status"], sims[name]["dh_bits"]) == ("connected", 1024), \
                sims[name]


def test_rsa_leaf_under_the_clients_minimum(run_cli, tmp_path: Path) -> None:
    """A 1024-bit RSA leaf signed by the CA given (--cafile): the strict profiles do not
    trust it ("certificate key too weak", as curl exits 60 and Python fails verification);
    GnuTLS trusts it; Node.js and Java (other stores) connect, trust not checked. Without
    verification (--no-verify, as curl -k) the strict ones connect."""
    weak = make_certs(tmp_path / "certs", rsa_bits=1024)
    server = start_server("openssl", certs=weak, workdir=tmp_path / "server",
                          ciphers="DEFAULT:@SECLEVEL=0")
    try:
        curl_code, py_said = _real(server.port, weak.ca)
        assert curl_code == 60 and "EE certificate key too weak" in py_said, \
            (curl_code, py_said)
        sims = _simulated(run_cli, server.port, "--cafile", weak.ca)
        for name in STRICT:
            sim = sims[name]
            assert (sim["status"], sim["reason"], sim["trusted"]) == \
                ("failed", "certificate not trusted", False), sim
            assert "the leaf has a 1024-bit RSA key" in str(sim["detail"]), sim
        assert (sims["gnutls-cli-3.7-debian12"]["status"],
                sims["gnutls-cli-3.7-debian12"]["trusted"]) == ("connected", True)
        for name in ("nodejs-20-debian12", "openjdk-17-debian12"):
            assert (sims[name]["status"], sims[name]["trusted"]) == ("connected", None)
        unchecked = _simulated(run_cli, server.port, "--no-verify")
        for name in STRICT + LENIENT:
            assert (unchecked[name]["status"], unchecked[name]["trusted"]) == \
                ("connected", None), unchecked[name]
    finally:
        server.stop()
