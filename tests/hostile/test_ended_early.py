"""A handshake that ends early establishes no absence of what would have come later.

Scripted servers send real messages up to a point, then a fatal alert; the probe (and
`tlsprobe pcap` on the probe's own --pcap-out and --keylog) must not report as absent what
the server never got to send: the TLS 1.3 ALPN choice (in EncryptedExtensions), a TLS 1.2
ServerKeyExchange, a TLS 1.2 CertificateStatus the ServerHello announced (nor may the
scan's stapling checks judge from it), a CertificateRequest. Each has a
control where the server's flight went past the message's place and its absence is a fact.
(Before: "ALPN (none)", "Key exchange ECDHE, no ServerKeyExchange" and "OCSP announced
(status_request), no CertificateStatus" for servers that had stopped before.)"""
from __future__ import annotations

import datetime
import json
from functools import lru_cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from tlsprobe.wire import ClientHello
from tlsprobe.wire import extensions as ext

from .catalog import HOLD
from .runner import ProbeOutcome, run_tlsprobe
from .server import Conn, HostileServer, Script
from .tls import (
    CCS,
    TLS12_SUITE,
    Tls12Server,
    Tls13Server,
    alert,
    certificate_12,
    handshake_records,
    identity,
    record,
    server_hello,
)

FATAL, HANDSHAKE_FAILURE, STATUS_REQUEST = 2, 40, 5
ECDSA_P256_SHA256 = 0x0403


async def tls13_alert_after_server_hello(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(tls.server_hello) + alert(FATAL, HANDSHAKE_FAILURE))
    await conn.hold(HOLD)


async def tls13_alert_after_encrypted_extensions(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(tls.server_hello) + record(CCS, b"\x01")
                    + tls.encrypt(tls.encrypted_extensions())
                    + tls.encrypt(bytes([FATAL, HANDSHAKE_FAILURE]), content_type=21))
    await conn.hold(HOLD)


async def tls12_alert_after_server_hello(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(tls.flight[0]) + alert(FATAL, HANDSHAKE_FAILURE))
    await conn.hold(HOLD)


