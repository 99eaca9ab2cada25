"""Third-party captures (../shared/captures): every TLS-over-TCP handshake of the small
files is run through RecordReader, HandshakeReassembler and decode_handshake, and the
decoded hellos and key exchange messages are compared with tshark's ground truth.

The TCP bytes come from the project's own reassembly (tlsprobe.capture), read up to the
first hole of each direction; bytes before the TLS (STARTTLS, proxy and database preambles)
are skipped by finding the hello's random, which the truth gives. A stream that still
cannot be checked must be listed in NOT_CHECKABLE with its reason: a new one fails the
test, and so does a listed one that becomes checkable. Captures without TLS over TCP
(QUIC, DTLS, EAP-TLS) are checked by tests/offline and tests/offline/test_pcap_corpus.py.
"""

from __future__ import annotations

import csv
import ipaddress
import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from tests.helpers.shared_data import captures_dir, shared_missing

from tlsprobe.capture import StreamData, StreamGap, StreamOpen, iter_stream_events
from tlsprobe.registry import cipher_suite
from tlsprobe.wire import (
    ClientHello,
    DecodeError,
    HandshakeReassembler,
    ParseContext,
    Record,
    RecordReader,
    ServerHello,
    SSLv2ClientHello,
    decode_handshake,
    looks_like_tls,
)

from .helpers import check_annotations

_REPO = Path(__file__).resolve().parents[2]
CAPTURES = captures_dir()
MAX_SIZE = 250_000  # the small files: ~120 captures, a few seconds
_OPENVPN = "TLS inside OpenVPN control packets: the TCP bytes are not a TLS stream"
# (file, tshark tcp.stream) -> why its handshake cannot be checked from the bytes before
# the first hole of the capture
NOT_CHECKABLE: dict[tuple[str, int], str] = {
    ("wireshark/wiki/SampleCaptures/OpenVPN_TCP_tls-auth.pcapng", 0): _OPENVPN,
    ("wireshark/wiki/SampleCaptures/OpenVPN_TCP_tls-auth.pcapng", 1): _OPENVPN,
}

_QUIC = "QUIC: the hellos are in protected Initial packets (compared by test_pcap_corpus.py)"
_DTLS = "DTLS: records in UDP datagrams, no TCP stream (compared by test_pcap_corpus.py)"
# Small corpus files with handshakes but none of them TLS over TCP: not read here, and why
NO_TLS_OVER_TCP: dict[str, str] = {
    "wireshark/test-captures/snakeoil-dtls.pcap": _DTLS,
    "wireshark/wiki/SampleCaptures/ThreadCommissioning-JPAKE-DTLS-1.pcapng": _DTLS,
    "wireshark/wiki/SampleCaptures/ThreadCommissioning-JPAKE-DTLS-2.pcapng": _DTLS,
    "wireshark/wiki/SampleCaptures/snakeoil-dtls.pcap": _DTLS,
    "ja4/pcap/dtls-udp.notest.cap": _DTLS,
    "wireshark/wiki/HowToDecrypt802.11/wpa-eap-tls.pcap.gz":
        "EAP-TLS in EAPOL frames over 802.11, no IP (not unwrapped: docs/PCAP_PARITY.md)",
    "wireshark/wiki/SampleCaptures/OpenVPN_UDP_tls-auth.pcapng":
        "TLS inside OpenVPN control packets over UDP (compared by test_pcap_corpus.py)",
    "ja4/pcap/quic-tls-handshake.pcapng": _QUIC,
    "ja4/pcap/quic-with-several-tls-frames.pcapng": _QUIC,
    "suricata-verify/tests/ja4-quic/input.pcap": _QUIC,
    "suricata-verify/tests/quic-ack3/input.pcap": _QUIC,
    "suricata-verify/tests/quic-frag/input.pcap": _QUIC,
    "suricata-verify/tests/quic-frag-middle-gap/input.pcap": _QUIC,
    "suricata-verify/tests/quic-frag-unordered/input.pcap": _QUIC,
    "suricata-verify/tests/quic-frag-wait/input.pcap": _QUIC,
    "suricata-verify/tests/quic-ietf/input.pcap": _QUIC,
    "suricata-verify/tests/quic-ietf-ja3/input.pcap": _QUIC,
    "suricata-verify/tests/quic-initial-not-first/input.pcap": _QUIC,
    "suricata-verify/tests/quic-retry/input.pcap": _QUIC,
    "suricata-verify/tests/quic-retry-multiple/input.pcap": _QUIC,
    "suricata-verify/tests/quic-v2/input.pcap": _QUIC,
    "suricata-verify/tests/quic-v2-ja3/input.pcap": _QUIC,
}


