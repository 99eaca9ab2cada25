"""QUIC handshakes in every version tshark decrypts, on captures built here (quicbuild):
v1, v2 (RFC 9369), drafts 22-34, mvfst, Google T050/T051; after a Retry and after a Version
Negotiation; ClientHellos over several packets and out-of-order CRYPTO frames; a greased
fixed bit. Each capture is read by tlsprobe and, where tshark is installed, by tshark."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile import tls as H
from tlsprobe.offline.analyzer import analyze
from tlsprobe.offline.quic import InitialKeys, initial_packets, version_salt

from tests.offline import quicbuild as Q

TSHARK = shutil.which("tshark")
GOOGLE = (Q.Q050, Q.T050, Q.T051)
TLS_VERSIONS = sorted(v for v in Q.VERSIONS if v != Q.Q050)


def reports(path: Path) -> list:  # type: ignore[type-arg]
    return [done.report for done in analyze(str(path)) if done.report.protocol == "quic"]


def tshark(path: Path) -> list[tuple[str, ...]]:
    """(quic.version, handshake type, SNI, key share groups, cipher) of each TLS message
    tshark reads in the capture's QUIC packets; [] without tshark (the comparison is then
    skipped, not the test)."""
    if TSHARK is None:
        return []
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-Y", "quic && tls.handshake", "-T", "fields",
         "-e", "quic.version", "-e", "tls.handshake.type",
         "-e", "tls.handshake.extensions_server_name",
         "-e", "tls.handshake.extensions_key_share_group", "-e", "tls.handshake.ciphersuite",
         "-e", "tls.handshake.extensions_alpn_str"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    return [tuple(line.split("\t")) for line in out.splitlines()]


def frames_for(version: int) -> "callable":  # type: ignore[valid-type]
    """CRYPTO frames as the version lays them out (Google's keep gQUIC type 0x08)."""
    if version in GOOGLE:
        return lambda offset, data: b"\x08" + Q.varint(offset) + Q.varint(len(data)) + data
    return Q.crypto


def handshake(version: int, **kw: object) -> tuple[list[bytes], object]:
    """A client Initial with a ClientHello and the server Initial with its ServerHello."""
    ch, chm = Q.client_hello(**kw)  # type: ignore[arg-type]
    sh = H.server_hello_13(ch)
    crypto = frames_for(version)
    d, c, s = Q.cid(), Q.cid(5), Q.cid()
    return [Q.datagram(Q.initial(version, d, c, 0, crypto(0, chm), pad_to=1160,
                                 keys=Q.initial_keys(version, d, "client"))),
            Q.datagram(Q.initial(version, c, s, 0, crypto(0, sh),
                                 keys=Q.initial_keys(version, d, "server")),
                       from_client=False)], ch


def check(path: Path, version: int, *, client_hellos: int = 1, tshark_hellos: int = 1) -> None:
    (r,) = reports(path)
    assert r.sni == "quic.example" and r.version.name == "TLS 1.3"
    assert r.cipher.iana_name == "TLS_AES_128_GCM_SHA256"
    assert r.key_exchange.group.name == "x25519" and r.offer.alpn == ("h3",)
    assert r.client_hellos == client_hellos
    if TSHARK:
        rows = tshark(path)
        hexv = f"0x{version:08x}"
        assert [row[:3] for row in rows if row[1] == "1"] == \
            [(hexv, "1", "quic.example")] * tshark_hellos
        (server,) = [row for row in rows if row[1] == "2"]
        assert server[0] == hexv and server[3] == "29" and server[4] == "0x1301"


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda v: f"0x{v:08x}")
def test_each_version_is_read_as_tshark_reads_it(version: int, tmp_path: Path) -> None:
    frames, _ = handshake(version)
    check(Q.write(tmp_path / "q.pcap", frames), version)


def test_salts_follow_the_drafts() -> None:
    """Drafts 33 and 34 already use v1's salt (draft-ietf-quic-tls-33 5.2); 29-32 the
    draft-29 one; mvfst's versions those of the drafts they follow; unknown: None."""
    assert version_salt(0xFF000021)[0] == version_salt(1)[0] == version_salt(0xFF000022)[0]
    assert version_salt(0xFF000020)[0].hex().startswith("afbfec28")
    assert version_salt(0xFACEB002)[0].hex().startswith("c3eef712")
    assert version_salt(0xFACEB001)[0].hex().startswith("7fbcdb0e")
    assert version_salt(0x6B3343CF) == (bytes.fromhex(Q.VERSIONS[Q.V2][0]), "quicv2")
    assert version_salt(0x1A2A3A4A) == version_salt(0xFAFAFAFA) == version_salt(0xFF00001D)
    for unknown in (0xFF000015, 0xFF000023, 0x51303430, 0x1A2A3A4B, 0):
        assert version_salt(unknown) is None


