"""Connection tracking on synthesized TCP around real recorded TLS bytes: plain text before
TLS (STARTTLS), wrong client/server guesses, captures that start inside a record, lost
segments, framing errors, and connections that are not TLS at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.capbuild import Conv, ether, pcap_bytes

from tests.helpers.own_captures import chunks
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.model.capture import ConnectionReport
from tlsprobe.report.trace import TraceFormatter

SEED = chunks("tls12_x25519.pcap")   # TLS 1.2 ECDHE-RSA X25519 against openssl s_server


def write(tmp_path: Path, frames: list[bytes]) -> str:
    path = tmp_path / "synth.pcap"
    path.write_bytes(pcap_bytes([ether(f) for f in frames]))
    return str(path)


def analyse(path: str, **options: object) -> list[ConnectionReport]:
    fast = [r for r, _ in CaptureAnalysis(path, AnalyzerOptions(**options))]
    flow = [r for r, _ in CaptureAnalysis(path, AnalyzerOptions(trace=True, trace_formatter=TraceFormatter,
                                                            **options))]
    assert [(r.version, r.cipher, r.key_exchange, r.offer, r.problems[:0]) for r in fast] == \
        [(r.version, r.cipher, r.key_exchange, r.offer, r.problems[:0]) for r in flow]
    return fast


def replay(conv: Conv, parts: list[tuple[int, bytes]], segment: int = 0) -> list[bytes]:
    out = []
    for direction, data in parts:
        pieces = [data[i:i + segment] for i in range(0, len(data), segment)] if segment \
            else [data]
        for piece in pieces:
            out.append(conv.c(piece) if direction == 0 else conv.s(piece))
    return out


def assert_seed(r: ConnectionReport) -> None:
    assert r.version is not None and r.version.hex == "0x0303"
    assert r.cipher is not None and r.cipher.hex == "0xc02f"
    assert r.group is not None and r.group.name == "x25519"
    assert r.key_exchange is not None and r.key_exchange.client_share_bytes == 32


def test_starttls_preamble_then_tls(tmp_path: Path) -> None:
    conv = Conv(("10.1.1.1", 50123), ("10.1.1.2", 25))
    frames = conv.handshake() + [
        conv.s(b"220 mail.example ESMTP\r\n"), conv.c(b"EHLO client.example\r\n"),
        conv.s(b"250-mail.example\r\n250 STARTTLS\r\n"), conv.c(b"STARTTLS\r\n"),
        conv.s(b"220 2.0.0 Ready to start TLS\r\n")] + replay(conv, SEED)
    (r,) = analyse(write(tmp_path, frames))
    assert_seed(r)
    assert r.preamble is not None and r.preamble.startswith("EHLO client.example\\r\\n")
    assert r.client == "10.1.1.1:50123" and not r.problems


def test_client_found_by_content_when_the_capture_guesses_wrong(tmp_path: Path) -> None:
    """No SYN, both ports high and the server speaks first (a STARTTLS banner): the capture
    takes the server for the client until the ClientHello shows otherwise."""
    conv = Conv(("10.1.1.1", 50123), ("10.1.1.2", 40025))
    frames = [conv.s(b"220 ready\r\n"), conv.c(b"STARTTLS\r\n"), conv.s(b"220 go\r\n")] + \
        replay(conv, SEED)
    (r,) = analyse(write(tmp_path, frames))
    assert_seed(r)
    assert (r.client, r.server) == ("10.1.1.1:50123", "10.1.1.2:40025")
    assert r.client_bytes == sum(len(b) for d, b in SEED if d == 0) + len(b"STARTTLS\r\n")


def test_records_split_into_tiny_segments(tmp_path: Path) -> None:
    conv = Conv()
    (r,) = analyse(write(tmp_path, conv.handshake() + replay(conv, SEED, segment=3)))
    assert_seed(r)
    assert len(r.certificates) == 2 and not r.problems


def test_lost_segment_inside_the_certificate_then_resync(tmp_path: Path) -> None:
    """The server's flight in 100-byte segments, one lost in the middle of the Certificate
    record: reading resumes at the next record header, so the ServerKeyExchange still
    names the group."""
    conv = Conv()
    frames = conv.handshake()
    for n, (direction, data) in enumerate(SEED):
        if direction == 0:
            frames.append(conv.c(data))
            continue
        for i in range(0, len(data), 100):
            packet = conv.s(data[i:i + 100])
            if n != 1 or i != 600:  # the Certificate (bytes 70..1700 of the first flight)
                frames.append(packet)
    (r,) = analyse(write(tmp_path, frames))
    assert r.gap_bytes == 100
    assert_seed(r)
    assert r.certificates == ()  # it was in the lost bytes
    assert ">>> ClientKeyExchange" in r.messages and "<<< NewSessionTicket" in r.messages


def test_capture_starting_inside_a_record(tmp_path: Path) -> None:
    conv = Conv()
    server_flight = SEED[1][1]
    parts = [(0, SEED[0][1][50:]), (1, server_flight[30:])] + SEED[2:]
    (r,) = analyse(write(tmp_path, replay(conv, parts)))
    assert r.midstream
    assert r.offer is None and r.version is None  # both hellos were cut
    assert r.encrypted and r.client_bytes > 0


def test_garbage_between_records_is_skipped(tmp_path: Path) -> None:
    conv = Conv()
    client = [(0, SEED[0][1]), (1, SEED[1][1]), (0, b"\x00GARBAGE\xff" + SEED[2][1])] + SEED[3:]
    (r,) = analyse(write(tmp_path, conv.handshake() + replay(conv, client)))
    assert_seed(r)
    assert any("no TLS record header" in p for p in r.problems)


def test_plain_http_is_not_reported(tmp_path: Path) -> None:
    conv = Conv(("10.1.1.1", 50000), ("10.1.1.2", 443))  # port 443 does not make it TLS
    frames = conv.handshake() + [conv.c(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                                 conv.s(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 1400)]
    analysis = CaptureAnalysis(write(tmp_path, frames), AnalyzerOptions())
    assert list(analysis) == []
    assert analysis.summary is not None and analysis.summary.connections == 1
    assert analysis.summary.tls_connections == 0


def test_many_connections_in_one_capture_each_reported_once(tmp_path: Path) -> None:
    frames = []
    for i in range(30):
        conv = Conv(("10.2.0.1", 40000 + i), ("10.2.0.2", 443), cisn=1000 * i)
        frames += conv.handshake() + replay(conv, SEED)
        frames.append(conv.c(b"", flags="FA"))
        frames.append(conv.s(b"", flags="FA"))
    reports = analyse(write(tmp_path, frames))
    assert sorted(r.client_port for r in reports) == list(range(40000, 40030))
    for r in reports:
        assert_seed(r)
        assert r.close == "fin"


def test_malformed_supported_versions_in_trace_mode(tmp_path: Path) -> None:
    """A ClientHello whose supported_versions list length is wrong: the fast reader names
    the problem; the --msg trace shows the message with the extension's error (the trace
    formatter keeps its version label) and goes on to the ServerHello."""
    parts = chunks("tls13_x25519.pcap")
    hello = bytearray(parts[0][1])
    at = bytes(hello).index(b"\x00\x2b\x00\x03\x02\x03\x04")  # supported_versions: TLS 1.3
    hello[at + 4] = 0x40                                       # list length 64: too long
    conv = Conv()
    frames = conv.handshake() + replay(conv, [(0, bytes(hello))] + parts[1:])
    path = write(tmp_path, frames)
    (r,) = [r for r, _ in CaptureAnalysis(path, AnalyzerOptions())]
    assert "malformed supported_versions extension in the ClientHello" in r.problems
    [(report, trace)] = list(CaptureAnalysis(path, AnalyzerOptions(trace=True,
                                                                      trace_formatter=TraceFormatter)))
    assert trace is not None
    assert "      !!! supported_versions.error: block of 64 bytes, only 2 left at +169" in trace
    assert any(line.endswith("ServerHello") and line.startswith("<<< TLS 1.3") for line in trace)
    assert report.offer is not None and report.version is not None


SUPPORTED_VERSIONS_TLS13 = b"\x00\x2b\x00\x02\x03\x04"
KEY_SHARE_X25519 = b"\x00\x33\x00\x24\x00\x1d\x00\x20"


def _empty_server_extension(flight: bytes, extension: bytes) -> bytes:
    """The server's first flight with one 2-byte extension of its ServerHello (its whole
    bytes given) emptied (the record, message and extensions lengths made to fit)."""
    sh = bytearray(flight[:5 + ((flight[3] << 8) | flight[4])])
    at = bytes(sh).index(extension)
    del sh[at + 4:at + 6]
    sh[at + 3] = 0                                   # extension_data of 0 bytes
    sh[3:5] = (len(sh) - 5).to_bytes(2, "big")
    sh[6:9] = (len(sh) - 9).to_bytes(3, "big")
    ext = 9 + 2 + 32 + 1 + sh[9 + 34] + 3           # the extensions block's length
    sh[ext:ext + 2] = (len(sh) - ext - 2).to_bytes(2, "big")
    return bytes(sh) + flight[len(sh) + 2:]


def _unreadable_key_share(flight: bytes) -> bytes:
    """The flight with its ServerHello's x25519 key_share claiming a 33-byte key in 32."""
    broken = bytearray(flight)
    broken[bytes(broken).index(KEY_SHARE_X25519) + 7] = 0x21
    return bytes(broken)


