#!/usr/bin/env python3
"""A tlslite-ng server (TLS 1.2 and 1.3) with one published flaw put back, for the vulnerable
side of the downgrade-sentinel and ROBOT checks (no installable server has them):

  --no-downgrade-sentinel  a TLS 1.2 (or 1.1) ServerHello.random ends with 8 fresh random
                           bytes instead of "DOWNGRD\\x01" / "DOWNGRD\\x00" (RFC 8446 4.1.3),
                           as TLS 1.3 servers built on the drafts before the sentinel did
                           (tlslite itself sets it: tlsconnection.py, "RFC 8446, section
                           4.1.3");
  --robot strong|weak      RSA key exchange only, and the ClientKeyExchange decrypted by a
                           Bleichenbacher oracle (CVE-2017-13099 and the ROBOT family, the
                           1998 attack): tlslite replaces a badly padded pre-master secret by
                           a random one and fails later at the Finished, alike for every
                           error (keyexchange.py RSAKeyExchange); here the decrypted block is
                           checked the way the vulnerable implementations did, each error
                           answered at once with its own alert instead:
                             strong: a block not starting 00 02, or with no 00 separator,
                               gets illegal_parameter (47) right after the ClientKeyExchange;
                               a PKCS #1-conformant one goes on (wrong length or version:
                               a random secret, as tlslite does) and fails at the Finished
                               (bad_record_mac): the oracle tells conformant from not;
                             weak: only a conformant 48-byte secret with the wrong version
                               gets its own alert (decode_error, 50); every other error fails
                               at the Finished like a correct one: the oracle needs a
                               correctly padded block (sslyze's "weak oracle").
"""
import argparse
import os
import socket
import warnings

from tests.lab_servers._common import serve_forever

warnings.simplefilter("ignore", DeprecationWarning)  # tlslite imports asyncore
from tlslite import keyexchange, tlsconnection  # noqa: E402
from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey  # noqa: E402
from tlslite.errors import TLSDecodeError, TLSIllegalParameterException  # noqa: E402
from tlslite.utils.cryptomath import getRandomBytes  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--no-downgrade-sentinel", action="store_true")
ap.add_argument("--robot", choices=["strong", "weak"])
args = ap.parse_args()
chain = X509CertChain()
with open(args.chain_file) as fh:
    chain.parsePemList(fh.read())
with open(args.key_file) as fh:
    key = parsePEMKey(fh.read(), private=True)
settings = HandshakeSettings()
settings.minVersion, settings.maxVersion = (3, 3), (3, 4)
settings.ticketKeys = []


class FreshRandom:
    """Iterated by `random[-8:] = SENTINEL`: 8 new random bytes each time."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(os.urandom(8))


if args.no_downgrade_sentinel:
    tlsconnection.TLS_1_2_DOWNGRADE_SENTINEL = FreshRandom()
    tlsconnection.TLS_1_1_DOWNGRADE_SENTINEL = FreshRandom()


def leaky_decrypt(self, cke):  # type: ignore[no-untyped-def]
    """RSAKeyExchange.processClientKeyExchange with the padding checks answered apart."""
    block = self.privateKey._raw_private_key_op_bytes(cke.encryptedPreMasterSecret)
    conformant = block[:2] == b"\x00\x02" and 0 in block[2:]
    message = block[block.index(0, 2) + 1:] if conformant else b""
    if args.robot == "strong" and not conformant:
        raise TLSIllegalParameterException("PKCS #1 padding error")
    if len(message) == 48 and tuple(message[:2]) != self.clientHello.client_version:
        if args.robot == "weak":
            raise TLSDecodeError("pre-master secret version mismatch")
        message = b""
    return bytearray(message) if len(message) == 48 else getRandomBytes(48)


if args.robot:
    settings.maxVersion = (3, 3)
    settings.keyExchangeNames = ["rsa"]
    settings.cipherNames = ["aes128gcm", "aes128"]
    keyexchange.RSAKeyExchange.processClientKeyExchange = leaky_decrypt
settings.versions = [v for v in [(3, 4), (3, 3)] if v <= settings.maxVersion]
settings = settings.validate()


def handler(sock: socket.socket, addr: tuple[str, int]) -> None:
    conn = TLSConnection(sock)
    try:
        conn.handshakeServer(certChain=chain, privateKey=key, settings=settings)
        conn.close()
    except Exception:
        pass


serve_forever("127.0.0.1", args.port, handler)
