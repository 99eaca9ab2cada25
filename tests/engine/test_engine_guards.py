"""The client engine against servers that misbehave without breaking a message: cut records,
application data too early, compression, bad ServerKeyExchange points, warning alerts,
records that carry nothing, endless streams, long or unparsable chains, keys `cryptography`
cannot use. Sans-IO: real server bytes (tests/hostile/tls.py builders) fed to
ClientHandshake.receive, each check on the verdict it raises (or the handshake it lets
through), plus the CLI's last-resort handler and the summary's bound on chain entries.
"""

from __future__ import annotations

import io
import sys

import pytest
from tests.hostile.tls import (
    ALERT,
    APPDATA,
    CCS,
    HANDSHAKE,
    SECP256R1,
    Tls13Server,
    alert,
    certificate_12,
    handshake_records,
    identity,
    record,
    server_hello_12,
    server_hello_13,
    server_hello_done,
    ske_ecdhe,
    tls12_flight,
)

from tlsprobe import cli
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure, Limits
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.guards import MAX_CHANGE_CIPHER_SPECS, MAX_WARNING_ALERTS
from tlsprobe.engine.common import INTERNAL_ERROR
from tlsprobe.errors import EXIT_INTERNAL, FailureKind
from tlsprobe.model import describe
from tlsprobe.probes.facts import certificate_info
from tlsprobe.model.probe import ProbeResult
from tlsprobe.report.tables import MAX_CHAIN_SHOWN, probe_rows
from tlsprobe.session.flow import RecordEvent
from tlsprobe.wire.handshake import decode_handshake
from tlsprobe.wire.hello import ClientHello

WARNING, FATAL, UNRECOGNIZED_NAME = 1, 2, 112
#: the hostile suite's certificate with its curve OID (P-256) changed to an unknown one
UNKNOWN_CURVE = (bytes.fromhex("2a8648ce3d030107"), bytes.fromhex("2a8648ce3d03017f"))


def start(limits: Limits | None = None, **config: object
          ) -> tuple[ClientHandshake, ClientHello, bytes]:
    hs = ClientHandshake(ClientConfig(**config), stop_after_first_flight=True,  # type: ignore[arg-type]
                         read_server_flight=True, limits=limits)
    raw = hs.start()[5:]
    hello = decode_handshake(raw).message
    assert isinstance(hello, ClientHello)
    return hs, hello, raw


def failure(hs: ClientHandshake, *chunks: bytes) -> HandshakeFailure:
    with pytest.raises(HandshakeFailure) as info:
        for chunk in chunks:
            hs.receive(chunk)
    return info.value


def alert_sent(hs: ClientHandshake) -> int:
    """The description of the fatal alert the client queued (a plaintext record)."""
    out = hs.take_output()
    assert out[:1] == b"\x15" and out[5] == FATAL, out.hex()
    return out[6]


