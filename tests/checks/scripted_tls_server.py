#!/usr/bin/env python3
"""A scripted TLS 1.0-1.2 server that answers hellos the way old, vulnerable servers did on
the wire, for the vulnerable side of the compression, renegotiation and SSLv2 checks and
for export and single-DES suites (no server this machine can install still behaves so). It
sends the first flight only (ServerHello, Certificate, ServerHelloDone with
TLS_RSA_WITH_AES_128_CBC_SHA, the suite every one of those servers had) and closes when
the client answers: the checks it serves stop at the ServerHello. A hello without that
suite gets handshake_failure, one below TLS 1.0 or listing only TLS 1.3 in
supported_versions protocol_version.

The suite (--suite, a static-RSA code, default 0x002f): the one suite the server answers
with, for the suites no installable server here still serves (OpenSSL 3.0 and tlslite-ng
have neither): single DES, 0x0009 TLS_RSA_WITH_DES_CBC_SHA (56-bit key), and the RSA export
suites of the 1990s' US export rules that FREAK (CVE-2015-0204) downgrades to: 0x0003
TLS_RSA_EXPORT_WITH_RC4_40_MD5, 0x0006 ..._RC2_CBC_40_MD5 and 0x0008 ..._DES40_CBC_SHA.
For an export suite whose certificate key is longer than 512 bits the flight carries,
between Certificate and ServerHelloDone, the ServerKeyExchange a real export server sent
(RFC 2246 7.4.3): a temporary 512-bit RSA key's modulus and exponent, signed with the
certificate's key over client_random + server_random + params (TLS 1.0/1.1: PKCS#1 v1.5
over MD5 || SHA-1, no DigestInfo; TLS 1.2: a rsa_pkcs1_* scheme the hello offered, RFC 5246
7.4.3, SHA-1 when it listed none; handshake_failure when it offered none). The temporary
key comes from `openssl genrsa 512` (`cryptography` makes none under 1024 bits), made once
per server as OpenSSL's export servers made it (which made FREAK practical); a certificate
key of 512 bits or less gets no ServerKeyExchange, as the RFC says. The suite is answered
in whatever version the hello negotiates, as the default one.

Modes (--mode):
  compression     the ServerHello picks DEFLATE (method 1) whenever the hello offers it, as an
                  OpenSSL 1.0.x server built with zlib did (CRIME, CVE-2012-4929;
                  OpenSSL 1.1.0 turned compression off by default);
  no-reneg-info   the ServerHello carries no renegotiation_info whatever the hello offered, as
                  servers before RFC 5746 (OpenSSL before 0.9.8m, 2010) did (CVE-2009-3555);
  sslv2           an SSLv2 CLIENT-HELLO (2-byte header with the high bit set, msg type 1) is
                  answered with an SSLv2 SERVER-HELLO (msg type 4: certificate, the cipher specs
                  shared with the client, a connection id), as OpenSSL with SSLv2 enabled did
                  (1.0.2g and 1.0.1s, 2016, disabled it by default): the DROWN precondition
                  (CVE-2016-0800); TLS hellos are answered as in the other modes;
  plain           none of these (a control).

The ServerHello.random (--random): `random` (default: 32 random bytes, as servers since
OpenSSL 1.0.1f send), `clock` (gmt_unix_time first, RFC 5246 7.4.1.2, as OpenSSL before
1.0.1f, 2014, and other old servers sent it: the tls_timestamp check's finding), shifted by
--skew seconds (a server whose clock is off), or `fixed` (the same first 4 bytes, 0x5f5f5f5f,
on every connection: not a clock).

After the flight (--after): what the server does with the client's next bytes: `close`
(default: it closes), `http` (a plaintext HTTP/1.1 400 reply, as a TLS port with a web
server behind a misconfigured proxy sends), `overlong` (a handshake record whose header
claims 18433 bytes, more than RFC 5246 6.2.3 allows, and those bytes), `silent` (nothing
more: it reads until the client closes, 10 s at most), `alert-text` (a fatal
unexpected_message alert and a plain error line in one write, as vsftpd and MariaDB answer a
record their TLS library refuses) or `alert-pause-text` (the same in two writes 0.3 s
apart). The hand-driven checks (heartbleed,
ccs, robot, ...) read those bytes, or that silence, as their evidence.
"""
import argparse
import base64
import os
import re
import socket
import subprocess
import time
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.lab_servers._common import serve_forever

SUITE = 0x002F                    # TLS_RSA_WITH_AES_128_CBC_SHA
#: the static-RSA suites --suite may name: is it an RSA export suite (a temporary key)?
SUITES = {0x002F: False, 0x0009: False, 0x0003: True, 0x0006: True, 0x0008: True}
EXPORT_BITS = 512                 # the export rules' limit: the temporary key's size
#: the TLS 1.2 signature schemes an export ServerKeyExchange may be signed with, preferred
#: first (rsa_pkcs1_sha256, _sha384, _sha512, _sha1)
PKCS1_SCHEMES = {0x0401: hashes.SHA256, 0x0501: hashes.SHA384, 0x0601: hashes.SHA512,
                 0x0201: hashes.SHA1}
