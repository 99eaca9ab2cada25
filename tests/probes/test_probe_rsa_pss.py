"""A server whose certificate holds an RSASSA-PSS key (id-RSASSA-PSS, RFC 4055), which may
sign only with rsa_pss_pss_*: the probe names the key as `openssl s_client` does (RSASSA-PSS,
not a plain RSA key) in text and JSON, with TLS 1.3 and TLS 1.2."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.servers import Server, ServerUnavailable, peer_unavailable, start_server
from tests.lab_servers.certs import CertSet, rsa_pss_set


@pytest.fixture(scope="module")
def pss_certs(certs: CertSet, tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return rsa_pss_set(certs, tmp_path_factory.mktemp("rsa-pss"))


@pytest.fixture(scope="module")
def pss_server(pss_certs: CertSet, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Server]:
    try:
        server = start_server("openssl", proto="both", cert="rsa-pss", certs=pss_certs,
                              workdir=tmp_path_factory.mktemp("rsa-pss-server"))
    except ServerUnavailable as exc:
        peer_unavailable(str(exc))
    with server:
        yield server


@pytest.mark.parametrize("flag", ["--tls1_3", "--tls1_2"])
def test_rsa_pss_key_named(run_cli, pss_server: Server, pss_certs: CertSet, flag: str) -> None:
    where = f"127.0.0.1:{pss_server.port}"
    res = run_cli(where, flag, "--json", "--cafile", pss_certs.ca)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    leaf = data["certificates"][0]
    assert (leaf["key_type"], leaf["key_bits"]) == ("RSA-PSS", 2048), leaf
    assert data["signature_scheme"]["name"].startswith("rsa_pss_pss_"), data["signature_scheme"]
    assert data["certificates"][1]["key_type"] == "RSA"   # the CA's rsaEncryption key
    res = run_cli(where, flag, "--cafile", pss_certs.ca)
    assert res.returncode == 0, res.stderr
    assert re.search(r"^\s+a: RSA-PSS 2048 bits; sha256WithRSAEncryption$", res.stdout,
                     re.MULTILINE), res.stdout


def test_rsa_pss_file_read_as_openssl_does(pss_certs: CertSet) -> None:
    """The same reading of the certificate file for every report (probe, scan, pcap)."""
    from tlsprobe.model.describe import certificate_info
    der = _der(pss_certs["rsa-pss"].cert)
    info = certificate_info(der)
    assert (info.key_type, info.key_bits, info.rsa_key) == ("RSA-PSS", 2048, True)


def _der(path: Path) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)
