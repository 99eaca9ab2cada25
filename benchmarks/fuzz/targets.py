"""Fuzz targets, one per parser family, shared by the atheris and the fallback runners.

Each target takes raw fuzzer bytes and must end normally: the codec's one DecodeError (and,
for the capture reader, CaptureError at open) is the expected way to reject input and is
swallowed here; ANY other exception escapes and counts as a finding. The first bytes of the
input steer the choices a parser needs (negotiated version and key exchange, extension type
and message context) so the fuzzer explores them too.

Families:
  record     RecordReader over the stream, fed whole and in chunks (framing, SSLv2 hello)
  handshake  record -> HandshakeReassembler -> decode_handshake in a chosen context
  extension  decode_extension and annotate_extension for a chosen type and message context
  ske        ServerKeyExchange / ClientKeyExchange bodies for every key exchange and version
  flow       the session Flow over a client and a server stream (events, never exceptions)
  pcap       the capture reader (pcap / pcapng, link layers, IP, TCP reassembly)
  analysis   the whole capture analysis over the reader (tlsprobe pcap's reports: each
             connection's brief report and its whole report as JSON, the summary)

Seeds are real messages: the wire tests' OpenSSL fixtures, the hostile server's builders,
and small captures built here (plus, with --captures, files from the shared corpus).
"""
from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _p in (REPO,):   # tlsprobe and the test suite's helpers (tests is a package)
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tlsprobe.capture import CaptureError, iter_stream_events
from tlsprobe.session.flow import CLIENT, SERVER, Flow
from tlsprobe.wire import (
    DecodeError,
    Extension,
    HandshakeReassembler,
    ParseContext,
    RecordReader,
    decode_extension,
    decode_handshake,
    looks_like_tls,
)
from tlsprobe.wire.context import KEY_EXCHANGES
from tlsprobe.wire.ext_decoders import DECODERS
from tlsprobe.wire.extensions import annotate_extension

VERSIONS = (None, 0x0300, 0x0301, 0x0302, 0x0303, 0x0304)
CONTEXTS = [ParseContext(version=v, key_exchange=kx, is_server_message=side)
            for v in VERSIONS for kx in (*KEY_EXCHANGES, None) for side in (True, False)]
WHERES = ("client_hello", "server_hello", "hello_retry_request", "encrypted_extensions",
          "certificate", "certificate_request", "new_session_ticket")
EXT_TYPES = sorted(DECODERS) + [0x0A0A, 0x4469, 0xFFFF]
MSG_TYPES = (0, 1, 2, 4, 5, 8, 11, 12, 13, 14, 15, 16, 20, 22, 24, 25, 254)


def _pick(seq: tuple | list, b: int):  # type: ignore[no-untyped-def]
    return seq[b % len(seq)]


# -- targets -----------------------------------------------------------------------------
def fuzz_record(data: bytes) -> None:
    chunk = (data[0] % 64 + 1) if data else 1
    stream = data[1:]
    for size in (len(stream) or 1, chunk):
        reader = RecordReader()
        try:
            for i in range(0, len(stream), size):
                reader.feed(stream[i:i + size])
            reader.feed(b"")
        except DecodeError:
            pass
    looks_like_tls(stream)


def fuzz_handshake(data: bytes) -> None:
    if len(data) < 2:
        return
    ctx = _pick(CONTEXTS, data[0])
    body = data[2:]
    reasm = HandshakeReassembler(max_message=1 << 16)
    try:
        messages = reasm.feed(body) + reasm.feed(b"")
    except DecodeError:
        messages = []
    if data[1] & 1:  # also force the body parser of a chosen type, whatever the header says
        messages.append(bytes([_pick(MSG_TYPES, data[1] >> 1)]) +
                        len(body).to_bytes(3, "big") + body)
    for raw in messages:
        try:
            decoded = decode_handshake(raw, ctx, annotate=bool(data[1] & 2))
        except DecodeError:
            continue
        if decoded.message.to_bytes() != raw:
            raise AssertionError(f"round trip differs for type {raw[0]}")


def fuzz_extension(data: bytes) -> None:
    if len(data) < 2:
        return
    ext_type, where, body = _pick(EXT_TYPES, data[0]), _pick(WHERES, data[1]), data[2:]
    try:
        decode_extension(ext_type, body, where)
    except DecodeError:
        pass
    annotate_extension(Extension(ext_type, body), where, 9)


def fuzz_ske(data: bytes) -> None:
    if len(data) < 1:
        return
    version = _pick(VERSIONS, data[0] >> 4)
    kx = _pick((*KEY_EXCHANGES, None), data[0] & 0x0F)
    ctx = ParseContext(version=version, key_exchange=kx)
    body = data[1:]
    for msg_type in (12, 16):
        raw = bytes([msg_type]) + len(body).to_bytes(3, "big") + body
        try:
            decode_handshake(raw, ctx, annotate=True)
        except DecodeError:
            pass


def fuzz_flow(data: bytes) -> None:
    if len(data) < 2:
        return
    split = int.from_bytes(data[:2], "big") % (len(data) - 1) + 2
    flow = Flow(annotate=True)
    for direction, part in ((CLIENT, data[2:split]), (SERVER, data[split:])):
        for i in range(0, len(part), 97):
            for _ in flow.feed(direction, part[i:i + 97]):
                pass
        for _ in flow.feed(direction, b""):
            pass


