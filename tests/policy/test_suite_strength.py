"""The weak-suite rule (policy/suite_strength.py) at its boundaries, and the suite rows
(probes/audit/suite_kx.py) of connections whose key exchange no lab server here can serve:
an export suite's 512-bit temporary RSA key, PSK, a connection that stopped before its
ServerKeyExchange, FFDHE and ML-KEM in TLS 1.3, an unregistered group. Live servers:
tests/scan/test_scan_suite_kx.py."""
from __future__ import annotations

from typing import Any

import pytest

from tlsprobe.model.facts import KeyExchangeFacts
from tlsprobe.model.vocab import KxStrength
from tlsprobe.policy.suite_strength import kx_strength, kx_weakness
from tlsprobe.probes.audit.outcome import HELLO_RETRY, SERVER_HELLO, Outcome
from tlsprobe.probes.audit.suite_kx import group_bits, suite_row


@pytest.mark.parametrize(("kind", "bits", "want"), [
    ("DHE", 2048, KxStrength.OK), ("DHE", 2047, KxStrength.WEAK),
    ("DHE", 1024, KxStrength.WEAK), ("DHE", 1023, KxStrength.INSECURE),
    ("RSA", 4096, KxStrength.OK), ("RSA", 1024, KxStrength.WEAK), ("RSA", 512, KxStrength.INSECURE),
    ("ECDHE", 224, KxStrength.OK), ("ECDHE", 223, KxStrength.WEAK),
    ("ECDHE", 160, KxStrength.WEAK), ("ECDHE", 159, KxStrength.INSECURE),
    ("ECDHE", 253, KxStrength.OK), ("hybrid", None, KxStrength.OK), ("KEM", None, KxStrength.OK),
    ("DHE", None, KxStrength.UNKNOWN), ("PSK", None, KxStrength.UNKNOWN),
    ("SRP", 2048, KxStrength.UNKNOWN)])
def test_strength_boundaries(kind: str, bits: int | None, want: KxStrength) -> None:
    assert kx_strength(kind, bits) == want
    weak = kx_weakness(kind, bits, "x")
    assert (weak is not None) == (want in (KxStrength.WEAK, KxStrength.INSECURE))


def test_curve_sizes_as_openssl_counts_them() -> None:
    assert [group_bits(g) for g in (0x1D, 0x1E, 0x17, 0x18, 0x19, 0x01, 0x0F, 0x100, 0x104,
                                    0x29, 0x22)] == \
        [253, 448, 256, 384, 521, 163, 161, 2048, 8192, 256, 256]   # secp160k1's order: 161
    assert group_bits(0x11EC) is None and group_bits(0x7777) is None


def _hello(**kw: Any) -> Outcome:
    return Outcome(SERVER_HELLO, **kw)


def test_export_rsa_uses_the_temporary_key_not_the_certificate() -> None:
    """TLS_RSA_EXPORT_WITH_RC4_40_MD5 with a 512-bit ServerKeyExchange key: RSA 512,
    insecure, after the suite's own weaknesses."""
    row = suite_row(0x0003, _hello(version=0x0301, cipher_suite=0x0003, rsa_temp_bits=512,
                                   key_exchange=KeyExchangeFacts(source="rsa", kind="RSA")))
    assert (row.kx_kind, row.kx_bits, row.kx_label, row.kx_source) == \
        ("RSA", 512, "RSA 512", "server_key_exchange")
    assert row.kx_strength == KxStrength.INSECURE and row.weak
    assert row.weak_reasons[-1] == "RSA 512: under 1024 bits (insecure)"
    assert "export" in row.weak_reasons and "RC4" in row.weak_reasons


def test_what_was_not_established_is_unknown_never_guessed() -> None:
    """A DHE suite whose connection stopped at the ServerHello, a static RSA suite without
    a certificate, a suite with no recorded connection: unknown, not weak for it."""
    dhe = suite_row(0x009E, _hello(version=0x0303, cipher_suite=0x009E))
    rsa = suite_row(0x009C, _hello(version=0x0303, cipher_suite=0x009C,
                                   key_exchange=KeyExchangeFacts(source="rsa", kind="RSA")))
    none = suite_row(0xC02F, None)
    for row, kind in ((dhe, "DHE"), (rsa, "RSA"), (none, "ECDHE")):
        assert (row.kx_kind, row.kx_bits, row.kx_label, row.kx_source, row.weak) == \
            (kind, None, "unknown", None, False)
        assert row.kx_strength == KxStrength.UNKNOWN


def test_psk_and_tls13_groups() -> None:
    psk = suite_row(0x00A8, _hello(version=0x0303, cipher_suite=0x00A8,
                                   key_exchange=KeyExchangeFacts(source="none", kind="PSK")))
    assert (psk.kx_kind, psk.kx_label, psk.kx_bits, psk.weak) == ("PSK", "PSK", None, False)
    ff = suite_row(0x1301, _hello(version=0x0304, cipher_suite=0x1301, key_exchange=(
        KeyExchangeFacts(source="key_share", kind="TLS13", group=0x0100))))
    assert (ff.kx_kind, ff.kx_bits, ff.kx_label) == ("DHE", 2048, "DH 2048")
    kem = suite_row(0x1301, Outcome(HELLO_RETRY, version=0x0304, cipher_suite=0x1301,
                                    hrr_group=0x0201))
    assert (kem.kx_kind, kem.kx_bits, kem.kx_label, kem.kx_source) == \
        ("KEM", None, "MLKEM768", "hello_retry_request")
    odd = suite_row(0x1301, _hello(version=0x0304, cipher_suite=0x1301, key_exchange=(
        KeyExchangeFacts(source="key_share", kind="TLS13", group=0x7777))))
    assert (odd.kx_bits, odd.kx_label, odd.kx_strength) == (None, "0x7777", KxStrength.UNKNOWN)