def _small_files() -> list[str]:
    rows = list(csv.DictReader((CAPTURES / "files.tsv").open(), delimiter="\t"))
    return [r["local_path"] for r in rows if r["kind"] == "capture"
            and int(r["handshake_streams"] or 0) > 0 and int(r["size"]) <= MAX_SIZE]


def _files() -> list[Any]:
    table = CAPTURES / "files.tsv"
    if not table.is_file():
        return [pytest.param(None, id="no-corpus")]   # the test fails, naming the path
    return [path for path in _small_files() if _tls_over_tcp(_truth(path))]


def _tls_over_tcp(truth: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in truth["streams"] if s["transport"] == "tcp" and s["protocol"] == "tls"]


def _truth(path: str) -> dict[str, Any]:
    name = "__".join(Path(path).parts).replace("/", "__")
    rows = csv.DictReader((CAPTURES / "files.tsv").open(), delimiter="\t")
    truth = next(r["truth_file"] for r in rows if r["local_path"] == path)
    return json.loads((CAPTURES / "truth" / (truth or name + ".json")).read_text())


def _endpoint(text: str) -> str:
    host, port = text.rsplit(":", 1)
    return f"{ipaddress.ip_address(host.strip('[]')).compressed}:{port}"


class Connection(NamedTuple):
    """One TCP connection as tlsprobe.capture reassembles it: endpoints and, per direction
    (0 client -> server, 1 server -> client), the bytes before the first hole."""

    client: str
    server: str
    data: tuple[bytes, bytes]
    hole: tuple[bool, bool]


def _tcp_connections(path: Path) -> list[Connection]:
    keys: dict[int, Any] = {}
    data: dict[int, tuple[bytearray, bytearray]] = {}
    hole: dict[int, list[bool]] = {}
    for ev in iter_stream_events(str(path)):
        if isinstance(ev, StreamOpen):
            keys[ev.conn.id], data[ev.conn.id] = ev.conn, (bytearray(), bytearray())
            hole[ev.conn.id] = [False, False]
        elif isinstance(ev, StreamData):
            keys[ev.conn.id] = ev.conn
            if not hole[ev.conn.id][ev.direction]:
                data[ev.conn.id][ev.direction].extend(ev.data)
        elif isinstance(ev, StreamGap):
            hole[ev.conn.id][ev.direction] = True
    return [Connection(_endpoint(k.client), _endpoint(k.server),
                       (bytes(data[i][0]), bytes(data[i][1])), (hole[i][0], hole[i][1]))
            for i, k in keys.items()]


def _tls_start(data: bytes, random: str | None, preamble: bool) -> int | None:
    """Where the TLS of one direction starts: at 0, or after a preamble at the record that
    carries the hello with this random (5 + 4 + 2 bytes before the random)."""
    if not preamble:
        return 0
    at = data.find(bytes.fromhex(random)) if random else -1
    return at - 11 if at >= 11 else None


def _directions(stream: dict[str, Any], conns: list[Connection]
                ) -> tuple[bytes, bytes, bool] | None:
    """The client's and the server's TLS bytes of a truth stream, and whether a hole cut
    them; None when the connection is not there."""
    client, server = _endpoint(stream["client"]), _endpoint(stream["server"])
    preamble = "payload_before_client_hello" in stream["flags"]
    c_random = (stream["client_hello"] or {}).get("random")
    s_random = (stream["server_hellos"] or [{}])[0].get("random")
    found = []
    for conn in conns:
        if {conn.client, conn.server} != {client, server}:
            continue
        c, s = (0, 1) if conn.client == client else (1, 0)
        c_at = _tls_start(conn.data[c], c_random, preamble)
        s_at = _tls_start(conn.data[s], s_random, preamble)
        found.append((conn.data[c][c_at:] if c_at is not None else b"",
                      conn.data[s][s_at:] if s_at is not None else b"",
                      conn.hole[c] or conn.hole[s]))
    with_hello = [f for f in found if c_random and bytes.fromhex(c_random) in f[0]]
    return (with_hello or found)[0] if found else None


def _handshake_messages(data: bytes, tls13: bool) -> list[bytes | SSLv2ClientHello]:
    """Clear-text handshake messages of one direction: up to the ChangeCipherSpec before
    TLS 1.2's encrypted Finished, or the first application_data record in TLS 1.3 (whose
    middlebox-compatibility CCS records are skipped)."""
    reasm, out = HandshakeReassembler(), []
    for item in RecordReader().feed(data):
        if isinstance(item, SSLv2ClientHello):
            out.append(item)
            continue
        assert isinstance(item, Record)
        if item.content_type == 20 and tls13:
            continue
        if item.content_type != 22:
            break
        out += reasm.feed(item.fragment)
    return out


def _hex(values: list[int], width: int = 4) -> list[str]:
    return [f"0x{v:0{width}x}" for v in values]


