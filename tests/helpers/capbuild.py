"""Builders for real packet and capture-file bytes used by the capture tests.

Packets are built field by field (with valid IP/TCP/UDP checksums) so that the same bytes
are also accepted by tshark and scapy; files are written per the pcap and pcapng specs.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

FLAG_BITS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20}
TSHARK = shutil.which("tshark")


# -- reading a built capture back ----------------------------------------------------------
def pcap_jsonl(run_cli: Callable[..., tuple[int, str, str]], path: Path | str, *args: str
               ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]], str]:
    """`tlsprobe pcap --jsonl PATH`: exit code, connection records, capture records and
    stderr."""
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress", *args)
    lines = [json.loads(line) for line in out.splitlines()]
    return code, [d for d in lines if d["kind"] == "connection"], \
        [d for d in lines if d["kind"] == "capture"], err


def tshark_fields(path: Path, display_filter: str | None, *fields: str) -> list[str]:
    """tshark's `-T fields` values of the packets `display_filter` selects (all if None),
    split on white space; only where tshark is installed."""
    assert TSHARK is not None
    cmd = [TSHARK, "-r", str(path)] + (["-Y", display_filter] if display_filter else [])
    for name in fields:
        cmd += ["-e", name]
    return subprocess.run(cmd + ["-T", "fields"], capture_output=True, text=True, timeout=60,
                          check=True).stdout.split()


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _addr(ip: str) -> bytes:
    return ipaddress.ip_address(ip).packed


def tcp(sport: int, dport: int, seq: int, ack: int = 0, flags: str = "A", payload: bytes = b"",
        options: bytes = b"", src: str | None = None, dst: str | None = None) -> bytes:
    """TCP header + payload (checksum filled in when the addresses are given)."""
    options += b"\x00" * (-len(options) % 4)
    bits = 0
    for f in flags:
        bits |= FLAG_BITS[f]
    doff = (20 + len(options)) // 4
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      doff << 4, bits, 65535, 0, 0) + options
    seg = hdr + payload
    if src and dst:
        a, b = _addr(src), _addr(dst)
        pseudo = (a + b + struct.pack("!BBH", 0, 6, len(seg)) if len(a) == 4
                  else a + b + struct.pack("!IxxxB", len(seg), 6))
        seg = seg[:16] + struct.pack("!H", _csum(pseudo + seg)) + seg[18:]
    return seg


def udp(sport: int, dport: int, payload: bytes, length: int | None = None) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(payload) if length is None else length,
                       0) + payload


def ipv4(src: str, dst: str, proto: int, l4: bytes, *, ident: int = 1, frag_offset: int = 0,
         more_fragments: bool = False, options: bytes = b"", total: int | None = None,
         ttl: int = 64) -> bytes:
    options += b"\x00" * (-len(options) % 4)
    ihl = (20 + len(options)) // 4
    flags = (0x2000 if more_fragments else 0) | (frag_offset // 8)
    length = 4 * ihl + len(l4) if total is None else total
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, length, ident, flags, ttl, proto, 0,
                      _addr(src), _addr(dst)) + options
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    return hdr + l4


def ipv6(src: str, dst: str, nh: int, l4: bytes,
         ext: Sequence[tuple[int, bytes]] = ()) -> bytes:
    """IPv6 with extension headers: ext = [(header type, body)], bodies padded to 8n-2."""
    chain = b""
    types = [t for t, _ in ext] + [nh]
    for i, (t, body) in enumerate(ext):
        nxt = types[i + 1]
        if t == 44:  # fragment header: body is the 6 bytes after next-header/reserved
            chain += bytes([nxt, 0]) + body
        else:
            body += b"\x00" * (-(len(body) + 2) % 8)
            chain += bytes([nxt, (len(body) + 2) // 8 - 1]) + body
    first = types[0]
    payload = chain + l4
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), first, 64, _addr(src),
                       _addr(dst)) + payload


def ether(ip_packet: bytes, etype: int | None = None, vlans: Sequence[tuple[int, int]] = (),
          pad_to: int = 0) -> bytes:
    """Ethernet II; vlans = [(tpid, vid)] outermost first; etype guessed from the IP version."""
    if etype is None:
        etype = 0x86DD if ip_packet[0] >> 4 == 6 else 0x0800
    tags = b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in vlans)
    frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + tags + struct.pack("!H", etype)
    frame += ip_packet
    return frame + b"\x00" * max(0, pad_to - len(frame))


def sll(ip_packet: bytes, proto: int | None = None) -> bytes:
    proto = proto if proto is not None else (0x86DD if ip_packet[0] >> 4 == 6 else 0x0800)
    return struct.pack("!HHH8sH", 0, 1, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00", proto) + ip_packet


def sll2(ip_packet: bytes, proto: int | None = None) -> bytes:
    proto = proto if proto is not None else (0x86DD if ip_packet[0] >> 4 == 6 else 0x0800)
    return struct.pack("!HHIHBB8s", proto, 0, 2, 1, 0, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00") \
        + ip_packet


def null(ip_packet: bytes, af: int, big_endian: bool = False) -> bytes:
    return struct.pack(">I" if big_endian else "<I", af) + ip_packet


# -- a TCP conversation with sequence bookkeeping ---------------------------------------
class Conv:
    """Builds the IP packets of one TCP connection, tracking both sides' sequence numbers."""

    def __init__(self, client: tuple[str, int] = ("10.0.0.1", 40000),
                 server: tuple[str, int] = ("10.0.0.2", 443), cisn: int = 1000,
                 sisn: int = 5000) -> None:
        self.client, self.server = client, server
        self.cseq, self.sseq = cisn, sisn
        self.v6 = ":" in client[0]

    def _pkt(self, from_client: bool, seq: int, ack: int, flags: str, payload: bytes) -> bytes:
        (sip, sp), (dip, dp) = ((self.client, self.server) if from_client
                                else (self.server, self.client))
        seg = tcp(sp, dp, seq, ack, flags, payload, src=sip, dst=dip)
        return ipv6(sip, dip, 6, seg) if self.v6 else ipv4(sip, dip, 6, seg)

    def syn(self) -> bytes:
        p = self._pkt(True, self.cseq, 0, "S", b"")
        self.cseq += 1
        return p

    def synack(self) -> bytes:
        p = self._pkt(False, self.sseq, self.cseq, "SA", b"")
        self.sseq += 1
        return p

    def handshake(self) -> list[bytes]:
        return [self.syn(), self.synack(), self.ack()]

    def ack(self, from_client: bool = True) -> bytes:
        if from_client:
            return self._pkt(True, self.cseq, self.sseq, "A", b"")
        return self._pkt(False, self.sseq, self.cseq, "A", b"")

    def c(self, data: bytes, flags: str = "PA", seq: int | None = None) -> bytes:
        """Client data; advances the client sequence unless an explicit seq is given."""
        if seq is not None:
            return self._pkt(True, seq, self.sseq, flags, data)
        p = self._pkt(True, self.cseq, self.sseq, flags, data)
        self.cseq += len(data) + (1 if "F" in flags else 0)
        return p

    def s(self, data: bytes, flags: str = "PA", seq: int | None = None) -> bytes:
        if seq is not None:
            return self._pkt(False, seq, self.cseq, flags, data)
        p = self._pkt(False, self.sseq, self.cseq, flags, data)
        self.sseq += len(data) + (1 if "F" in flags else 0)
        return p


