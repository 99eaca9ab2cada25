"""ClientHello / ServerHello / HelloRetryRequest on real OpenSSL hellos, cross-checked with
tlslite-ng's parser and the negotiated parameters the ssl module reports."""

from __future__ import annotations

import warnings

import pytest

from tlsprobe.registry import group_label, parse_suite, suite_label
from tlsprobe.wire import (
    HELLO_RETRY_REQUEST_RANDOM,
    ClientHello,
    DecodeError,
    Extension,
    KeyShareEntry,
    ParseContext,
    ServerHello,
    decode_handshake,
)
from tlsprobe.wire import extensions as ext

from .helpers import check_annotations, find

with warnings.catch_warnings():  # tlslite-ng's package imports the deprecated asyncore
    warnings.simplefilter("ignore", DeprecationWarning)
    import tlslite.messages as tlslite_messages
    from tlslite.utils.codec import Parser

CONFIGS = ["tls13", "tls13_hrr", "tls13_ecdsa", "tls12_ecdhe", "tls12_ecdhe_p256", "tls12_dhe",
           "tls12_rsa", "tls12_downgrade", "tls10_ecdhe"]


def _hellos(hs, msg_type: int) -> list[bytes]:
    return hs.of_type(msg_type)


@pytest.mark.parametrize("name", CONFIGS)
def test_client_hello_matches_tlslite_and_round_trips(handshake, name: str) -> None:
    for raw in _hellos(handshake(name), 1):
        ch = decode_handshake(raw).message
        assert isinstance(ch, ClientHello)
        assert ch.to_bytes() == raw and ClientHello.parse(raw[4:]).serialize() == raw[4:]
        oracle = tlslite_messages.ClientHello().parse(Parser(bytearray(raw[1:])))
        assert ch.legacy_version == oracle.client_version[0] << 8 | oracle.client_version[1]
        assert ch.random == bytes(oracle.random)
        assert ch.legacy_session_id == bytes(oracle.session_id)
        assert ch.cipher_suites == list(oracle.cipher_suites)
        assert list(ch.legacy_compression_methods) == list(oracle.compression_methods)
        assert [e.type for e in ch.extensions] == [e.extType for e in oracle.extensions]
        shares = oracle.getExtension(51)
        if shares is not None:
            assert ch.key_shares == [KeyShareEntry(s.group, bytes(s.key_exchange))
                                     for s in shares.client_shares]
        groups = oracle.getExtension(10)
        assert ch.supported_groups == (list(groups.groups) if groups else [])
        assert ch.server_name == "localhost"


@pytest.mark.parametrize("name", CONFIGS)
def test_server_hello_matches_negotiation(handshake, name: str) -> None:
    hs = handshake(name)
    sh = decode_handshake(_hellos(hs, 2)[-1]).message
    assert isinstance(sh, ServerHello) and not sh.is_hello_retry_request
    assert sh.to_bytes() == _hellos(hs, 2)[-1]
    oracle = tlslite_messages.ServerHello().parse(Parser(bytearray(_hellos(hs, 2)[-1][1:])))
    assert sh.cipher_suite == oracle.cipher_suite == parse_suite(hs.cipher)
    assert [e.type for e in sh.extensions] == [e.extType for e in oracle.extensions]
    version = {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303, "TLSv1": 0x0301}[hs.version]
    assert sh.selected_version == version
    if version == 0x0304:
        group, key = sh.key_share  # type: ignore[misc]
        assert (group, len(key)) == ((0x17, 65) if name == "tls13_hrr" else (0x1D, 32))
        assert sh.legacy_version == 0x0303
    else:
        assert sh.key_share is None and sh.legacy_version == version
    assert sh.hrr_selected_group is None


