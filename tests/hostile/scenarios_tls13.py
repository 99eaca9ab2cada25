"""Scenarios: the encrypted TLS 1.3 server flight (EncryptedExtensions, Certificate,
CertificateVerify, Finished under the handshake traffic key), broken one piece at a time.

The probe's first-flight mode decrypts and checks this flight (signature over the
transcript, Finished MAC), so a wrong byte anywhere in it must be named."""
from __future__ import annotations

from .catalog import EXIT_ALERT, EXIT_OK, EXIT_PROTOCOL, HOLD, scenario
from .server import Conn
from .tls import APPDATA, HANDSHAKE, Tls13Server, alert, handshake_records, record


async def _tls13(conn: Conn) -> Tls13Server:
    ch = await conn.client_hello()
    return Tls13Server(ch, conn.hello_raw[-1])


async def _send_then_hold(conn: Conn, data: bytes) -> None:
    await conn.send(data)
    await conn.hold(HOLD)


@scenario("nothing (TLS 1.3 control)", EXIT_OK, "", stdout=r"x25519")
async def control_tls13(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, tls.hello_and_flight(tls.flight()))


@scenario("TLS 1.3 Finished with a wrong verify_data", EXIT_PROTOCOL, r"(?i)finished")
async def tls13_bad_finished(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, tls.hello_and_flight(tls.flight(bad_finished=True)))


@scenario("TLS 1.3 CertificateVerify with a bad signature", EXIT_PROTOCOL,
          r"(?i)CertificateVerify|signature")
async def tls13_bad_signature(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, tls.hello_and_flight(tls.flight(bad_signature=True)))


@scenario("TLS 1.3 Certificate that is not DER", EXIT_PROTOCOL, r"(?i)certificate")
async def tls13_garbage_der(conn: Conn) -> None:
    tls = await _tls13(conn)
    flight = tls.flight(ders=[b"\x30\x82\x01\x00" + bytes(40)])
    await _send_then_hold(conn, tls.hello_and_flight(flight))


@scenario("TLS 1.3 Certificate with an empty list", EXIT_PROTOCOL,
          r"(?i)empty certificate|no certificate|without a certificate|certificate")
async def tls13_empty_certificate(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, tls.hello_and_flight(tls.flight(ders=[])))


@scenario("TLS 1.3 Finished right after EncryptedExtensions (no Certificate)", EXIT_PROTOCOL,
          r"(?i)Finished|expected|unexpected")
async def tls13_skips_certificate(conn: Conn) -> None:
    tls = await _tls13(conn)
    flight = [tls.encrypted_extensions(), tls.finished()]
    await _send_then_hold(conn, tls.hello_and_flight(flight))


@scenario("TLS 1.3 EncryptedExtensions sent in plaintext", EXIT_PROTOCOL,
          r"(?i)plaintext|unencrypted|unprotected|EncryptedExtensions|unexpected")
async def tls13_plaintext_flight(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, handshake_records(tls.server_hello, *tls.flight()))


@scenario("TLS 1.3 encrypted record with a corrupted tag", EXIT_PROTOCOL,
          r"(?i)decrypt|bad_record_mac|authentic")
async def tls13_bad_record_tag(conn: Conn) -> None:
    tls = await _tls13(conn)
    data = bytearray(tls.hello_and_flight(tls.flight()))
    data[-1] ^= 0x01
    await _send_then_hold(conn, bytes(data))


@scenario("TLS 1.3 encrypted record over 2^14+256 bytes", EXIT_PROTOCOL,
          r"(?i)exceeds|over|too long|record_overflow")
async def tls13_oversized_record(conn: Conn) -> None:
    tls = await _tls13(conn)
    await conn.send(handshake_records(tls.server_hello))
    await _send_then_hold(conn, record(APPDATA, bytes(2**14 + 1000)))


@scenario("TLS 1.3 closes after EncryptedExtensions", EXIT_ALERT,
          r"closed the connection before")
async def tls13_close_after_ee(conn: Conn) -> None:
    tls = await _tls13(conn)
    await conn.send(tls.hello_and_flight([tls.encrypted_extensions()]))
    conn.close()


@scenario("TLS 1.3 encrypted fatal alert after EncryptedExtensions", EXIT_ALERT,
          r"fatal alert handshake_failure")
async def tls13_encrypted_alert(conn: Conn) -> None:
    tls = await _tls13(conn)
    data = tls.hello_and_flight([tls.encrypted_extensions()])
    await _send_then_hold(conn, data + tls.encrypt(b"\x02\x28", content_type=21))


@scenario("TLS 1.3 plaintext alert after the ServerHello", EXIT_ALERT,
          r"fatal alert handshake_failure")
async def tls13_plaintext_alert(conn: Conn) -> None:
    tls = await _tls13(conn)
    await _send_then_hold(conn, handshake_records(tls.server_hello) + alert(2, 40))


@scenario("TLS 1.3 endless encrypted records of padding only", EXIT_PROTOCOL,
          r"(?i)empty|zero|padding|unexpected|no content")
async def tls13_endless_padding(conn: Conn) -> None:
    tls = await _tls13(conn)
    await conn.send(tls.hello_and_flight([tls.encrypted_extensions()]))
    while True:  # bounded by the server's own limits
        await conn.send(b"".join(tls.protection.encrypt(HANDSHAKE, b"", padding=1000)
                                 for _ in range(20)))


def _tls13_close_after(n: int, label: str) -> None:
    async def script(conn: Conn) -> None:
        tls = await _tls13(conn)
        await conn.send(tls.hello_and_flight(tls.flight()[:n]))
        conn.close()
    scenario(f"TLS 1.3 closes after its {label}", EXIT_ALERT, r"closed the connection before",
             name=f"tls13_close_after_{label.lower()}")(script)


_tls13_close_after(2, "Certificate")
_tls13_close_after(3, "CertificateVerify")
