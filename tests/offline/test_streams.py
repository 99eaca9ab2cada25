"""Connection tracking on synthesized TCP around real recorded TLS bytes: plain text before
TLS (STARTTLS), wrong client/server guesses, captures that start inside a record, lost
segments, framing errors, and connections that are not TLS at all."""

from __future__ import annotations

from pathlib import Path

from capture.capbuild import Conv, ether, pcap_bytes

from offline.helpers import chunks
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
