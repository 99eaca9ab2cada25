"""The TLS 1.3 half driven on its own through its narrow interface (engine.verdict): it
reads a HandshakeContext and answers each message with a Verdict, with no ClientHandshake.

RFC 8448 section 3: the RFC's transcript and shared secret in, the RFC's keys and client
Finished out; a tampered server Finished gives a refusal and nothing to send.
"""

from __future__ import annotations

from tests.engine import engine_rfc8448 as v

from tlsprobe.engine.common import DECRYPT_ERROR, UNEXPECTED_MESSAGE
from tlsprobe.engine.keyschedule import Transcript
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.engine.tls13 import CONNECTED, WAIT_EE, Tls13Client
from tlsprobe.engine.verdict import (
    HandshakeContext,
    ReadKeys,
    SendChangeCipherSpec,
    SendMessage,
    Verdict,
    WriteKeys,
)
from tlsprobe.session.flow import SERVER, MessageEvent
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.handshake import decode_handshake
from tlsprobe.wire.hello import ClientHello, ServerHello

CTX = ParseContext(version=0x0304, cipher_suite=0x1301, key_exchange="TLS13",
                   is_server_message=True)


def half(read_only: bool = False) -> tuple[Tls13Client, Verdict]:
    transcript = Transcript()
    transcript.add(v.CLIENT_HELLO)
    transcript.add(v.SERVER_HELLO)
    hello = ClientHello.parse(v.CLIENT_HELLO[4:])
    sh = ServerHello.parse(v.SERVER_HELLO[4:])
    ctx = HandshakeContext(hello.random, hello, sh, transcript, read_only)
    client = Tls13Client(ctx, v.SHARED_SECRET)
    return client, client.start()


def server_messages(tamper_finished: bool = False) -> list[MessageEvent]:
    _, plain = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY,
                               v.SERVER_HS_IV).decrypt_record(v.SERVER_HANDSHAKE_RECORD)
    data = bytearray(plain)
    if tamper_finished:
        data[-1] ^= 1
    events, pos = [], 0
    while pos < len(data):
        raw = bytes(data[pos:pos + 4 + int.from_bytes(data[pos + 1:pos + 4], "big")])
        events.append(MessageEvent(SERVER, raw, decode_handshake(raw, CTX), protected=True))
        pos += len(raw)
    return events


def run(client: Tls13Client, waiting: str, events: list[MessageEvent]) -> list[Verdict]:
    verdicts = []
    for ev in events:
        verdict = client.on_message(waiting, ev, ev.decoded.message if ev.decoded else None,
                                    may_send=True)
        verdicts.append(verdict)
        if verdict.refusal is not None:
            break
        waiting = verdict.waiting_for or waiting
    return verdicts


def test_start_installs_the_rfc_handshake_keys() -> None:
    _, start = half()
    assert start.waiting_for == WAIT_EE
    read, write = start.outputs
    assert isinstance(read, ReadKeys) and isinstance(write, WriteKeys)
    assert read.protection.decrypt_record(v.SERVER_HANDSHAKE_RECORD)[0] == 22
    # `make` gives a fresh protection each time (one to send, one for the trace)
    assert write.make() is not write.make()
    assert start.keylog_lines and start.refusal is None


def test_server_flight_verdicts_end_with_the_rfc_client_finished() -> None:
    client, start = half()
    verdicts = run(client, start.waiting_for or "", server_messages())
    assert [x.refusal for x in verdicts] == [None] * 4
    assert verdicts[1].certificates and verdicts[2].signature_verified is True
    finished = verdicts[-1]
    assert finished.finished_verified is True and finished.complete
    assert finished.waiting_for == CONNECTED and finished.awaiting_acceptance is True
    kinds = [type(o) for o in finished.outputs]
    assert kinds == [ReadKeys, SendChangeCipherSpec, SendMessage, WriteKeys]
    message = finished.outputs[2]
    assert isinstance(message, SendMessage)
    assert message.raw == b"\x14\x00\x00\x20" + v.CLIENT_FINISHED_VERIFY_DATA
    assert client.ks.resumption_master_secret == v.RESUMPTION_MASTER


def test_read_only_half_stops_at_the_server_finished_sending_nothing() -> None:
    client, start = half(read_only=True)
    finished = run(client, start.waiting_for or "", server_messages())[-1]
    assert finished.finished_verified is True and finished.done and not finished.complete
    assert finished.outputs == []


def test_tampered_finished_is_a_refusal_with_nothing_to_send() -> None:
    client, start = half()
    verdicts = run(client, start.waiting_for or "", server_messages(tamper_finished=True))
    last = verdicts[-1]
    assert last.refusal is not None and last.refusal.alert == DECRYPT_ERROR
    assert "server Finished is wrong" in last.refusal.message
    assert last.finished_verified is False and last.outputs == [] and not last.complete


def test_message_out_of_order_is_refused() -> None:
    client, start = half()
    certificate = server_messages()[1]
    verdict = client.on_message(start.waiting_for or "", certificate,
                                certificate.decoded.message if certificate.decoded else None,
                                may_send=True)
    assert verdict.refusal is not None and verdict.refusal.alert == UNEXPECTED_MESSAGE
    assert verdict.refusal.message == ("server sent Certificate while the client waited for "
                                       "EncryptedExtensions")
