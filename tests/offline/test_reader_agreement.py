"""The fast reader and the Flow reader say the same of damaged streams (issue 35).

A capture is read by the fast reader without keys and by the Flow reader (session.Flow)
for the connections a key log has keys for; a connection must read the same either way,
or a key log (a pcapng's embedded one included) would change what is said of the
connections it has no keys for. Each stream here is a kind of damage the third-party
corpus holds (../shared/captures: aol.pcap, dof-*.pcapng, jxta-mcast-sample.pcap,
suricata-verify's bug-1450 and app-layer-protocol tests), rebuilt around the project's
own handshakes: every field of each report must be equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import Conv, ether, pcap_bytes
from tests.helpers.own_captures import CAPTURES, chunks
from tlsprobe.engine.keylog import KeyLog, load_keylog
from tlsprobe.offline import flowreader
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis

SEED = chunks("tls12_rsa.pcap")  # TLS 1.2 RSA key transport against openssl s_server
#: an SSLv2-format ClientHello offering TLS 1.2 (aol.pcap's client, version raised)
SSLV2_HELLO = bytes.fromhex(
    "804c01030300330000001000000400000500000a0100800700c0030080000009"
    "060040000064000062000003000006020080040080000013000012000063b2fd"
    "95d6265d2ee647ca9a129fafafba")


def write(tmp_path: Path, frames: list[bytes]) -> str:
    path = tmp_path / "damaged.pcap"
    path.write_bytes(pcap_bytes([ether(f) for f in frames]))
    return str(path)


def both(path: str) -> list[dict[str, object]]:
    """Every report of the capture as the fast reader gives it, after checking that the
    Flow reader's are equal, field by field."""
    with CaptureAnalysis(path, AnalyzerOptions()) as fast:
        first = [json.loads(r.to_json()) for r, _ in fast]
    # a key log with an RSA Session-ID line makes every connection the Flow reader's (the
    # session id is known only at the ServerHello); this one matches no connection here
    keylog = KeyLog(session_ids={b"\x35" * 32: b"\x00" * 48})
    with CaptureAnalysis(path, AnalyzerOptions(keylog=keylog)) as flow:
        second = [json.loads(r.to_json()) for r, _ in flow]
    assert first and first == second
    return first


def test_sslv2_hello_then_a_server_segment_starting_with_a_high_byte(tmp_path: Path) -> None:
    """After an SSLv2-format ClientHello, a server segment that starts inside a record
    with a byte >= 0x80 is not an SSL 2.0 record (the Flow reader stopped reading the
    server there and lost its ServerHello and Certificate)."""
    assert len(SSLV2_HELLO) == 2 + 0x4C
    conv = Conv()
    server = b"".join(data for d, data in SEED if d == 1)[:1706]  # its first flight
    cut = next(i for i in range(6, len(server)) if server[i] & 0x80)
    frames = conv.handshake() + [conv.c(SSLV2_HELLO), conv.s(server[:cut]),
                                 conv.s(server[cut:])]
    (r,) = both(write(tmp_path, frames))
    assert r["cipher"] is not None and r["certificates"]


def test_application_data_without_a_handshake(tmp_path: Path) -> None:
    """A capture that starts inside a connection, only application data records: after
    eight records a side is taken for encrypted by both readers."""
    conv = Conv()
    frames = []
    for i in range(9):
        record = b"\x17\x03\x03\x00\x20" + bytes([i]) * 32
        frames += [conv.c(record), conv.s(record)]
    (r,) = both(write(tmp_path, frames))
    assert r["encrypted"] is True


def test_unknown_content_type(tmp_path: Path) -> None:
    """A record of content type 202 after the ClientHello: one problem, the same words."""
    conv = Conv()
    junk = bytes((202, 3, 3, 0, 4)) + b"abcd"
    frames = conv.handshake() + [conv.c(SEED[0][1] + junk)] + \
        [conv.c(data) if d == 0 else conv.s(data) for d, data in SEED[1:]]
    (r,) = both(write(tmp_path, frames))
    assert r["problems"] == ["no TLS record header where one was expected (client)"]


def test_handshake_message_over_the_limit(tmp_path: Path) -> None:
    """A server message that declares 16 MiB (suricata-verify bug-1450)."""
    conv = Conv()
    huge = bytes.fromhex("1603030008" "0bffffff" "00000000")
    frames = conv.handshake() + [conv.c(SEED[0][1]), conv.s(SEED[1][1][:62] + huge)]
    (r,) = both(write(tmp_path, frames))
    assert r["problems"] == [
        "handshake message of 16777219 bytes from the server: over the limit, skipped"]


def test_the_flow_reader_only_for_connections_the_key_log_has_keys_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A key log without keys for a connection leaves it to the fast reader (the same
    report as without the log); with its keys it is read by the Flow reader, decrypted."""
    made = []
    real = flowreader.FlowReader

    def counted(*args: Any, **kwargs: Any) -> flowreader.FlowReader:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(flowreader, "FlowReader", counted)
    path = str(CAPTURES / "tls12_x25519.pcap")

    def reports(keys: str | None) -> list[dict[str, object]]:
        keylog = load_keylog(str(CAPTURES / keys)) if keys else None
        with CaptureAnalysis(path, AnalyzerOptions(keylog=keylog)) as analysis:
            return [json.loads(r.to_json()) for r, _ in analysis]

    plain = reports(None)
    assert reports("tls13_p256.keys") == plain and not made
    (decrypted,) = reports("tls12_x25519.keys")
    assert made == [1] and decrypted["decrypted"] is True and not plain[0]["decrypted"]
