#!/usr/bin/env python3
"""One pyOpenSSL client handshake (the OpenSSL bundled with the lab environment's
`cryptography`), for tests/project/test_servers.py: verifies the chain against --ca, then prints one
JSON object: version, cipher, group, the peer chain (PEM) and the raw ServerKeyExchange
(hex, if any). Runs in the lab environment (tests/helpers/lab_env.py), never in the test one."""
import argparse
import json
import socket
import struct
import sys

from cryptography.hazmat.primitives.serialization import Encoding
from OpenSSL import SSL
from OpenSSL._util import ffi, lib

VERSION = {"tls1_0": SSL.TLS1_VERSION, "tls1_1": SSL.TLS1_1_VERSION,
           "tls1_2": SSL.TLS1_2_VERSION, "tls1_3": SSL.TLS1_3_VERSION}

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--host", required=True)
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--ca", required=True)
parser.add_argument("--groups")
parser.add_argument("--min-version", default="tls1_2", choices=VERSION)
parser.add_argument("--max-version", default="tls1_3", choices=VERSION)
parser.add_argument("--cipher-list")
args = parser.parse_args()

ctx = SSL.Context(SSL.TLS_METHOD)
ctx.set_min_proto_version(VERSION[args.min_version])
ctx.set_max_proto_version(VERSION[args.max_version])
ctx.load_verify_locations(args.ca)
ctx.set_verify(SSL.VERIFY_PEER)
if args.cipher_list:
    ctx.set_cipher_list(args.cipher_list.encode())
if args.groups and lib.SSL_CTX_set1_curves_list(ctx._context, args.groups.encode()) != 1:
    sys.exit(f"groups not accepted: {args.groups}")
seen = {}


@ffi.callback("void(int, int, int, void *, size_t, SSL *, void *)")
def on_message(write_p, version, content_type, buf, length, ssl_, arg):
    data = bytes(ffi.buffer(buf, length))
    if not write_p and content_type == 22 and data[:1] == b"\x0c":
        seen["server_key_exchange"] = data.hex()


lib.SSL_CTX_set_msg_callback(ctx._context, on_message)
with socket.create_connection((args.host, args.port), timeout=5) as sock:
    sock.settimeout(None)  # pyOpenSSL wants a blocking socket; the kernel times out reads
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 5, 0))
    conn = SSL.Connection(ctx, sock)
    conn.set_tlsext_host_name(b"localhost")
    conn.set_connect_state()
    conn.do_handshake()
    name = lib.SSL_get0_group_name(conn._ssl)
    chain = [c.to_cryptography().public_bytes(Encoding.PEM).decode()
             for c in conn.get_peer_cert_chain() or []]
    result = {"version": conn.get_protocol_version_name(), "cipher": conn.get_cipher_name(),
              "group": ffi.string(name).decode() if name != ffi.NULL else None,
              "chain": chain, **seen}
    conn.shutdown()
print(json.dumps(result))