def test_hello_retry_request(handshake) -> None:
    hs = handshake("tls13_hrr")
    ch1, ch2 = (decode_handshake(m).message for m in _hellos(hs, 1))
    hrr, sh = (decode_handshake(m).message for m in _hellos(hs, 2))
    assert hrr.is_hello_retry_request and hrr.random == HELLO_RETRY_REQUEST_RANDOM
    assert hrr.hrr_selected_group == 0x17 and hrr.key_share is None  # server wants P-256
    assert hrr.selected_version == 0x0304
    assert 0x17 not in [s.group for s in ch1.key_shares]
    assert [s.group for s in ch2.key_shares] == [0x17]
    assert sh.key_share[0] == 0x17  # type: ignore[index]
    decoded = decode_handshake(_hellos(hs, 2)[0], annotate=True)
    assert find(decoded.annotations, "random").value == "HelloRetryRequest magic"
    assert find(decoded.annotations, "key_share.selected_group").value == group_label(0x17)


def test_downgrade_sentinel(handshake) -> None:
    sh = decode_handshake(_hellos(handshake("tls12_downgrade"), 2)[0]).message
    assert sh.selected_version == 0x0303 and sh.downgrade_sentinel == 0x0303
    sh13 = decode_handshake(_hellos(handshake("tls13"), 2)[0]).message
    assert sh13.downgrade_sentinel is None


@pytest.mark.parametrize("name", CONFIGS)
def test_hello_annotations_describe_the_bytes(handshake, name: str) -> None:
    for raw in _hellos(handshake(name), 1) + _hellos(handshake(name), 2):
        annotations = decode_handshake(raw, annotate=True).annotations
        assert check_annotations(raw, annotations) > 10
        assert not [a for a in annotations if a.kind == "error"]


def test_client_hello_annotation_offsets(handshake) -> None:
    raw = _hellos(handshake("tls13"), 1)[0]
    ch = decode_handshake(raw).message
    notes = decode_handshake(raw, annotate=True).annotations
    assert find(notes, "legacy_version") .offset == 4
    assert find(notes, "legacy_version").value == "TLS 1.2 (0x0303)"
    assert (find(notes, "random").offset, find(notes, "random").length) == (6, 32)
    assert find(notes, "legacy_session_id_length").offset == 38
    sid = len(ch.legacy_session_id)
    assert find(notes, "cipher_suites_length").offset == 39 + sid
    first = find(notes, "cipher_suites[0]")
    assert first.offset == 41 + sid and first.value == suite_label(ch.cipher_suites[0])
    # inside key_share: group, key_exchange length and key at exact offsets
    ks = next(a for a in notes if a.kind == "extension" and a.value == "key_share (0x0033)")
    assert raw[ks.offset:ks.offset + 2] == b"\x00\x33"
    group = find(notes, "key_share.client_shares[0].group")
    assert group.offset == ks.offset + 6 and group.value == "x25519 (0x001d)"
    assert raw[group.offset:group.offset + 2] == b"\x00\x1d"
    klen = find(notes, "key_share.client_shares[0].key_exchange_length")
    assert (klen.offset, klen.value) == (ks.offset + 8, "32 (0x20)")
    key = find(notes, "key_share.client_shares[0].key_exchange")
    assert (key.offset, key.length, key.kind) == (ks.offset + 10, 32, "bytes")
    assert raw[key.offset:key.offset + 32] == ch.key_shares[0].key_exchange
    versions = [a for a in notes if a.name.startswith("supported_versions.versions[")]
    assert [a.value for a in versions][:1] == ["TLS 1.3 (0x0304)"]
    assert [a for a in notes if a.name.startswith("signature_algorithms.supported_")]


def _strip_extensions(raw: bytes) -> ClientHello:
    ch = decode_handshake(raw).message
    return ClientHello(ch.legacy_version, ch.random, ch.legacy_session_id, ch.cipher_suites,
                       ch.legacy_compression_methods, [], extensions_absent=True)


def test_hellos_without_extensions_block(handshake) -> None:
    hs = handshake("tls12_rsa")
    old = _strip_extensions(_hellos(hs, 1)[0])
    body = old.serialize()
    assert body.endswith(b"\x01\x00")  # ends right after compression_methods <1: null>
    assert ClientHello.parse(body) == old and old.extensions_absent
    with_empty = ClientHello.parse(body + b"\x00\x00")
    assert not with_empty.extensions_absent and with_empty.serialize() == body + b"\x00\x00"
    sh = decode_handshake(_hellos(hs, 2)[0]).message
    old_sh = ServerHello(sh.legacy_version, sh.random, sh.legacy_session_id_echo,
                         sh.cipher_suite, 0, [], extensions_absent=True)
    assert ServerHello.parse(old_sh.serialize()) == old_sh
    assert len(old_sh.serialize()) == 2 + 32 + 1 + len(sh.legacy_session_id_echo) + 3


