"""Key-log decryption of every TLS 1.0-1.2 suite whose bulk cipher `cryptography` has (fixed
ECDH, Camellia, SEED, IDEA, DES, RC4): record protection per cipher, MAC and PRF, the
Wireshark sample capture of every suite, and the note for what stays encrypted (export
suites, SSL 3.0). The pcap command's files and filters: test_pcap_files_and_filters.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tlsprobe.engine.protection import (
    CbcProtection,
    RecordProtectionError,
    StreamProtection,
    protection_for_suite,
)
from tlsprobe.engine.suites import protection_params, suite_params, unsupported_reason


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- 1. record protection by cipher, MAC and PRF -------------------------------------------
@pytest.mark.parametrize(("code", "twin"), [
    (0xC004, 0x002F), (0xC005, 0x0035), (0xC025, 0xC023), (0xC026, 0xC024),
    (0xC029, 0xC027), (0xC02A, 0xC028), (0xC003, 0x000A), (0x0034, 0x002F)])
def test_fixed_ecdh_and_anonymous_suites_protect_like_their_twins(code: int, twin: int) -> None:
    params, known = protection_params(code), suite_params(twin)
    assert suite_params(code) is None and params is not None and known is not None
    assert params.code == code and params.name != known.name
    assert (params.cipher, params.mac, params.prf_hash, params.key_material(0x0303)) == \
        (known.cipher, known.mac, known.prf_hash, known.key_material(0x0303))


@pytest.mark.parametrize(("code", "reason"), [
    (0x0003, "export key derivation"), (0xC03C, "ARIA: not in cryptography"),
    (0xC07A, "CamelliaGCM: not in cryptography"), (0x0000, "no protection")])
def test_suites_without_protection_say_why(code: int, reason: str) -> None:
    assert protection_params(code) is None
    assert reason in unsupported_reason(code)


@pytest.mark.parametrize("code", [0x0041, 0x0084, 0x0096, 0x0007, 0x0009])
def test_new_cbc_ciphers_round_trip_and_reject_tampering(code: int) -> None:
    params = protection_params(code)
    assert params is not None
    mac_len, key_len, _ = params.key_material(0x0303)
    key, mac_key = bytes(range(key_len)), bytes(range(1, mac_len + 1))
    tx = protection_for_suite(params, key, b"", mac_key, 0x0303)
    rx = protection_for_suite(params, key, b"", mac_key, 0x0303)
    assert isinstance(tx, CbcProtection)
    record = tx.encrypt(23, b"GET / HTTP/1.1\r\n")
    assert b"GET" not in record
    assert rx.decrypt_record(record) == (23, b"GET / HTTP/1.1\r\n")
    bad = bytearray(tx.encrypt(23, b"x" * 40))
    bad[-1] ^= 1
    with pytest.raises(RecordProtectionError):
        rx.decrypt_record(bytes(bad))


def test_rc4_is_one_keystream_per_direction() -> None:
    params = protection_params(0x0005)
    assert params is not None and params.cipher_params.stream
    key, mac_key = bytes(16), bytes(20)
    tx = protection_for_suite(params, key, b"", mac_key, 0x0301)
    rx = protection_for_suite(params, key, b"", mac_key, 0x0301)
    assert isinstance(tx, StreamProtection)
    first, second = tx.encrypt(22, b"hello"), tx.encrypt(22, b"hello")
    assert first[5:] != second[5:]  # the keystream goes on
    assert rx.decrypt_record(first) == (22, b"hello")
    assert rx.decrypt_record(second) == (22, b"hello")


def test_every_suite_of_the_wireshark_notes_capture_but_export_is_decrypted(
        run_cli, captures_dir: Path) -> None:
    folder = captures_dir / "wireshark" / "notes" / "all"
    code, out, err = run_cli("pcap", "--json", "--keylog", folder / "premaster.txt",
                             folder / "dump.pcapng")
    assert code == 0
    conns = json.loads(out)["connections"]
    assert len(conns) == 73
    decrypted = [c for c in conns if c["decrypted"]]
    names = {c["cipher"]["iana_name"] for c in decrypted}
    assert len(decrypted) == 68 and not any("EXPORT" in n for n in names)
    assert {"TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA", "TLS_RSA_WITH_RC4_128_MD5",
            "TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA", "TLS_RSA_WITH_SEED_CBC_SHA",
            "TLS_RSA_WITH_IDEA_CBC_SHA", "TLS_RSA_WITH_DES_CBC_SHA"} <= names
    for c in decrypted:  # both Finished messages opened and checked as handshake messages
        assert sum("Finished (decrypted)" in m for m in c["messages"]) == 2, c["id"]
    line = one_line(err)
    assert line.startswith("tlsprobe: note: ") and "5 connection(s) not decrypted" in line
    assert "TLS_RSA_EXPORT_WITH_RC4_40_MD5" in line and "export key derivation" in line
    assert json.loads(out)["captures"][0]["notes"] == [line.split(": note: ", 1)[1].split(
        ": ", 1)[1]]


def test_ssl3_connections_with_keys_are_noted(run_cli, captures_dir: Path) -> None:
    folder = captures_dir / "wireshark" / "notes" / "ssl3"
    code, _out, err = run_cli("pcap", "--keylog", folder / "premaster.txt",
                              folder / "dump.pcapng")
    assert code == 0
    assert re.search(r"keylog .*: 39 connection\(s\) not decrypted: SSL 3\.0 \(not "
                     r"supported\)$", one_line(err))
