"""Client simulation against real loopback servers: what each profile negotiates agrees
with what the server itself says it sent (openssl s_server -trace), post-quantum groups for
the clients that offer them, HelloRetryRequest answered as the client would, and failures
(no shared version, no shared suite: scan --clients, whose audit names the reason; network:
inconclusive)."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.clients.conftest import DATA, simulate
from tests.helpers.servers import CertSet, Server
from tlsprobe.model.clients import (
    ClientProfile,
    ClientSimulation,
    FailureReason,
    SimStatus,
)
from tlsprobe.report.client_cells import client_cells

MODERN = ("test-chromium", "test-firefox", "test-openssl-s_client", "test-curl")


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Server]:
    """Start openssl s_server with -trace, its stdout unbuffered (stdbuf), so that what it
    says it sent is in its log as soon as it sent it: `traced(tls_server, **options)`."""
    real = shutil.which("openssl")
    assert real is not None and shutil.which("stdbuf") is not None, "openssl, coreutils"
    wrapper = tmp_path / "bin" / "openssl"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec stdbuf -o0 -e0 {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")

    def start(factory: Callable[..., Server], **options: object) -> Server:
        return factory("openssl", extra=["-trace"], **options)

    return start


def _server_hellos(server: Server, since: int) -> list[tuple[int, int, int | None, int | None]]:
    """(version, suite, group, signature scheme) of each ServerHello openssl s_server -trace
    says it sent after offset `since` of its log (TLS 1.2: the group and scheme of its
    ServerKeyExchange; TLS 1.3: the scheme is encrypted, None)."""
    text = server.log_text()[since:]
    blocks = [b for b in re.split(r"\n(?=Sent Record|Received Record)", text)
              if b.startswith("Sent Record")]
    out = []
    for i, block in enumerate(blocks):
        if "    ServerHello," not in block:
            continue
        hi, lo = re.search(r"cipher_suite \{0x(..), 0x(..)\}", block).groups()
        version = re.search(r"supported_versions\(43\), length=2\n\s+TLS 1\.3 \((\d+)\)", block)
        rest = "\n".join(blocks[i:i + 4])
        group = re.search(r"(?:NamedGroup|named_curve): [^\n]*\((\d+)\)$", block if version
                          else rest, re.MULTILINE)
        sig = re.search(r"Signature Algorithm: [^\n]*\(0x(....)\)$", rest, re.MULTILINE)
        out.append((int(version.group(1)) if version else 0x0303, int(hi + lo, 16),
                    int(group.group(1)) if group else None,
                    int(sig.group(1), 16) if sig and not version else None))
    return out


def test_a_modern_server_agrees_with_the_simulation(tls_server, traced, profiles) -> None:
    """Each profile's version, suite and group is what openssl s_server -trace says its
    ServerHello (and ServerKeyExchange, with its signature scheme) carried, over TLS 1.3
    and over TLS 1.2."""
    for proto in ("both", "tls1_2"):
        server = traced(tls_server, proto=proto, cert="ecdsa")
        for name in MODERN:
            since = len(server.log_text())
            sim = simulate(server.port, [profiles[name]])[name]
            assert sim.status == SimStatus.connected, sim
            sent = _server_hellos(server, since)
            assert len(sent) == 1, server.log_tail()
            version, suite, group, sig = sent[0]
            assert (sim.version, sim.cipher_suite, sim.group) == (version, suite, group), name
            assert sim.version == (0x0304 if proto == "both" else 0x0303)
            assert sim.signature_scheme is not None and not sim.hello_retry
            if sig is not None:
                assert sim.signature_scheme == sig


def test_post_quantum_server(tls_server, profiles) -> None:
    """A server with X25519MLKEM768 (pyOpenSSL on OpenSSL 3.5): the Chromium and Firefox
    profiles, which send an X25519MLKEM768 share, negotiate it; OpenSSL 3.0's gets x25519."""
    server = tls_server("pyopenssl", groups=["X25519MLKEM768", "X25519", "P-256"])
    sims = simulate(server.port, [profiles[n] for n in MODERN])
    for name in ("test-chromium", "test-firefox"):
        assert (sims[name].group, sims[name].post_quantum) == (0x11EC, True), sims[name]
        assert sims[name].version == 0x0304 and not sims[name].hello_retry
    for name in ("test-openssl-s_client", "test-curl"):
        assert (sims[name].group, sims[name].post_quantum) == (0x001D, False), sims[name]


