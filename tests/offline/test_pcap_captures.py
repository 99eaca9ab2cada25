"""The project's own captures (captures/, recorded on loopback by tools/record_captures.py)
against their expected results (captures/expected.json, written from each case's server
and client configuration and checked against tshark when recorded)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.engine.keylog import load_keylog
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.model.capture import ConnectionReport
from tlsprobe.report.trace import TraceFormatter

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
EXPECTED: dict[str, Any] = json.loads((CAPTURES / "expected.json").read_text())


def traced(options: dict[str, Any]) -> dict[str, Any]:
    """The options, with the trace formatter the command passes when a trace is asked for."""
    return {**options, "trace_formatter": TraceFormatter} if options.get("trace") else options


def reports(name: str, **options: Any) -> list[ConnectionReport]:
    return [r for r, _ in CaptureAnalysis(str(CAPTURES / name), AnalyzerOptions(**traced(options)))]


def facts_of(r: ConnectionReport) -> dict[str, Any]:
    kx = r.key_exchange
    return {"version": r.version.hex if r.version else None,
            "cipher_suite": r.cipher.hex if r.cipher else None,
            "group": kx.group.hex if kx and kx.group else None,
            "group_source": kx.source if kx else None,
            "server_share_bytes": kx.server_share_bytes if kx else None,
            "client_share_bytes": kx.client_share_bytes if kx else None,
            "dh_prime_bits": kx.dh_prime_bits if kx else None,
            "sni": r.sni, "resumption": r.resumption, "midstream": r.midstream,
            "hello_retry_request": r.hello_retry_request.hex if r.hello_retry_request else None,
            "alerts": [[a.direction, a.level, a.description] for a in r.alerts],
            "certificates": len(r.certificates), "gap": r.gap_bytes > 0,
            "session_ticket_lifetime": r.session_ticket_lifetime,
            "client_auth": [r.client_auth.requested, r.client_auth.sent,
                            len(r.client_auth.certificates)] if r.client_auth else None}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_gives_the_expected_handshakes(name: str) -> None:
    entry = EXPECTED[name]
    got = reports(name)
    assert len(got) == len(entry["connections"]), [r.client for r in got]
    for report, want in zip(got, entry["connections"]):
        have = facts_of(report)
        wrong = {k: (v, have[k]) for k, v in want.items() if k in have and
                 (v is not None or k in ("sni", "version")) and have[k] != v}
        assert not wrong, (name, wrong, report.problems)
        assert report.client_port != report.server_port
        assert report.server_port == entry["server_port"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fast_and_flow_readers_agree(name: str) -> None:
    """The fast reader and the session.Flow reader (used for --msg) report the same."""
    fast = reports(name)
    flow = reports(name, trace=True)
    assert len(fast) == len(flow)
    for a, b in zip(fast, flow):
        b = replace(b, timings=replace(b.timings, handshake_ms=a.timings.handshake_ms))
        assert a == b, name


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e.get("keylog") and
                                         not any(c.get("alerts") for c in e["connections"])))
def test_key_log_decrypts_the_whole_handshake(name: str) -> None:
    keylog = load_keylog(CAPTURES / EXPECTED[name]["keylog"])
    for r in reports(name, keylog=keylog):
        assert r.decrypted and r.handshake_complete, (name, r.problems)
        assert not r.problems
        if r.resumption is None:
            assert len(r.certificates) == 2  # leaf and test CA, also in TLS 1.3
            assert r.certificates[0].subject == "CN=localhost"
            assert (r.signature_scheme is None) == (r.key_exchange.kind == "RSA")
        assert any("Finished (decrypted)" in m for m in r.messages)


def test_tls13_certificates_only_with_keys() -> None:
    plain = reports("tls13_x25519.pcap")[0]
    assert plain.certificates == () and plain.signature_scheme is None and not plain.decrypted
    assert plain.encrypted and plain.handshake_complete is None


def test_keys_embedded_in_pcapng_are_used(tmp_path: Path) -> None:
    (r,) = reports("tls13_x25519_dsb.pcapng")
    assert r.decrypted and r.handshake_complete and len(r.certificates) == 2
    (r,) = reports("tls13_x25519_dsb.pcapng", embedded_keys=False)
    assert not r.decrypted and r.certificates == ()


def test_gzip_capture_reads_like_the_plain_one() -> None:
    a, = reports("tls13_x25519.pcap")
    b, = reports("tls13_x25519.pcap.gz")
    assert replace(b, file=a.file) == a


def test_records_split_over_segments_reordered_and_duplicated() -> None:
    (split,) = reports("tls12_split.pcap")
    (messy,) = reports("tls12_split_reordered.pcap")
    assert split.offer is not None and split.offer.client_hello_bytes > 100
    keep = ("offer", "version", "cipher", "key_exchange", "certificates", "fingerprints",
            "messages", "client_bytes", "server_bytes", "alerts", "session_ticket_lifetime")
    for field in keep:
        assert getattr(split, field) == getattr(messy, field), field
    assert not messy.problems and messy.gap_bytes == 0


def test_gap_is_reported_and_reading_resumes_after_it() -> None:
    (r,) = reports("tls12_split_gap.pcap")
    assert r.gap_bytes > 0
    # messages after the lost segment were still read: the client's key exchange and the
    # server's NewSessionTicket come after it
    assert ">>> ClientKeyExchange" in r.messages and "<<< NewSessionTicket" in r.messages
    assert r.key_exchange is not None and r.key_exchange.client_share_bytes == 32


def test_midstream_capture_is_flagged() -> None:
    (r,) = reports("tls12_x25519_midstream.pcap")
    assert r.midstream and r.offer is None and r.fingerprints.ja4 is None
    assert r.fingerprints.ja3s is not None and r.version is not None


def _certificate(san: bytes) -> bytes:
    """A self-signed certificate (DER) whose subjectAltName dNSName is `san`, spliced in
    after signing (its signature no longer matches; only parsing matters here)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "server.example")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(7).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("ZZZZZZZZ")]), False)
            .sign(key, hashes.SHA256()))
    der = cert.public_bytes(serialization.Encoding.DER)
    assert len(san) == 8 and der.count(b"ZZZZZZZZ") == 1
    return der.replace(b"ZZZZZZZZ", san)