def _check_client_hello(first: bytes | SSLv2ClientHello, truth: dict[str, Any]) -> None:
    if truth["sslv2_format"]:
        assert isinstance(first, SSLv2ClientHello)
        assert _hex(first.cipher_specs, 6) == truth["sslv2_cipher_specs"]
        assert f"0x{first.version:04x}" == truth["legacy_version"]
        return
    assert isinstance(first, bytes)
    decoded = decode_handshake(first, annotate=True)
    ch: ClientHello = decoded.message
    check_annotations(first, decoded.annotations)
    assert ch.to_bytes() == first
    assert f"0x{ch.legacy_version:04x}" == truth["legacy_version"]
    assert _hex(ch.cipher_suites) == truth["cipher_suites"]
    assert _hex([e.type for e in ch.extensions]) == truth["extensions"]
    assert _hex(ch.supported_groups) == (truth["supported_groups"] or [])
    shares = ch.extension(51).decode() if ch.extension(51) else []  # tshark: type 51 only
    assert [{"group": f"0x{k.group:04x}", "key_exchange_length": len(k.key_exchange)}
            for k in shares] == (truth["key_share"] or [])
    assert _hex(ch.supported_versions) == (truth["supported_versions"] or [])
    assert _hex(ch.signature_algorithms) == (truth["signature_algorithms"] or [])
    assert ch.server_name == truth["sni"]
    assert list(ch.legacy_compression_methods) == truth["compression_methods"]


def _check_stream(stream: dict[str, Any], conns: list[Connection]) -> str | None:
    """Compare one handshake with the truth; the reason when it cannot be checked here."""
    if "openvpn" in stream["link_and_stack"]:
        return _OPENVPN
    found = _directions(stream, conns)
    if found is None:
        return "connection not found"
    c_bytes, s_bytes, cut = found
    if stream["client_hello"] and looks_like_tls(c_bytes) is not True:
        return "ClientHello not found" + (" before a hole" if cut else "")
    s_truth = stream["server_hello"]
    version = int(stream["negotiated"].get("version") or "0", 16)
    tls13 = version == 0x0304 or version & 0xFF00 == 0x7F00
    c_msgs = _handshake_messages(c_bytes, tls13) if stream["client_hello"] else []
    if stream["client_hello"]:
        if not c_msgs:
            return "ClientHello cut by a hole" if cut else "ClientHello incomplete"
        _check_client_hello(c_msgs[0], stream["client_hello"])
    if not s_truth:
        return None
    if s_bytes[:1] and s_bytes[0] & 0x80:  # an SSLv2 server: not spoken here, said clearly
        with pytest.raises(DecodeError, match="SSLv2 record with msg_type 4"):
            RecordReader().feed(s_bytes)
        return None
    s_msgs = _handshake_messages(s_bytes, tls13)
    hellos = [decode_handshake(m).message for m in s_msgs if m[0] == 2]
    final = [h for h in hellos if not h.is_hello_retry_request]
    if not final:
        return "ServerHello cut by a hole" if cut else "ServerHello not found"
    sh: ServerHello = final[-1]
    if sh.legacy_version == 0x0304:  # draft <= 15 layout, which tshark 4.0 misreads
        return None
    assert f"0x{sh.cipher_suite:04x}" == s_truth["cipher_suite"]
    assert _hex([e.type for e in sh.extensions]) == s_truth["extensions"]
    share = sh.key_share if sh.extension(51) else None  # tshark: type 51 only
    assert (f"0x{share[0]:04x}" if share else None) == s_truth["key_share_group"]
    assert (len(share[1]) if share else None) == s_truth["key_share_length"]
    hrr = [h.hrr_selected_group for h in hellos if h.is_hello_retry_request and h.extension(51)]
    assert [f"0x{g:04x}" if g else None for g in hrr] == [
        h["hrr_selected_group"] for h in stream["server_hellos"]
        if h["hello_retry_request"] and "0x0033" in h["extensions"]]
    row = cipher_suite(sh.cipher_suite)
    ctx = ParseContext(sh.selected_version, sh.cipher_suite, row.kx if row else None)
    for sender, msgs in (("server", s_msgs), ("client", c_msgs)):
        for raw in msgs:
            if isinstance(raw, bytes):
                decoded = decode_handshake(raw, ctx, annotate=True)
                assert decoded.message.to_bytes() == raw, (sender, raw[0])
                check_annotations(raw, decoded.annotations)
    _check_key_exchange(stream, s_msgs, c_msgs, ctx)
    return None


