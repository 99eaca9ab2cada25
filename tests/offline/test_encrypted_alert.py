"""Which protected TLS 1.3 record a capture without keys takes for a client's alert
(offline.facts.Facts.first_protected): only the client's first one after the ServerHello,
of the suite's AEAD tag + 3 bytes, and only when nothing else could be in flight or lost
before it. Recorded captures cover the whole path (tests/offline/test_pcap_cli.py); these are the
rule's edges."""

from __future__ import annotations

import pytest

from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo

EARLY_DATA, SUPPORTED_VERSIONS, KEY_SHARE = 42, 43, 51


def facts(suite: int, *, early_data: bool = False, partial: bool = False) -> Facts:
    f = Facts()
    extensions = (SUPPORTED_VERSIONS, KEY_SHARE) + ((EARLY_DATA,) if early_data else ())
    f.client_hellos.append(ClientHelloInfo(0x0303, bytes(32), b"", (0x1301, 0x1302, 0x1305),
                                           b"\x00", extensions, supported_versions=(0x0304,),
                                           early_data=early_data, partial=partial))
    f._server_hello(ServerHelloInfo(0x0303, bytes(32), b"", suite, 0,
                                    (SUPPORTED_VERSIONS, KEY_SHARE), 0x0304,
                                    key_share=(0x001D, 32)), 0.0, 1, None)
    return f


@pytest.mark.parametrize(("suite", "length", "alert"), [
    (0x1301, 19, True), (0x1302, 19, True), (0x1305, 11, True),   # tag 16, 16, 8 (CCM_8)
    (0x1301, 11, False), (0x1305, 19, False), (0x1301, 20, False), (0x1301, 53, False)])
def test_record_of_tag_plus_three_is_an_alert(suite: int, length: int, alert: bool) -> None:
    f = facts(suite)
    f.first_protected(CLIENT, length)
    assert (f.alerts == [(CLIENT, -1, -1, False)]) == alert, f.alerts
    assert (f.encrypted_alert == CLIENT) == alert


def test_only_a_sides_first_protected_record() -> None:
    f = facts(0x1301)
    f.first_protected(SERVER, 700)  # its EncryptedExtensions and more
    f.mark_encrypted(SERVER, 0.0)
    f.first_protected(CLIENT, 53)
    f.mark_encrypted(CLIENT, 0.0)
    f.first_protected(CLIENT, 19)  # a close_notify after the Finished
    f.first_protected(SERVER, 19)  # 2 bytes of application data, or a closure
    assert f.alerts == [] and f.encrypted_alert is None


def test_server_alert_in_place_of_its_encrypted_extensions() -> None:
    f = facts(0x1301)
    f.first_protected(SERVER, 19)
    assert f.alerts == [(SERVER, -1, -1, False)] and f.encrypted_alert == SERVER


@pytest.mark.parametrize("why", ["early_data", "partial", "gap", "no_hello"])
def test_not_decided_when_another_record_could_come_first(why: str) -> None:
    """0-RTT data may still arrive after the ServerHello; a ClientHello not read whole may
    have offered it; bytes lost may have held the Finished; without the ClientHello
    nothing says which."""
    f = facts(0x1301, early_data=why == "early_data", partial=why == "partial")
    if why == "gap":
        f.lost(CLIENT, 40)
    if why == "no_hello":
        f.client_hellos.clear()
    f.first_protected(CLIENT, 19)
    assert f.alerts == [] and f.encrypted_alert is None