def unknown_initial(version: int, dcid: bytes, scid: bytes) -> bytes:
    """A client Initial (v1 layout, padded to 1200 bytes) labelled with another version."""
    ch, chm = Q.client_hello()
    packet = bytearray(Q.initial(Q.V1, dcid, scid, 0, Q.crypto(0, chm), pad_to=1200,
                                 keys=Q.initial_keys(Q.V1, dcid, "client")))
    packet[1:5] = version.to_bytes(4, "big")
    return bytes(packet)


def test_connections_of_an_unknown_version_are_said_not_read(run_cli, tmp_path: Path) -> None:
    """A QUIC connection in a version without public Initial keys cannot be read; the
    capture does not say "no TLS" silently: a note counts such connections and names them
    (exit 7). A client Initial counts once the server answers it (Version Negotiation to
    the client's CIDs, or a packet of that version) or it is sent again; a lone datagram of
    that shape (random bytes of another UDP protocol can take it), RTP (no fixed bit) and
    small long-header datagrams do not count."""
    version = 0x12345678
    answered, again, lone = (("10.1.0.1", 50000 + i) for i in range(3))
    d1, c1, d2, c2, d3 = Q.cid(), Q.cid(5), Q.cid(), Q.cid(0), Q.cid()
    vn = bytes([0x80]) + bytes(4) + bytes([len(c1)]) + c1 + bytes([len(d1)]) + d1 + \
        (1).to_bytes(4, "big")
    rtp = bytes([0x80, 0x60]) + bytes(range(256)) * 5
    small = bytes([0xC0]) + version.to_bytes(4, "big") + b"\x08" + bytes(8) + b"\x00" * 40
    frames = [Q.datagram(unknown_initial(version, d1, c1), client=answered),
              Q.datagram(vn, from_client=False, client=answered),
              Q.datagram(unknown_initial(version, d2, c2), client=again),
              Q.datagram(unknown_initial(version, d2, c2), client=again),
              Q.datagram(unknown_initial(version, d3, b""), client=lone),
              Q.datagram(rtp), Q.datagram(rtp), Q.datagram(small), Q.datagram(small)]
    path = Q.write(tmp_path / "unknown.pcap", frames)
    code, out, err = run_cli("pcap", "--no-progress", str(path))
    assert code == 7 and out.startswith("no TLS connections found")
    assert err == (f"tlsprobe: note: {path}: 2 QUIC connections in a version whose Initial "
                   "keys are not public, not read (first: 10.1.0.1:50000 -> 10.1.0.2:443 "
                   "(version 0x12345678), 10.1.0.1:50001 -> 10.1.0.2:443 (version "
                   "0x12345678))\n")
    # without the answers nothing is claimed
    path = Q.write(tmp_path / "lone.pcap", [frames[0], frames[4], frames[5], frames[7]])
    code, out, err = run_cli("pcap", "--no-progress", str(path))
    assert (code, err) == (0, "") and out.startswith("no TLS connections found")


# RFC 9369 A.3: the server's v2 Initial packet (DCID 8394c8f03e515708 of A.1)
V2_SERVER_INITIAL = bytes.fromhex(
    "dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698"
    "baeea26b91eb761d9b89237bbf87263017915358230035f7fd3945d88965cf17"
    "f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e42757507698075b2"
    "c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca8"
    "4bed8521e2e140")


def test_v2_keys_and_packet_of_rfc9369_appendix_a() -> None:
    keys = Q.initial_keys(Q.V2, bytes.fromhex("8394c8f03e515708"), "client")
    assert (keys.key.hex(), keys.iv.hex(), keys.hp.hex()) == (
        "8b1a0bc121284290a29e0971b5cd045d", "91f73e2351d8fa91660e909f",
        "45b95e15235d6f45a6b19cbcb0294ba9")
    (version, _, _, packet, pn_offset, end), = initial_packets(V2_SERVER_INITIAL)
    payload = InitialKeys(bytes.fromhex("8394c8f03e515708"), version, "server").open(
        packet, pn_offset, end)
    assert payload.startswith(bytes.fromhex("02000000000600405a020000560303eefce7f7"))