SSL2_SPECS = (0x0700C0, 0x010080, 0x020080, 0x060040)   # 3DES, RC4, RC4-EXPORT40, DES
ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--mode", choices=["compression", "no-reneg-info", "sslv2", "plain"],
                required=True)
ap.add_argument("--after", choices=["close", "http", "overlong", "silent", "alert-text",
                                    "alert-pause-text"], default="close")
ap.add_argument("--random", choices=["random", "clock", "fixed"], default="random")
ap.add_argument("--skew", type=int, default=0)
ap.add_argument("--suite", type=lambda v: int(v, 16), choices=sorted(SUITES), default=SUITE,
                metavar="0xNNNN", help="the static-RSA suite answered (hex): " +
                ", ".join(f"0x{c:04x}" for c in sorted(SUITES)))
args = ap.parse_args()
with open(args.chain_file) as fh:
    CHAIN = [base64.b64decode("".join(m.split()))
             for m in re.findall(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----",
                                 fh.read(), re.S)]


def temporary_key() -> rsa.RSAPrivateKey:
    """A fresh 512-bit RSA key, from `openssl genrsa` (which still makes one)."""
    pem = subprocess.run(["openssl", "genrsa", str(EXPORT_BITS)], check=True,
                         capture_output=True, timeout=30).stdout
    key = serialization.load_pem_private_key(pem, None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


with open(args.key_file, "rb") as fh:
    CERT_KEY = serialization.load_pem_private_key(fh.read(), None)
#: the export suite's temporary key: only when the certificate's key is over the limit
TEMP_KEY = temporary_key() if SUITES[args.suite] and isinstance(
    CERT_KEY, rsa.RSAPrivateKey) and CERT_KEY.key_size > EXPORT_BITS else None


def u16(n: int) -> bytes:
    return n.to_bytes(2, "big")


def u24(n: int) -> bytes:
    return n.to_bytes(3, "big")


def record(ctype: int, version: int, body: bytes) -> bytes:
    return bytes([ctype]) + u16(version) + u16(len(body)) + body


def handshake(msg_type: int, body: bytes) -> bytes:
    return bytes([msg_type]) + u24(len(body)) + body


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def parse_client_hello(body: bytes) -> dict[str, Any]:
    p = 4 + 2 + 32                               # handshake header, version, random
    version = int.from_bytes(body[4:6], "big")
    client_random = body[6:38]
    p += 1 + body[p]
    n = int.from_bytes(body[p:p + 2], "big")
    suites = [int.from_bytes(body[i:i + 2], "big") for i in range(p + 2, p + 2 + n, 2)]
    p += 2 + n
    methods = body[p + 1:p + 1 + body[p]]
    p += 1 + body[p]
    exts: dict[int, bytes] = {}
    if p + 2 <= len(body):
        end = p + 2 + int.from_bytes(body[p:p + 2], "big")
        p += 2
        while p + 4 <= end:
            t, n = int.from_bytes(body[p:p + 2], "big"), int.from_bytes(body[p + 2:p + 4], "big")
            exts[t] = body[p + 4:p + 4 + n]
            p += 4 + n
    return {"version": version, "suites": suites, "methods": methods, "exts": exts,
            "random": client_random}


def legacy_rsa_sign(key: rsa.RSAPrivateKey, data: bytes) -> bytes:
    """A TLS 1.0/1.1 RSA signature (RFC 2246 4.7): PKCS#1 v1.5 block type 1 over the 36
    bytes MD5(data) || SHA-1(data), without the DigestInfo `cryptography`'s sign() adds."""
    md5, sha1 = hashes.Hash(hashes.MD5()), hashes.Hash(hashes.SHA1())
    md5.update(data)
    sha1.update(data)
    digest = md5.finalize() + sha1.finalize()
    nums = key.private_numbers()
    k = (nums.public_numbers.n.bit_length() + 7) // 8
    block = b"\x00\x01" + b"\xff" * (k - 3 - len(digest)) + b"\x00" + digest
    return pow(int.from_bytes(block, "big"), nums.d, nums.public_numbers.n).to_bytes(k, "big")


def server_key_exchange(hello: dict[str, Any], version: int,
                        server_random: bytes) -> bytes | None:
    """The export ServerKeyExchange body (RFC 2246 7.4.3, RFC 5246 7.4.3): the temporary
    key's modulus and exponent, signed with the certificate key (None: a TLS 1.2 hello
    whose signature_algorithms has no rsa_pkcs1 scheme to sign with)."""
    assert TEMP_KEY is not None and isinstance(CERT_KEY, rsa.RSAPrivateKey)
    pub = TEMP_KEY.public_key().public_numbers()
    modulus = pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")
    exponent = pub.e.to_bytes((pub.e.bit_length() + 7) // 8, "big")
    params = u16(len(modulus)) + modulus + u16(len(exponent)) + exponent
    signed = hello["random"] + server_random + params
    if version < 0x0303:
        signature = legacy_rsa_sign(CERT_KEY, signed)
        return params + u16(len(signature)) + signature
    raw = hello["exts"].get(13, b"")
    offered = [int.from_bytes(raw[i:i + 2], "big") for i in range(2, len(raw) - 1, 2)]
    scheme = next((s for s in PKCS1_SCHEMES if s in offered), None) if offered else 0x0201
    if scheme is None:
        return None
    signature = CERT_KEY.sign(signed, padding.PKCS1v15(), PKCS1_SCHEMES[scheme]())
    return params + u16(scheme) + u16(len(signature)) + signature


def answer_tls(sock: socket.socket, header: bytes) -> None:
    body = read_exact(sock, int.from_bytes(header[3:5], "big"))
    hello = parse_client_hello(body)
    versions = hello["exts"].get(43)
    listed = [int.from_bytes(versions[i:i + 2], "big") for i in range(1, len(versions), 2)] \
        if versions else []
    version = min(hello["version"], 0x0303)
    if version < 0x0301 or (listed and not any(0x0301 <= v <= 0x0303 for v in listed)):
        sock.sendall(record(21, 0x0301, b"\x02\x46"))
        return
    if listed:
        version = max(v for v in listed if 0x0301 <= v <= 0x0303)
    if args.suite not in hello["suites"]:
        sock.sendall(record(21, version, b"\x02\x28"))
        return
    method = 1 if args.mode == "compression" and 1 in hello["methods"] else 0
    exts = b""
    if args.mode != "no-reneg-info" and (0xFF01 in hello["exts"] or 0x00FF in hello["suites"]):
        exts += u16(0xFF01) + u16(1) + b"\x00"
    random = os.urandom(32) if args.random == "random" else b"\x5f" * 4 + os.urandom(28) \
        if args.random == "fixed" else \
        ((int(time.time()) + args.skew) % 2**32).to_bytes(4, "big") + os.urandom(28)
    sh = u16(version) + random + b"\x00" + u16(args.suite) + bytes([method])
    sh += u16(len(exts)) + exts if exts else b""
    certs = b"".join(u24(len(c)) + c for c in CHAIN)
    flight = handshake(2, sh) + handshake(11, u24(len(certs)) + certs)
    if TEMP_KEY is not None:
        ske = server_key_exchange(hello, version, random)
        if ske is None:
            sock.sendall(record(21, version, b"\x02\x28"))
            return
        flight += handshake(12, ske)
    flight += handshake(14, b"")
    sock.sendall(record(22, version, flight))
    sock.settimeout(10)
    if not sock.recv(65536) or args.after == "close":
        return                       # the client's answer, or its close: then close
    if args.after == "silent":
        while sock.recv(65536):
            pass
        return
    if args.after.startswith("alert"):
        alert, text = record(21, version, b"\x02\x0a"), b"500 OOPS: SSL routines\r\n"
        if args.after == "alert-text":
            sock.sendall(alert + text)
        else:
            sock.sendall(alert)
            time.sleep(0.3)
            sock.sendall(text)
    elif args.after == "http":
        sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n"
                     b"Content-Length: 11\r\nConnection: close\r\n\r\nBad Request")
    else:
        sock.sendall(b"\x16" + u16(version) + u16(18433) + b"\x00" * 18433)
    time.sleep(0.2)


def answer_sslv2(sock: socket.socket, header: bytes) -> None:
    length = ((header[0] & 0x7F) << 8) | header[1]
    body = header[2:] + read_exact(sock, length - 3)
    if body[0] != 1:                 # CLIENT-HELLO
        return
    specs_len, sid_len = int.from_bytes(body[3:5], "big"), int.from_bytes(body[5:7], "big")
    offered = [int.from_bytes(body[9 + i:12 + i], "big") for i in range(0, specs_len, 3)]
    del sid_len
    if args.mode != "sslv2":
        return                       # close, as a server without SSLv2
    shared = [s for s in SSL2_SPECS if s in offered]
    cert, conn_id = CHAIN[0], os.urandom(16)
    msg = bytes([4, 0, 1]) + u16(0x0002) + u16(len(cert)) + u16(3 * len(shared)) + \
        u16(len(conn_id)) + cert + b"".join(s.to_bytes(3, "big") for s in shared) + conn_id
    sock.sendall(bytes([0x80 | (len(msg) >> 8), len(msg) & 0xFF]) + msg)
    sock.settimeout(10)
    sock.recv(1)


def handler(sock: socket.socket, addr: tuple[str, int]) -> None:
    try:
        sock.settimeout(10)
        header = read_exact(sock, 5)
        if header[0] & 0x80:
            answer_sslv2(sock, header)
        elif header[0] == 22:
            answer_tls(sock, header)
    except (OSError, EOFError, IndexError, ValueError):
        pass
    finally:
        sock.close()


serve_forever("127.0.0.1", args.port, handler)
