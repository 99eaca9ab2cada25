"""`pcap --details` says the server's ALPN only when the capture shows it: in TLS 1.3 it is
in the encrypted EncryptedExtensions, so a connection not decrypted (a TCP one without its
keys, a QUIC one without them: its EncryptedExtensions is in Handshake packets) has it "not
visible", never "(none)", which said the server chose no protocol (Chrome to Cloudflare
chose h2 over TCP, and QUIC needs one: RFC 9001 8.1). Likewise a QUIC handshake past its
ServerHello is not said "not finished in the capture": the rest is in Handshake packets.
With the keys the pcapng embeds, both connections are decrypted (the QUIC one's Handshake
packets too): h2 and h3."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

CAPTURE = Path("ja4") / "pcap" / "chrome-cloudflare-quic-with-secrets.pcapng"


def _alpn_rows(run_cli: Callable[..., Any], path: Path, *args: str,
               label: str = "ALPN") -> dict[str, str]:
    res = run_cli("pcap", path, "--details", *args)
    assert res.returncode == 0, res.stderr
    rows, conn = {}, ""
    for line in res.stdout.splitlines():
        if line.startswith("Connection "):
            conn = line.split()[1]
        elif line.startswith(label + " "):
            rows[conn] = line[len(label):].strip()
    return rows


def test_tls13_alpn_not_decrypted_is_not_said_to_be_none(captures_dir: Path,
                                                         run_cli: Callable[..., Any]) -> None:
    path = captures_dir / CAPTURE
    hidden = _alpn_rows(run_cli, path, "--no-embedded-keys")
    assert hidden == {
        "#0": "(not visible: TLS 1.3 encrypts it; --keylog with this connection's secrets "
              "shows it)",
        "#quic/0": "(not visible: TLS 1.3 encrypts it, in QUIC Handshake packets; --keylog "
                   "with this connection's secrets shows it)"}, hidden
    # with the keys embedded in the pcapng both connections are decrypted: h2 over TCP,
    # h3 in the QUIC Handshake packets' EncryptedExtensions
    assert _alpn_rows(run_cli, path) == {"#0": "h2", "#quic/0": "h3"}
    assert _alpn_rows(run_cli, path, label="Handshake")["#quic/0"] == \
        "complete (both Finished decrypted)"
    states = _alpn_rows(run_cli, path, "--no-embedded-keys", label="Handshake")
    assert states == {"#0": "both sides encrypting",
                      "#quic/0": "ServerHello seen; the rest is in QUIC Handshake packets "
                                 "(--keylog with this connection's secrets reads them)"}, states
