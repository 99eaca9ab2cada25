"""`tlsprobe pcap` never says less than it read: packets skipped for a reason other than
the snaplen (an interface no block defines, an unknown link type, encapsulation too deep, an
IP length beyond the packet, fragments never completed) each give a note line with counts,
a JSON field, and exit 7. The capture is a real loopback handshake (captures/) replayed
into packets built here."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.helpers.capbuild import Conv, Pcapng, ether, ipv4, pcap_bytes, real_chunks


def replay(conv: Conv) -> list[bytes]:
    """The real handshake as IP packets of `conv` (a SYN handshake first)."""
    pkts = conv.handshake()
    for direction, data in real_chunks():
        pkts.append(conv.c(data) if direction == 0 else conv.s(data))
    return pkts


def capture_record(out: str) -> dict:
    return [json.loads(line) for line in out.splitlines()
            if json.loads(line)["kind"] == "capture"][0]


def notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("tlsprobe: note: ")]


def test_clean_replay_exits_0_without_notes(run_cli, tmp_path: Path) -> None:
    (tmp_path / "ok.pcap").write_bytes(pcap_bytes([ether(p) for p in replay(Conv())]))
    code, out, err = run_cli("pcap", "ok.pcap", "--jsonl", "--no-progress")
    assert code == 0 and err == ""
    assert capture_record(out)["losses"] == []


def test_unknown_link_type_and_undefined_interface(run_cli, tmp_path: Path) -> None:
    ng = Pcapng().shb().idb(1).idb(147)
    pkts = replay(Conv())
    for i, p in enumerate(pkts):
        ng.epb(0, i, ether(p))
    ng.epb(1, 100, b"\x00" * 40).epb(1, 101, b"\x00" * 40)  # link type 147: not read
    ng.epb(5, 102, ether(pkts[3]))  # interface 5: no block defines it
    (tmp_path / "x.pcapng").write_bytes(ng.bytes())
    code, out, err = run_cli("pcap", "x.pcapng", "--jsonl", "--no-progress")
    assert code == 7, err
    said = notes(err)
    assert "tlsprobe: note: x.pcapng: 2 packets of link type 147, which tlsprobe does not " \
        "read (skipped)" in said
    assert "tlsprobe: note: x.pcapng: 1 packet on an interface no pcapng interface block " \
        "defines (skipped)" in said
    assert "snaplen" not in err
    record = capture_record(out)
    assert record["capture"]["skipped"] == {"bad_interface_id": 1, "link_type_147": 2}
    assert len(record["losses"]) == 2 and record["tls_connections"] == 1


def test_encapsulation_deeper_than_the_limit(run_cli, tmp_path: Path) -> None:
    pkts = [ether(p) for p in replay(Conv())]
    deep = ether(Conv().c(b"x"))[14:]
    for _ in range(12):
        deep = ipv4("192.0.2.1", "192.0.2.2", 4, deep)  # IP in IP, twelve times
    (tmp_path / "deep.pcap").write_bytes(pcap_bytes(pkts + [ether(deep)]))
    code, out, err = run_cli("pcap", "deep.pcap", "--jsonl", "--no-progress")
    assert code == 7
    assert notes(err) == ["tlsprobe: note: deep.pcap: 1 packet encapsulated deeper than 6 "
                          "levels (skipped)"]
    assert capture_record(out)["capture"]["skipped"] == {"tunnel_too_deep": 1}


def test_ip_length_beyond_the_packet_is_not_called_a_snaplen_cut(run_cli,
                                                                 tmp_path: Path) -> None:
    """The frame is whole on the wire (original length = captured length) but its IPv4
    total length claims 100 bytes more: the bytes there are read (as tshark does) and the
    note says what happened, without the snaplen wording."""
    pkts = [ether(p) for p in replay(Conv())]
    bad = bytearray(pkts[3])  # the ClientHello
    total = struct.unpack_from("!H", bad, 16)[0]
    struct.pack_into("!H", bad, 16, total + 100)
    pkts[3] = bytes(bad)
    (tmp_path / "long.pcap").write_bytes(pcap_bytes(pkts))
    code, out, err = run_cli("pcap", "long.pcap", "--jsonl", "--no-progress")
    assert code == 7
    assert notes(err) == ["tlsprobe: note: long.pcap: 1 packet whose IP length exceeds the "
                          "bytes on the wire (the bytes present were read)"]
    assert "snaplen" not in err
    record = capture_record(out)
    assert record["capture"]["snaplen_cut"] == 0
    assert record["capture"]["ip_length_exceeds_packet"] == 1
    conn = json.loads(out.splitlines()[0])
    assert conn["sni"] == "localhost" and conn["gap_bytes"] == 0
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"


def test_fragments_never_completed(run_cli, tmp_path: Path) -> None:
    pkts = [ether(p) for p in replay(Conv())]
    lone = ipv4("10.9.9.9", "10.8.8.8", 6, b"\x00" * 48, ident=77, frag_offset=1480,
                more_fragments=True)
    (tmp_path / "frag.pcap").write_bytes(pcap_bytes(pkts + [ether(lone)]))
    code, out, err = run_cli("pcap", "frag.pcap", "--jsonl", "--no-progress")
    assert code == 7
    assert notes(err) == ["tlsprobe: note: frag.pcap: 1 IP datagram whose fragments never "
                          "all arrived (48 bytes skipped; first fragments read)"]
    frags = capture_record(out)["capture"]["ip_fragments"]
    assert frags == {"fragments": 1, "reassembled": 0, "incomplete": 1, "bytes_lost": 48,
                     "duplicates": 0}


def test_network_monitor_metadata_records_are_not_losses(run_cli, tmp_path: Path) -> None:
    """Network Monitor's own records (network types 0xFFE0-0xFFFF: process and network
    information, filters) carry no traffic: skipped without a note; an unknown network
    type with traffic is a loss."""
    from tests.helpers.capbuild import netmon_bytes
    frames = [ether(p) for p in replay(Conv())]
    meta = [(0xFFFB, b"\x00" * 30), (0xFFFF, b"\x00" * 12)]
    (tmp_path / "meta.cap").write_bytes(netmon_bytes([*frames, *meta]))
    code, out, err = run_cli("pcap", "meta.cap", "--jsonl", "--no-progress")
    assert code == 0 and err == "", err
    assert capture_record(out)["losses"] == []
    (tmp_path / "odd.cap").write_bytes(netmon_bytes([*frames, (0x0042, b"\x00" * 30)]))
    code, out, err = run_cli("pcap", "odd.cap", "--jsonl", "--no-progress")
    assert code == 7 and "1 packet of link type 65602" in err


@pytest.mark.parametrize("zeros", [4096, 9 << 20], ids=["short", "piped"])
def test_zeros_after_the_packets_stop_the_reading_with_exit_7(run_cli, tmp_path: Path,
                                                              zeros: int) -> None:
    """A pcap whose packets are followed by zeros (a preallocated file never filled): the
    zeros read as empty records without a timestamp, which no capture tool writes. Reading
    stops at the first one with one line naming its offset and exit 7; the handshake before
    stands. The
    piped size goes through the reader process (`pcap` of 8 MiB or more)."""
    good = pcap_bytes([ether(p) for p in replay(Conv())])
    (tmp_path / "z.pcap").write_bytes(good + bytes(zeros))
    code, out, err = run_cli("pcap", "z.pcap", "--jsonl", "--no-progress")
    assert code == 7, err
    assert err.splitlines() == [f"tlsprobe: z.pcap: pcap record header of zeros (the file "
                                f"holds zeros instead of packets from here) at file offset "
                                f"{len(good)}; "
                                f"read {len(replay(Conv()))} packets, reported what could "
                                "be read"], err
    assert capture_record(out)["tls_connections"] == 1


def test_header_followed_by_junk_is_damage(run_cli, tmp_path: Path) -> None:
    """A valid file header, then junk where the records should be: exit 7 and one line at
    offset 24, whether the junk's first length is impossible or the record is zeros."""
    header = pcap_bytes([])
    for name, body in (("junk", bytes(range(256)) * 64), ("zero", bytes(1 << 16))):
        (tmp_path / f"{name}.pcap").write_bytes(header + body)
        code, out, err = run_cli("pcap", f"{name}.pcap", "--no-progress")
        assert code == 7, (name, err)
        lines = err.splitlines()
        assert len(lines) == 1 and "at file offset 24; read 0 packets" in lines[0], lines


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_a_format_version_no_reader_knows_is_not_read_as_a_known_one(run_cli, tmp_path: Path,
                                                                   kind: str) -> None:
    """libpcap's tests pcap-invalid-version-1.pcap (1.4) and pcapng-invalid-vers-1.pcapng
    (0.1): libpcap and tshark refuse them; tlsprobe read their records as 2.4 and 1.0 and
    said nothing. A major version other than pcap's 2 or pcapng's 1 is now said and its
    records (a section's, in pcapng) are not read: exit 7. Another minor version has the
    same layout and is read (tshark reads pcap 2.5)."""
    frames = [ether(p) for p in replay(Conv())]
    if kind == "pcap":
        good = pcap_bytes(frames)
        bad = good[:4] + struct.pack("<HH", 1, 4) + good[8:]
        odd = good[:4] + struct.pack("<HH", 2, 5) + good[8:]
        said = "pcap file format version 1.4, not 2.x"
    else:
        def pcapng(second: tuple[int, int]) -> bytes:
            ng = Pcapng().shb().idb(1)
            for i, f in enumerate(frames[:3]):
                ng.epb(0, i, f)
            ng.shb(version=second).idb(1)
            for i, f in enumerate(frames[3:]):
                ng.epb(0, 10 + i, f)
            return ng.bytes()
        good, bad, odd = pcapng((1, 0)), pcapng((0, 1)), pcapng((1, 1))
        said = "pcapng section of format version 0.1, not 1.x"
    for name, data in (("good", good), ("odd", odd), ("bad", bad)):
        (tmp_path / name).write_bytes(data)
    for name in ("good", "odd"):
        code, out, err = run_cli("pcap", name, "--jsonl", "--no-progress")
        assert (code, err) == (0, "") and capture_record(out)["packets"] == len(frames)
    code, out, err = run_cli("pcap", "bad", "--jsonl", "--no-progress")
    assert code == 7 and said in err, err
    record = capture_record(out)
    assert record["packets"] == (0 if kind == "pcap" else 3) and record["tls_connections"] == 0
