"""QUIC v1 packet pieces (net/quic_wire.py) against the RFC 9001 Appendix A and RFC 9000
Appendix A vectors: keys, header protection, packet sealing and opening, Retry tag."""
from __future__ import annotations

import pytest

from tlsprobe.net import quic_params as qp
from tlsprobe.net import quic_wire as w

DCID = bytes.fromhex("8394c8f03e515708")


@pytest.mark.parametrize("hex_, value", [("c2197c5eff14e88c", 151288809941952652),
                                         ("9d7f3e7d", 494878333), ("7bbd", 15293),
                                         ("25", 37)])
def test_varint_vectors(hex_: str, value: int) -> None:
    data = bytes.fromhex(hex_)
    assert w.pull_varint(data, 0) == (value, len(data))
    assert w.pull_varint(w.varint(value), 0)[0] == value


def test_varint_cut_is_value_error() -> None:
    for data in (b"", b"\x40", b"\xc0\x00"):
        with pytest.raises(ValueError):
            w.pull_varint(data, 0)


def test_v1_salt_is_the_capture_readers() -> None:
    from tlsprobe.offline import quic_packets
    assert (w.QUIC_V1, w.SALT_V1) == (quic_packets.QUIC_V1, quic_packets.SALT_V1)


def test_client_initial_keys_rfc9001_a1() -> None:
    keys = w.PacketKeys.initial(DCID, "client")
    assert keys.iv.hex() == "fa044b2f42a3fd3b46fb255c"
    assert keys.mask(bytes.fromhex("d1b1c98dd7689fb8ec11d242b123dc9b")).hex() == "437b9aec36"


