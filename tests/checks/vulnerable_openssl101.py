#!/usr/bin/env python3
"""A TLS 1.0-1.2 server on loopback that answers as OpenSSL 1.0.1 to 1.0.1f did on the wire,
up to the client's key exchange: the vulnerable side of the heartbleed and ccs checks
(tests/checks/test_checks_early.py). No vulnerable OpenSSL can be installed here; this
script writes the same bytes.

Handshake (as s3_srvr.c of 1.0.1): one record per message: ServerHello (the client's
version up to TLS 1.2, a fresh 32-byte session ID, the one suite of --suite if the client
offers it, else a handshake_failure alert; extensions renegotiation_info when the client
signals RFC 5746, an empty session_ticket when it sends one, heartbeat mode
peer_allowed_to_send when it offers heartbeat), Certificate (--chain-file), ServerHelloDone.
RSA key exchange only, so there is no ServerKeyExchange. The server stops before the key
exchange: a handshake record after the flight closes the connection (the checks never
send one).

--heartbleed (CVE-2014-0160, t1_lib.c tls1_process_heartbeat before 1.0.1g): a heartbeat
record (type 24) is processed whether the extension was negotiated or not; a
HeartbeatRequest is answered with a HeartbeatResponse of payload_length payload bytes copied
from the request onwards whatever the record held (here: the request's own bytes, then what
the connection received before it, as the stale read buffer holds, then zeros) and 16
random padding bytes, written in records of at most 16384 bytes (ssl3_write_bytes). Without
it (1.0.1g): a request shorter than 1 + 2 + payload_length + 16 bytes is discarded silently
(RFC 6520 section 4), a well-formed one is answered.

--ccs (CVE-2014-0224, s3_pkt.c before 1.0.1h): a ChangeCipherSpec before the key exchange
is accepted silently and the read side switches to keys derived from the empty master
secret; the next record then fails to decrypt: a record whose length is not a multiple of
the block size of a CBC suite gets a fatal decryption_failed alert (tls1_enc), any other a
fatal bad_record_mac (the MAC check of ssl3_get_record). Without it (1.0.1h): the early
ChangeCipherSpec gets a fatal unexpected_message alert (SSL_R_CCS_RECEIVED_EARLY).
"""
import argparse
import os
import socket
import ssl
import struct
import time
import warnings

from tests.lab_servers._common import serve_forever

warnings.simplefilter("ignore", DeprecationWarning)  # tlslite imports asyncore
from tlslite.messages import ClientHello  # noqa: E402
from tlslite.utils.codec import Parser  # noqa: E402

SUITES = {"aes128-sha": (0x002F, 16), "aes128-gcm": (0x009C, 0), "rc4": (0x0005, 0)}
CCS, ALERT, HANDSHAKE, HEARTBEAT = 20, 21, 22, 24
UNEXPECTED_MESSAGE, BAD_RECORD_MAC, DECRYPTION_FAILED, HANDSHAKE_FAILURE = 10, 20, 21, 40
PROTOCOL_VERSION = 70

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--suite", default="aes128-sha", choices=list(SUITES))
ap.add_argument("--heartbleed", action="store_true", help="answer as OpenSSL 1.0.1f")
ap.add_argument("--ccs", action="store_true", help="accept an early CCS as OpenSSL 1.0.1g")
args = ap.parse_args()
with open(args.chain_file) as fh:
    pems = fh.read().split("-----END CERTIFICATE-----")
CHAIN = [ssl.PEM_cert_to_DER_cert(p.strip() + "\n-----END CERTIFICATE-----\n")
         for p in pems if "BEGIN CERTIFICATE" in p]
SUITE, BLOCK = SUITES[args.suite]


def record(content_type: int, version: int, fragment: bytes) -> bytes:
    return struct.pack(">BHH", content_type, version, len(fragment)) + fragment


def message(msg_type: int, body: bytes) -> bytes:
    return struct.pack(">B", msg_type) + len(body).to_bytes(3, "big") + body


