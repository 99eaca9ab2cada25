#!/usr/bin/env python3
"""pyOpenSSL TLS test server on the OpenSSL bundled with `cryptography` (post-quantum groups).

Groups come from the OPENSSL_CONF file that tests/helpers/servers.py puts in the environment
(`Groups =` in system_default): pyOpenSSL has no set_groups call, so the config has to be
in place before OpenSSL is imported and initialised.
"""
import os

from _common import ConnLog, http_reply, parse_args, serve_forever  # runs as a script: its folder is on the path

from OpenSSL import SSL  # noqa: E402  (after OPENSSL_CONF is in the environment)
from OpenSSL._util import ffi, lib  # noqa: E402

args = parse_args(__doc__ or "")
VERSION = {"tls1_0": SSL.TLS1_VERSION, "tls1_1": SSL.TLS1_1_VERSION,
           "tls1_2": SSL.TLS1_2_VERSION, "tls1_3": SSL.TLS1_3_VERSION}
ctx = SSL.Context(SSL.TLS_METHOD)
ctx.use_certificate_chain_file(args.chain_file)
ctx.use_privatekey_file(args.key_file)
ctx.set_min_proto_version(VERSION[args.min_version])
ctx.set_max_proto_version(VERSION[args.max_version])
ctx.set_options(SSL.OP_NO_TICKET)
if args.ciphers:
    ctx.set_cipher_list(args.ciphers.encode())
if args.ciphersuites:
    ctx.set_tls13_ciphersuites(args.ciphersuites.encode())
if args.serverpref:
    ctx.set_options(SSL.OP_CIPHER_SERVER_PREFERENCE)
if args.dhparam:
    ctx.load_tmp_dh(args.dhparam)
log = ConnLog(args.log)
log.write(f"start {SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode()} "
          f"OPENSSL_CONF={os.environ.get('OPENSSL_CONF')}")


def handler(sock, addr):
    conn = SSL.Connection(ctx, sock)
    conn.set_accept_state()
    try:
        conn.do_handshake()
    except Exception as exc:
        log.write(f"{addr[0]} handshake-fail {exc!r}")
        return
    name = lib.SSL_get0_group_name(conn._ssl)
    group = ffi.string(name).decode() if name != ffi.NULL else None
    info = f"pyopenssl {conn.get_protocol_version_name()} {conn.get_cipher_name()} group={group}"
    log.write(f"{addr[0]} ok {info}")
    try:
        conn.recv(4096)
        conn.sendall(http_reply(info))
        conn.shutdown()
    except Exception:
        pass


serve_forever(args.host, args.port, handler)