def test_padding_to_512_before_pre_shared_key(handshake) -> None:
    ch = decode_handshake(_hellos(handshake("tls12_ecdhe"), 1)[0]).message
    assert len(ch.to_bytes()) < 512
    padded = ch.padded()
    assert len(padded.to_bytes()) == 512 and padded.extensions[-1].type == 21
    assert padded.padded() is padded
    psk = ext.pre_shared_key_client([(b"id", 7)], [bytes(32)])
    with_psk = ClientHello(ch.legacy_version, ch.random, ch.legacy_session_id,
                           ch.cipher_suites, ch.legacy_compression_methods,
                           ch.extensions + [psk])
    padded = with_psk.padded()
    assert [e.type for e in padded.extensions[-2:]] == [21, 41]
    assert len(padded.to_bytes()) == 512
    assert _strip_extensions(ch.to_bytes()).padded().to_bytes().__len__() == 512
    big = decode_handshake(_hellos(handshake("tls13"), 1)[0]).message
    assert big.padded() is big  # OpenSSL already pads its TLS 1.3 hello to 512


@pytest.mark.parametrize("body, match", [
    (b"\x03\x03" + bytes(31), "random"),
    (b"\x03\x03" + bytes(32) + b"\x21" + bytes(33), "legacy_session_id"),
    (b"\x03\x03" + bytes(32) + b"\x00\x00\x03\x13\x01\x13", "cipher_suites"),
    (b"\x03\x03" + bytes(32) + b"\x00\x00\x00", "cipher_suites"),  # empty list
    (b"\x03\x03" + bytes(32) + b"\x00\x00\x02\x13\x01\x00", "legacy_compression_methods"),
    (b"\x03\x03" + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00\x00", "extensions"),
    (b"\x03\x03" + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00\x00\x04\x00\x0a\x00\x01",
     "extensions"),
])
def test_malformed_client_hello_names_the_field(body: bytes, match: str) -> None:
    with pytest.raises(DecodeError) as exc:
        decode_handshake(b"\x01" + len(body).to_bytes(3, "big") + body)
    assert match in exc.value.path
    assert exc.value.path.startswith("handshake.ClientHello")


def test_malformed_extension_content_is_lazy() -> None:
    bad_share = Extension(51, b"\x00\x04\x00\x1d\x00\x05")  # key_exchange overruns its list
    ch = ClientHello(0x0303, bytes(32), b"", [0x1301], b"\x00", [bad_share])
    decoded = decode_handshake(ch.to_bytes(), annotate=True)
    assert decoded.message == ch  # the hello itself is well formed
    error = find(decoded.annotations, "key_share.error")
    assert error.kind == "error" and "need 5 bytes" in error.value
    with pytest.raises(DecodeError) as exc:
        _ = ch.key_shares
    assert exc.value.path == "key_share.client_shares[0].key_exchange"


def test_grease_and_unknown_values_annotate_without_failing() -> None:
    exts = [ext.grease(0x3A3A, b"\x00"), ext.supported_groups([0x0A0A, 0x1D, 0x4242]),
            ext.key_share_client([(0xFAFA, b"\x00"), (0x11EC, bytes(1216))]),
            Extension(0xFE0D, b"ech"), ext.supported_versions_client([0x5A5A, 0x7F17])]
    ch = ClientHello(0x0303, bytes(32), b"", [0x2A2A, 0x1301, 0xFFFF], b"\x00", exts)
    raw = ch.to_bytes()
    notes = decode_handshake(raw, annotate=True).annotations
    assert check_annotations(raw, notes) > 15
    assert find(notes, "cipher_suites[0]").value == "GREASE (0x2a2a)"
    assert find(notes, "supported_groups.named_group_list[2]").value == "0x4242"
    assert find(notes, "key_share.client_shares[1].group").value == group_label(0x11EC)
    assert ParseContext().tls13 is False
