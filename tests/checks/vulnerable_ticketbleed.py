#!/usr/bin/env python3
"""A TLS 1.2 server on loopback (tlslite-ng) that issues RFC 5077 session tickets, for the
ticketbleed check (tests/checks/test_checks_early.py).

With --f5 it answers as the F5 BIG-IP stacks affected by Ticketbleed (CVE-2016-9244, F5
K05121675) did on the wire: when it resumes a session from a ticket and the ClientHello
carries a session ID shorter than 32 bytes, the ServerHello echoes 32 bytes: the client's
session ID followed by bytes of the server's uninitialised memory (here: 31 - n random
bytes, different on each connection, as the published captures show). Without --f5 it is
tlslite-ng as released, which echoes the session ID as sent (RFC 5077 section 3.4).
No F5 software can be installed here; tlslite-ng resumes from its own tickets, and the one
place it sets the echoed session ID (TLSConnection._serverGetClientHello, "client MAY send a
random session_id ... server has to echo the session_ID back") is where the padding goes.
"""
import argparse
import os
import socket
import warnings

from tests.lab_servers._common import serve_forever

warnings.simplefilter("ignore", DeprecationWarning)  # tlslite imports asyncore
from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey  # noqa: E402
from tlslite.session import Session  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--chain-file", required=True)
ap.add_argument("--key-file", required=True)
ap.add_argument("--f5", action="store_true", help="pad the echoed session ID to 32 bytes")
args = ap.parse_args()
chain = X509CertChain()
with open(args.chain_file) as fh:
    chain.parsePemList(fh.read())
with open(args.key_file) as fh:
    key = parsePEMKey(fh.read(), private=True)
settings = HandshakeSettings()
settings.minVersion = settings.maxVersion = (3, 3)
settings.versions = [(3, 3)]
settings.ticketKeys = [os.urandom(32)]
settings = settings.validate()


class F5Session(Session):
    """A session resumed from a ticket whose echoed session ID is always 32 bytes."""

    @property  # type: ignore[override]
    def sessionID(self) -> bytearray:
        return self.__dict__.get("_padded", self.__dict__.get("_plain", bytearray()))

    @sessionID.setter
    def sessionID(self, value: bytearray) -> None:
        self.__dict__["_plain"] = bytearray(value)
        if 0 < len(value) < 32:
            self.__dict__["_padded"] = bytearray(value) + bytearray(os.urandom(32 - len(value)))


if args.f5:
    plain_ticket_to_session = TLSConnection._ticket_to_session

    def _ticket_to_session(self, settings, ticket_ext):  # type: ignore[no-untyped-def]
        session = plain_ticket_to_session(self, settings, ticket_ext)
        if session is not None:
            sid = session.__dict__.pop("sessionID", bytearray())
            session.__class__ = F5Session
            session.sessionID = sid
        return session

    TLSConnection._ticket_to_session = _ticket_to_session


def handler(sock: socket.socket, addr: tuple[str, int]) -> None:
    conn = TLSConnection(sock)
    try:
        conn.handshakeServer(certChain=chain, privateKey=key, settings=settings)
        conn.close()
    except Exception:
        pass


serve_forever("127.0.0.1", args.port, handler)
