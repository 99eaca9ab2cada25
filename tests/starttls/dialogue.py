"""Play a server's side of a STARTTLS dialogue into `StartTls` and check the client's side.

A transcript is a list of (sender, bytes): "C" items must be exactly what the machine asked
to send at that point, "S" items are fed to it whole, byte by byte or line by line (`mode`).
"""
from __future__ import annotations

import struct

from tlsprobe.net.starttls import StartTls, Status, Step

MODES = ("whole", "bytes", "lines")

Transcript = list[tuple[str, bytes]]

# what servers send, for the transcripts and the scripted servers
XMPP_HEAD = (b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
             b"xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")
SERVER_HEAD = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' from='localhost' "
               b"id='x1' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")
TLS_FEATURE = b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls>"


def ldap_response(code: int, text: bytes = b"", ident: int = 1, name: bytes = b"") -> bytes:
    op = b"\x0a\x01" + bytes([code]) + b"\x04\x00\x04" + bytes([len(text)]) + text
    if name:
        op += b"\x8a" + bytes([len(name)]) + name
    body = b"\x02\x01" + bytes([ident]) + b"\x78" + bytes([len(op)]) + op
    return b"\x30" + bytes([len(body)]) + body


def pg_error(body: bytes) -> bytes:
    return b"E" + struct.pack("!I", 4 + len(body)) + body


def mysql_greeting(caps: int, version: bytes = b"10.11.6-MariaDB") -> bytes:
    payload = (b"\x0a" + version + b"\x00" + struct.pack("<I", 7) + b"abcdefgh" + b"\x00" +
               struct.pack("<H", caps & 0xFFFF) + b"\x21" + b"\x02\x00" +
               struct.pack("<H", caps >> 16) + b"\x15" + bytes(10) + b"ijklmnopqrst\x00")
    return struct.pack("<I", len(payload))[:3] + b"\x00" + payload


def mysql_error(code: int, text: bytes) -> bytes:
    payload = b"\xff" + struct.pack("<H", code) + b"#HY000" + text
    return struct.pack("<I", len(payload))[:3] + b"\x00" + payload


def chunks(data: bytes, mode: str) -> list[bytes]:
    if mode == "whole":
        return [data]
    if mode == "bytes":
        return [data[i:i + 1] for i in range(len(data))]
    if mode == "lines":
        parts = data.split(b"\n")
        return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    raise ValueError(mode)


def play(proto: str, transcript: Transcript, mode: str = "whole",
         **options: object) -> tuple[StartTls, Step]:
    """Run the transcript; stop at the first READY or FAILED step; return the machine and
    that last step. Every byte the client sent must appear in the transcript, in order."""
    machine = StartTls(proto, server_name="localhost", **options)  # type: ignore[arg-type]
    step = machine.start()
    pending = bytearray(step.send)
    for sender, data in transcript:
        if step.status is Status.FAILED:
            break
        if sender == "C":
            assert bytes(pending[:len(data)]) == data, (bytes(pending), data)
            del pending[:len(data)]
            continue
        if step.status is not Status.NEED_DATA:
            break
        for chunk in chunks(data, mode):
            step = machine.receive_data(chunk)
            pending += step.send
            if step.status is not Status.NEED_DATA:
                break
    assert not pending or step.status is Status.FAILED, bytes(pending)
    return machine, step