def test_client_hello_over_packets_and_crypto_frames_out_of_order(tmp_path: Path) -> None:
    """A ClientHello with a post-quantum share (1.2 kB) in three Initial packets, their
    CRYPTO frames sent last-first and one of them split in two, one repeated."""
    ch, chm = Q.client_hello(extra_share_groups=(0x11EC,))
    assert len(chm) > 1300
    sh = H.server_hello_13(ch)
    d, c, s = Q.cid(), Q.cid(), Q.cid()
    keys = Q.initial_keys(Q.V1, d, "client")
    cut = [0, 400, 450, 900, len(chm)]
    pieces = [Q.crypto(a, chm[a:b]) for a, b in zip(cut, cut[1:])]
    packets = [pieces[3], pieces[2] + pieces[0], pieces[1], pieces[1]]
    frames = [Q.datagram(Q.initial(Q.V1, d, c, pn, body, keys=keys, pad_to=1160))
              for pn, body in enumerate(packets)]
    frames.append(Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh),
                                       keys=Q.initial_keys(Q.V1, d, "server")),
                             from_client=False))
    path = Q.write(tmp_path / "spread.pcap", frames)
    (r,) = reports(path)
    assert r.sni == "quic.example" and r.key_exchange.group.name == "x25519"
    assert [g.name for g in r.offer.key_share_groups] == ["x25519", "X25519MLKEM768"]
    if TSHARK:
        assert [row[1:3] for row in tshark(path) if row[1] == "1"] == [("1", "quic.example")]


def test_client_initial_after_a_retry_uses_the_retry_scid(tmp_path: Path) -> None:
    """RFC 9000 17.2.5.2: after a Retry the client's Initial goes to the Retry's Source CID
    and its keys (and the server's) come from that CID, not the first DCID."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, r_cid, s = Q.cid(), Q.cid(), Q.cid(), Q.cid()
    token = b"retry-token-0123"
    frames = [
        Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                             keys=Q.initial_keys(Q.V1, d, "client"))),
        Q.datagram(Q.retry(d, c, r_cid, token), from_client=False),
        Q.datagram(Q.initial(Q.V1, r_cid, c, 1, Q.crypto(0, chm), pad_to=1160, token=token,
                             keys=Q.initial_keys(Q.V1, r_cid, "client"))),
        Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh),
                             keys=Q.initial_keys(Q.V1, r_cid, "server")), from_client=False)]
    # tshark decrypts the second ClientHello (frame 3) with the new keys but dissects its
    # CRYPTO data once ("reused stream offset"); the ServerHello opens only with them
    check(Q.write(tmp_path / "retry.pcap", frames), Q.V1, client_hellos=2, tshark_hellos=1)


def test_client_initial_after_version_negotiation(tmp_path: Path) -> None:
    """The client tries draft 29, the server answers Version Negotiation, the client
    starts over in v1 with the same DCID from the same port: the v1 handshake is read."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, s = Q.cid(), Q.cid(), Q.cid()
    draft29 = 0xFF00001D
    frames = [
        Q.datagram(Q.initial(draft29, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                             keys=Q.initial_keys(draft29, d, "client"))),
        Q.datagram(Q.version_negotiation(c, d, [Q.V1, 0x1A2A3A4A]), from_client=False),
        Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                             keys=Q.initial_keys(Q.V1, d, "client"))),
        Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh),
                             keys=Q.initial_keys(Q.V1, d, "server")), from_client=False)]
    path = Q.write(tmp_path / "vn.pcap", frames)
    (r,) = reports(path)
    assert r.client_hellos == 2 and r.key_exchange.group.name == "x25519"
    assert r.sni == "quic.example"
    if TSHARK:
        rows = tshark(path)
        # tshark takes the v1 ClientHello's CRYPTO data for a retransmission (same
        # offset) and shows it once, but opens the v1 ServerHello with the v1 keys
        assert [row[:2] for row in rows] == [("0xff00001d", "1"), ("0x00000001", "2")]


