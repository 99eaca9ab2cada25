"""QUIC Handshake packets opened with a key log's secrets (RFC 9001 5.1).

A QUIC handshake's ServerHello comes in Initial packets, which anyone can open; the rest of
it (EncryptedExtensions, Certificate, CertificateRequest, CertificateVerify, both Finished)
comes in Handshake packets, protected with keys from the TLS handshake traffic secrets. A
key log (SSLKEYLOGFILE, `--keylog`) that has CLIENT_HANDSHAKE_TRAFFIC_SECRET and
SERVER_HANDSHAKE_TRAFFIC_SECRET for the ClientHello's random gives them, as tshark
(`-o tls.keylog_file:FILE`) uses them: "quic key", "quic iv" and "quic hp" ("quicv2 ..."
in QUIC v2) expanded with the hash of the suite the ServerHello chose (wire.quic, shared
with the live client). Google's versions (T050, T051) keep Google QUIC's frames and are not
opened here. Handshake packets that come before their keys (reordered ahead of the
ServerHello) wait, at most `MAX_HELD` of them a connection, and only for a connection whose
secrets the key log has.
"""

from __future__ import annotations

from typing import Final

from tlsprobe.engine import keylog as kl
from tlsprobe.wire.quic import GOOGLE_SALTS, SUITES, PacketKeys, unprotect

MAX_HELD: Final = 4   # Handshake packets kept while their keys are not known yet


class HandshakeKeys:
    """Both directions' Handshake packet protection of one QUIC connection, and the
    largest packet number opened in each (RFC 9000 A.3 decodes the next ones from it)."""

    __slots__ = ("keys", "largest")

    def __init__(self, client: PacketKeys, server: PacketKeys) -> None:
        self.keys = (client, server)
        self.largest = [-1, -1]

    def open(self, direction: int, packet: bytes, pn_offset: int) -> bytes:
        """The payload of a Handshake packet from `direction`; raises ValueError when it
        does not open."""
        pn, payload = unprotect(self.keys[direction], packet, pn_offset,
                                self.largest[direction])
        self.largest[direction] = max(self.largest[direction], pn)
        return payload


def handshake_keys(secrets: dict[str, bytes] | None, suite: int | None,
                   version: int) -> HandshakeKeys | str:
    """The Handshake packet keys of a connection, or why there are none (a note's text)."""
    if not secrets:
        return ""  # the key log has nothing for this connection: nothing to say
    client = secrets.get(kl.CLIENT_HANDSHAKE_TRAFFIC_SECRET)
    server = secrets.get(kl.SERVER_HANDSHAKE_TRAFFIC_SECRET)
    if client is None or server is None:
        return ("QUIC: the key log has no CLIENT_HANDSHAKE_TRAFFIC_SECRET and "
                "SERVER_HANDSHAKE_TRAFFIC_SECRET for it (only its Initial packets are read)")
    if version in GOOGLE_SALTS:
        return ("Google QUIC (T050, T051): its Handshake packets keep Google QUIC's frames, "
                "not read (only its Initial packets are)")
    if suite not in SUITES:
        name = "no suite" if suite is None else f"suite 0x{suite:04x}"
        return f"QUIC: {name} has no QUIC packet protection here (RFC 9001 5.3)"
    return HandshakeKeys(PacketKeys(client, suite, version), PacketKeys(server, suite, version))


__all__ = ["MAX_HELD", "HandshakeKeys", "handshake_keys"]
