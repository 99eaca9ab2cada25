#!/usr/bin/python3
"""Python standard-library ssl TLS test server (the system OpenSSL, 3.0 on Debian 12).

Groups and TLS 1.3 suites come from the OPENSSL_CONF file that tests/helpers/servers.py puts in the
environment (`Groups =` / `Ciphersuites =`): the ssl module has no call for either.
Note that OpenSSL silently skips group names it does not know in that line.
"""
import os
import ssl

from _common import ConnLog, http_reply, parse_args, serve_forever  # runs as a script: its folder is on the path

args = parse_args(__doc__ or "")
VERSION = {"tls1_0": ssl.TLSVersion.TLSv1, "tls1_1": ssl.TLSVersion.TLSv1_1,
           "tls1_2": ssl.TLSVersion.TLSv1_2, "tls1_3": ssl.TLSVersion.TLSv1_3}
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(args.chain_file, args.key_file)
if args.ciphers:
    ctx.set_ciphers(args.ciphers)
ctx.minimum_version = VERSION[args.min_version]
ctx.maximum_version = VERSION[args.max_version]
ctx.options |= ssl.OP_NO_TICKET
if args.serverpref:
    ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
else:
    ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
if args.dhparam:
    ctx.load_dh_params(args.dhparam)
log = ConnLog(args.log)
log.write(f"start {ssl.OPENSSL_VERSION} OPENSSL_CONF={os.environ.get('OPENSSL_CONF')}")


def handler(sock, addr):
    try:
        conn = ctx.wrap_socket(sock, server_side=True)
    except Exception as exc:
        log.write(f"{addr[0]} handshake-fail {exc!r}")
        return
    info = f"pyssl {conn.version()} {conn.cipher()[0]} group=?"  # ssl cannot report the group
    log.write(f"{addr[0]} ok {info}")
    try:
        if args.reply_unread:   # the socket is closed with the request unread: a reset
            conn.sendall(http_reply(info))
            return
        conn.recv(4096)
        conn.sendall(http_reply(info))
        conn.unwrap()
    except Exception:
        pass


serve_forever(args.host, args.port, handler)