def fuzz_pcap(data: bytes) -> None:
    try:
        stream = iter_stream_events(io.BytesIO(data))
    except CaptureError:
        return
    for _ in stream:
        pass


def fuzz_analysis(data: bytes) -> None:
    """What `tlsprobe pcap` makes of the capture: the first input byte picks brief reports
    (the table, --stats) or whole ones (--jsonl, --details); damage is said in the summary's
    warnings, never raised after the open."""
    import tempfile

    from tlsprobe.capture import CaptureError
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    if not data:
        return
    with tempfile.NamedTemporaryFile(suffix=".pcap") as fh:
        fh.write(data[1:])
        fh.flush()
        try:
            analysis = CaptureAnalysis(fh.name, AnalyzerOptions(brief=bool(data[0] & 1)))
        except CaptureError:
            return
        with analysis:
            for report, _trace in analysis:
                if not data[0] & 1:
                    report.to_json()
        assert analysis.summary is not None  # made by the close, damage or not


FAMILIES: dict[str, Callable[[bytes], None]] = {
    "record": fuzz_record, "handshake": fuzz_handshake, "extension": fuzz_extension,
    "ske": fuzz_ske, "flow": fuzz_flow, "pcap": fuzz_pcap, "analysis": fuzz_analysis,
}


# -- seeds -----------------------------------------------------------------------------
def _fixture_messages() -> list[tuple[str, bytes]]:
    path = REPO / "tests" / "wire" / "data" / "openssl_msgs.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    out = []
    for key, value in data.items():
        if key.startswith("_"):
            continue
        for run in value if isinstance(value, list) else [value]:
            for m in run["messages"]:
                out.append((m["content"], bytes.fromhex(m["hex"])))
    return sorted(set(out), key=lambda cm: (len(cm[1]), cm))[:400]


def _built_traffic() -> tuple[bytes, list[bytes]]:
    from tests.hostile.tls import (
        alert,
        handshake_records,
        hello_retry_request,
        record,
        server_hello_13,
        tls12_flight,
    )

    from tlsprobe.engine.config import ClientConfig, build_client_hello
    from tlsprobe.wire import frame
    hello = build_client_hello(ClientConfig(server_name="fuzz.test")).hello
    client = record(22, frame(1, hello.serialize()), version=0x0301)
    servers = [handshake_records(*tls12_flight(hello)), handshake_records(server_hello_13(hello)),
               handshake_records(hello_retry_request(hello, group=0x17)),
               handshake_records(*tls12_flight(hello)[:2]) + alert(2, 40)]
    return client, servers


def _captures(client: bytes, servers: list[bytes], corpus: Path | None) -> list[bytes]:
    from tests.helpers.capbuild import Conv, Pcapng, ether, pcap_bytes
    conv = Conv()
    packets = conv.handshake() + [conv.c(client), conv.s(servers[0][:600]),
                                  conv.s(servers[0][600:]), conv.c(b"", "FA")]
    seeds = [pcap_bytes([ether(p) for p in packets])]
    ng = Pcapng().shb().idb(1)
    conv6 = Conv(client=("2001:db8::1", 40001), server=("2001:db8::2", 443))
    for i, p in enumerate(conv6.handshake() + [conv6.c(client), conv6.s(servers[1])]):
        ng.epb(0, 1_000_000 * (i + 1), ether(p))
    seeds.append(ng.bytes())
    if corpus is not None and corpus.is_dir():
        small = sorted((p for p in corpus.rglob("*.pcap*") if p.stat().st_size <= 16384),
                       key=lambda p: p.stat().st_size)
        seeds += [p.read_bytes() for p in small[:40]]
    return seeds


def seeds(family: str, corpus: Path | None = None) -> list[bytes]:
    """Seed inputs for `family`, already in the target's input layout."""
    messages = _fixture_messages()
    client, servers = _built_traffic()
    handshakes = [m for c, m in messages if c == "Handshake"]
    if family == "record":
        return [b"\x10" + client, *(b"\x07" + s for s in servers)]
    if family == "handshake":
        return [bytes([i % 256, 0]) + m for i, m in enumerate(handshakes)]
    if family == "extension":
        from tlsprobe.wire import decode_handshake as dh
        out = []
        for m in handshakes[:200]:
            try:
                msg = dh(m, ParseContext(version=0x0304)).message
            except DecodeError:
                continue
            for e in getattr(msg, "extensions", []):
                if e.type in EXT_TYPES:
                    out.append(bytes([EXT_TYPES.index(e.type), 0]) + e.data)
        return out or [b"\x00\x00"]
    if family == "ske":
        kx_index = {kx: i for i, kx in enumerate(KEY_EXCHANGES)}
        out = [bytes([0x40 | kx_index["ECDHE"]]) + m[4:] for m in handshakes if m[0] == 12]
        out += [bytes([0x40 | kx_index["DHE"]]) + m[4:] for m in handshakes if m[0] == 12]
        return out or [b"\x40"]
    if family == "flow":
        return [len(client).to_bytes(2, "big") + client + s for s in servers]
    if family == "pcap":
        return _captures(client, servers, corpus)
    if family == "analysis":
        return [bytes([i % 2]) + c for i, c in enumerate(_captures(client, servers, corpus))]
    raise KeyError(family)
