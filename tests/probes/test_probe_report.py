"""Probe report fixes from the user review: DHE prime checks cached out of the timed
handshake, anonymous suites completed and flagged, verification wording, summary lines."""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path
from unittest import mock

import pytest
from cryptography.hazmat.primitives.asymmetric import dh

from tlsprobe import kex
from tlsprobe.engine.config import TLS12, ClientConfig
from tlsprobe.kex import dhprime
from tlsprobe.probes.timing.run import time_handshake

# A 1024-bit safe prime made with `openssl dhparam 1024`: unknown to OpenSSL's named groups,
# so cryptography's DH_check runs its primality tests on it.
DH1024 = """-----BEGIN DH PARAMETERS-----
MIGHAoGBAOvRvYSYfkoURioBYeCQd0kfyDQpbsbzzU4fTEWq9XG4MLSjYSke+eGZ
Od3WqW7P53oDO2d1E+ueVmUaQtzL1RLgNlDDIg/9QB1VPwTqGK2R0xA6BjE+umRA
FMFI2kPN58Ooj4p7BAXa0OTJQ5QLQ0oE8Z84hnDmscFUgDXP8VsXAgEC
-----END DH PARAMETERS-----
"""
ANON = "ALL:COMPLEMENTOFALL:@SECLEVEL=0"


def target(srv) -> str:
    return f"{srv.host}:{srv.port}"


def _dh1024() -> tuple[int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from cryptography.hazmat.primitives.serialization import load_pem_parameters
        numbers = load_pem_parameters(DH1024.encode()).parameter_numbers()
    return numbers.p, numbers.g


@pytest.fixture
def dh1024_file(tmp_path: Path) -> Path:
    path = tmp_path / "dh1024.pem"
    path.write_text(DH1024)
    return path


# -- 1. the prime check is made once per prime, not in every timed handshake ---------------
def test_unknown_prime_is_checked_once_and_still_refused_when_bad():
    p, g = _dh1024()
    dhprime._cache.clear()
    first = kex.DHShare(p, g)
    assert p in dhprime._cache                        # judged once, by p alone
    with mock.patch.object(dhprime, "_classify", side_effect=AssertionError("checked again")):
        kex.DHShare(p, g)
        kex.DHShare(p, 5)                             # another g does not defeat the cache
    # the peer, through cryptography's own exchange: the pow path agrees with it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = dh.DHParameterNumbers(p, g).parameters().generate_private_key()
        ours = dh.DHPublicNumbers(int.from_bytes(first.public, "big"),
                                  dh.DHParameterNumbers(p, g)).public_key()
        expected = peer.exchange(ours).lstrip(b"\x00")
    peer_public = peer.public_key().public_numbers().y.to_bytes(128, "big")
    assert first.premaster_secret(peer_public) == expected
    with pytest.raises(kex.InvalidShare):
        kex.DHShare(p, g).premaster_secret((p - 1).to_bytes(128, "big"))
    for _ in range(2):   # a composite "prime" is refused as not prime, the verdict cached
        with pytest.raises(kex.InvalidShare, match="is not prime"):
            kex.DHShare(p + 2, g)
    assert dhprime._cache[p + 2].verdict == dhprime.COMPOSITE


def test_timed_dhe_handshake_does_not_pay_for_the_prime_check(tls_server, dh1024_file):
    srv = tls_server("openssl", ciphers="DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0",
                     dhparam=dh1024_file, proto="tls1_2")
    p, g = _dh1024()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.thread_time()
        dh.DHParameterNumbers(p, g).parameters()   # one DH_check of this prime
        check_s = time.thread_time() - t0
    config = ClientConfig(versions=(TLS12,))
    samples = [time_handshake(2, (srv.host, srv.port), config, 5.0) for _ in range(5)]
    assert all(s.outcome.version == TLS12 for s in samples)
    # before: two checks per handshake, so the client CPU was over twice `check_s`
    assert statistics.median(s.cpu_s for s in samples[1:]) < check_s


def test_a_dh_prime_under_2048_bits_is_flagged_weak(run_cli, tls_server, dh1024_file):
    srv = tls_server("openssl", ciphers="DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0",
                     dhparam=dh1024_file, proto="tls1_2")
    res = run_cli(target(srv), "--tls1_2", "--timeout", "5", "--no-verify")
    assert res.returncode == 0, res.stderr
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("DH prime")]
    assert "1024 bits" in line and "WEAK: under 2048 bits" in line


