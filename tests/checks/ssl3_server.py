#!/usr/bin/env python3
"""An SSL 3.0 server on loopback (tlslite-ng, which still speaks SSL 3.0), for the POODLE
check: SSL 3.0 (up to --max-version), CBC and RC4 suites with RSA key exchange (--ciphers: tlslite cipher
names, default aes128,rc4). Used by tests/checks/test_checks_servers.py.

No library this machine's openssl or gnutls can be set to speaks SSL 3.0 any more; tlslite-ng
implements it as the published servers did (RFC 6101 record and handshake, CBC with the
SSL 3.0 padding POODLE exploits). With --ignore-fallback-scsv it also stands for the servers
that predate RFC 7507 (the fallback check's vulnerable side)."""
import argparse
import socket
import warnings

from tests.lab_servers._common import serve_forever

warnings.simplefilter("ignore", DeprecationWarning)  # tlslite imports asyncore
from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey  # noqa: E402

VERSIONS = {"ssl3": (3, 0), "tls1_0": (3, 1), "tls1_1": (3, 2), "tls1_2": (3, 3)}
ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--ciphers", default="aes128,rc4")
ap.add_argument("--max-version", default="ssl3", choices=list(VERSIONS),
                help="highest version spoken (SSL 3.0 is always spoken)")
ap.add_argument("--ignore-fallback-scsv", action="store_true",
                help="answer a hello with TLS_FALLBACK_SCSV as any other, as servers before "
                     "RFC 7507 (OpenSSL before 1.0.1j, 2014) did")
args = ap.parse_args()
chain = X509CertChain()
with open(args.chain_file) as fh:
    chain.parsePemList(fh.read())
with open(args.key_file) as fh:
    key = parsePEMKey(fh.read(), private=True)
settings = HandshakeSettings()
settings.minVersion, settings.maxVersion = (3, 0), VERSIONS[args.max_version]
settings.versions = sorted((v for v in VERSIONS.values() if v <= settings.maxVersion),
                           reverse=True)
settings.cipherNames = args.ciphers.split(",")
settings.keyExchangeNames = ["rsa"]
settings.ticketKeys = []
settings = settings.validate()
if args.ignore_fallback_scsv:
    # tlslite refuses a hello listing TLS_FALLBACK_SCSV below its highest version
    # (tlsconnection.py, "Detect if the client performed an inappropriate fallback"); with
    # the constant moved off the wire's 0x5600 the suite is one it does not know, ignored.
    from tlslite.constants import CipherSuite
    CipherSuite.TLS_FALLBACK_SCSV = -1


def handler(sock: socket.socket, addr: tuple[str, int]) -> None:
    conn = TLSConnection(sock)
    try:
        conn.handshakeServer(certChain=chain, privateKey=key, settings=settings)
        conn.close()
    except Exception:
        pass


serve_forever("127.0.0.1", args.port, handler)
