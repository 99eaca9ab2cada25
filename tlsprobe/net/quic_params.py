"""QUIC transport parameters (RFC 9000 18.2): the client's, and the server's decoded.

They travel in the TLS extension quic_transport_parameters (0x39): the client's in its
ClientHello, the server's in EncryptedExtensions. Integer parameters are varints; connection
IDs, tokens and unknown parameters are shown as hex (the server's bytes are never shown raw).
"""

from __future__ import annotations

from typing import NamedTuple

from tlsprobe.net.quic_wire import pull_bytes, pull_varint, varint, version_name

EXTENSION = 0x39
NAMES = {
    0x00: "original_destination_connection_id", 0x01: "max_idle_timeout",
    0x02: "stateless_reset_token", 0x03: "max_udp_payload_size", 0x04: "initial_max_data",
    0x05: "initial_max_stream_data_bidi_local", 0x06: "initial_max_stream_data_bidi_remote",
    0x07: "initial_max_stream_data_uni", 0x08: "initial_max_streams_bidi",
    0x09: "initial_max_streams_uni", 0x0A: "ack_delay_exponent", 0x0B: "max_ack_delay",
    0x0C: "disable_active_migration", 0x0D: "preferred_address",
    0x0E: "active_connection_id_limit", 0x0F: "initial_source_connection_id",
    0x10: "retry_source_connection_id", 0x11: "version_information",
    0x20: "max_datagram_frame_size", 0x2AB2: "grease_quic_bit",
}
INTEGERS = frozenset({0x01, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0E,
                      0x20})
MAX_PARAMETERS = 64


def client_parameters(scid: bytes, chosen: int | None = None,
                      available: tuple[int, ...] = ()) -> bytes:
    """What tlsprobe offers: enough for a server to finish the handshake (RFC 9000 7.3:
    initial_source_connection_id is required), no streams it would need to serve; with
    `available`, version_information (RFC 9368 3) naming `chosen` (our Initial packets'
    version) and the versions we accept, ours first."""
    ints = ((0x01, 30000), (0x03, 1472), (0x04, 1 << 20), (0x05, 1 << 18), (0x06, 1 << 18),
            (0x07, 1 << 18), (0x08, 0), (0x09, 3), (0x0E, 2))
    out = b"".join(varint(k) + varint(len(varint(v))) + varint(v) for k, v in ints)
    out += varint(0x0F) + varint(len(scid)) + scid
    if available and chosen is not None:
        info = b"".join(v.to_bytes(4, "big") for v in (chosen, *available))
        out += varint(0x11) + varint(len(info)) + info
    return out


def chosen_version(value: int | bytes | None) -> int | None:
    """The Chosen Version of a version_information value, None when absent or malformed."""
    if not isinstance(value, bytes) or len(value) < 4 or len(value) % 4:
        return None
    return int.from_bytes(value[:4], "big")


def parse_parameters(data: bytes) -> list[tuple[int, int | bytes]]:
    """(id, value) of each parameter, integers decoded; ValueError when malformed."""
    out: list[tuple[int, int | bytes]] = []
    p = 0
    while p < len(data):
        if len(out) >= MAX_PARAMETERS:
            raise ValueError(f"more than {MAX_PARAMETERS} transport parameters")
        pid, p = pull_varint(data, p)
        size, p = pull_varint(data, p)
        value, p = pull_bytes(data, p, size)
        if pid in INTEGERS:
            number, used = pull_varint(value, 0)
            if used != len(value):
                raise ValueError(f"transport parameter {NAMES[pid]} is not one varint")
            out.append((pid, number))
        else:
            out.append((pid, value))
    return out


TRANSPORT_PARAMETER_ERROR = 0x08     # RFC 9000 20.1
VERSION_NEGOTIATION_ERROR = 0x11     # RFC 9368 10.2
MISSING_EXTENSION = 0x100 + 109      # RFC 9001 8.2: the TLS alert missing_extension


class NoParameters(ValueError):
    """The server's EncryptedExtensions has no quic_transport_parameters extension."""


class Problem(NamedTuple):
    """What is wrong with the server's parameters, and the error code of the
    CONNECTION_CLOSE the client then sends."""

    code: int
    text: str


def server_problem(params: list[tuple[int, int | bytes]], original_dcid: bytes,
                   version: int, negotiated: bool) -> Problem | None:
    """What is wrong with the server's parameters, None when nothing: the connection ID we
    first sent must come back (RFC 9000 7.3), a stateless_reset_token is 16 bytes (18.2), and
    version_information must name the version in use (RFC 9368 4; required after a
    compatible version negotiation)."""
    found = dict(params)
    if found.get(0x00) != original_dcid:
        return Problem(TRANSPORT_PARAMETER_ERROR, "server's original_destination_connection_id"
                       " is not the one we sent (RFC 9000 7.3)")
    token = found.get(0x02)
    if token is not None and (not isinstance(token, bytes) or len(token) != 16):
        return Problem(TRANSPORT_PARAMETER_ERROR, "server's stateless_reset_token is not 16 "
                       "bytes (RFC 9000 18.2)")
    chosen = chosen_version(found.get(0x11))
    if (chosen is not None and chosen != version) or (chosen is None and negotiated):
        return Problem(VERSION_NEGOTIATION_ERROR, "server's version_information does not "
                       f"confirm QUIC {version_name(version)}, the version it answered in "
                       "(RFC 9368 4)")
    return None


def describe(pid: int, value: int | bytes) -> tuple[str, str]:
    """(name, shown value) of one parameter."""
    name = NAMES.get(pid, f"unknown 0x{pid:x}")
    if isinstance(value, int):
        return name, str(value)
    if pid == 0x0C or (pid == 0x2AB2 and not value):
        return name, "(present)"
    if pid == 0x11 and chosen_version(value) is not None:
        versions = [f"0x{int.from_bytes(value[i:i + 4], 'big'):08x}"
                    for i in range(4, min(len(value), 4 + 4 * 16), 4)]
        return name, f"chosen 0x{value[:4].hex()}, available " + (" ".join(versions) or
                                                                 "(none)")
    return name, value.hex() if value else "(empty)"


def server_parameters(stream: bytes) -> list[tuple[int, int | bytes]] | None:
    """The transport parameters of the EncryptedExtensions that begins the server's
    Handshake CRYPTO `stream`; None until the message is whole; NoParameters when it has
    no quic_transport_parameters extension (ValueError when malformed)."""
    if len(stream) < 4 or stream[0] != 8:
        return None
    size = int.from_bytes(stream[1:4], "big")
    if len(stream) < 4 + size:
        return None
    raw = encrypted_extensions_parameters(stream[:4 + size])
    if raw is None:
        raise NoParameters("server's EncryptedExtensions has no quic_transport_parameters "
                           "extension (RFC 9001 8.2: missing_extension)")
    return parse_parameters(raw)


def encrypted_extensions_parameters(message: bytes) -> bytes | None:
    """The 0x39 extension of one EncryptedExtensions message (type 8, with its header),
    None when it has none; ValueError when the message is malformed."""
    body = message[4:]
    size = int.from_bytes(body[:2], "big")
    if len(body) < 2 or size != len(body) - 2:
        raise ValueError("EncryptedExtensions extensions length is wrong")
    p = 2
    while p < len(body):
        head, p = pull_bytes(body, p, 4)
        data, p = pull_bytes(body, p, int.from_bytes(head[2:], "big"))
        if int.from_bytes(head[:2], "big") == EXTENSION:
            return data
    return None
