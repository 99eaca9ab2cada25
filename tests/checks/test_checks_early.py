"""The engine's two ClientConfig fields the heartbleed and ticketbleed checks need: extensions
sent as given (extra_extensions) and the legacy_session_id (session_id)."""
from __future__ import annotations

from tlsprobe.engine.config import ClientConfig, build_client_hello


def test_config_sends_extra_extensions_and_session_id() -> None:
    config = ClientConfig(versions=(0x0303,), session_ticket=False, session_id=b"\x07",
                          extra_extensions=((15, b"\x01"), (35, b"ticket")))
    hello = build_client_hello(config).hello
    assert hello.legacy_session_id == b"\x07"
    exts = [(e.type, e.data) for e in hello.extensions]
    assert (15, b"\x01") in exts and (35, b"ticket") in exts
    assert [t for t, _ in exts].count(35) == 1 and exts[-1][0] == 21   # padding stays last
    plain = build_client_hello(ClientConfig(versions=(0x0303,))).hello
    assert plain.legacy_session_id == b"" and 15 not in [e.type for e in plain.extensions]