def _check_key_exchange(stream: dict[str, Any], s_msgs: list[Any], c_msgs: list[Any],
                        ctx: ParseContext) -> None:
    ske_truth, cke_truth = stream["server_key_exchange"], stream["client_key_exchange"]
    skes = [decode_handshake(m, ctx).message for m in s_msgs if m[0] == 12]
    if ske_truth and skes:
        ske = skes[0]
        if ske_truth.get("named_curve"):
            assert f"0x{ske.named_curve:04x}" == ske_truth["named_curve"]
        for field, value in (("public_key_length", ske.public), ("dh_p_length", ske.dh_p),
                             ("dh_g_length", ske.dh_g), ("dh_ys_length", ske.public)):
            if ske_truth.get(field) is not None:
                assert len(value) == ske_truth[field], field
        if ske_truth.get("signature_algorithm"):
            assert f"0x{ske.algorithm:04x}" == ske_truth["signature_algorithm"]
    ckes = [decode_handshake(m, ctx).message for m in c_msgs
            if isinstance(m, bytes) and m[0] == 16]
    if cke_truth and cke_truth.get("public_key_length") and ckes:
        assert len(ckes[0].exchange_keys) == cke_truth["public_key_length"]


@pytest.mark.parametrize("path", _files())
def test_capture_handshakes_match_tshark(path: str | None) -> None:
    if path is None:
        shared_missing("captures corpus", CAPTURES, "TLSPROBE_CAPTURES")
    truth = _truth(path)
    conns = _tcp_connections(CAPTURES / path)
    errors, unchecked = [], {}
    for stream in _tls_over_tcp(truth):
        try:
            reason = _check_stream(stream, conns)
        except (AssertionError, DecodeError) as exc:
            errors.append(f"stream {stream['stream']}: {exc!r}"[:300])
            continue
        if reason is not None:
            unchecked[(path, stream["stream"])] = reason
    assert not errors, "\n".join(errors)
    expected = {k: v for k, v in NOT_CHECKABLE.items() if k[0] == path}
    assert unchecked == expected, f"NOT_CHECKABLE is {expected}, found {unchecked}"


def test_not_checkable_streams_are_in_files_checked() -> None:
    """Each listed stream belongs to a file the test above reads (so the list is verified)."""
    if not (CAPTURES / "files.tsv").is_file():
        shared_missing("captures corpus", CAPTURES, "TLSPROBE_CAPTURES")
    files = set(_files())
    assert {path for path, _ in NOT_CHECKABLE} <= files
    assert len(files) > 100


def test_files_without_tls_over_tcp_are_listed() -> None:
    """Every small file left out above for having no TLS-over-TCP handshake is named, with
    the reason, in NO_TLS_OVER_TCP (and every named one is such a file)."""
    if not (CAPTURES / "files.tsv").is_file():
        shared_missing("captures corpus", CAPTURES, "TLSPROBE_CAPTURES")
    left_out = {p for p in _small_files() if not _tls_over_tcp(_truth(p))}
    assert left_out == set(NO_TLS_OVER_TCP)


@pytest.mark.parametrize("draft, hrr_group, group, key_len", [
    ("14", None, 0x17, 65), ("18", None, 0x1D, 32), ("19", None, 0x1D, 32),
    ("22", 0x17, 0x17, 65),
])
def test_tls13_draft_server_hellos(draft: str, hrr_group: int | None, group: int,
                                   key_len: int) -> None:
    """Pre-RFC layouts tshark 4.0 does not fully read: ServerHello without session id and
    compression (drafts <= 21) and key_share as extension 40 (drafts <= 22)."""
    path = f"suricata-verify/tests/tls/tls13-draft{draft}/tls13_draft{draft}.pcap"
    if not (CAPTURES / path).is_file():
        shared_missing("a capture of the corpus", CAPTURES / path, "TLSPROBE_CAPTURES")
    stream = _truth(path)["streams"][0]
    found = _directions(stream, _tcp_connections(CAPTURES / path))
    assert found is not None
    client, server, _ = found
    raws = [m for m in _handshake_messages(server, True) if m[0] == 2]
    hellos = [decode_handshake(m, annotate=True) for m in raws]
    assert [h.message.to_bytes() for h in hellos] == raws
    assert [h.message.hrr_selected_group for h in hellos if h.message.is_hello_retry_request] \
        == ([hrr_group] if hrr_group else [])
    sh: ServerHello = hellos[-1].message
    assert sh.key_share is not None
    assert (sh.key_share[0], len(sh.key_share[1])) == (group, key_len)
    assert not sh.legacy_session_id_echo if int(draft) < 22 else sh.legacy_version == 0x0303
    assert [a for a in hellos[-1].annotations if a.name.startswith("key_share_draft.")]
    ch: ClientHello = decode_handshake(_handshake_messages(client, True)[0]).message
    assert group in [k.group for k in ch.key_shares] or hrr_group == group