class Conn:
    """One connection: its socket, every byte it received (the 'read buffer') and a
    record reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = b""
        self.pending = b""

    def next_record(self) -> tuple[int, int, bytes] | None:
        while True:
            if len(self.pending) >= 5:
                t, v, n = struct.unpack(">BHH", self.pending[:5])
                if len(self.pending) >= 5 + n:
                    frag, self.pending = self.pending[5:5 + n], self.pending[5 + n:]
                    return t, v, frag
            data = self.sock.recv(65536)
            if not data:
                return None
            self.received += data
            self.pending += data

    def alert(self, version: int, description: int) -> None:
        self.sock.sendall(record(ALERT, version, bytes([2, description])))


def client_hello(conn: Conn) -> ClientHello | None:
    body = b""
    while len(body) < 4 or len(body) < 4 + int.from_bytes(body[1:4], "big"):
        got = conn.next_record()
        if got is None or got[0] != HANDSHAKE:
            return None
        body += got[2]
    if body[0] != 1:
        return None
    return ClientHello().parse(Parser(bytearray(body[1:])))


def server_flight(hello: ClientHello, version: int) -> bytes:
    types = {e.extType for e in hello.extensions or []}
    exts = b""
    if 0xFF01 in types or 0x00FF in hello.cipher_suites:
        exts += struct.pack(">HHB", 0xFF01, 1, 0)
    if 35 in types:
        exts += struct.pack(">HH", 35, 0)
    if 15 in types:
        exts += struct.pack(">HHB", 15, 1, 1)
    random = struct.pack(">I", int(time.time())) + os.urandom(28)
    sh = struct.pack(">H", version) + random + b"\x20" + os.urandom(32) + \
        struct.pack(">HB", SUITE, 0) + (struct.pack(">H", len(exts)) + exts if exts else b"")
    certs = b"".join(len(c).to_bytes(3, "big") + c for c in CHAIN)
    certificate = len(certs).to_bytes(3, "big") + certs
    return record(HANDSHAKE, version, message(2, sh)) + \
        record(HANDSHAKE, version, message(11, certificate)) + \
        record(HANDSHAKE, version, message(14, b""))


def heartbeat(conn: Conn, version: int, fragment: bytes) -> None:
    if len(fragment) < 3 or fragment[0] != 1:
        return
    claimed = int.from_bytes(fragment[1:3], "big")
    if not args.heartbleed:
        if 1 + 2 + claimed + 16 > len(fragment):
            return      # 1.0.1g: discarded silently
        payload = fragment[3:3 + claimed]
    else:
        # memcpy(bp, pl, payload): the request's bytes, then what the buffer held before
        memory = fragment[3:] + conn.received
        payload = (memory + bytes(claimed))[:claimed]
    answer = bytes([2]) + claimed.to_bytes(2, "big") + payload + os.urandom(16)
    out = b"".join(record(HEARTBEAT, version, answer[i:i + 16384])
                   for i in range(0, len(answer), 16384))
    conn.sock.sendall(out)


def handler(sock: socket.socket, addr: tuple[str, int]) -> None:
    conn = Conn(sock)
    hello = client_hello(conn)
    if hello is None:
        return
    version = min(hello.client_version[0] << 8 | hello.client_version[1], 0x0303)
    if version < 0x0301:
        conn.alert(0x0301, PROTOCOL_VERSION)
        return
    if SUITE not in hello.cipher_suites or (SUITE == 0x009C and version < 0x0303):
        conn.alert(version, HANDSHAKE_FAILURE)
        return
    sock.sendall(server_flight(hello, version))
    keyed = False        # the read side switched to keys from the empty master secret
    while True:
        got = conn.next_record()
        if got is None:
            return
        content_type, _, fragment = got
        if keyed:
            failed = DECRYPTION_FAILED if BLOCK and len(fragment) % BLOCK else BAD_RECORD_MAC
            conn.alert(version, failed)
            return
        if content_type == HEARTBEAT:
            heartbeat(conn, version, fragment)
        elif content_type == CCS and args.ccs:
            keyed = True
        elif content_type == CCS:
            conn.alert(version, UNEXPECTED_MESSAGE)
            return
        elif content_type == ALERT:
            return
        elif content_type == HANDSHAKE:
            return       # no key exchange here: see the docstring
        else:
            conn.alert(version, UNEXPECTED_MESSAGE)
            return


serve_forever("127.0.0.1", args.port, handler)
