"""Extension builders and context-aware decoders: rebuilt real OpenSSL extensions byte for
byte, exact vector length checks, and the ClientHello / ServerHello / HRR / NST forms."""

from __future__ import annotations

import pytest

from tlsprobe.wire import (
    CertificateStatusRequest,
    DecodeError,
    Extension,
    KeyShareEntry,
    OcspStatus,
    OfferedPsks,
    PskIdentity,
    ServerName,
    decode_extension,
    decode_handshake,
    is_grease,
)
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.ext_decoders import (
    WHERE_CERTIFICATE,
    WHERE_ENCRYPTED_EXTENSIONS,
    WHERE_HRR,
    WHERE_NEW_SESSION_TICKET,
    WHERE_SERVER_HELLO,
)

# builders that rebuild an extension from its decoded ClientHello value
REBUILD = {
    0: lambda v: ext.server_name(v[0].host_name),
    10: ext.supported_groups,
    11: ext.ec_point_formats,
    13: ext.signature_algorithms,
    16: ext.alpn,
    22: lambda v: ext.encrypt_then_mac(),
    23: lambda v: ext.extended_master_secret(),
    21: ext.padding,
    35: ext.session_ticket,
    43: ext.supported_versions_client,
    45: ext.psk_key_exchange_modes,
    51: lambda v: ext.key_share_client([(s.group, s.key_exchange) for s in v]),
    0xFF01: ext.renegotiation_info,
}


@pytest.mark.parametrize("name", ["tls13", "tls13_hrr", "tls12_ecdhe", "tls10_ecdhe"])
def test_builders_rebuild_real_client_extensions(handshake, name: str) -> None:
    rebuilt = 0
    for raw in handshake(name).of_type(1):
        for e in decode_handshake(raw).message.extensions:
            if e.type in REBUILD:
                assert REBUILD[e.type](e.decode()) == e, e
                rebuilt += 1
    assert rebuilt >= 6


def test_server_side_builders_match_real_server_hello(handshake) -> None:
    sh = decode_handshake(handshake("tls13").of_type(2)[0]).message
    group, key = sh.key_share
    assert sh.extension(51) == ext.key_share_server(group, key)
    assert sh.extension(43) == ext.supported_versions_server(0x0304)
    hrr = decode_handshake(handshake("tls13_hrr").of_type(2)[0]).message
    assert hrr.extension(51) == ext.key_share_hrr(0x17)


@pytest.mark.parametrize("built, where, value", [
    (ext.server_name("example.com"), "client_hello", [ServerName(0, b"example.com")]),
    (ext.server_name("bücher.de"), "client_hello", [ServerName(0, b"xn--bcher-kva.de")]),
    (ext.empty(0), WHERE_ENCRYPTED_EXTENSIONS, []),
    (ext.supported_groups([0x1D, 0x17, 0x11EC]), "client_hello", [0x1D, 0x17, 0x11EC]),
    (ext.ec_point_formats(), "client_hello", [0]),
    (ext.signature_algorithms([0x0804, 0x0403]), "client_hello", [0x0804, 0x0403]),
    (ext.signature_algorithms_cert([0x0807]), "client_hello", [0x0807]),
    (ext.supported_versions_client([0x0304, 0x0303]), "client_hello", [0x0304, 0x0303]),
    (ext.supported_versions_server(0x0304), WHERE_SERVER_HELLO, 0x0304),
    (ext.supported_versions_server(0x0304), WHERE_HRR, 0x0304),
    (ext.key_share_client([(0x1D, b"k" * 32), (0x17, b"p" * 65)]), "client_hello",
     [KeyShareEntry(0x1D, b"k" * 32), KeyShareEntry(0x17, b"p" * 65)]),
    (ext.key_share_client([]), "client_hello", []),
    (ext.key_share_server(0x11EC, b"c" * 1120), WHERE_SERVER_HELLO,
     KeyShareEntry(0x11EC, b"c" * 1120)),
    (ext.key_share_hrr(0x17), WHERE_HRR, 0x17),
    (ext.psk_key_exchange_modes(), "client_hello", [1]),
    (ext.pre_shared_key_client([(b"ticket", 12345)], [b"b" * 32]), "client_hello",
     OfferedPsks([PskIdentity(b"ticket", 12345)], [b"b" * 32])),
    (ext.pre_shared_key_server(0), WHERE_SERVER_HELLO, 0),
    (ext.alpn(["h2", b"http/1.1"]), "client_hello", [b"h2", b"http/1.1"]),
    (ext.status_request(), "client_hello", CertificateStatusRequest(1, [], b"")),
    (ext.empty(5), WHERE_SERVER_HELLO, None),
    (Extension(5, b"\x01\x00\x00\x03der"), WHERE_CERTIFICATE, OcspStatus(1, b"der")),
    (ext.extended_master_secret(), "client_hello", None),
    (ext.encrypt_then_mac(), WHERE_SERVER_HELLO, None),
    (ext.post_handshake_auth(), "client_hello", None),
    (ext.session_ticket(b"opaque"), "client_hello", b"opaque"),
    (ext.renegotiation_info(), "client_hello", b""),
    (ext.renegotiation_info(b"\x01" * 24), WHERE_SERVER_HELLO, b"\x01" * 24),
    (ext.padding(7), "client_hello", 7),
    (ext.compress_certificate([2, 1]), "client_hello", [2, 1]),
    (ext.record_size_limit(16385), "client_hello", 16385),
    (ext.max_fragment_length(2), "client_hello", 2),
    (ext.early_data(), "client_hello", None),
    (ext.early_data(), WHERE_ENCRYPTED_EXTENSIONS, None),
    (ext.early_data(16384), WHERE_NEW_SESSION_TICKET, 16384),
    (ext.cookie(b"c" * 40), WHERE_HRR, b"c" * 40),
    (ext.grease(0xDADA, b"\x00"), "client_hello", b"\x00"),
    (Extension(0x4469, b"raw"), "client_hello", b"raw"),
])
def test_decoders_by_context(built: Extension, where: str, value: object) -> None:
    assert built.decode(where) == value
    assert decode_extension(built.type, built.data, where) == value