async def tls12_no_server_key_exchange(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    server_hello_, certificate, _, done = tls.flight
    await conn.send(handshake_records(server_hello_, certificate, done))
    await conn.hold(HOLD)


async def tls13_alert_before_finished(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(tls.hello_and_flight(tls.flight()[:3])
                    + tls.encrypt(bytes([FATAL, HANDSHAKE_FAILURE]), content_type=21))
    await conn.hold(HOLD)


async def tls13_whole_flight(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(tls.hello_and_flight(tls.flight()))
    await conn.hold(HOLD)


def _announcing(tls: Tls12Server, ch: ClientHello) -> bytes:
    """The flight's ServerHello again, with an empty status_request extension."""
    exts = [ext.renegotiation_info(), ext.ec_point_formats(), ext.Extension(STATUS_REQUEST)]
    return server_hello(ch, suite=TLS12_SUITE, random=tls.random, extensions=exts)


async def tls12_status_announced_alert_after_certificate(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(_announcing(tls, ch), certificate_12([identity().der]))
                    + alert(FATAL, HANDSHAKE_FAILURE))
    await conn.hold(HOLD)


async def tls12_status_announced_never_sent(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(_announcing(tls, ch), *tls.flight[1:]))
    await conn.hold(HOLD)


@lru_cache(maxsize=1)
def must_staple_leaf() -> bytes:
    """identity()'s key in a self-signed leaf whose TLS Feature lists status_request."""
    key, name = identity().key, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                "hostile.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.TLSFeature([x509.TLSFeatureType.status_request]), False)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


async def _must_staple(conn: Conn, *, past: bool) -> None:
    """A TLS 1.2 flight with the must-staple leaf (a hello without its suite refused) and no
    CertificateStatus: the
    ServerHello announces one (when asked for), then a fatal alert right after the
    Certificate, or (`past`) the rest of the flight without it."""
    ch = await conn.client_hello()
    if TLS12_SUITE not in ch.cipher_suites or ECDSA_P256_SHA256 not in \
            ch.signature_algorithms:   # a hello for another chain: refused
        await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
        return
    tls = Tls12Server(ch, conn.hello_raw[-1])
    asked = any(e.type == STATUS_REQUEST for e in ch.extensions)
    hello = _announcing(tls, ch) if asked else tls.flight[0]
    rest = handshake_records(*tls.flight[2:]) if past else alert(FATAL, HANDSHAKE_FAILURE)
    await conn.send(handshake_records(hello, certificate_12([must_staple_leaf()])) + rest)
    await conn.hold(HOLD)


async def tls12_must_staple_alert_after_certificate(conn: Conn) -> None:
    await _must_staple(conn, past=False)


async def tls12_must_staple_never_stapled(conn: Conn) -> None:
    await _must_staple(conn, past=True)


def _row(out: ProbeOutcome, label: str) -> str:
    """The value of the first summary row named `label`."""
    for line in out.stdout.splitlines():
        if line.startswith(label + " "):
            return line[len(label):].strip()
    raise AssertionError(f"no {label} row in:\n{out.stdout}\n{out.stderr}")


def _probe(server: HostileServer, script: Script, *args: str) -> ProbeOutcome:
    listener = server.serve(script)
    return run_tlsprobe(f"127.0.0.1:{listener.port}", "--timeout", "5", *args,
                        hard_timeout=60.0)


def test_tls13_alpn_not_known_before_encrypted_extensions(hostile_server: HostileServer,
                                                           tmp_path: Path) -> None:
    pcap, keylog = tmp_path / "early.pcap", tmp_path / "keys.log"
    out = _probe(hostile_server, tls13_alert_after_server_hello, "--pcap-out", str(pcap),
                 "--keylog", str(keylog))
    assert out.returncode == 5, out.stderr
    assert _row(out, "ALPN").startswith("(not known: no EncryptedExtensions"), out.stdout
    offline = run_tlsprobe("pcap", str(pcap), "--keylog", str(keylog), "--details",
                           hard_timeout=60.0)
    assert offline.returncode == 0, offline.stderr
    assert _row(offline, "ALPN").startswith("(not known: no EncryptedExtensions"), \
        offline.stdout
    control = _probe(hostile_server, tls13_alert_after_encrypted_extensions)
    assert control.returncode == 5, control.stderr
    assert _row(control, "ALPN") == "(none)", control.stdout


def test_tls12_server_key_exchange_not_known_before_its_place(
        hostile_server: HostileServer, tmp_path: Path) -> None:
    pcap = tmp_path / "early.pcap"
    out = _probe(hostile_server, tls12_alert_after_server_hello, "--tls1_2",
                 "--pcap-out", str(pcap))
    assert out.returncode == 5, out.stderr
    not_known = "ECDHE, not known: the handshake ended before the ServerKeyExchange"
    assert _row(out, "Key exchange") == not_known, out.stdout
    offline = run_tlsprobe("pcap", str(pcap), "--details", hard_timeout=60.0)
    assert _row(offline, "Key exchange") == not_known, offline.stdout
    control = _probe(hostile_server, tls12_no_server_key_exchange, "--tls1_2")
    assert control.returncode == 6, control.stderr
    assert _row(control, "Key exchange") == "ECDHE, no ServerKeyExchange", control.stdout


def test_tls12_certificate_status_not_known_before_its_place(
        hostile_server: HostileServer) -> None:
    out = _probe(hostile_server, tls12_status_announced_alert_after_certificate, "--tls1_2")
    assert out.returncode == 5, out.stderr
    assert _row(out, "OCSP") == ("announced (status_request); the handshake ended before "
                                 "its CertificateStatus"), out.stdout
    control = _probe(hostile_server, tls12_status_announced_never_sent, "--tls1_2",
                     "--first-flight-only")
    assert control.returncode == 0, control.stderr
    assert _row(control, "OCSP") == "announced (status_request), no CertificateStatus", \
        control.stdout


def _requested(out: ProbeOutcome) -> object:
    return json.loads(out.stdout)["client_certificate_requested"]


def test_certificate_request_not_known_before_its_place(
        hostile_server: HostileServer) -> None:
    """TLS 1.0-1.2: a CertificateRequest comes before the ServerHelloDone; TLS 1.3 before
    the server's Finished. Ended before: null (was false); past it: false."""
    for script, args, code in ((tls12_alert_after_server_hello, ("--tls1_2",), 5),
                               (tls13_alert_after_encrypted_extensions, (), 5),
                               (tls13_alert_before_finished, (), 5)):
        out = _probe(hostile_server, script, "--json", *args)
        assert out.returncode == code, (script.__name__, out.stderr)
        assert _requested(out) is None, (script.__name__, out.stdout)
    for script, args, code in ((tls12_no_server_key_exchange, ("--tls1_2",), 6),
                               (tls13_whole_flight, (), 0)):
        control = _probe(hostile_server, script, "--json", *args)
        assert control.returncode == code, (script.__name__, control.stderr)
        assert _requested(control) is False, (script.__name__, control.stdout)


STAPLING_CHECKS = ("must_staple", "ocsp_response", "ocsp_stapling", "sct")


def _checks(hostile_server: HostileServer, script: Script) -> dict[str, dict[str, object]]:
    """`scan --checks` of the stapling checks against `script`: each check's JSON result."""
    listener = hostile_server.serve(script)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--timeout", "3", "--retries",
                       "0", "--no-progress", "--checks", ",".join(STAPLING_CHECKS), "--json",
                       hard_timeout=120.0)
    assert out.returncode in (0, 1, 5), out.stderr
    doc = json.loads(out.stdout)
    return {c["name"]: c for audit in (doc if isinstance(doc, list) else [doc])
            for c in audit["check_results"] if c["name"] in STAPLING_CHECKS}


def test_stapling_not_judged_before_the_certificate_status(
        hostile_server: HostileServer) -> None:
    """A TLS 1.2 server whose leaf demands stapling and whose handshakes end right after
    the Certificate: whether it staples is not known, so must_staple, ocsp_stapling,
    ocsp_response and sct (an OCSP response may carry SCTs) are inconclusive (were:
    vulnerable "no OCSP response on two connections", not supported, not applicable, not
    supported). The control goes past the CertificateStatus's place without one."""
    got = _checks(hostile_server, tls12_must_staple_alert_after_certificate)
    assert set(got) == set(STAPLING_CHECKS), got
    for name, result in got.items():
        assert result["verdict"] == "inconclusive", (name, result)
        assert "ended before" in str(result["reason"]) or \
            "not known" in str(result["reason"]), (name, result)
    control = _checks(hostile_server, tls12_must_staple_never_stapled)
    assert control["must_staple"]["verdict"] == "vulnerable", control
    assert control["ocsp_stapling"]["verdict"] == "not supported", control
    assert control["ocsp_response"]["verdict"] == "not applicable", control
    assert control["sct"]["verdict"] == "not supported", control
