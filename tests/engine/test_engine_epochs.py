"""TLS 1.3 traffic-key epochs (engine.epochs), shared by the client and offline decryption,
against RFC 8448 section 3 and an HKDF written here from RFC 8446 7.1-7.2."""

from __future__ import annotations

from tests.engine import engine_rfc8448 as v
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from tlsprobe.engine.epochs import TrafficEpochs, tls13_protection
from tlsprobe.engine.protection import Tls13Protection

CLIENT, SERVER = 0, 1
SUITE = ("AES-128-GCM", 16, "sha256")


def expand_label(secret: bytes, label: bytes, length: int) -> bytes:
    """HKDF-Expand-Label(secret, label, "", length), RFC 8446 7.1, from cryptography's HKDF."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


def test_handshake_secret_opens_the_rfc_server_flight() -> None:
    content_type, plain = tls13_protection(*SUITE, v.SERVER_HS_TRAFFIC).decrypt_record(
        v.SERVER_HANDSHAKE_RECORD)
    rfc = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY, v.SERVER_HS_IV)
    assert (content_type, plain) == rfc.decrypt_record(v.SERVER_HANDSHAKE_RECORD)
    assert content_type == 22 and plain[0] == 8   # EncryptedExtensions first


def test_finished_switches_to_application_secret_0() -> None:
    epochs = TrafficEpochs(*SUITE)
    assert epochs.finished(CLIENT) is None          # not known yet: no keys
    epochs.set_application(CLIENT, v.CLIENT_AP_TRAFFIC)
    secret = epochs.finished(CLIENT)
    assert secret == v.CLIENT_AP_TRAFFIC
    record = epochs.protection(secret).encrypt(23, v.APPLICATION_PAYLOAD)
    assert record == v.CLIENT_APPLICATION_RECORD


def test_key_update_advances_only_its_direction() -> None:
    epochs = TrafficEpochs(*SUITE)
    epochs.set_application(CLIENT, v.CLIENT_AP_TRAFFIC)
    epochs.set_application(SERVER, v.SERVER_AP_TRAFFIC)
    first = epochs.key_update(SERVER)
    assert first == expand_label(v.SERVER_AP_TRAFFIC, b"traffic upd", 32)
    second = epochs.key_update(SERVER)
    assert second == expand_label(first, b"traffic upd", 32)
    assert epochs.finished(SERVER) == second
    assert epochs.finished(CLIENT) == v.CLIENT_AP_TRAFFIC
    # the protection of the new epoch uses the key and IV of RFC 8446 7.3
    key = expand_label(second, b"key", 16)
    iv = expand_label(second, b"iv", 12)
    sealed = epochs.protection(second).encrypt(23, b"after two updates")
    assert Tls13Protection("AES-128-GCM", key, iv).decrypt_record(sealed) == \
        (23, b"after two updates")


def test_key_update_without_a_known_secret_changes_nothing() -> None:
    epochs = TrafficEpochs(*SUITE)
    assert epochs.key_update(SERVER) is None
    assert epochs.application == {}