def test_malformed_server_supported_versions_leaves_the_version_unknown(
        tmp_path: Path) -> None:
    """A ServerHello whose supported_versions extension is empty: the version it chose is
    unknown (not its legacy_version, TLS 1.2), said as a problem; the suite and the group
    of its key_share are still reported, in the table, --stats and JSON."""
    parts = chunks("tls13_x25519.pcap")
    flight = _empty_server_extension(parts[1][1], SUPPORTED_VERSIONS_TLS13)
    conv = Conv()
    path = write(tmp_path, conv.handshake() + replay(conv, [parts[0], (1, flight)]))
    (r,) = analyse(path)
    assert r.version is None
    assert r.cipher is not None and r.cipher.hex == "0x1302"
    assert r.group is not None and r.group.name == "x25519"
    assert "malformed supported_versions extension in the ServerHello (the version it " \
        "chose is not known)" in r.problems
    table = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", path],
                           capture_output=True, text=True, timeout=60)
    (row,) = [line for line in table.stdout.splitlines() if "TLS_AES_256_GCM_SHA384" in line]
    assert "(unknown)" in row and "TLS 1.2" not in row and "no ServerHello" not in row
    stats = json.loads(subprocess.run(
        [sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--stats", "--json", path],
        capture_output=True, text=True, timeout=60).stdout)["stats"]
    assert stats["handshakes"] == 1 and stats["client_hello_only"] == 0
    assert stats["versions"] == [{"name": "(unknown)", "connections": 1}]
    line = json.loads(subprocess.run(
        [sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--jsonl", path],
        capture_output=True, text=True, timeout=60).stdout.splitlines()[0])
    assert line["version"] is None and line["cipher"]["hex"] == "0x1302"
    # its key_share unreadable too: the group is not known either (not "no key exchange")
    conv = Conv()
    path = write(tmp_path, conv.handshake() + replay(conv, [parts[0],
                                                           (1, _unreadable_key_share(flight))]))
    (r,) = analyse(path)
    assert r.version is None and r.key_exchange is not None
    assert (r.key_exchange.kind, r.key_exchange.source) == ("unknown", "malformed")


def test_malformed_server_key_share_is_no_psk_handshake(tmp_path: Path) -> None:
    """A TLS 1.3 ServerHello whose key_share extension cannot be read (its key's length
    overruns the extension): the group is unknown, not "PSK, no key exchange"."""
    parts = chunks("tls13_x25519.pcap")
    flight = _unreadable_key_share(parts[1][1])
    conv = Conv()
    path = write(tmp_path, conv.handshake() + replay(conv, [parts[0], (1, flight)]))
    (r,) = analyse(path)
    assert r.version is not None and r.version.hex == "0x0304"
    assert r.key_exchange is not None
    assert (r.key_exchange.kind, r.key_exchange.source, r.group) == ("unknown", "malformed", None)
    assert "malformed key_share extension in the ServerHello" in r.problems


def test_server_messages_lost_before_its_ccs_leave_resumption_unknown(
        tmp_path: Path) -> None:
    """TLS 1.2: the ServerHello is captured, the rest of the server's first flight
    (Certificate, ServerKeyExchange, ServerHelloDone) is not, then its CCS: that is not
    told from an abbreviated handshake, so no resumption is claimed, and the problems say
    what is not known; the same handshake captured whole is a full one."""
    sh_record = 5 + ((SEED[1][1][3] << 8) | SEED[1][1][4])
    for lost in (True, False):
        conv = Conv()
        frames = conv.handshake()
        for n, (direction, data) in enumerate(SEED):
            if direction == 0:
                frames.append(conv.c(data))
            elif n == 1:
                frames.append(conv.s(data[:sh_record]))
                rest = conv.s(data[sh_record:])  # advances the server's sequence
                if not lost:
                    frames.append(rest)
            else:
                frames.append(conv.s(data))
        (r,) = analyse(write(tmp_path, frames))
        assert r.version is not None and r.version.hex == "0x0303"
        assert r.resumption is None
        unknown = [p for p in r.problems if p.startswith("resumption not known")]
        if lost:
            assert r.gap_bytes == len(SEED[1][1]) - sh_record
            assert unknown == [f"resumption not known (gap of {r.gap_bytes} bytes in the "
                               "server's handshake)"]
            assert r.key_exchange is not None and r.key_exchange.source == "not_captured"
        else:
            assert unknown == [] and r.gap_bytes == 0
            assert_seed(r)


def test_unreadable_server_pre_shared_key_is_still_a_psk_resumption(tmp_path: Path) -> None:
    """A TLS 1.3 ServerHello's pre_shared_key extension is there only when the server took a
    PSK: emptied (its selected identity unreadable), the resumption is still "psk", with the
    problem; the capture's own resumption reads "psk" with no problem."""
    parts = chunks("tls13_resumption.pcap", conn=1)  # the resumed connection
    for broken in (False, True):
        flight = _empty_server_extension(parts[1][1], b"\x00\x29\x00\x02\x00\x00") \
            if broken else parts[1][1]
        conv = Conv()
        path = write(tmp_path, conv.handshake() + replay(conv, [parts[0], (1, flight)]))
        (r,) = analyse(path)
        assert r.version is not None and r.version.hex == "0x0304"
        assert r.resumption == "psk"
        assert ("malformed pre_shared_key extension in the ServerHello" in r.problems) is broken


def test_partial_messages_are_released(tmp_path: Path) -> None:
    """Bytes of handshake messages still incomplete are accounted for across connections
    and given back when connections end (the bound that keeps memory flat)."""
    conv = Conv()
    flight = SEED[1][1]
    frames = conv.handshake() + [conv.c(SEED[0][1]), conv.s(flight[:1000])]  # cut in a message
    path = write(tmp_path, frames)
    reports = analyse(path)
    assert len(reports) == 1 and reports[0].version is not None
    analysis = CaptureAnalysis(path, AnalyzerOptions())  # the budget is the analysis's own
    assert [r.version for r, _ in analysis] == [reports[0].version]
    assert analysis.caches.held == 0


def test_two_holes_of_the_same_size_are_both_counted(tmp_path: Path) -> None:
    """One 100-byte segment lost in the server's first flight and one in its last: both
    holes are flushed when the capture ends (same size, same frame) and both count."""
    conv = Conv()
    frames = conv.handshake()
    for direction, data in SEED:
        if direction == 0:
            frames.append(conv.c(data))
            continue
        for i in range(0, len(data), 100):
            packet = conv.s(data[i:i + 100])
            if i != 600 or len(data) < 700:  # lost in the 2019- and 2277-byte flights
                frames.append(packet)
    (r,) = analyse(write(tmp_path, frames))
    assert r.gap_bytes == 200
    assert_seed(r)


def _seed_without(parts: set[int]) -> list[bytes]:
    """The seed connection with the segments of `parts` (indexes into SEED) lost: their
    sequence numbers are taken, so the capture shows a hole."""
    conv = Conv()
    frames = conv.handshake()
    for i, (direction, data) in enumerate(SEED):
        frame = conv.c(data) if direction == 0 else conv.s(data)
        if i not in parts:
            frames.append(frame)
    return frames


def _both_readers(path: str) -> list[ConnectionReport]:
    return [r for options in ({}, {"trace": True, "trace_formatter": TraceFormatter})
            for r, _ in CaptureAnalysis(path, AnalyzerOptions(**options))]  # type: ignore[arg-type]


def test_encrypted_alerts_after_a_lost_change_cipher_spec_are_not_reported(
        tmp_path: Path) -> None:
    """The client's ClientKeyExchange/CCS/Finished segment is lost, so its CCS is not seen;
    its closing alert (a 26-byte AES-GCM record) is ciphertext, not 13 alerts."""
    assert [len(d) for _, d in SEED][-2:] == [31, 31]  # the two encrypted close_notify
    path = write(tmp_path, _seed_without({2}))
    for r in _both_readers(path):
        assert r.alerts == () and r.problems == ()
        assert r.encrypted
        assert r.version is not None and r.version.hex == "0x0303"
        assert r.group is not None and r.group.name == "x25519"
        assert r.key_exchange is not None and r.key_exchange.client_share_bytes is None
        assert r.gap_bytes == 93


def test_change_cipher_spec_after_a_lost_server_hello_of_a_tls12_only_offer(
        tmp_path: Path) -> None:
    """The ServerHello flight and the client's key exchange are lost: the client offered
    TLS 1.2 only, so the server's CCS starts protection whatever the ServerHello chose.
    Its encrypted Finished is not read as a handshake message (it was reported as one of
    8 MB 'over the limit'), nor either side's encrypted alert as alerts; the plaintext
    NewSessionTicket before the CCS is still read."""
    path = write(tmp_path, _seed_without({1, 2}))
    for r in _both_readers(path):
        assert r.version is None and r.alerts == () and r.problems == ()
        assert r.messages == (">>> ClientHello", "<<< NewSessionTicket")
        assert r.session_ticket_lifetime == 7200
        assert r.encrypted


def test_a_two_byte_alert_of_any_level_is_still_read(tmp_path: Path) -> None:
    """Only alert records that cannot be plaintext are taken for ciphertext: a 2-byte one
    is an alert whatever its level, as is a 4-byte pair of warning/fatal alerts, and a
    3-byte one is a malformed plaintext alert (too short to be protected)."""
    conv = Conv()
    frames = conv.handshake() + [conv.c(SEED[0][1]), conv.s(b"\x15\x03\x03\x00\x02\x07\x28"),
                                 conv.c(b"\x15\x03\x03\x00\x04\x01\x00\x02\x0a"),
                                 conv.c(b"\x15\x03\x03\x00\x03\x02\x28\x00")]
    for r in _both_readers(write(tmp_path, frames)):
        assert [(a.direction, a.level, a.description) for a in r.alerts] == [
            ("server", 7, 40), ("client", 1, 0), ("client", 2, 10)]
        assert any("malformed alert" in p for p in r.problems), r.problems
        assert not r.encrypted


def _offering_tls13(hello_record: bytes) -> bytes:
    """A TLS 1.2-only ClientHello record with supported_versions (TLS 1.3, TLS 1.2) added."""
    body = bytearray(hello_record[9:])
    p = 34
    p += 1 + body[p]                                   # session id
    p += 2 + int.from_bytes(body[p:p + 2], "big")      # cipher suites
    p += 1 + body[p]                                   # compression methods
    extensions = body[p + 2:] + bytes.fromhex("002b00050403040303")
    body = body[:p] + len(extensions).to_bytes(2, "big") + extensions
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    return hello_record[:3] + len(message).to_bytes(2, "big") + message


def test_change_cipher_spec_after_a_lost_server_hello_of_a_tls13_offer(
        tmp_path: Path) -> None:
    """As above, but the client also offered TLS 1.3: the server's CCS may be TLS 1.3's
    middlebox one, so the record after it decides. It is not whole plaintext messages
    (an encrypted Finished), so it is protected: no handshake message 'over the limit'."""
    seed = [(0, _offering_tls13(SEED[0][1])), *SEED[1:]]
    conv = Conv()
    frames = conv.handshake()
    for i, (direction, data) in enumerate(seed):
        frame = conv.c(data) if direction == 0 else conv.s(data)
        if i not in (1, 2):
            frames.append(frame)
    for r in _both_readers(write(tmp_path, frames)):
        assert r.offer is not None and [v.hex for v in r.offer.versions] == ["0x0304", "0x0303"]
        assert r.alerts == () and r.problems == ()
        assert r.messages == (">>> ClientHello", "<<< NewSessionTicket")
        assert r.encrypted


def test_plaintext_hello_after_an_unsure_change_cipher_spec_is_read(tmp_path: Path) -> None:
    """TLS 1.3 with a HelloRetryRequest whose segment (HRR and the server's CCS) is lost:
    the client's middlebox CCS comes with no ServerHello known, and the second ClientHello
    after it is whole plaintext messages, so it is still read, as is the ServerHello. The
    second ClientHello answers a HelloRetryRequest: one came, not captured (never "no")."""
    from tlsprobe.offline.facts import HRR_NOT_CAPTURED
    parts = chunks("tls13_hrr.pcap")
    conv = Conv()
    frames = conv.handshake()
    for i, (direction, data) in enumerate(parts):
        frame = conv.c(data) if direction == 0 else conv.s(data)
        if i != 1:
            frames.append(frame)
    for r in _both_readers(write(tmp_path, frames)):
        assert r.client_hellos == 2 and r.problems == (HRR_NOT_CAPTURED,)
        assert r.key_exchange is not None and r.hello_retry_request is None
        assert r.key_exchange.source == "hello_retry_request"
        assert r.version is not None and r.version.hex == "0x0304"
        assert r.messages[:3] == (">>> ClientHello", ">>> ClientHello", "<<< ServerHello")
