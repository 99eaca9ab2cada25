"""QUIC Initial packets built for the capture tests, independently of tlsprobe.offline.quic.

The salts and labels below are written out from the RFCs and drafts (RFC 9001 5.2, RFC 9369
3.3, draft-ietf-quic-tls-22/-23/-29, Wireshark's packet-quic.c for mvfst and Google's
versions); only HKDF-Expand-Label comes from tlsprobe (checked on RFC 8448). Packets are
protected as RFC 9001 5.3/5.4 say (AES-128-GCM, then AES-ECB header protection over a
16-byte sample) and written as Ethernet/IPv4/UDP frames of a pcap that tshark also reads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.engine.keyschedule import hkdf_expand_label, hkdf_extract
from tlsprobe.wire import ClientHello, frame
from tlsprobe.wire.extensions import Extension

from tests.helpers.capbuild import ether, ipv4, pcap_bytes, udp

V1, V2 = 0x00000001, 0x6B3343CF
Q050, T050, T051 = 0x51303530, 0x54303530, 0x54303531
_S_V1 = "38762cf7f55934b34d179ae6a4c80cadccbb7f0a"       # RFC 9001, drafts 33-34
_S_D29 = "afbfec289993d24c9e9786f19c6111e04390a899"      # drafts 29-32
_S_D23 = "c3eef712c72ebb5a11a7d2432bb46365bef9f502"      # drafts 23-28
_S_D22 = "7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a"      # drafts 21-22
#: version -> (salt, label prefix, RFC 9369 packet types?)
VERSIONS: dict[int, tuple[str, str, bool]] = {
    V1: (_S_V1, "quic", False),
    V2: ("0dede3def700a6db819381be6e269dcbf9bd2ed9", "quicv2", True),
    Q050: ("504574efd066fe2f9d945cfcdbd3a7f0d3b56b45", "quic", False),
    T050: ("7ff579e5acd072915580304c43a2367c60488310", "quic", False),
    T051: ("7a4edef4e7ccee5fa4506c19124fc8ccda6e033d", "quic", False),
    0xFACEB001: (_S_D22, "quic", False),
    0xFACEB002: (_S_D23, "quic", False),
    0xFACEB00E: (_S_D23, "quic", False),
    **{0xFF000000 | d: (_S_D22 if d <= 22 else _S_D23 if d <= 28 else _S_D29 if d <= 32
                        else _S_V1, "quic", False) for d in range(22, 35)},
    # versions reserved to force version negotiation (RFC 9000 15): draft 29's salt, as
    # quic-interop-runner's clients use and Wireshark reads them
    0x0A0A0A0A: (_S_D29, "quic", False),
    0x1A2A3A4A: (_S_D29, "quic", False),
}
CLIENT, SERVER = ("10.1.0.1", 50000), ("10.1.0.2", 443)


class Keys(NamedTuple):
    key: bytes
    iv: bytes
    hp: bytes


def initial_keys(version: int, dcid: bytes, side: str) -> Keys:
    """`side`: "client" or "server"."""
    salt, prefix, _ = VERSIONS[version]
    secret = hkdf_expand_label(hkdf_extract(bytes.fromhex(salt), dcid), f"{side} in".encode(),
                               b"", 32)
    return Keys(*(hkdf_expand_label(secret, f"{prefix} {what}".encode(), b"", n)
                  for what, n in (("key", 16), ("iv", 12), ("hp", 16))))


def chlo(sni: str) -> bytes:
    """A QUIC Crypto CHLO (Google QUIC Q050's client hello): tag, entry count, padding,
    then (tag, end offset) pairs little-endian and the values; SNI and VER here."""
    values = [(b"SNI\x00", sni.encode()), (b"VER\x00", b"Q050")]
    out, end = b"CHLO" + len(values).to_bytes(2, "little") + b"\x00\x00", 0
    for tag, value in values:
        end += len(value)
        out += tag + end.to_bytes(4, "little")
    return out + b"".join(v for _, v in values)


def varint(n: int) -> bytes:
    for size, tag in ((1, 0), (2, 0x40), (4, 0x80), (8, 0xC0)):
        if n < 1 << (8 * size - 2):
            return (n | tag << (8 * size - 8)).to_bytes(size, "big")
    raise ValueError(n)


def crypto(offset: int, data: bytes) -> bytes:
    return b"\x06" + varint(offset) + varint(len(data)) + data


def initial(version: int, dcid: bytes, scid: bytes, pn: int, frames: bytes, *, keys: Keys,
            token: bytes = b"", fixed_bit: bool = True, pn_len: int = 2,
            pad_to: int = 0) -> bytes:
    """A protected Initial packet (frames padded with PADDING to `pad_to` bytes of payload
    and to at least the header protection sample)."""
    v2_types = VERSIONS[version][2]
    payload = frames + b"\x00" * max(0, pad_to - len(frames), 4 - len(frames))
    first = 0x80 | (0x40 if fixed_bit else 0) | ((1 if v2_types else 0) << 4) | (pn_len - 1)
    pn_bytes = pn.to_bytes(pn_len, "big")
    header = bytes([first]) + version.to_bytes(4, "big") + bytes([len(dcid)]) + dcid + \
        bytes([len(scid)]) + scid + varint(len(token)) + token + \
        varint(pn_len + len(payload) + 16) + pn_bytes
    nonce = (int.from_bytes(keys.iv, "big") ^ pn).to_bytes(12, "big")
    sealed = AESGCM(keys.key).encrypt(nonce, payload, header)
    sample = sealed[4 - pn_len:20 - pn_len]
    enc = Cipher(algorithms.AES(keys.hp), modes.ECB()).encryptor()
    mask = enc.update(sample) + enc.finalize()
    masked = bytes([first ^ (mask[0] & 0x0F)]) + header[1:-pn_len] + \
        bytes(b ^ m for b, m in zip(pn_bytes, mask[1:]))
    return masked + sealed


#: RFC 9001 5.8: the fixed key and nonce of the v1 Retry Integrity Tag
_RETRY_KEY, _RETRY_NONCE = "be0c690b9f66575a1d766b54e368c84e", "461599d35d632bf2239825bb"


def retry(odcid: bytes, dcid: bytes, scid: bytes, token: bytes) -> bytes:
    """A v1 Retry packet with its integrity tag."""
    packet = bytes([0xF0]) + V1.to_bytes(4, "big") + bytes([len(dcid)]) + dcid + \
        bytes([len(scid)]) + scid + token
    tag = AESGCM(bytes.fromhex(_RETRY_KEY)).encrypt(
        bytes.fromhex(_RETRY_NONCE), b"", bytes([len(odcid)]) + odcid + packet)
    return packet + tag


def version_negotiation(dcid: bytes, scid: bytes, versions: list[int]) -> bytes:
    return bytes([0x80 | 0x2A]) + bytes(4) + bytes([len(dcid)]) + dcid + \
        bytes([len(scid)]) + scid + b"".join(v.to_bytes(4, "big") for v in versions)


def client_hello(sni: str = "quic.example", alpn: tuple[str, ...] = ("h3",),
                 versions: tuple[int, ...] = (0x0304,), groups: tuple[int, ...] = (0x001D,),
                 extra_share_groups: tuple[int, ...] = ()) -> tuple[ClientHello, bytes]:
    """A real ClientHello from tlsprobe's engine, with quic_transport_parameters; (hello,
    framed handshake message)."""
    config = ClientConfig(server_name=sni, versions=versions, groups=groups + extra_share_groups,
                          key_share_groups=groups + extra_share_groups, alpn=alpn,
                          padding=False, session_ticket=False, status_request=False)
    hello = build_client_hello(config, session_id=b"").hello
    hello.extensions.append(Extension(0x39, bytes.fromhex("0104800075300f00")))
    return hello, frame(1, hello.serialize())


def datagram(payload: bytes, *, from_client: bool = True,
             client: tuple[str, int] = CLIENT, server: tuple[str, int] = SERVER) -> bytes:
    """An Ethernet frame with one UDP datagram."""
    (sip, sp), (dip, dp) = (client, server) if from_client else (server, client)
    return ether(ipv4(sip, dip, 17, udp(sp, dp, payload)))


def write(path: Path, frames: list[bytes]) -> Path:
    path.write_bytes(pcap_bytes([(1700000000.0 + i * 0.001, f) for i, f in enumerate(frames)]))
    return path


def cid(n: int = 8) -> bytes:
    return os.urandom(n)
