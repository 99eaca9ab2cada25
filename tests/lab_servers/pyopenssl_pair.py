#!/usr/bin/env python3
"""One chosen suite between two pyOpenSSL memory-BIO connections (the OpenSSL bundled with
the lab environment's `cryptography`, which can pick TLS 1.3 suites), for
tests/engine/engine_peers.py. Runs in the lab environment (tests/helpers/lab_env.py).

Arguments: CERT KEY SUITE [--tls12] (a TLS 1.3 suite name, or with --tls12 an OpenSSL TLS
1.2 cipher name). stdin: JSON {client_payload, server_payload, exporter: [label, context,
length]} (hex strings). stdout: JSON with the bytes each way, what each side read, the
client's key log lines and the exporter output (hex)."""
import argparse
import json
import sys

from OpenSSL import SSL

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("cert")
parser.add_argument("key")
parser.add_argument("suite")
parser.add_argument("--tls12", action="store_true")
args = parser.parse_args()
spec = json.loads(sys.stdin.read())
client_payload = bytes.fromhex(spec["client_payload"])
server_payload = bytes.fromhex(spec["server_payload"])
label, context, length = spec["exporter"]

lines = []
contexts = SSL.Context(SSL.TLS_METHOD), SSL.Context(SSL.TLS_METHOD)
for ctx in contexts:
    if args.tls12:
        ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
        ctx.set_cipher_list(f"{args.suite}:@SECLEVEL=0".encode())
    else:
        ctx.set_min_proto_version(SSL.TLS1_3_VERSION)
        ctx.set_tls13_ciphersuites(args.suite.encode())
        ctx.set_cipher_list(b"DEFAULT:@SECLEVEL=0")  # CCM_8 has a 64-bit tag
server_ctx, client_ctx = contexts
server_ctx.use_certificate_file(args.cert)
server_ctx.use_privatekey_file(args.key)
client_ctx.set_keylog_callback(lambda _conn, line: lines.append(line.decode()))
server, client = SSL.Connection(server_ctx, None), SSL.Connection(client_ctx, None)
server.set_accept_state()
client.set_connect_state()
c2s, s2c = bytearray(), bytearray()


def pump(step, what):
    """Call `step` until it reports done, moving bytes between the peers in between."""
    for _ in range(200):
        if step():
            return
        if not transfer():
            sys.exit(f"{what}: stalled with nothing to transfer")
    sys.exit(f"{what}: did not finish")


def drain(conn):
    out = bytearray()
    while True:
        try:
            out.extend(conn.bio_read(65536))
        except SSL.WantReadError:
            return bytes(out)


def transfer():
    a, b = drain(client), drain(server)
    c2s.extend(a)
    s2c.extend(b)
    if a:
        server.bio_write(a)
    if b:
        client.bio_write(b)
    return bool(a or b)


done = {"client": False, "server": False}


def handshake():
    for name, conn in (("client", client), ("server", server)):
        if not done[name]:
            try:
                conn.do_handshake()
                done[name] = True
            except SSL.WantReadError:
                pass
    return all(done.values())


def reader(conn, size, sink):
    def step():
        while len(sink) < size:
            try:
                sink.extend(conn.recv(size - len(sink)))
            except SSL.WantReadError:
                return False
        return True
    return step


pump(handshake, "handshake")
server_received, client_received = bytearray(), bytearray()
client.sendall(client_payload)
pump(reader(server, len(client_payload), server_received), "server read")
server.sendall(server_payload)
pump(reader(client, len(server_payload), client_received), "client read")
transfer()
exported = client.export_keying_material(bytes.fromhex(label), length, bytes.fromhex(context))
print(json.dumps({"c2s": c2s.hex(), "s2c": s2c.hex(), "keylog": lines,
                  "client_received": client_received.hex(),
                  "server_received": server_received.hex(), "exported": exported.hex()}))