# -- closed in the middle --------------------------------------------------------------------
def test_close_in_the_middle_of_a_record() -> None:
    hs, ch, _ = start()
    data = handshake_records(server_hello_13(ch))
    hs.receive(data[:len(data) // 2])
    with pytest.raises(HandshakeFailure, match="middle of a record, before sending "
                       "ServerHello") as info:
        hs.connection_closed()
    assert info.value.kind == "closed"


def test_close_in_the_middle_of_a_handshake_message() -> None:
    hs, ch, _ = start()
    msg = server_hello_13(ch)
    hs.receive(record(HANDSHAKE, msg[:len(msg) // 2]))
    with pytest.raises(HandshakeFailure, match="middle of a handshake message"):
        hs.connection_closed()


def test_close_between_records_says_nothing_was_cut() -> None:
    hs, _, _ = start()
    with pytest.raises(HandshakeFailure) as info:
        hs.connection_closed()
    assert str(info.value) == "server closed the connection before sending ServerHello"


# -- application data too early --------------------------------------------------------------
def test_application_data_before_server_hello() -> None:
    hs, _, _ = start()
    exc = failure(hs, record(APPDATA, b"GET / HTTP/1.0\r\n\r\n"))
    assert exc.kind == "protocol"
    assert str(exc) == "server sent application data before the handshake (before ServerHello)"


def test_application_data_in_the_tls12_first_flight() -> None:
    hs, ch, _ = start()
    flight = tls12_flight(ch)
    exc = failure(hs, handshake_records(*flight[:2]), record(APPDATA, b"early"))
    assert "application data before its Finished" in str(exc)


def test_heartbeat_record_is_not_application_data() -> None:
    hs, ch, _ = start()
    exc = failure(hs, handshake_records(server_hello_12(ch)), record(24, b"\x01\x00\x10"))
    assert "heartbeat" in str(exc).lower() and "not negotiated" in str(exc)


# -- ServerHello and ServerKeyExchange -------------------------------------------------------
def test_compression_not_offered() -> None:
    hs, ch, _ = start()
    exc = failure(hs, handshake_records(server_hello_12(ch, compression=1)))
    assert str(exc) == "server chose compression method 1 (DEFLATE), which was not offered"


def test_first_flight_validates_the_ske_point() -> None:
    hs, ch, _ = start()
    flight = tls12_flight(ch)
    random = decode_handshake(flight[0]).message.random  # type: ignore[attr-defined]
    bad_point = b"\x04" + bytes(31) + b"\x01" + bytes(31) + b"\x01"
    ske = ske_ecdhe(ch, random, group=SECP256R1, public=bad_point)
    exc = failure(hs, handshake_records(flight[0], flight[1], ske, server_hello_done()))
    assert "invalid server key share for secp256r1" in str(exc)
    assert hs.verification.share_problem is not None


def test_valid_first_flight_still_passes() -> None:
    hs, ch, _ = start()
    hs.receive(handshake_records(*tls12_flight(ch)))
    assert hs.done and hs.first_flight_done and hs.verification.signature_verified is True


# -- alerts ------------------------------------------------------------------------------------
def test_tls12_warning_alert_before_the_flight_is_not_an_end() -> None:
    hs, ch, _ = start()
    hs.receive(alert(WARNING, UNRECOGNIZED_NAME) + handshake_records(*tls12_flight(ch)))
    assert hs.done and hs.verification.signature_verified is True


def test_warning_then_close_names_the_warning() -> None:
    hs, _, _ = start()
    hs.receive(alert(WARNING, UNRECOGNIZED_NAME))
    with pytest.raises(HandshakeFailure, match=r"after a warning alert unrecognized_name "
                       r"\(112\)"):
        hs.connection_closed()


def test_endless_warning_alerts_end_as_an_alert() -> None:
    hs, _, _ = start()
    exc = failure(hs, alert(WARNING, UNRECOGNIZED_NAME) * (MAX_WARNING_ALERTS + 1))
    assert exc.kind == "alert" and exc.alert == UNRECOGNIZED_NAME
    assert f"{MAX_WARNING_ALERTS + 1} warning alerts" in str(exc)


def test_warning_alert_is_an_error_when_only_tls13_was_offered() -> None:
    hs, _, _ = start(versions=(0x0304,))
    exc = failure(hs, alert(WARNING, UNRECOGNIZED_NAME))
    assert exc.kind == "alert" and "warning alert unrecognized_name" in str(exc)


def test_warning_close_notify_ends_the_handshake() -> None:
    hs, _, _ = start()
    assert failure(hs, alert(WARNING, 0)).kind == "alert"


# -- records that carry nothing ----------------------------------------------------------------
@pytest.mark.parametrize("content_type", [HANDSHAKE, ALERT, CCS])
def test_zero_length_records_are_refused(content_type: int) -> None:
    hs, _, _ = start()
    exc = failure(hs, record(content_type, b""))
    assert "empty" in str(exc) and "zero-length" in str(exc)


def test_empty_application_data_record_is_still_too_early() -> None:
    hs, _, _ = start()
    assert "application data before" in str(failure(hs, record(APPDATA, b"")))


def test_tls13_padding_only_record() -> None:
    hs, ch, raw = start()
    tls = Tls13Server(ch, raw)
    flight = tls.hello_and_flight([tls.encrypted_extensions()])
    padding = tls.protection.encrypt(HANDSHAKE, b"", padding=100)
    exc = failure(hs, flight + padding)
    assert "padding only" in str(exc)


def test_middlebox_change_cipher_specs_are_dropped_up_to_a_bound() -> None:
    hs, ch, raw = start()
    tls = Tls13Server(ch, raw)
    hs.receive(record(CCS, b"\x01") + tls.hello_and_flight(tls.flight()))
    # a CCS before the ServerHello, one after it
    assert hs.done and hs.verification.finished_verified

    hs, _, _ = start()
    exc = failure(hs, record(CCS, b"\x01") * (MAX_CHANGE_CIPHER_SPECS + 1))
    assert f"{MAX_CHANGE_CIPHER_SPECS + 1} ChangeCipherSpec records" in str(exc)


def test_encrypted_change_cipher_spec() -> None:
    hs, ch, raw = start()
    tls = Tls13Server(ch, raw)
    flight = tls.hello_and_flight([tls.encrypted_extensions()])
    exc = failure(hs, flight + tls.encrypt(b"\x01", content_type=CCS))
    assert "encrypted ChangeCipherSpec" in str(exc)


def test_change_cipher_spec_before_a_tls12_server_hello() -> None:
    hs, _, _ = start(versions=(0x0303,))
    assert "ChangeCipherSpec before ServerHello" in str(failure(hs, record(CCS, b"\x01")))


def test_malformed_change_cipher_spec() -> None:
    hs, _, _ = start()
    assert "malformed ChangeCipherSpec" in str(failure(hs, record(CCS, b"\x02")))


# -- limits --------------------------------------------------------------------------------------
def test_max_records() -> None:
    hs, ch, _ = start(Limits(max_records=20))
    hello_request = record(HANDSHAKE, b"\x00\x00\x00\x00")  # ignored by a TLS 1.2 client
    exc = failure(hs, handshake_records(server_hello_12(ch)), hello_request * 25)
    assert "more than 20 records, tlsprobe's limit (--max-records raises it)" in str(exc)
    assert exc.kind == FailureKind.LIMIT and alert_sent(hs) == INTERNAL_ERROR


def test_max_bytes() -> None:
    hs, ch, _ = start(Limits(max_bytes=1000))
    exc = failure(hs, handshake_records(server_hello_12(ch)), b"\x16\x03\x03" * 400)
    assert "more than 1000 bytes, tlsprobe's limit (--max-bytes raises it)" in str(exc)
    assert exc.kind == FailureKind.LIMIT and alert_sent(hs) == INTERNAL_ERROR


def test_max_message_is_named() -> None:
    hs, ch, _ = start(Limits(max_message=100))
    exc = failure(hs, handshake_records(server_hello_12(ch), certificate_12([identity().der])))
    assert "over 100" in str(exc) and str(exc).endswith("(--max-message raises it)")
    assert exc.kind == FailureKind.LIMIT and alert_sent(hs) == INTERNAL_ERROR


def test_events_kept_for_the_trace_are_bounded() -> None:
    limits = Limits(max_records=10)
    hs, ch, _ = start(limits)
    many = record(HANDSHAKE, b"\x00\x00\x00\x00" * 200)  # 200 HelloRequests in one record
    exc = failure(hs, handshake_records(server_hello_12(ch)), many)
    assert f"more than {limits.max_events} records, messages and alerts" in str(exc)
    assert len(hs.events) <= limits.max_events + 8


def test_trace_keeps_record_headers_without_their_fragments() -> None:
    hs, ch, _ = start()
    data = handshake_records(*tls12_flight(ch))
    hs.receive(data)
    kept = [ev for ev in hs.events if isinstance(ev, RecordEvent) and ev.direction == 1]
    assert kept and all(ev.record.fragment == b"" for ev in kept)
    assert kept[0].header == data[:5]


# -- certificates ----------------------------------------------------------------------------------
def _flight_with(ch: ClientHello, ders: list[bytes]) -> bytes:
    flight = tls12_flight(ch)
    return handshake_records(flight[0], certificate_12(ders), *flight[2:])


def test_max_chain() -> None:
    hs, ch, _ = start(Limits(max_chain=3))
    exc = failure(hs, _flight_with(ch, [identity().der] * 4))
    assert "chain of 4 certificates, more than tlsprobe's limit of 3 (--max-chain raises " \
        "it)" in str(exc)
    # the limit is ours, not a fault of the chain: internal_error (it was bad_certificate),
    # and the failure is a limit (exit 8), not a protocol error (exit 6)
    assert exc.kind == FailureKind.LIMIT and alert_sent(hs) == INTERNAL_ERROR


def test_unparsable_entry_after_a_valid_leaf() -> None:
    hs, ch, _ = start()
    exc = failure(hs, _flight_with(ch, [identity().der, identity().der, b"\x30"]))
    assert "entry 2 (of 3) is not a parsable DER certificate" in str(exc)


def test_leaf_of_an_x509_version_cryptography_refuses_is_read() -> None:
    """An X.509 version cryptography does not know (v2) raises no ValueError there; OpenSSL
    reads it (s_client completes: tests/probes/test_probe_ber_certificates.py), and the
    engine now too, through its DER twin (it refused the chain as unparsable): the
    handshake completes, the server's signature checked with the leaf's key."""
    hs, ch, _ = start()
    der = identity().der.replace(b"\xa0\x03\x02\x01\x02", b"\xa0\x03\x02\x01\x01", 1)
    hs.receive(_flight_with(ch, [der]))
    assert hs.done and hs.verification.signature_verified is True
    assert certificate_info(der).subject == "CN=hostile.test"


def test_leaf_key_on_an_unknown_curve_is_reported_not_raised() -> None:
    der = identity().der.replace(*UNKNOWN_CURVE)
    hs, ch, _ = start()
    hs.receive(_flight_with(ch, [der]))
    assert hs.done and hs.verification.signature_verified is None
    assert "not supported" in (hs.verification.signature_detail or "")
    info = certificate_info(der)
    assert info.key_type.startswith("unsupported key") and info.subject == "CN=hostile.test"


def test_tls13_leaf_key_on_an_unknown_curve() -> None:
    hs, ch, raw = start()
    tls = Tls13Server(ch, raw)
    der = identity().der.replace(*UNKNOWN_CURVE)
    hs.receive(tls.hello_and_flight(tls.flight(ders=[der])))
    assert hs.done and hs.verification.finished_verified is True
    assert hs.verification.signature_verified is None
    assert "CertificateVerify: the certificate's key is not supported" in \
        (hs.verification.signature_detail or "")


def test_summary_prints_a_bounded_number_of_chain_entries() -> None:
    info = certificate_info(identity().der)
    result = ProbeResult(host="h", port=1, address=None, offer=describe.hello_offer(
        start()[0].facts().client_hellos[0]), certificates=(info,) * (MAX_CHAIN_SHOWN + 5))
    rows = probe_rows(result)
    assert sum(1 for _, value in rows if " s: " in value) == MAX_CHAIN_SHOWN
    assert any("5 more certificates not shown" in value for _, value in rows)


# -- the CLI's last resort ---------------------------------------------------------------------------
class _Broken:
    @staticmethod
    def add_arguments(parser: object) -> None:
        pass

    @staticmethod
    def run(args: object) -> int:
        raise RuntimeError("boom\nsecond line")


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_load", lambda name: _Broken)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["speed"]) == EXIT_INTERNAL == 70
    assert err.getvalue() == ("tlsprobe: internal error: RuntimeError: boom second line "
                              "(a bug in tlsprobe; rerun with TLSPROBE_DEBUG=1 for the "
                              "traceback)\n")


def test_internal_error_traceback_with_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_load", lambda name: _Broken)
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["speed"]) == EXIT_INTERNAL
    assert "Traceback (most recent call last)" in err.getvalue()
    assert 'raise RuntimeError("boom' in err.getvalue()