def test_hello_retry_request_is_answered_as_the_client_would(tls_server, traced,
                                                             profiles) -> None:
    """A server with secp384r1 only: every profile sent x25519 (and other) shares, gets a
    HelloRetryRequest for secp384r1 and answers it on the same connection; the server then
    sends its ServerHello with a secp384r1 share (its trace: an HRR, then that ServerHello)."""
    server = traced(tls_server, groups=["P-384"], cert="ecdsa")
    for name in MODERN:
        since = len(server.log_text())
        sim = simulate(server.port, [profiles[name]])[name]
        assert sim.status == SimStatus.connected, sim
        assert (sim.group, sim.hello_retry, sim.version) == (0x0018, True, 0x0304), sim
        assert "secp384r1 via HRR" in client_cells(sim)
        sent = _server_hellos(server, since)
        assert [g for _, _, g, _ in sent] == [0x0018, 0x0018], sent   # the HRR, the SH
        assert sent[-1][:2] == (sim.version, sim.cipher_suite)
        assert server.log_text()[since:].count("ClientHello") == 2


def test_hello_retry_request_with_a_cookie(tls_server, profiles) -> None:
    """tlslite-ng puts a cookie in its HelloRetryRequest and goes on only when the second
    hello carries it back: every profile gets there (secp384r1 via HRR), its cookie
    echoed."""
    server = tls_server("tlslite", groups=["P-384"])
    sims = simulate(server.port, list(profiles.values()))
    for name, sim in sims.items():
        assert (sim.group, sim.hello_retry) == (0x0018, True), sim
        assert sim.status == SimStatus.connected, sim
        if name == "test-firefox":   # zlib: tlslite compresses its certificate (RFC 8879)
            assert "compressed" in sim.detail and sim.signature_scheme is None, sim


def test_a_reset_is_retried_then_inconclusive(tls_server, profiles) -> None:
    """A path that resets the first connection: with --retries the simulation asks again
    (and connects); without, it is inconclusive with the reset, never failed."""
    from tests.helpers.faultproxy import RESET, FaultProxy, at
    server = tls_server("openssl")
    for retries, status in ((1, SimStatus.connected), (0, SimStatus.inconclusive)):
        proxy = FaultProxy([(server.host, server.port)], fault=at([1], RESET))
        try:
            sim = simulate(proxy.port, [profiles["test-curl"]], retries=retries)["test-curl"]
        finally:
            proxy.close()
        assert sim.status == status, sim
        assert proxy.faults() == [(1, RESET)]
        if status == SimStatus.inconclusive:
            assert "reset" in sim.detail and sim.reason is None


