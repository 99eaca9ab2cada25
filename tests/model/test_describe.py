"""model.describe: the one set of describing rules the probe summary and the pcap report
share (offer, key exchange in s_client's words, certificates, message labels)."""

from __future__ import annotations

from pathlib import Path

from tlsprobe.model import describe
from tlsprobe.model.describe import offer
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.offline.analyzer import CaptureAnalysis

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def test_server_temp_key_wording() -> None:
    kx = describe.named_group_key_exchange("ECDHE", "key_share", 0x001D, 32, 32)
    assert (kx.bits, kx.server_temp_key, kx.group.name if kx.group else None) == \
        (253, "X25519, 253 bits", "x25519")
    hybrid = describe.named_group_key_exchange(describe.key_share_kind(0x11EC), "key_share",
                                               0x11EC, 1120, 1216)
    assert hybrid.kind == "hybrid" and hybrid.bits is None
    assert hybrid.server_temp_key == "X25519MLKEM768, 1120-byte server share"
    assert describe.key_share_kind(0x0200) == "KEM" and describe.key_share_kind(0x0100) == "DHE"
    dhe = describe.dhe_key_exchange((1 << 2047) + 1, "ffdhe2048", 256, 256)
    assert (dhe.group.id if dhe.group else None, dhe.server_temp_key, dhe.dh_group_name) == \
        (0x0100, "DH, 2048 bits", "ffdhe2048")
    assert describe.dhe_key_exchange((1 << 1023) + 1, None, 128, None).dh_group_name == \
        "unknown 1024-bit"


def test_message_labels() -> None:
    assert describe.message_label(0, 1) == ">>> ClientHello"
    assert describe.message_label(1, 2, hrr=True) == "<<< HelloRetryRequest"
    assert describe.message_label(1, 11, decrypted=True) == "<<< Certificate (decrypted)"
    assert describe.message_name(0xFE) == "MessageHash"
    assert describe.message_name(0xF0) == "UnknownHandshake(0xf0)"


def test_certificate_info_never_raises() -> None:
    info = describe.certificate_info(b"\x30\x03\x02\x01\x00")
    assert info.subject.startswith("(unparsable certificate") and len(info.sha256) == 64


def test_certificate_of_an_unknown_x509_version_is_read_or_unparsable_not_raised() -> None:
    """cryptography raises InvalidVersion (no ValueError) for an X.509 version other than
    1 and 3: a byte of a captured certificate is enough (found by the capture fuzz test).
    A v2 one is read as OpenSSL reads it (as v3: wire/dertwin.py); a negative version,
    which no twin reads, is unparsable, never raised."""
    from tests.hostile.tls import identity
    der = identity().der
    v3 = b"\xa0\x03\x02\x01\x02"
    assert der.count(v3) == 1
    info = describe.certificate_info(der.replace(v3, b"\xa0\x03\x02\x01\x01"))
    assert info.subject == "CN=hostile.test", info
    info = describe.certificate_info(der.replace(v3, b"\xa0\x03\x02\x01\xff"))
    assert info.subject.startswith("(unparsable certificate") and "version" in info.subject


def test_the_pcap_report_uses_the_shared_rules() -> None:
    """A capture of a TLS 1.2 x25519 handshake is described by the same functions a probe
    of it would be: equal values, not look-alikes."""
    (report, _), = list(CaptureAnalysis(str(CAPTURES / "tls12_x25519.pcap")))
    assert report.key_exchange == describe.named_group_key_exchange(
        "ECDHE", "server_key_exchange", 0x001D, 32, 32)
    assert report.messages[:2] == (describe.message_label(0, 1), describe.message_label(1, 2))
    hello = report.offer
    assert hello is not None and hello == describe.offer(
        tuple(v.id for v in hello.versions), tuple(c.id for c in hello.cipher_suites),
        tuple(g.id for g in hello.groups), tuple(g.id for g in hello.key_share_groups),
        tuple(s.id for s in hello.signature_algorithms), hello.alpn, hello.sni,
        hello.client_hello_bytes)


def test_codepoints_are_made_once_per_code_and_their_tables_stay_bounded() -> None:
    """An offer's Codepoints and Ciphers come from tables by code (a capture's hellos repeat
    the same few hundred), equal to ones made afresh; codes come from the wire, so a run of
    distinct codes empties a table rather than growing it past its bound."""
    from tlsprobe import registry
    from tlsprobe.model import probe

    first = offer((0x0304,), (0x1301, 0xC02F), (0x001D,), (0x001D,), (0x0804,), (), None, 200)
    again = offer((0x0304,), (0x1301, 0xC02F), (0x001D,), (0x001D,), (0x0804,), (), None, 200)
    assert first == again
    for made, remade in ((first.cipher_suites, again.cipher_suites),
                         (first.groups, again.groups), (first.versions, again.versions),
                         (first.signature_algorithms, again.signature_algorithms)):
        assert all(a is b for a, b in zip(made, remade, strict=True))
    assert first.groups[0] == Codepoint(0x001D, "0x001d", registry.group_name(0x001D))
    suite = registry.cipher_suite(0xC02F)
    assert first.cipher_suites[1] == Cipher(0xC02F, "0xc02f", registry.suite_name(0xC02F),
                                            suite.openssl_name if suite else None)
    for code in range(3 * probe._MADE_MAX):
        Codepoint.group(code)
        Cipher.of(code)
    assert len(probe._groups) <= probe._MADE_MAX and len(probe._ciphers) <= probe._MADE_MAX
    assert Codepoint.group(0x001D).name == registry.group_name(0x001D)
