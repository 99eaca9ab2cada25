"""TLS inside MS-TDS (SQL Server, TDS 7): the handshake in PRELOGIN packets (a record may
run over several, as the 4096-byte packet size cuts a long server flight), the records on
the stream itself afterwards. The TLS bytes are a real loopback handshake (captures/); the
TDS packets are built here as MS-TDS lays them out, and tshark's reading (it dissects TDS
on port 1433) is checked beside ours."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.capbuild import TSHARK, Conv, ether, pcap_bytes, pcap_jsonl, real_chunks, tshark_fields

from tlsprobe.offline.tds import TdsChannel, tds_start


def packet(ptype: int, payload: bytes, last: bool = True, pid: int = 1) -> bytes:
    return bytes([ptype, 1 if last else 0]) + (8 + len(payload)).to_bytes(2, "big") + \
        b"\x00\x00" + bytes([pid & 0xFF, 0]) + payload


def prelogin(options: list[tuple[int, bytes]]) -> bytes:
    """A PRELOGIN option table (token, offset, length; 0xFF) followed by the data."""
    table_len = 5 * len(options) + 1
    table, data = b"", b""
    for token, value in options:
        table += bytes([token]) + (table_len + len(data)).to_bytes(2, "big") + \
            len(value).to_bytes(2, "big")
        data += value
    return table + b"\xff" + data


def in_packets(tls: bytes, size: int) -> bytes:
    """TLS bytes as PRELOGIN packets of at most `size` bytes (the last one EOM)."""
    step = size - 8
    chunks = [tls[i:i + step] for i in range(0, len(tls), step)]
    return b"".join(packet(0x12, c, last=i == len(chunks) - 1, pid=i + 1)
                    for i, c in enumerate(chunks))


def session(size: int = 4096) -> list[bytes]:
    c = Conv(client=("10.0.0.1", 50000), server=("10.0.0.2", 1433))
    version = (0, b"\x0f\x00\x07\xd0\x00\x00")
    pkts = c.handshake() + [
        c.c(packet(0x12, prelogin([version, (1, b"\x01"), (2, b"\x00"), (3, bytes(4))]))),
        c.s(packet(0x04, prelogin([version, (1, b"\x01"), (2, b"\x00")])))]
    for i, (side, data) in enumerate(real_chunks()):
        wrapped = in_packets(data, size) if i < 4 else data  # handshake, then raw records
        pkts.append(c.c(wrapped) if side == 0 else c.s(wrapped))
    return [ether(p) for p in pkts]


@pytest.mark.parametrize("size", [4096, 512], ids=["default-packets", "records-split"])
def test_tls_in_prelogin_packets_is_read(run_cli, tmp_path: Path, size: int) -> None:
    path = tmp_path / "tds.pcap"
    path.write_bytes(pcap_bytes(session(size)))
    code, [conn], _, err = pcap_jsonl(run_cli, path)
    assert code == 0, err
    assert conn["framing"] == "tds" and conn["problems"] == []
    assert conn["messages"] == [">>> ClientHello", "<<< ServerHello", "<<< Certificate",
                                "<<< ServerKeyExchange", "<<< ServerHelloDone",
                                ">>> ClientKeyExchange", "<<< NewSessionTicket"]
    assert conn["key_exchange"]["group"]["name"] == "x25519" and conn["encrypted"]
    assert len(conn["certificates"]) == 2  # leaf and CA: the record over several packets
    if TSHARK:
        rows = tshark_fields(path, "tls.handshake", "tls.handshake.type",
                             "tls.handshake.server_named_curve")
        # the same messages (1, 2, 11, 12, 14, 16, 4) and the same curve as ours
        assert rows == ["1", "2,11,12,14", "0x001d", "16", "4"]


def test_start_and_channel_bounds() -> None:
    """Not a PRELOGIN: a TLS record, HTTP, an option table pointing out of the packet;
    undecided on a header alone. A packet type outside MS-TDS stops the channel."""
    good = packet(0x12, prelogin([(0, bytes(6))]))
    assert tds_start(good) is True and tds_start(good[:6]) is None
    assert tds_start(b"\x16\x03\x01\x00\x05hello") is False
    assert tds_start(b"GET / HTTP/1.1\r\n") is False
    bad = bytearray(good)
    bad[10] = 0x40  # the VERSION option's offset beyond the packet
    assert tds_start(bytes(bad)) is False
    channel = TdsChannel()
    assert channel.feed(good + packet(0x12, b"\x16\x03\x03\x00\x01\x00")) == \
        b"\x16\x03\x03\x00\x01\x00"
    assert channel.feed(b"\x55" * 16) == b"" and channel.unreadable is not None