# -- 3. anonymous suites complete, and say loudly that nobody was authenticated ------------
@pytest.mark.parametrize("suite", ["AECDH-AES128-SHA", "ADH-AES256-GCM-SHA384"])
def test_anonymous_suites_complete_and_are_flagged(run_cli, server_cache, suite):
    srv = server_cache("openssl", ciphers=ANON, proto="tls1_2")
    res = run_cli(target(srv), "--tls1_2", "--ciphers", suite, "--timeout", "5")
    assert res.returncode == 0, res.stderr
    assert "Handshake        complete" in res.stdout
    assert "Server Finished  verified" in res.stdout
    assert "Authentication   ANONYMOUS: no server authentication" in res.stdout
    assert "Certificate chain" not in res.stdout


# -- 5. summary details ------------------------------------------------------------------
def test_summary_names_the_real_version_and_shows_session_features(run_cli, server_cache,
                                                                   certs):
    srv = server_cache("openssl", ciphers=ANON, proto="all")
    res = run_cli(target(srv), "--tls1", "--timeout", "5", "--cafile", certs.ca)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "from TLS 1.0 ServerKeyExchange" in out and "TLS 1.2 ServerKeyExchange" not in out
    assert "Extended master secret: yes (RFC 7627)" in out
    assert "Secure Renegotiation IS supported (RFC 5746)" in out
    assert "OCSP response: no response sent" in out       # s_server without -status_file
    assert "  SAN: localhost" in out                     # the test CA's leaf
    res13 = run_cli(target(srv), "--tls1_3", "--timeout", "5", "--cafile", certs.ca)
    assert "Extended master secret" not in res13.stdout  # TLS 1.3 has no such option


# -- 2. the timing table never cuts a figure ----------------------------------------------
@pytest.mark.usefixtures("own_heap")   # the timing probe in this process (conftest.py)
@pytest.mark.parametrize("width", [60, 120, 250])
def test_timing_table_keeps_figures_whole_with_a_long_label(server_cache, width):
    import dataclasses
    import io

    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.timing.run import TimingOptions, measure_timing
    from tlsprobe.report.timing_tables import render_timing
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_2")
    report = measure_timing(Target(srv.host, srv.port), TimingOptions(
        runs=3, warmup=0, versions=(TLS12,), groups=(0x001D,), kex_budget=0.01))
    long = "x25519 (0x001d) with a very long label that a narrow table must wrap somewhere"
    report = dataclasses.replace(report, entries=tuple(
        dataclasses.replace(e, label=long) for e in report.entries))
    entry = report.entries[0]
    out = io.StringIO()
    render_timing(report, out, width=width)
    text = out.getvalue()
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.startswith("Version"))
    assert header.split()[-4:] == ["CPU", "kex", "server+net", "rank"]
    row = next(line for line in text.splitlines() if line.startswith("TLS 1.2"))
    median = entry.handshake_ms.median   # as the table writes it (whole from 100 ms: a
    shown = f"{median:.0f}" if median >= 100 else f"{median:.2f}" if median >= 1 else \
        f"{median:.3f}"                  # busy machine's median can be that slow)
    assert shown in row.split()
    assert f"{entry.handshakes_per_s:.0f}" in row.split()
    words = text.split()
    assert all(word in words for word in long.split())   # wrapped, not cut


