"""Completed handshakes against real servers on loopback (openssl s_server, nginx, gnutls-serv,
pyOpenSSL, tlslite-ng, Python ssl), for each group each one serves.

Every probe here completes the handshake with tlsprobe's own engine, sends an HTTP GET and
reads the status line: the server's Finished and signature were verified by the engine,
and the server answering our encrypted request proves it accepted our Finished too. Each
server is started once (server_cache) with several groups or suites; each probe offers
exactly one, so the server has to use that one. Groups per implementation and version
follow ../shared/lab/server-group-matrix.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers.servers import GROUP_CODES

from tlsprobe.engine.config import ClientConfig
from tlsprobe.net.tcp import Target
from tlsprobe.probes.probe import ProbeOptions, ProbeRun, run_probe

TLS13, TLS12, TLS11, TLS10 = 0x0304, 0x0303, 0x0302, 0x0301
_CLASSIC = ["X25519", "X448", "P-256", "P-384", "P-521"]
_FFDHE = ["ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"]
_BP = ["brainpoolP256r1", "brainpoolP384r1", "brainpoolP512r1"]
_BP13 = ["brainpoolP256r1tls13", "brainpoolP384r1tls13", "brainpoolP512r1tls13"]
_HYBRID = ["X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"]
_MLKEM = ["MLKEM512", "MLKEM768", "MLKEM1024"]
_SUITES13 = ("TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:"
             "TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256")

# (implementation, version, groups it negotiates there, extra server options)
MATRIX: list[tuple[str, int, list[str], dict[str, Any]]] = [
    ("openssl", TLS13, _CLASSIC + _FFDHE, {}),
    ("openssl", TLS12, _CLASSIC + _BP + ["secp256k1", "secp224r1"], {}),
    ("nginx", TLS13, _CLASSIC + _FFDHE, {}),
    ("nginx", TLS12, _CLASSIC + _BP + ["secp256k1", "secp224r1"], {}),
    ("gnutls", TLS13, _CLASSIC + _FFDHE, {}),
    ("gnutls", TLS12, _CLASSIC + ["secp224r1", "secp192r1"], {}),
    ("pyopenssl", TLS13, _CLASSIC + _FFDHE + _BP13 + _HYBRID + _MLKEM, {}),
    ("pyopenssl", TLS12, _CLASSIC + _BP, {}),
    ("tlslite", TLS13, _CLASSIC + _FFDHE + _BP13 + _HYBRID, {}),
    ("tlslite", TLS12, _CLASSIC + _BP + ["secp256k1", "secp224r1", "secp192r1"], {}),
    ("pyssl", TLS13, _CLASSIC + _FFDHE, {}),
    ("pyssl", TLS12, _CLASSIC + _BP + ["secp256k1", "secp224r1"], {}),
]
CASES = [pytest.param(impl, version, group, extra, id=f"{impl}-{version:04x}-{group}")
         for impl, version, groups, extra in MATRIX for group in groups]


def server_for(server_cache: Any, impl: str, version: int, groups: list[str],
               **options: Any) -> Any:
    proto = "tls1_3" if version == TLS13 else "tls1_2"
    return server_cache(impl, groups=groups, proto=proto, **options)


def probe(server: Any, certs: Any, *, http: str | None = "/", **config: Any) -> ProbeRun:
    config.setdefault("alpn", ("http/1.1",))
    options = ProbeOptions(config=ClientConfig(**config), timeout=5.0, annotate=False,
                           http_get=http, cafile=str(certs.ca))
    return run_probe(Target(server.host, server.port), options)


def assert_complete(run: ProbeRun, http: bool = True) -> None:
    r = run.result
    assert r.error is None, r.error
    assert r.handshake_complete and r.finished_verified is True
    if r.key_exchange is not None and r.key_exchange.kind == "RSA":
        assert r.signature_verified is None and "RSA key transport" in (r.signature_detail
                                                                          or "")
    else:
        assert r.signature_verified is True, r.signature_detail
    assert r.verification is not None and r.verification.ok, r.verification
    if http:
        assert r.http_status is not None and r.http_status.startswith("HTTP/1."), r.http_status
        assert " 200 " in r.http_status + " "


@pytest.mark.parametrize("impl, version, group, extra", CASES)
def test_each_group_each_server(server_cache, certs, impl, version, group, extra) -> None:
    groups = [g for impl_, v, gs, _ in MATRIX if (impl_, v) == (impl, version) for g in gs]
    options = dict(extra)
    if "secp192r1" in groups and impl in ("openssl", "nginx"):
        options["ciphers"] = "DEFAULT:@SECLEVEL=0"
    srv = server_for(server_cache, impl, version, groups, **options)
    code = GROUP_CODES[group]
    # tlslite-ng 0.8 servers crash on a TLS 1.3 ALPN offer when they have none configured
    alpn = () if impl == "tlslite" else ("http/1.1",)
    run = probe(srv, certs, versions=(version,), groups=(code,), alpn=alpn,
                cipher_suites_12=(0xC02F, 0xC030, 0xCCA8, 0xC013))
    assert_complete(run)
    r = run.result
    assert r.version is not None and r.version.id == version
    assert r.key_exchange is not None and r.key_exchange.group is not None
    assert r.key_exchange.group.id == code
    assert r.key_exchange.valid is True
    if impl in ("pyopenssl", "tlslite") and version == TLS13:
        seen = srv.connections(wait_for=1)
        assert any(line.startswith("127.0.0.1 ok") for line in seen)


def test_tls12_ffdhe_negotiated_by_gnutls_and_tlslite(server_cache, certs) -> None:
    """gnutls-serv and tlslite-ng pick an RFC 7919 group from the client's list in TLS 1.2."""
    for impl in ("gnutls", "tlslite"):
        srv = server_cache(impl, groups=["ffdhe3072", "X25519"], proto="tls1_2")
        run = probe(srv, certs, versions=(TLS12,), groups=(0x0101,),
                    cipher_suites_12=(0x009E, 0x0033))
        assert_complete(run)
        kx = run.result.key_exchange
        assert kx is not None and kx.kind == "DHE" and kx.dh_group_name == "ffdhe3072"
        assert kx.client_share_bytes == 384 and kx.valid is True
