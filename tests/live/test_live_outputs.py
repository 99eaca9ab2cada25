"""What the text views of a live capture say about a connection still open when its row
comes: its time and bytes are those until then, said so."""

from __future__ import annotations

import socket
import ssl
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