def test_chacha20_short_header_rfc9001_a5() -> None:
    secret = bytes.fromhex("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
    keys = w.PacketKeys(secret, 0x1303)
    sealed = w.seal(keys, bytes.fromhex("4200bff4"), 654360564, 3, b"\x01")
    assert sealed.hex() == "4cfe4189655e5cd55c41f69080575d7999c25a5bfb"
    assert w.unprotect(keys, sealed, 1, 654360563) == (654360564, b"\x01")
    with pytest.raises(ValueError):
        w.unprotect(keys, sealed[:-1] + b"\x00", 1, 654360563)


def test_retry_tag_rfc9001_a4() -> None:
    retry = bytes.fromhex("ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f"
                          "0f2496ba")
    assert w.retry_tag(DCID, retry[:-16]) == retry[-16:]
    packets = list(w.split_datagram(retry, 8))
    assert [p.kind for p in packets] == ["Retry"]
    assert retry[packets[0].pn_offset:-16] == b"token"


def test_long_header_round_trip_and_ack_ranges() -> None:
    keys = w.PacketKeys.initial(DCID, "client")
    frames = w.ack_frame({0, 1, 2, 5, 7, 8}) + w.crypto_frame(3, b"hello") + bytes(30)
    header = w.long_header(0, DCID, b"\x01" * 8, 9, len(frames), b"tok")
    packet = w.seal(keys, header, 9, 2, frames)
    [parsed] = list(w.split_datagram(packet + b"", 8))
    assert (parsed.kind, parsed.dcid, parsed.token) == ("Initial", DCID, b"tok")
    pn, payload = w.unprotect(keys, parsed.data, parsed.pn_offset, 8)
    assert pn == 9
    got = w.parse_frames(payload)
    assert got[0].ranges == ((7, 8), (5, 5), (0, 2))
    assert (got[1].type, got[1].offset, got[1].data) == (0x06, 3, b"hello")
    assert [f.type for f in got[2:]] == [0x00]


def test_unreadable_bytes_raise_value_error_only() -> None:
    for data in (b"\xc0", b"\xc0\x00\x00\x00\x01\x08", b"\xc0\x00\x00\x00\x02\x00\x00",
                 b"\xc0\x00\x00\x00\x01\x00\x00\x00\x7f"):
        with pytest.raises(ValueError):
            list(w.split_datagram(data, 8))
    for payload in (b"\x06\x00\x05ab", b"\x1c\x00", b"\x30", b"\x02\x05\x00\x01\x00\x03"):
        with pytest.raises(ValueError):
            w.parse_frames(payload)


def test_transport_parameters_round_trip() -> None:
    params = dict(qp.parse_parameters(qp.client_parameters(b"\xaa" * 8)))
    assert params[0x0F] == b"\xaa" * 8 and params[0x01] == 30000 and params[0x09] == 3
    assert qp.describe(0x0F, b"\xaa" * 8) == ("initial_source_connection_id", "aa" * 8)
    with pytest.raises(ValueError):
        qp.parse_parameters(b"\x01\x02\x05")   # max_idle_timeout cut short
    with pytest.raises(ValueError):
        qp.parse_parameters(b"\x01\x02\x05\x05")   # an integer that is not one varint


def test_crypto_stream_reassembles_out_of_order_and_overlapping_ranges() -> None:
    stream = w.CryptoStream()
    stream.add(6, b"world")
    assert stream.ready == b""
    stream.add(0, b"hell")
    stream.add(2, b"llo ")        # overlaps both sides
    stream.add(0, b"he")          # a duplicate
    assert bytes(stream.ready) == b"hello world"
    stream.ready.clear()
    stream.add(11, b"!")
    assert bytes(stream.ready) == b"!"


def test_crypto_stream_is_bounded() -> None:
    stream = w.CryptoStream(w.crypto_limit(1000))
    with pytest.raises(w.CryptoLimit, match="beyond 66536 bytes"):
        stream.add(w.crypto_limit(1000), b"x")
    for i in range(w.MAX_RANGES):
        stream.add(2 + 2 * i, b"x")
    with pytest.raises(w.CryptoLimit, match="out-of-order ranges"):
        stream.add(1000, b"x")


def test_v2_initial_keys_and_retry_rfc9369_appendix_a() -> None:
    from tlsprobe.wire import quic as q
    client = q.key_material(q.initial_secret(DCID, q.QUIC_V2, "client"), q.QUIC_V2)
    assert [k.hex() for k in client] == ["8b1a0bc121284290a29e0971b5cd045d",
                                         "91f73e2351d8fa91660e909f",
                                         "45b95e15235d6f45a6b19cbcb0294ba9"]
    server = q.key_material(q.initial_secret(DCID, q.QUIC_V2, "server"), q.QUIC_V2)
    assert server[1].hex() == "dd13c276499c0249d3310652"
    retry = bytes.fromhex("cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665"
                          "dcc7b6")
    assert q.retry_tag(DCID, retry[:-16], q.QUIC_V2) == retry[-16:]
    assert q.retry_tag(DCID, retry[:-16], q.QUIC_V1) != retry[-16:]
    [packet] = list(w.split_datagram(retry, 8))
    assert (packet.kind, packet.version) == ("Retry", q.QUIC_V2)


def test_v2_long_header_type_bits_round_trip() -> None:
    keys = w.PacketKeys.initial(DCID, "client", w.QUIC_V2)
    for ptype, kind in ((0, "Initial"), (2, "Handshake")):
        header = w.long_header(ptype, DCID, b"\x01" * 8, 3, 30, b"", version=w.QUIC_V2)
        assert (header[0] >> 4) & 3 == ptype + 1     # RFC 9369 3.2
        [parsed] = list(w.split_datagram(w.seal(keys, header, 3, 2, bytes(30)), 8))
        assert (parsed.kind, parsed.version) == (kind, w.QUIC_V2)
        assert w.unprotect(keys, parsed.data, parsed.pn_offset, 2) == (3, bytes(30))


def test_wire_hkdf_is_the_engines_and_option_versions_are_the_wires() -> None:
    from tlsprobe.commands import quic_option
    from tlsprobe.engine import keyschedule as ks
    from tlsprobe.wire import quic as q
    prk = q.hkdf_extract(q.SALT_V2, DCID)
    assert prk == ks.hkdf_extract(q.SALT_V2, DCID)
    for label, n, hash_name in ((b"quic key", 16, "sha256"), (b"quic hp", 32, "sha384"),
                                (b"client in", 48, "sha384")):
        assert q.hkdf_expand_label(prk, label, n, hash_name) == \
            ks.hkdf_expand_label(prk, label, b"", n, hash_name)
    assert (quic_option.QUIC_V1, quic_option.QUIC_V2) == (q.QUIC_V1, q.QUIC_V2)


def test_version_information_in_our_parameters() -> None:
    raw = qp.client_parameters(b"\xaa" * 8, w.QUIC_V1, (w.QUIC_V2, w.QUIC_V1))
    value = dict(qp.parse_parameters(raw))[0x11]
    assert value == bytes.fromhex("00000001" "6b3343cf" "00000001")
    assert qp.chosen_version(value) == w.QUIC_V1
    assert qp.describe(0x11, value) == ("version_information",
                                        "chosen 0x00000001, available 0x6b3343cf 0x00000001")
    assert 0x11 not in dict(qp.parse_parameters(qp.client_parameters(b"\xaa" * 8)))
    assert qp.chosen_version(b"\x00\x00\x01") is None