# -- files ------------------------------------------------------------------------------
def pcap_bytes(frames: Iterable[bytes | tuple[float, bytes] | tuple[float, bytes, int]],
               linktype: int = 1, *, big_endian: bool = False, nanos: bool = False,
               snaplen: int = 262144, modified: bool = False) -> bytes:
    """A classic pcap file. Frames: data, (ts, data) or (ts, data, original length)."""
    o = ">" if big_endian else "<"
    magic = 0xA1B2CD34 if modified else (0xA1B23C4D if nanos else 0xA1B2C3D4)
    out = [struct.pack(o + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for i, f in enumerate(frames):
        ts, data, orig = (1000.0 + i, f, len(f)) if isinstance(f, bytes) else \
            (f[0], f[1], f[2] if len(f) > 2 else len(f[1]))  # type: ignore[misc]
        sec = int(ts)
        frac = round((ts - sec) * (1e9 if nanos else 1e6))
        out.append(struct.pack(o + "IIII", sec, frac, len(data), orig))
        if modified:
            out.append(struct.pack(o + "iHBx", 1, 0x0800, 0))
        out.append(data)
    return b"".join(out)


def _block(o: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(o + "II", btype, n) + body + struct.pack(o + "I", n)


def _opts(o: str, opts: Sequence[tuple[int, bytes]]) -> bytes:
    if not opts:
        return b""
    out = b""
    for code, value in opts:
        out += struct.pack(o + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)
    return out + struct.pack(o + "HH", 0, 0)


class Pcapng:
    """Accumulates pcapng blocks; one byte order per section."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.o = "<"

    def shb(self, big_endian: bool = False, version: tuple[int, int] = (1, 0)) -> Pcapng:
        self.o = ">" if big_endian else "<"
        self.parts.append(_block(self.o, 0x0A0D0D0A,
                                 struct.pack(self.o + "IHHq", 0x1A2B3C4D, *version, -1)))
        return self

    def idb(self, linktype: int, snaplen: int = 0, tsresol: int | None = None,
            tsoffset: int | None = None) -> Pcapng:
        opts: list[tuple[int, bytes]] = [(2, b"if0")]
        if tsresol is not None:
            opts.append((9, bytes([tsresol])))
        if tsoffset is not None:
            opts.append((14, struct.pack(self.o + "q", tsoffset)))
        self.parts.append(_block(self.o, 1, struct.pack(self.o + "HHI", linktype, 0, snaplen)
                                 + _opts(self.o, opts)))
        return self

    def epb(self, ifid: int, ts_units: int, data: bytes, orig: int | None = None) -> Pcapng:
        body = struct.pack(self.o + "IIIII", ifid, ts_units >> 32, ts_units & 0xFFFFFFFF,
                           len(data), len(data) if orig is None else orig) + data
        body += b"\x00" * (-len(body) % 4) + _opts(self.o, [(1, b"comment")])
        self.parts.append(_block(self.o, 6, body))
        return self

    def spb(self, data: bytes) -> Pcapng:
        self.parts.append(_block(self.o, 3, struct.pack(self.o + "I", len(data)) + data))
        return self

    def pb(self, ifid: int, ts_units: int, data: bytes) -> Pcapng:
        self.parts.append(_block(self.o, 2, struct.pack(
            self.o + "HHIIII", ifid, 0, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data),
            len(data)) + data))
        return self

    def dsb(self, secrets_type: int, data: bytes) -> Pcapng:
        self.parts.append(_block(self.o, 0x0A, struct.pack(self.o + "II", secrets_type,
                                                           len(data)) + data))
        return self

    def raw_block(self, btype: int, body: bytes) -> Pcapng:
        self.parts.append(_block(self.o, btype, body))
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


# -- reading back -----------------------------------------------------------------------
def collect(source: object, **kw: object) -> tuple[list, object]:
    """All events of a capture and the stream object (for stats/secrets)."""
    from tlsprobe.capture import iter_stream_events
    stream = iter_stream_events(source, **kw)  # type: ignore[arg-type]
    return list(stream), stream


class Streams(dict):
    """conn id -> {"key", "data": [c2s, s2c], "gaps": [[...], [...]], "close", "events"}."""


def streams(events: list) -> Streams:
    from tlsprobe.capture import StreamClose, StreamData, StreamGap, StreamOpen
    out = Streams()
    for ev in events:
        if isinstance(ev, StreamOpen):
            out[ev.conn.id] = {"key": ev.conn, "data": [b"", b""], "gaps": [[], []],
                               "close": None, "pieces": [[], []]}
        elif isinstance(ev, StreamData):
            st = out[ev.conn.id]
            st["data"][ev.direction] += ev.data
            st["pieces"][ev.direction].append(ev.data)
            st["key"] = ev.conn
        elif isinstance(ev, StreamGap):
            st = out[ev.conn.id]
            st["gaps"][ev.direction].append((len(st["data"][ev.direction]), ev.size))
        elif isinstance(ev, StreamClose):
            out[ev.conn.id]["close"] = ev.reason
            out[ev.conn.id]["key"] = ev.conn
    return out


def netmon_bytes(frames: Sequence[bytes | tuple[int, bytes]], *, minor: int = 3,
                 network: int = 1, gap: int = 8) -> bytes:
    """A Network Monitor 2.x file. Frames: data, or (per-frame network type, data) for 2.1+;
    `gap` filler bytes between header and first frame (real files have some)."""
    body = b"\x00" * gap
    offsets = []
    for i, f in enumerate(frames):
        net, data = (network, f) if isinstance(f, bytes) else f
        offsets.append(64 + len(body))
        body += struct.pack("<QII", i * 1_500_000, len(data), len(data)) + data
        if minor >= 1:
            body += struct.pack("<H", net)
        if minor >= 2:
            body += b"\x00" * 4
        if minor >= 3:
            body += b"\x00" * 9
    table = struct.pack(f"<{len(offsets)}I", *offsets)
    header = b"GMBU" + struct.pack("<BBH8HII", minor, 2, network, 2024, 1, 1, 2, 3, 4, 5, 250,
                                   64 + len(body), len(table))
    return header + b"\x00" * (64 - len(header)) + body + table


# -- a real handshake replayed ------------------------------------------------------------
def real_chunks(name: str = "tls12_x25519.pcap") -> list[tuple[int, bytes]]:
    """(direction, bytes) of the first connection of one of the project's own captures
    (captures/, recorded on loopback), in order."""
    from pathlib import Path

    from tlsprobe.capture import StreamData, iter_stream_events
    path = Path(__file__).resolve().parents[2] / "captures" / name
    return [(ev.direction, ev.data) for ev in iter_stream_events(str(path))
            if isinstance(ev, StreamData) and ev.conn.id == 0]


def dtls_client_hello() -> bytes:
    """A DTLS 1.2 record holding the real TLS ClientHello (real_chunks) made DTLS: DTLS
    record and handshake headers, an empty cookie."""
    hello = real_chunks()[0][1][5:]  # the TLS ClientHello message
    body = hello[4:]
    sid_end = 35 + body[34]
    dtls_body = b"\xfe\xfd" + body[2:sid_end] + b"\x00" + body[sid_end:]
    msg = bytes([1]) + len(dtls_body).to_bytes(3, "big") + b"\x00\x00" + b"\x00\x00\x00" + \
        len(dtls_body).to_bytes(3, "big") + dtls_body
    return b"\x16\xfe\xff" + b"\x00\x00" + b"\x00" * 6 + len(msg).to_bytes(2, "big") + msg


def dtls_server_hello() -> bytes:
    """A DTLS 1.2 record holding the real TLS ServerHello (real_chunks) made DTLS."""
    hello = records(real_chunks()[1][1])[0][5:]  # the server flight's first message
    assert hello[0] == 2
    dtls_body = b"\xfe\xfd" + hello[6:]
    msg = bytes([2]) + len(dtls_body).to_bytes(3, "big") + b"\x00\x00" + b"\x00\x00\x00" + \
        len(dtls_body).to_bytes(3, "big") + dtls_body
    return b"\x16\xfe\xfd" + b"\x00\x00" + b"\x00" * 6 + len(msg).to_bytes(2, "big") + msg


def records(data: bytes) -> list[bytes]:
    """The TLS records of a chunk, each whole."""
    out, p = [], 0
    while p + 5 <= len(data):
        end = p + 5 + int.from_bytes(data[p + 3:p + 5], "big")
        out.append(data[p:end])
        p = end
    return out


# -- OpenVPN control channel --------------------------------------------------------------
class OpenVpn:
    """OpenVPN packets of one session (both sides), carrying TLS bytes in P_CONTROL_V1
    packets as OpenVPN 2.x sends them: hard resets V2, control packets acknowledging the
    peer's last one, `hmac` bytes of tls-auth HMAC (0: none) with replay id and time."""

    def __init__(self, hmac: int = 0, hmac_first: int = 0) -> None:
        self.hmac = hmac
        self.hmac_first = hmac_first  # first HMAC byte (8 reads as an ack count of 8)
        self.sid = (b"\x11" * 8, b"\x22" * 8)
        self.msg_pid = [0, 0]
        self.replay = [1, 1]
        self.last_seen: list[int | None] = [None, None]  # the peer's last message id

    def _auth(self, side: int) -> bytes:
        if not self.hmac:
            return b""
        self.replay[side] += 1
        return bytes([self.hmac_first]) + bytes(range(1, self.hmac)) + \
            struct.pack("!II", self.replay[side], 1700000000)

    def _acks(self, side: int) -> bytes:
        seen = self.last_seen[side]
        if seen is None:
            return b"\x00"
        return b"\x01" + struct.pack("!I", seen) + self.sid[1 - side]

    def _control(self, side: int, opcode: int, payload: bytes) -> bytes:
        pid = self.msg_pid[side]
        self.msg_pid[side] += 1
        self.last_seen[1 - side] = pid
        return bytes([opcode << 3]) + self.sid[side] + self._auth(side) + self._acks(side) + \
            struct.pack("!I", pid) + payload

    def reset(self, side: int) -> bytes:
        return self._control(side, 7 if side == 0 else 8, b"")

    def control(self, side: int, tls: bytes, size: int = 1100) -> list[bytes]:
        return [self._control(side, 4, tls[o:o + size]) for o in range(0, len(tls), size)]

    def ack(self, side: int) -> bytes:
        return bytes([5 << 3]) + self.sid[side] + self._auth(side) + self._acks(side)

    def data(self, side: int) -> bytes:
        return bytes([9 << 3, 0, 0, 1]) + b"\x00\x00\x00\x01" + b"\xee" * 40


def tcp_framed(packet: bytes) -> bytes:
    """An OpenVPN packet as sent over TCP: with its 2-byte length."""
    return struct.pack("!H", len(packet)) + packet


# -- RDP over UDP ---------------------------------------------------------------------------
class RdpUdp:
    """Packets of one RDP-over-UDP session as MS-RDPEUDP (version 1: big-endian headers) and
    MS-RDPEUDP2 (after a SYN exchange agreeing on version 0x0101: little-endian headers,
    bytes 0 and 7 swapped on the wire) send them. `version`: what the SYNs offer (0x0101
    switches to RDPEUDP2); `lossy`: a SYNLOSSY session (DTLS instead of TLS)."""

    def __init__(self, version: int = 0x0101, lossy: bool = False) -> None:
        self.version = version
        self.lossy = lossy
        self.isn = (0x1000, 0x7000)

    def _syn(self, side: int) -> bytes:
        flags = 0x0001 | 0x1000 | (0x0800 if side == 0 else 0x0004) | \
            (0x0200 if self.lossy else 0)
        ack = 0xFFFFFFFF if side == 0 else self.isn[0]
        out = struct.pack("!IHH", ack, 64, flags) + struct.pack("!IHH", self.isn[side], 1232,
                                                                 1232)
        if side == 0:
            out += bytes(range(16)) + bytes(16)  # correlation id, reserved
        out += struct.pack("!HH", 1, self.version)
        if self.version == 0x0101:
            out += bytes(range(32))  # cookie hash
        return out + bytes(1232 - len(out))

    def syn(self) -> bytes:
        return self._syn(0)

    def synack(self) -> bytes:
        return self._syn(1)

    def v1_data(self, side: int, seq: int, payload: bytes, *, acks: int = 2,
                fec: bool = False, aoa: bool = False) -> bytes:
        """A version 1 data packet: ACK vector of `acks` elements, FEC and ack-of-acks
        headers as asked, then the source payload header (snCoded = `seq`)."""
        flags = 0x0008 | (0x0004 if acks else 0) | (0x0010 if fec else 0) | \
            (0x0100 if aoa else 0)
        out = struct.pack("!IHH", self.isn[1 - side] + 1, 64, flags)
        if acks:  # the ack vector header, padded to a 4-byte boundary
            out += struct.pack("!H", acks) + b"\x40" * acks + bytes(-(2 + acks) % 4)
        if fec:
            out += struct.pack("!IIBBH", seq, seq, 1, 0, 0)[:10]
        if aoa:
            out += struct.pack("!I", self.isn[side])
        return out + struct.pack("!II", seq, seq) + payload

    @staticmethod
    def _swap(packet: bytes) -> bytes:
        b = bytearray(packet)
        b[0], b[7] = packet[7], packet[0]
        return bytes(b)

    def v2(self, seq: int, payload: bytes | None, *, ack: int = -1, overhead: bool = False,
           delay_ack: bool = False, aoa: bool = False, ackvec: int = -1,
           ackvec_ts: bool = False, dummy: bool = False) -> bytes:
        """An RDPEUDP2 packet: `payload` (None: no data) in channel sequence `seq`; `ack`:
        an ACK payload with that many delayed acks (-1: none); `ackvec`: an ack vector of
        that many coded bytes (-1: none); `dummy`: a padding packet (MTU probe)."""
        flags = (0x001 if ack >= 0 else 0) | (0x004 if payload is not None or dummy else 0) | \
            (0x008 if ackvec >= 0 else 0) | (0x010 if aoa else 0) | \
            (0x040 if overhead else 0) | (0x100 if delay_ack else 0)
        out = bytes([0xF0 if dummy else 0xE0]) + struct.pack("<H", flags | 0xC000)
        if ack >= 0:
            out += struct.pack("<H", 100) + b"\x01\x02\x03" + b"\x05" + bytes([ack]) + \
                b"\x07" * ack
        if overhead:
            out += b"\x0a"
        if delay_ack:
            out += b"\x01\xf4\x01"
        if aoa:
            out += struct.pack("<H", 99)
        if payload is not None or dummy:
            out += struct.pack("<H", (0x200 + seq) & 0xFFFF)  # the data sequence number
        if ackvec >= 0:
            out += struct.pack("<H", 50) + bytes([ackvec | (0x80 if ackvec_ts else 0)])
            out += b"\x01\x02\x03\x04" if ackvec_ts else b""
            out += b"\xc3" * ackvec
        if dummy:
            return self._swap(out + bytes(1000))
        if payload is not None:
            out += struct.pack("<H", seq & 0xFFFF) + payload
        return self._swap(out)


# -- a TLS 1.2 first flight of chosen bytes -------------------------------------------------
def _vec16(data: bytes) -> bytes:
    return len(data).to_bytes(2, "big") + data


def _handshake_record(msg_type: int, body: bytes, version: bytes = b"\x03\x03") -> bytes:
    msg = bytes([msg_type]) + len(body).to_bytes(3, "big") + body
    return b"\x16" + version + _vec16(msg)


def tls12_flight_pcap(ders: Sequence[bytes], sni: bytes = b"server.example") -> bytes:
    """A pcap of one TCP connection: a TLS 1.2 ClientHello offering `sni`, then the
    server's ServerHello, Certificate of the DER blobs `ders` (any bytes) and
    ServerHelloDone, so that a test chooses exactly what the certificate holds."""
    sni_ext = b"\x00\x00" + _vec16(_vec16(b"\x00" + _vec16(sni)))
    hello = b"\x03\x03" + b"\x11" * 32 + b"\x00" + _vec16(b"\xc0\x2b") + b"\x01\x00" + \
        _vec16(sni_ext + b"\x00\x0a\x00\x04\x00\x02\x00\x17")
    server = b"\x03\x03" + b"\x22" * 32 + b"\x00" + b"\xc0\x2b\x00" + \
        _vec16(b"\xff\x01\x00\x01\x00")
    chain = b"".join(len(d).to_bytes(3, "big") + d for d in ders)
    conv = Conv()
    frames = conv.handshake() + [
        conv.c(_handshake_record(1, hello, b"\x03\x01")),
        conv.s(_handshake_record(2, server) + _handshake_record(11, len(chain).to_bytes(3, "big")
                                                                + chain) +
               _handshake_record(14, b""))]
    return pcap_bytes(ether(f) for f in frames)


def tls12_abbreviated_pcap(client_sid: bytes, server_sid: bytes,
                           ticket: bytes | None = None) -> bytes:
    """A pcap of one TCP connection whose TLS 1.2 server goes from its ServerHello straight
    to ChangeCipherSpec and an encrypted Finished (an abbreviated handshake's shape): the
    ClientHello with session ID `client_sid` and, unless None, a session_ticket extension
    carrying `ticket`; the ServerHello echoing `server_sid`; then the client's CCS and
    Finished."""
    ext = b"\x00\x0a\x00\x04\x00\x02\x00\x17" + \
        (b"\x00\x23" + _vec16(ticket) if ticket is not None else b"")
    hello = b"\x03\x03" + b"\x11" * 32 + bytes([len(client_sid)]) + client_sid + \
        _vec16(b"\xc0\x2b") + b"\x01\x00" + _vec16(ext)
    server = b"\x03\x03" + b"\x22" * 32 + bytes([len(server_sid)]) + server_sid + \
        b"\xc0\x2b\x00" + _vec16(b"\xff\x01\x00\x01\x00")
    ccs, finished = b"\x14\x03\x03\x00\x01\x01", b"\x16\x03\x03" + _vec16(b"\x5a" * 40)
    conv = Conv()
    frames = conv.handshake() + [
        conv.c(_handshake_record(1, hello, b"\x03\x01")),
        conv.s(_handshake_record(2, server) + ccs + finished),
        conv.c(ccs + finished)]
    return pcap_bytes(ether(f) for f in frames)