@pytest.mark.usefixtures("own_heap")   # the timing probe in this process (conftest.py)
def test_piped_timing_rows_keep_their_group_on_one_line(server_cache):
    """Piped (no width given), each group's row is one line whatever its figures' widths:
    slow figures under load widened the figure columns until the group label wrapped, and
    a reader of the lines (grep, the plot test) lost the row."""
    import dataclasses
    import io

    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.timing.run import TimingOptions, measure_timing
    from tlsprobe.report.timing_tables import render_timing
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_2")
    report = measure_timing(Target(srv.host, srv.port), TimingOptions(
        runs=3, warmup=0, versions=(TLS12,), groups=(0x001D,), kex_budget=0.01))
    label = "x25519 (0x001d) as labelled by a long-winded implementation of this group"
    report = dataclasses.replace(report, entries=tuple(
        dataclasses.replace(e, label=label) for e in report.entries))
    out = io.StringIO()
    render_timing(report, out)
    assert any(line.startswith("TLS 1.2") and label in line
               for line in out.getvalue().splitlines())


# -- the Server Temp Key of the RFC 4492 curves, as openssl s_client prints it -------------
def _s_client_temp_key(port: int, group: str) -> str:
    import re
    import subprocess
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2",
                           "-groups", group, "-cipher", "ECDHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0"],
                          input="", capture_output=True, text=True, timeout=30, check=False)
    found = re.search(r"^Server Temp Key: (.+)$", proc.stdout, re.MULTILINE)
    assert found, proc.stdout + proc.stderr
    return found.group(1)


@pytest.mark.parametrize("group, code", [("sect571r1", 0x000E), ("sect283k1", 0x0009),
                                         ("secp224k1", 0x0014), ("secp256k1", 0x0016)])
def test_legacy_curve_temp_key_as_openssl(run_cli, tls_server, group, code) -> None:
    """The curves of RFC 4492 that TLS 1.2 servers still answer (binary, Koblitz): the
    Server Temp Key and its bits as `openssl s_client` prints them on the same server (the
    order's bits: 570 for sect571r1); it was 'sect571r1, 145-byte server share', bits null."""
    import json
    srv = tls_server("openssl", proto="tls1_2", ciphers="ALL:@SECLEVEL=0",
                     extra=["-groups", group])
    expected = _s_client_temp_key(srv.port, group)
    res = run_cli(target(srv), "--tls1_2", "--groups", group, "--ciphers",
                  "ECDHE-RSA-AES128-GCM-SHA256", "--no-verify", "--first-flight-only", "--json")
    assert res.returncode == 0, res.stderr
    kx = json.loads(res.stdout)["key_exchange"]
    assert kx["group"]["id"] == code, kx
    assert kx["server_temp_key"] == expected, kx
    assert kx["bits"] == int(expected.split(", ")[-1].split()[0]), kx
    if group.startswith("sect"):   # no key can be computed here: the probe stops, and says
        res = run_cli(target(srv), "--tls1_2", "--groups", group, "--no-verify", "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["incomplete_reason"] == \
            f"{group} (0x{code:04x}) cannot be computed here"


def test_a_message_over_max_message_is_not_called_malformed(run_cli, server_cache) -> None:
    """A real server's Certificate (leaf + CA, about 1.6 KB) over `--max-message 1000`: the
    one line says the message is over tlsprobe's limit and how to raise it, not that the
    server sent malformed data (it did not)."""
    srv = server_cache("openssl", groups=["X25519"], proto="tls1_2")
    res = run_cli(target(srv), "--tls1_2", "--no-verify", "--max-message", "1000")
    assert res.returncode == 8, res.stderr     # a limit of ours, not a protocol error (6)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert "malformed" not in line, line
    assert "Certificate" in line and "over 1000" in line and "tlsprobe's limit" in line, line
    assert line.endswith("(--max-message raises it)"), line
