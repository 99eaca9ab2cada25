"""Completed handshakes for a representative set of cipher suites, signature schemes and
versions: TLS 1.3's five suites (and HelloRetryRequest with and without a cookie), TLS 1.2
ECDHE / DHE / RSA key exchange with AES-GCM, AES-CCM(_8), ChaCha20-Poly1305 and AES/3DES-CBC
with and without encrypt_then_mac, RSA-PKCS#1 / RSA-PSS / ECDSA / Ed25519 signatures, and
TLS 1.0 / 1.1 with their MD5+SHA1 and SHA-1 signatures and (TLS 1.0) chained CBC IVs.

Each probe offers exactly one suite, so the server must run it; the HTTP exchange after the
handshake proves that both sides' record protection and Finished agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.probes.test_probe_complete import TLS10, TLS11, TLS12, TLS13, assert_complete, probe

from tlsprobe.session.flow import MessageEvent
from tlsprobe.wire.hello import ServerHello

_OPENSSL_12 = ("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:"
               "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA384:"
               "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-CCM:DHE-RSA-AES128-CCM8:"
               "DHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES256-SHA:AES128-GCM-SHA256:AES256-CCM:"
               "AES128-CCM8:AES128-SHA256:AES256-SHA:DES-CBC3-SHA:@SECLEVEL=0")
_OPENSSL_ECDSA = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                  "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-CCM:ECDHE-ECDSA-AES256-CCM8:"
                  "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384")
_SUITES13 = ("TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:"
             "TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256")


def server_hello(run: Any) -> ServerHello:
    return next(ev.decoded.message for ev in run.events if isinstance(ev, MessageEvent)
                and isinstance(ev.decoded.message, ServerHello) and ev.direction == 1)


@pytest.mark.parametrize("suite", [0x1301, 0x1302, 0x1303, 0x1304, 0x1305])
def test_tls13_every_suite(server_cache, certs, suite) -> None:
    srv = server_cache("openssl", proto="tls1_3", groups=["X25519"], ciphersuites=_SUITES13)
    run = probe(srv, certs, versions=(TLS13,), groups=(0x1D,), cipher_suites_13=(suite,))
    assert_complete(run)
    assert run.result.cipher is not None and run.result.cipher.id == suite


@pytest.mark.parametrize("suite", [0x1301, 0x1302, 0x1303, 0x1304])
def test_tls13_suites_gnutls(server_cache, certs, suite) -> None:
    srv = server_cache("gnutls", proto="tls1_3", ciphers="NORMAL:+AES-128-CCM")
    run = probe(srv, certs, versions=(TLS13,), groups=(0x1D,), cipher_suites_13=(suite,))
    assert_complete(run)
    assert run.result.cipher is not None and run.result.cipher.id == suite


@pytest.mark.parametrize("impl", ["openssl", "tlslite"])
def test_tls13_hello_retry_request_completes(server_cache, certs, impl) -> None:
    """openssl s_server's HelloRetryRequest has no cookie, tlslite-ng's has one."""
    srv = server_cache(impl, proto="tls1_3", groups=["P-256"])
    run = probe(srv, certs, versions=(TLS13,), groups=(0x1D, 0x17), key_share_groups=(0x1D,),
                alpn=() if impl == "tlslite" else ("http/1.1",))
    assert_complete(run)
    r = run.result
    assert r.hello_retry_request is not None and r.hello_retry_request.id == 0x17
    assert r.key_exchange is not None and r.key_exchange.source == "hello_retry_request"
    hrr = next(ev.decoded.message for ev in run.events if isinstance(ev, MessageEvent)
               and getattr(ev.decoded.message, "is_hello_retry_request", False))
    assert (hrr.extension(44) is not None) == (impl == "tlslite")
    if impl == "tlslite":  # the cookie went back in the second ClientHello
        hello2 = [ev.decoded.message for ev in run.events if isinstance(ev, MessageEvent)
                  and ev.direction == 0 and ev.msg_type == 1][1]
        assert hello2.extension(44).data == hrr.extension(44).data


# (suite, client overrides) on an RSA certificate, TLS 1.2
RSA_12 = [
    (0xC02F, {}), (0xC030, {}), (0xCCA8, {}), (0xC013, {}),
    (0xC013, {"encrypt_then_mac": False}), (0xC028, {}), (0x009E, {}), (0xC09F, {}),
    (0xC0A2, {}), (0xCCAA, {}), (0x0039, {"encrypt_then_mac": False}), (0x009C, {}),
    (0xC09D, {}), (0xC0A0, {}), (0x003C, {}), (0x0035, {}),
    (0xC02F, {"extended_master_secret": False}),
]


@pytest.mark.parametrize("suite, overrides", RSA_12,
                         ids=[f"{s:04x}-{'-'.join(o) or 'default'}" for s, o in RSA_12])
def test_tls12_rsa_certificate_suites(server_cache, certs, suite, overrides) -> None:
    srv = server_cache("openssl", proto="tls1_2", groups=["X25519"], ciphers=_OPENSSL_12,
                       dhparam="ffdhe2048")
    run = probe(srv, certs, versions=(TLS12,), groups=(0x1D, 0x100),
                cipher_suites_12=(suite,), **overrides)
    assert_complete(run)
    r = run.result
    assert r.cipher is not None and r.cipher.id == suite
    sh = server_hello(run)
    assert (sh.extension(23) is not None) == overrides.get("extended_master_secret", True)
    cbc = suite in (0xC013, 0xC028, 0x0039, 0x003C, 0x0035)
    assert (sh.extension(22) is not None) == (cbc and overrides.get("encrypt_then_mac", True))
    assert r.key_exchange is not None
    if r.key_exchange.kind == "RSA":
        assert r.signature_scheme is None and r.signature_verified is None
    else:
        assert r.signature_detail is not None and "ServerKeyExchange" in r.signature_detail


@pytest.mark.parametrize("suite", [0xC02B, 0xC02C, 0xCCA9, 0xC0AC, 0xC0AF, 0xC009, 0xC023,
                                   0xC024])
def test_tls12_ecdsa_certificate_suites(server_cache, certs, suite) -> None:
    srv = server_cache("openssl", proto="tls1_2", cert="ecdsa", ciphers=_OPENSSL_ECDSA)
    run = probe(srv, certs, versions=(TLS12,), groups=(0x17,), cipher_suites_12=(suite,))
    assert_complete(run)
    assert run.result.cipher is not None and run.result.cipher.id == suite
    assert run.result.signature_scheme is not None
    assert run.result.signature_scheme.name.startswith("ecdsa")


@pytest.mark.parametrize("scheme", [0x0401, 0x0501, 0x0601, 0x0201, 0x0804, 0x0805, 0x0806])
def test_tls12_rsa_signature_schemes(server_cache, certs, scheme) -> None:
    srv = server_cache("openssl", proto="tls1_2", groups=["X25519"], ciphers=_OPENSSL_12,
                       dhparam="ffdhe2048")
    run = probe(srv, certs, versions=(TLS12,), groups=(0x1D,), cipher_suites_12=(0xC02F,),
                signature_algorithms=(scheme,))
    assert_complete(run)
    assert run.result.signature_scheme is not None
    assert run.result.signature_scheme.id == scheme


@pytest.mark.parametrize("cert, version, scheme", [
    ("ecdsa", TLS13, 0x0403), ("ed25519", TLS13, 0x0807), ("ed25519", TLS12, 0x0807),
    ("rsa", TLS13, 0x0806)])
def test_certificate_key_types(server_cache, certs, cert, version, scheme) -> None:
    proto = "tls1_3" if version == TLS13 else "tls1_2"
    srv = server_cache("openssl", proto=proto, cert=cert, groups=["X25519"])
    run = probe(srv, certs, versions=(version,), groups=(0x1D,),
                cipher_suites_12=(0xC02B, 0xC02F), signature_algorithms=(scheme,))
    assert_complete(run)
    assert run.result.signature_scheme is not None
    assert run.result.signature_scheme.id == scheme


# TLS 1.0 / 1.1: (version, certificate, suite, what signed the ServerKeyExchange)
LEGACY = [
    (TLS10, "rsa", 0xC013, "RSA MD5+SHA1"), (TLS10, "rsa", 0x0039, "RSA MD5+SHA1"),
    (TLS10, "rsa", 0x002F, None),
    (TLS10, "ecdsa", 0xC009, "ECDSA SHA1"), (TLS11, "rsa", 0xC014, "RSA MD5+SHA1"),
    (TLS11, "rsa", 0x0035, None), (TLS11, "ecdsa", 0xC00A, "ECDSA SHA1"),
]


@pytest.mark.parametrize("version, cert, suite, signed", LEGACY,
                         ids=[f"{v:04x}-{c}-{s:04x}" for v, c, s, _ in LEGACY])
@pytest.mark.parametrize("etm", [True, False], ids=["etm", "mte"])
def test_tls10_tls11(server_cache, certs, version, cert, suite, signed, etm) -> None:
    proto = "tls1_0" if version == TLS10 else "tls1_1"
    srv = server_cache("openssl", proto=proto, cert=cert, dhparam="ffdhe2048",
                       ciphers="ALL:@SECLEVEL=0")
    run = probe(srv, certs, versions=(version,), groups=(0x17, 0x1D),
                cipher_suites_12=(suite,), encrypt_then_mac=etm)
    assert_complete(run)
    r = run.result
    assert r.version is not None and r.version.id == version
    assert r.cipher is not None and r.cipher.id == suite
    if signed:
        assert r.signature_detail == f"{signed} ServerKeyExchange"
    else:
        assert r.signature_detail is not None and "RSA key transport" in r.signature_detail


@pytest.mark.parametrize("impl, suite", [
    ("tlslite", 0xC02F), ("tlslite", 0xC013), ("tlslite", 0x009E), ("tlslite", 0x009C),
    ("tlslite", 0xCCA8), ("tlslite", 0xC0A0), ("gnutls", 0xC02F), ("gnutls", 0xCCA8),
    ("gnutls", 0xC013), ("gnutls", 0x009E), ("gnutls", 0xC012), ("gnutls", 0x000A),
    ("nginx", 0xC030), ("nginx", 0xC014)])
def test_tls12_suites_other_servers(server_cache, certs, impl, suite) -> None:
    options: dict[str, Any] = {"proto": "tls1_2"}
    if impl == "tlslite":
        options.update(ciphers="aes128gcm,aes256gcm,chacha20-poly1305,aes128ccm,aes128ccm_8,"
                       "aes128,aes256", ciphersuites="kx:ecdhe_rsa,dhe_rsa,rsa")
    elif impl == "gnutls":
        options.update(ciphers="NORMAL:+DHE-RSA:+RSA:+AES-128-CBC:+3DES-CBC:+SHA1")
    else:
        options.update(ciphers="ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-SHA")
    srv = server_cache(impl, **options)
    run = probe(srv, certs, versions=(TLS12,), groups=(0x1D, 0x100),
                cipher_suites_12=(suite,), alpn=() if impl == "tlslite" else ("http/1.1",))
    assert_complete(run)
    assert run.result.cipher is not None and run.result.cipher.id == suite


@pytest.mark.parametrize("suite", [0xC013, 0xC012, 0x000A])
def test_tls10_tlslite(server_cache, certs, suite) -> None:
    """TLS 1.0 against a second implementation, with AES and 3DES chained-IV CBC."""
    srv = server_cache("tlslite", proto="tls1_0", ciphers="aes128,3des")
    run = probe(srv, certs, versions=(TLS10,), groups=(0x1D,), cipher_suites_12=(suite,),
                alpn=())
    assert_complete(run)
    assert run.result.cipher is not None and run.result.cipher.id == suite
    if suite != 0x000A:
        assert run.result.signature_detail == "RSA MD5+SHA1 ServerKeyExchange"


@pytest.mark.parametrize("proto, version", [("tls1_2", TLS12), ("tls1_3", TLS13)])
def test_certificate_request_answered_without_certificate(server_cache, certs, proto,
                                                          version) -> None:
    """A server asking for an optional client certificate gets an empty Certificate."""
    srv = server_cache("openssl", proto=proto, groups=["X25519"], extra=["-verify", "1"])
    run = probe(srv, certs, versions=(version,), groups=(0x1D,))
    assert_complete(run)
    ours = [ev for ev in run.events if isinstance(ev, MessageEvent) and ev.direction == 0
            and ev.msg_type == 11]
    assert len(ours) == 1 and ours[0].decoded.message.certificate_list == []
    assert any(isinstance(ev, MessageEvent) and ev.direction == 1 and ev.msg_type == 13
               for ev in run.events)