def test_greased_fixed_bit_is_still_quic(tmp_path: Path) -> None:
    """RFC 9287: a peer that received grease_quic_bit may send long headers with the fixed
    bit 0; the version says the packet is QUIC."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, s = Q.cid(), Q.cid(), Q.cid()
    frames = [
        Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160, fixed_bit=False,
                             keys=Q.initial_keys(Q.V1, d, "client"))),
        Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh), fixed_bit=False,
                             keys=Q.initial_keys(Q.V1, d, "server")), from_client=False)]
    path = Q.write(tmp_path / "grease.pcap", frames)
    (r,) = reports(path)
    assert r.sni == "quic.example" and r.key_exchange.group.name == "x25519"


def test_many_tiny_crypto_frames_in_reverse_cost_little() -> None:
    """A hostile peer's 20,000 one-byte CRYPTO ranges, last first: each is placed in
    O(log n), not by re-sorting everything waiting (which took minutes)."""
    import time

    from tlsprobe.offline.quic import CryptoStream as _Side
    side = _Side()
    data = bytes(range(256)) * 80
    start = time.process_time()
    out = b"".join(side.add(i, data[i:i + 1]) for i in range(len(data) - 1, -1, -1))
    assert out == data and time.process_time() - start < 2.0


def test_pcap_command_reports_each_version_as_tshark_does(run_cli, tmp_path: Path) -> None:
    """One capture, one handshake per version family on its own client port: `tlsprobe
    pcap --jsonl` gives each its SNI, TLS version, suite, group and offered ALPN, and tshark
    reads the same SNI and group on the same UDP conversation."""
    versions = [Q.V1, Q.V2, 0xFF00001D, 0xFF000022, 0xFF00001B, 0xFACEB002, Q.T051]
    frames: list[bytes] = []
    for i, version in enumerate(versions):
        client = ("10.1.0.1", 51000 + i)
        ch, chm = Q.client_hello(sni=f"v{i}.example", alpn=("h3", f"x{i}"))
        sh = H.server_hello_13(ch)
        crypto = frames_for(version)
        d, c, s = Q.cid(), Q.cid(), Q.cid()
        frames += [Q.datagram(Q.initial(version, d, c, 0, crypto(0, chm), pad_to=1160,
                                        keys=Q.initial_keys(version, d, "client")),
                              client=client),
                   Q.datagram(Q.initial(version, c, s, 0, crypto(0, sh),
                                        keys=Q.initial_keys(version, d, "server")),
                              from_client=False, client=client)]
    path = Q.write(tmp_path / "all.pcap", frames)
    code, out, err = run_cli("pcap", "--jsonl", "--no-progress", path)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    conns = {r["client_port"]: r for r in rows if r.get("protocol") == "quic"}
    assert sorted(conns) == [51000 + i for i in range(len(versions))]
    for i in range(len(versions)):
        r = conns[51000 + i]
        assert (r["sni"], r["version"]["name"], r["cipher"]["iana_name"],
                r["key_exchange"]["group"]["name"], r["offer"]["alpn"]) == \
            (f"v{i}.example", "TLS 1.3", "TLS_AES_128_GCM_SHA256", "x25519", ["h3", f"x{i}"])
    if TSHARK:
        out = subprocess.run(
            [TSHARK, "-r", str(path), "-Y", "tls.handshake.type == 1", "-T", "fields",
             "-e", "udp.srcport", "-e", "quic.version",
             "-e", "tls.handshake.extensions_server_name",
             "-e", "tls.handshake.extensions_alpn_str"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        seen = sorted(tuple(line.split("\t")) for line in out.splitlines())
        assert seen == [(str(51000 + i), f"0x{v:08x}", f"v{i}.example", f"h3,x{i}")
                        for i, v in enumerate(versions)]


def test_server_answering_in_v2_to_a_v1_client_initial(tmp_path: Path) -> None:
    """Compatible version negotiation (RFC 9368, RFC 9369 4): the client's first Initial is
    v1, the server's Initial already v2 with v2 keys from the same original DCID, and the
    client goes on in v2. The ServerHello is read with the v2 keys."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, s = Q.cid(), Q.cid(), Q.cid()
    frames = [
        Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                             keys=Q.initial_keys(Q.V1, d, "client"))),
        Q.datagram(Q.initial(Q.V2, c, s, 0, Q.crypto(0, sh),
                             keys=Q.initial_keys(Q.V2, d, "server")), from_client=False),
    ]
    path = Q.write(tmp_path / "cvn.pcap", frames)
    (r,) = reports(path)
    assert r.client_hellos == 1 and r.sni == "quic.example"
    assert r.key_exchange.group.name == "x25519"
    assert r.cipher.iana_name == "TLS_AES_128_GCM_SHA256"
    if TSHARK:
        assert [row[:2] for row in tshark(path)] == [("0x00000001", "1"), ("0x6b3343cf", "2")]


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(sorted(Q.VERSIONS)), first=st.integers(0x80, 0xFF),
       body=st.binary(max_size=300), cut=st.integers(0, 400))
