"""What the views of a live capture say: a connection still open when its row comes has
its time and bytes until then, said so; a long escaped SNI wraps between its escapes; a
failed handshake reset on a quiet link still has its row."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any


def test_details_of_a_connection_still_open_say_so_far(tls_server: Any,
                                                       live_pcap: Any) -> None:
    """--details of a connection reported while it is open (its handshake decided): the
    connection's time and bytes are counted until then, and the block says so (it said
    'connection 3.1 ms', 'Bytes client 377, server 756' as if the connection had ended;
    the same capture read from a file gives the whole connection's)."""
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", "--details", "-c", "1")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as raw, \
            context.wrap_socket(raw, server_hostname="held.test"):
        code, lines, err = run.finish(timeout=30)   # -c 1: ends while the client is open
    assert code == 0, err
    timing = next(line for line in lines if line.startswith("Timing"))
    nbytes = next(line for line in lines if line.startswith("Bytes"))
    assert timing.endswith(" ms so far (open when reported)"), timing
    assert nbytes.endswith(" so far (open when reported)"), nbytes


def _client_hello(sni: bytes) -> bytes:
    """A TLS 1.2 ClientHello naming `sni` (ECDHE suites, x25519 and secp256r1)."""
    def vec16(data: bytes) -> bytes:
        return struct.pack("!H", len(data)) + data

    def ext(kind: int, body: bytes) -> bytes:
        return struct.pack("!HH", kind, len(body)) + body

    exts = (ext(0, vec16(b"\x00" + vec16(sni))) + ext(10, vec16(b"\x00\x1d\x00\x17"))
            + ext(13, vec16(b"\x04\x03\x08\x04\x04\x01")) + ext(11, b"\x01\x00"))
    body = (b"\x03\x03" + bytes(32) + b"\x00" + vec16(b"\xc0\x2f\xc0\x2b\xc0\x30\xc0\x2c")
            + b"\x01\x00" + vec16(exts))
    handshake = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + vec16(handshake)


def test_a_long_escaped_name_wraps_between_its_escapes(tls_server: Any,
                                                       live_pcap: Any) -> None:
    """The streamed table wraps a long SNI inside its column: an SNI of escapes (an
    escape sequence, a newline, UTF-8 of a bidi override) is cut between two escapes and
    its lines joined give it back; it was cut inside one ('\\xa' on a line, 'ename' on
    the next, as if the bytes were others)."""
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", "--duration", "4")
    sni = b"\x1b[2Jevil\n\xe2\x80\xaename.example"
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as raw:
        raw.sendall(_client_hello(sni))
        raw.settimeout(10)
        assert raw.recv(65536)       # the server's flight; the close ends the connection
    code, lines, err = run.finish(timeout=30)
    assert code == 0, err
    column = slice(55, 55 + 24)     # the SNI column (STREAM_WIDTHS)
    row = [line for line in lines[1:] if not line.startswith("Key S/C")]
    cells = [line[column].rstrip() for line in row]
    assert "".join(cells) == r"\x1b[2Jevil\n\xe2\x80\xaename.example", row
    assert not any(cell.endswith(("\\", "\\x", "\\xa", "\\xe")) for cell in cells), row


def test_a_failed_handshake_reset_on_a_quiet_link_is_reported(tls_server: Any,
                                                              live_pcap: Any) -> None:
    """A client that gives up after the server's flight (its close answered by the
    server's alert, which it resets): the connection waits RST_LINGER (2 s) of capture
    time for data still in flight, and on a link with no more packets the capture's time
    goes on with the clock: the row comes then, and -c 1 ends the run (it came only when
    the capture stopped: here after --duration's 60 s)."""
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "-c", "1", "--duration", "60")
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as raw:
        raw.sendall(_client_hello(b"quiet.example"))
        raw.settimeout(10)
        assert raw.recv(65536)       # the server's flight; then the close
    got = run.next_record(timeout=20.0)
    assert got is not None, "no row on the quiet link: " + "".join(run.stderr)
    code, _lines, err = run.finish(timeout=10)
    assert code == 0, err
    assert got[1]["sni"] == "quiet.example" and got[1]["close"] == "rst", got[1]