def test_builder_wire_bytes() -> None:
    assert ext.supported_groups([0x1D]).data == b"\x00\x02\x00\x1d"
    assert ext.supported_versions_client([0x0304]).data == b"\x02\x03\x04"
    assert ext.key_share_client([(0x1D, b"\xaa")]).data == b"\x00\x05\x00\x1d\x00\x01\xaa"
    assert ext.key_share_server(0x1D, b"\xaa").data == b"\x00\x1d\x00\x01\xaa"
    assert ext.server_name("a.b").data == b"\x00\x06\x00\x00\x03a.b"
    assert ext.alpn(["h2"]).data == b"\x00\x03\x02h2"
    assert ext.compress_certificate([2]).data == b"\x02\x00\x02"
    assert ext.renegotiation_info().data == b"\x00"
    assert ext.cookie(b"xy").data == b"\x00\x02xy"
    assert ext.pre_shared_key_client([(b"i", 1)], [b"\x00" * 32]).data == (
        b"\x00\x07\x00\x01i\x00\x00\x00\x01" + b"\x00\x21\x20" + bytes(32))


@pytest.mark.parametrize("ext_type, data, where, match", [
    (10, b"\x00\x03\x00\x1d\x00", "client_hello", "multiple of 2"),
    (10, b"\x00\x00", "client_hello", "outside 2"),
    (10, b"\x00\x02\x00\x1d\x00", "client_hello", "trailing"),
    (10, b"\x00\x04\x00\x1d", "client_hello", "block of 4"),
    (43, b"\x03\x03\x04\x03", "client_hello", "multiple of 2"),
    (43, b"\x03", WHERE_SERVER_HELLO, "need 2"),
    (43, b"\x02\x03\x04", WHERE_SERVER_HELLO, "trailing"),
    (51, b"\x00\x1d\x00\x00", WHERE_SERVER_HELLO, "outside 1"),  # empty key_exchange
    (51, b"\x00\x1d", "client_hello", "block of 29"),
    (51, b"\x00\x17\x00", WHERE_HRR, "trailing"),
    (41, b"\x00\x07\x00\x01i\x00\x00\x00\x01\x00\x02\x01\x00", "client_hello", "outside 33"),
    (41, b"\x00\x07\x00\x01i\x00\x00\x00\x01\x00\x21\x1f" + bytes(32), "client_hello",
     "outside 32"),
    (0, b"\x00\x05\x00\x00\x01a", "client_hello", "block of 5"),
    (0, b"\x00", WHERE_SERVER_HELLO, "must be empty"),
    (23, b"\x00", "client_hello", "must be empty"),
    (42, b"\x00\x00", WHERE_NEW_SESSION_TICKET, "need 4"),
    (16, b"\x00\x03\x00h2", "client_hello", "outside 1"),
    (45, b"\x00", "client_hello", "outside 1"),
    (65281, b"\x02\x00", "client_hello", "need 2"),
    (44, b"\x00\x00", WHERE_HRR, "outside 1"),
    (5, b"\x01\x00\x01", "client_hello", "block of 1"),
])
def test_decoders_validate_lengths_exactly(ext_type: int, data: bytes, where: str,
                                           match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_extension(ext_type, data, where)


def test_error_path_names_the_field() -> None:
    with pytest.raises(DecodeError) as exc:
        decode_extension(41, b"\x00\x07\x00\x01i\x00\x00\x00\x01\x00\x21\x1f" + bytes(32))
    assert exc.value.path == "pre_shared_key.binders[0]" and exc.value.offset == 11


def test_grease_values() -> None:
    assert [v for v in range(0x10000) if is_grease(v)] == [0x0A0A + 0x1010 * i
                                                          for i in range(16)]
    assert ext.grease(0x1A1A).is_grease
    with pytest.raises(ValueError):
        ext.grease(0x0A0B)


@pytest.mark.parametrize("length, padding", [(300, 208), (507, 1), (508, 1), (506, 2),
                                             (512, None), (600, None)])
def test_padding_length(length: int, padding: int | None) -> None:
    assert ext.padding_length(length) == padding
    if padding is not None and length + 4 + padding == 512:
        assert length + len(ext.padding(padding).data) + 4 == 512