def test_hostile_long_headers_never_raise(version: int, first: int, body: bytes,
                                          cut: int) -> None:
    """Any bytes after a long header of a known version, a real Initial cut anywhere or
    followed by junk: no exception leaves the tracker (truncated lengths, CIDs, varints,
    packets that do not decrypt)."""
    from tlsprobe.capture import Datagram
    from tlsprobe.offline.quic import QuicTracker
    d = b"\x11" * 8
    real = Q.initial(version, d, b"", 0, Q.crypto(0, b"\x01\x00\x00\x05hello"), pad_to=40,
                     keys=Q.initial_keys(version, d, "client"))
    tracker = QuicTracker("x")
    for data in (bytes([first]) + version.to_bytes(4, "big") + body, real[:cut],
                 real[:cut] + body):
        list(tracker.datagram(Datagram("10.0.0.1", 1, "10.0.0.2", 2, data, 1.0, 1)))
    list(tracker.finish())


def test_a_late_copy_of_the_initial_before_a_retry_is_no_new_connection(
        tmp_path: Path) -> None:
    """The client's first Initial (to the original DCID) retransmitted after the handshake
    that followed the Retry was reported: it belongs to that connection."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, r_cid, s = Q.cid(), Q.cid(), Q.cid(), Q.cid()
    first = Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                                 keys=Q.initial_keys(Q.V1, d, "client")))
    frames = [
        first, Q.datagram(Q.retry(d, c, r_cid, b"tok"), from_client=False),
        Q.datagram(Q.initial(Q.V1, r_cid, c, 1, Q.crypto(0, chm), pad_to=1160, token=b"tok",
                             keys=Q.initial_keys(Q.V1, r_cid, "client"))),
        Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh),
                             keys=Q.initial_keys(Q.V1, r_cid, "server")), from_client=False),
        first]
    (r,) = reports(Q.write(tmp_path / "late.pcap", frames))
    assert r.key_exchange.group.name == "x25519"


def test_google_q050_is_listed_as_quic_crypto_not_read(tmp_path: Path) -> None:
    """Q050's Initial packets open with its public salt but hold QUIC Crypto (CHLO), not
    TLS: the connection is listed with that reason, no TLS field is made up."""
    d, c = Q.cid(), Q.cid()
    hello = Q.chlo("gquic.example")
    gcrypto = b"\x08" + Q.varint(0) + Q.varint(len(hello)) + hello
    path = Q.write(tmp_path / "q050.pcap", [
        Q.datagram(Q.initial(Q.Q050, d, c, 0, gcrypto, pad_to=1160,
                             keys=Q.initial_keys(Q.Q050, d, "client")))])
    (r,) = reports(path)
    assert r.sni is None and r.offer is None and r.client_hellos == 0
    assert r.problems == ("Google QUIC Q050: the handshake is QUIC Crypto (CHLO), not TLS; "
                          "not read",)
    if TSHARK:
        out = subprocess.run([TSHARK, "-r", str(path), "-T", "fields", "-e", "quic.version",
                              "-e", "gquic.tag", "-e", "tls.handshake.type"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert out.split() == ["0x51303530", "CHLO"]


@pytest.mark.parametrize("version", [Q.T050, Q.T051], ids=["T050", "T051"])
def test_google_server_initial_with_an_ack_before_its_crypto(version: int,
                                                             tmp_path: Path) -> None:
    """A T05x server Initial as servers send it: a gQUIC ACK frame (4-byte largest acked,
    two ack blocks of 2 bytes, two timestamps) before the CRYPTO frame with the
    ServerHello."""
    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    crypto = frames_for(version)
    d, c, s = Q.cid(), Q.cid(), Q.cid()
    ack = bytes([0x40 | 0x20 | (2 << 2) | 1]) + (7).to_bytes(4, "big") + b"\x00\x10" + \
        b"\x01" + b"\x00\x03" + b"\x02" + b"\x00\x01" + b"\x02" + b"\x01" + \
        b"\x00\x00\x00\x10" + b"\x01" + b"\x00\x05"
    frames = [Q.datagram(Q.initial(version, d, c, 0, crypto(0, chm), pad_to=1160,
                                   keys=Q.initial_keys(version, d, "client"))),
              Q.datagram(Q.initial(version, c, s, 0, ack + b"\x07" + crypto(0, sh),
                                   keys=Q.initial_keys(version, d, "server")),
                         from_client=False)]
    check(Q.write(tmp_path / "ack.pcap", frames), version)


@settings(max_examples=500, deadline=None)
@given(version=st.sampled_from([Q.V1, Q.T051]), payload=st.binary(max_size=200))
def test_frame_walk_raises_only_value_error(version: int, payload: bytes) -> None:
    """Decrypted Initial payloads of any content (IETF and gQUIC frame layouts): CRYPTO
    ranges or ValueError, never IndexError."""
    from tlsprobe.offline.quic import crypto_frames
    try:
        for offset, data in crypto_frames(payload, version):
            assert offset >= 0 and len(data) <= len(payload)
    except ValueError:
        pass