def test_network_failure_is_inconclusive(profiles) -> None:
    """Nothing listens: each profile is inconclusive with the reason, never failed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sims = simulate(port, list(profiles.values()))
    for sim in sims.values():
        assert sim.status == SimStatus.inconclusive and sim.reason is None
        assert "refused" in sim.detail


def _scan_clients(run_cli, server: Server, checks: str) -> dict[str, dict[str, object]]:
    return _scan_clients_at(run_cli, server.port, checks)


def _scan_clients_at(run_cli, port: int, checks: str) -> dict[str, dict[str, object]]:
    code, out, err = run_cli("scan", f"localhost:{port}", "--checks", checks,
                             "--clients", "--profiles-dir", str(DATA), "--json",
                             "--no-progress", "--no-policy")
    assert code == 0, err
    report = json.loads(out.splitlines()[-1])
    return {c["profile"]: c for c in report["clients"]}


def test_legacy_server_no_shared_version(tls_server, run_cli) -> None:
    """A TLS 1.0-only server: the TLS 1.3-only profile fails with "no shared version" (the
    audit found TLS 1.0 alone); the profiles offering TLS 1.0 connect, or fail with that
    reason where they do not offer it."""
    server = tls_server("openssl", proto="tls1_0")
    sims = _scan_clients(run_cli, server, "versions,suites,groups")
    only13 = sims["test-openssl-tls13-only"]
    assert (only13["status"], only13["reason"]) == ("failed", "no shared version")
    assert "TLS 1.0" in str(only13["detail"])
    for name in ("test-chromium", "test-firefox", "test-python-ssl"):   # TLS 1.2+ only
        assert (sims[name]["status"], sims[name]["reason"]) == ("failed",
                                                                "no shared version"), name
    assert sims["test-openssl-s_client"]["version_name"] == "TLS 1.0"
    assert sims["test-openssl-s_client"]["status"] in ("connected", "failed")


def test_no_shared_suite(tls_server, run_cli) -> None:
    """A TLS 1.2 server with DHE-RSA-AES256-GCM-SHA384 only: the browsers offer no DHE suite
    ("no shared cipher suite", from the suites the audit enumerated); OpenSSL's clients
    offer it and connect with it."""
    server = tls_server("openssl", proto="tls1_2", ciphers="DHE-RSA-AES256-GCM-SHA384",
                        dhparam="ffdhe2048")
    sims = _scan_clients(run_cli, server, "versions,suites")
    for name in ("test-chromium", "test-firefox"):
        assert (sims[name]["status"], sims[name]["reason"]) == ("failed",
                                                                "no shared cipher suite")
    curl = sims["test-curl"]
    assert curl["cipher_suite"] == 0x009F and curl["dh_bits"] == 2048
    assert curl["version_name"] == "TLS 1.2"


def test_trust_under_the_clients_store(tls_server, profiles, certs: CertSet) -> None:
    """With the lab CA as the trust store, a client of the system store trusts the chain;
    Chromium's store (the Chrome Root Store) is not one tlsprobe checks: not checked."""
    server = tls_server("openssl")
    chosen: list[ClientProfile] = [profiles["test-openssl-s_client"], profiles["test-chromium"]]
    sims: dict[str, ClientSimulation] = simulate(server.port, chosen, cafile=str(certs.ca))
    assert sims["test-openssl-s_client"].trusted is True
    assert sims["test-chromium"].trusted is None
    untrusted = simulate(server.port, chosen, trust=True)   # the system store: the lab CA is not in it
    assert untrusted["test-openssl-s_client"].trusted is False
    assert untrusted["test-openssl-s_client"].reason == FailureReason.certificate_not_trusted


def test_hello_too_large_and_version_intolerance(tls_server, run_cli) -> None:
    """Behind a box that resets hellos over 1500 bytes, the browsers' post-quantum hellos
    (about 2 kB) fail with "hello too large" (large_hello found such hellos reset), the
    512-byte ones connect; behind one that drops hellos offering TLS 1.3, in front of a
    TLS 1.2 server, every TLS 1.3-offering client fails with "version intolerance"
    (tls13_intolerance found it)."""
    from tests.checks.intolerant_proxy import IntolerantProxy
    server = tls_server("openssl", proto="both")
    big = IntolerantProxy((server.host, server.port), "max_hello=1500")
    try:
        sims = _scan_clients_at(run_cli, big.port, "versions,large_hello")
    finally:
        big.close()
    for name in ("test-chromium", "test-firefox"):
        assert (sims[name]["status"], sims[name]["reason"]) == ("failed", "hello too large")
        assert "1800-byte hello" in str(sims[name]["detail"])
    assert sims["test-curl"]["version_name"] == "TLS 1.3"
    old = tls_server("openssl", proto="tls1_2")
    t13 = IntolerantProxy((old.host, old.port), "tls13")
    try:
        sims = _scan_clients_at(run_cli, t13.port, "versions,suites,groups,tls13_intolerance")
    finally:
        t13.close()
    for name in ("test-chromium", "test-curl", "test-openssl-tls13-only"):
        assert sims[name]["status"] == "failed", sims[name]
    assert sims["test-chromium"]["reason"] == "version intolerance"
    assert sims["test-openssl-tls13-only"]["reason"] == "no shared version"