def test_a_subject_alt_name_that_does_not_parse_is_not_reported_absent(run_cli, tmp_path: Path
                                                                       ) -> None:  # type: ignore[no-untyped-def]
    """cryptography refuses a dNSName that is not IA5 (bytes over 0x7f): the certificate
    has a subjectAltName, only unreadable; `san` [] (and `scan`'s certificate.no_san) would
    say it has none. The name says it is undecodable, as an undecodable subject does."""
    from tests.helpers.capbuild import tls12_flight_pcap
    path = tmp_path / "bad_san.pcap"
    path.write_bytes(tls12_flight_pcap([_certificate(b"\xff\xfe\x80bad.x")]))
    res = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    leaf = json.loads(res.stdout.splitlines()[0])["certificates"][0]
    assert leaf["subject"] == "CN=server.example"
    assert len(leaf["san"]) == 1 and leaf["san"][0].startswith(
        "(undecodable subjectAltName: "), leaf["san"]
    path.write_bytes(tls12_flight_pcap([_certificate(b"ok.a.b.c")]))
    res = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    assert json.loads(res.stdout.splitlines()[0])["certificates"][0]["san"] == ["ok.a.b.c"]


@pytest.mark.parametrize("client_sid, server_sid, ticket, expected", [
    (b"\x07" * 32, b"\x07" * 32, None, "session_id"),        # the ID echoed: resumed by it
    (b"", b"", b"\x33" * 64, "session_ticket"),               # a ticket offered
    (b"", b"", None, None),                                   # neither: not known how
    (b"", b"\x07" * 32, None, None),                          # an ID the client never sent
    (b"\x07" * 32, b"\x08" * 32, None, None)],              # another ID than the client's
    ids=["id-echoed", "ticket", "neither", "id-not-sent", "other-id"])
def test_an_abbreviated_handshake_names_only_a_mechanism_it_shows(
        run_cli, tmp_path: Path, client_sid: bytes, server_sid: bytes,  # type: ignore[no-untyped-def]
        ticket: bytes | None, expected: str | None) -> None:
    """A TLS 1.2 server going from its ServerHello to its ChangeCipherSpec resumed a session;
    by its session ID only when it echoed the ID the client sent (RFC 5246 7.4.1.2), by a
    ticket only when one was offered (RFC 5077 3.4). Without either the mechanism is not
    known (offline.facts resumption_unknown, HandshakeFacts.unknown): null, never
    "session_id"."""
    from tests.helpers.capbuild import pcap_jsonl, tls12_abbreviated_pcap
    path = tmp_path / "abbreviated.pcap"
    path.write_bytes(tls12_abbreviated_pcap(client_sid, server_sid, ticket))
    code, conns, _caps, err = pcap_jsonl(run_cli, path)
    assert code == 0, err
    (conn,) = conns
    assert conn["resumption"] == expected
    assert conn["handshake_complete"] is not False, conn