def test_a_group_tlsprobe_cannot_make_is_inconclusive(tls_server, profiles,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """When kex cannot make a share the client sent (here: x25519 made unavailable), the
    share is random bytes; a server choosing that group leaves the simulation inconclusive
    with the reason, what it chose stated, never "failed"."""
    from tlsprobe import kex
    real = kex.generate

    def no_x25519(group: int) -> kex.KeyShare:
        if group == 0x001D:
            raise kex.UnsupportedGroup("x25519 made unavailable by the test")
        return real(group)

    monkeypatch.setattr(kex, "generate", no_x25519)
    server = tls_server("openssl", groups=["X25519", "P-256"])
    sims = simulate(server.port, [profiles["test-curl"], profiles["test-firefox"]])
    curl = sims["test-curl"]
    assert curl.status == SimStatus.inconclusive and curl.reason is None, curl
    assert (curl.version, curl.group) == (0x0304, 0x001D)
    assert "cannot make" in curl.detail
    # Firefox sent a P-256 share too, but the server prefers x25519 (its own order)
    assert sims["test-firefox"].status == SimStatus.inconclusive


def test_legacy_signatures_refused_as_openssl_3_does(tls_server, profiles) -> None:
    """A TLS 1.1 server signing its ECDHE key exchange (MD5+SHA-1): OpenSSL 3's profiles
    offer TLS 1.1 but list no SHA-1 signature scheme, and the real openssl s_client aborts
    ("legacy sigalg disallowed"): failed, no shared signature algorithm; over a suite
    without a signature (RSA key transport) they connect."""
    signed = tls_server("openssl", proto="tls1_1", ciphers="ECDHE-RSA-AES128-SHA")
    sim = simulate(signed.port, [profiles["test-openssl-s_client"]])["test-openssl-s_client"]
    assert (sim.status, sim.reason, sim.version) == (SimStatus.failed,
                                                     FailureReason.no_shared_signature, 0x0302)
    plain = tls_server("openssl", proto="tls1_1", ciphers="AES128-SHA")
    sim = simulate(plain.port, [profiles["test-openssl-s_client"]])["test-openssl-s_client"]
    assert (sim.status, sim.version, sim.cipher_suite) == (SimStatus.connected, 0x0302, 0x002F)


@pytest.mark.parametrize("proto", ["tls1_3", "tls1_2"])
def test_a_server_requiring_a_client_certificate_refuses_the_clients(
        tls_server, profiles, certs: CertSet, proto: str) -> None:
    """openssl s_server -Verify 1 asks for a client certificate and insists: the real curl,
    openssl s_client, gnutls-cli and Java (none has a certificate to send) all fail
    (TLS 1.3: certificate_required after their Finished; TLS 1.2: handshake_failure after
    their empty Certificate). The first flight alone does not show that (the same
    CertificateRequest comes from a server for which the certificate is optional), so the
    simulation finishes the handshake as the client would: failed, refused, with the alert;
    with -verify 1 (optional) the same clients connect, the detail saying it was asked."""
    chosen = [profiles["test-curl"], profiles["test-openssl-s_client"]]
    required = tls_server("openssl", proto=proto, extra=["-Verify", "1", "-CAfile", str(certs.ca)])
    for sim in simulate(required.port, chosen).values():
        assert (sim.status, sim.reason) == (SimStatus.failed, FailureReason.refused), sim
        assert "client certificate" in sim.detail, sim
        assert ("certificate_required (116)" if proto == "tls1_3"
                else "handshake_failure (40)") in sim.detail, sim
        assert sim.version == (0x0304 if proto == "tls1_3" else 0x0303), sim
    optional = tls_server("openssl", proto=proto, extra=["-verify", "1", "-CAfile", str(certs.ca)])
    for sim in simulate(optional.port, chosen).values():
        assert sim.status == SimStatus.connected, sim
        assert "went on without one" in sim.detail, sim
