"""tlsprobe pcap next to tshark's view of the third-party corpus (../shared/captures/truth).

For every handshake stream in truth/, the matching tlsprobe connection (same endpoints,
same client random) is compared field by field: version, cipher suite, group (or DH prime
size), the offered lists (cipher_suites, extensions, supported_groups, key_share_groups,
signature_algorithms, supported_versions), SNI, ALPN, JA3, JA3S and JA4. The server side
is compared on every stream, against tshark with out-of-order TCP reassembly where its
default settings saw no ServerHello but may have missed one (tshark_ooo.py). Known
disagreements are listed in docs/PCAP_PARITY.md with the reason; the test checks that the
observed ones are exactly those.

Run as a module for the per-field agreement table:  python3 -m tests.offline.parity
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

from tlsprobe.capture import CaptureError
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.model.capture import ConnectionReport

from tests.helpers.shared_data import CAPTURES_ENV, captures_dir, required
from tests.offline import tshark_ooo

FIELDS = ("version", "cipher_suite", "group", "cipher_suites", "extensions",
          "supported_groups", "key_share_groups", "signature_algorithms",
          "supported_versions", "sni", "alpn", "ja3", "ja3s", "ja4")
SERVER_FIELDS = ("version", "cipher_suite", "group", "alpn", "ja3s")
TCP_TROUBLE = {"tcp_retransmission", "tcp_out_of_order", "tcp_lost_segment"}
PARITY_DOC = REPO / "docs" / "PCAP_PARITY.md"
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([0-9, ]+)\s*\|\s*([a-z0-9_, ]+)\s*\|")


def corpus_dir() -> Path:
    return required(captures_dir(), "captures corpus", CAPTURES_ENV)


def _hexes(values: Any) -> list[str] | None:
    return None if values is None else [str(v).lower() for v in values]


def expected(stream: dict[str, Any], server_view: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """tshark's values of one stream, in our comparison form. The server side comes from
    `server_view` (the stream as tshark sees it with out-of-order reassembly) where given;
    a stream with no ServerHello in that view has None for every server-side field."""
    ch = stream.get("client_hello") or {}
    source = server_view if server_view is not None else stream
    sh = source.get("server_hello") or {}
    neg = source.get("negotiated") or {}
    out: dict[str, Any] = dict.fromkeys(SERVER_FIELDS)
    if sh:
        out["version"] = neg.get("version")
        out["cipher_suite"] = neg.get("cipher_suite")
        group_source = neg.get("key_exchange_group_source") or ""
        m = re.search(r"dhe\(p_len=(\d+)\)", group_source)
        out["group"] = f"dh{int(m.group(1)) * 8}" if m else neg.get("key_exchange_group")
        out["ja3s"] = source.get("ja3s")
        out["alpn"] = neg.get("alpn")
    if ch:
        for name in ("cipher_suites", "extensions", "supported_groups", "key_share_groups",
                     "signature_algorithms"):
            out[name] = _hexes(ch.get(name)) or []
        if ch.get("sslv2_format"):
            # tshark lists an SSLv2 hello's 3-byte cipher specs apart; 0x00XXYY names the
            # TLS suite 0xXXYY, which is what tlsprobe reports as offered
            out["cipher_suites"] = [f"0x{int(s, 16):04x}" for s in
                                    ch.get("sslv2_cipher_specs") or [] if int(s, 16) < 0x10000]
        versions = _hexes(ch.get("supported_versions"))
        out["supported_versions"] = versions or [ch.get("legacy_version")]
        out["sni"] = ch.get("sni")
        out["ja3"] = stream.get("ja3")
        out["ja4"] = stream.get("ja4")
    return out


def observed(r: ConnectionReport) -> dict[str, Any]:
    out: dict[str, Any] = {"version": r.version.hex if r.version else None,
                           "cipher_suite": r.cipher.hex if r.cipher else None,
                           "ja3s": r.fingerprints.ja3s, "alpn": r.alpn}
    kx = r.key_exchange
    if kx is not None and kx.group is None and kx.dh_prime_bits:
        out["group"] = f"dh{kx.dh_prime_bits + (-kx.dh_prime_bits) % 8}"
    elif kx is not None and kx.group is not None and kx.source == "dhe_parameters":
        out["group"] = f"dh{kx.dh_prime_bits + (-(kx.dh_prime_bits or 0)) % 8}"
    else:
        out["group"] = kx.group.hex if kx is not None and kx.group is not None else None
    o = r.offer
    if o is not None:
        out["cipher_suites"] = [c.hex for c in o.cipher_suites]
        out["extensions"] = [e.hex for e in r.client_extensions]
        out["supported_groups"] = [g.hex for g in o.groups]
        out["key_share_groups"] = [g.hex for g in o.key_share_groups]
        out["signature_algorithms"] = [s.hex for s in o.signature_algorithms]
        out["supported_versions"] = [v.hex for v in o.versions]
        out["sni"] = o.sni
        out["ja3"] = r.fingerprints.ja3
        out["ja4"] = r.fingerprints.ja4
    return out


def _analyse(path: str, keylog: bool = False) -> tuple[list[ConnectionReport], str | None]:
    try:
        analysis = CaptureAnalysis(path, AnalyzerOptions())
        return [r for r, _ in analysis], None
    except CaptureError as exc:
        return [], str(exc)


def _match(stream: dict[str, Any], reports: list[ConnectionReport],
           used: set[int]) -> ConnectionReport | None:
    transport = "udp" if stream["transport"] == "udp" else "tcp"
    pair = {stream["client"], stream["server"]}
    random = (stream.get("client_hello") or {}).get("random")
    candidates = [r for r in reports if id(r) not in used and r.transport == transport
                  and {r.client, r.server} == pair]
    if random:
        exact = [r for r in candidates if r.client_random == random]
        if exact:
            return exact[0]
    sh_random = (stream.get("server_hello") or {}).get("random")
    if not random and sh_random:
        candidates = [r for r in candidates if not r.offer] or candidates
    return candidates[0] if candidates else None


Row = tuple[str, int, str, Any, Any]


def _needs_ooo_view(stream: dict[str, Any], report: ConnectionReport | None) -> bool:
    """A TCP stream whose ServerHello tshark's default settings did not see, where
    out-of-order reassembly may show one: TCP trouble in the stream, or tlsprobe read a
    server side there."""
    if stream["transport"] != "tcp" or stream.get("server_hello"):
        return False
    return bool(TCP_TROUBLE & set(stream["flags"])) or (
        report is not None and observed(report)["version"] is not None)


def compare_file(truth_path: str, ooo_cache: str | None = None
                 ) -> tuple[list[Row], list[tuple[str, int]]]:
    """(file, stream, field, tshark's value, ours) for every field of every handshake
    stream of one capture, equal values included (agreement counts need them); and the
    streams whose server side was compared with tshark's out-of-order view (run only when
    `ooo_cache`, its cache directory, is given)."""
    truth = json.loads(Path(truth_path).read_text())
    path = corpus_dir() / truth["file"]
    reports, _error = _analyse(str(path))
    used: set[int] = set()
    matched: list[tuple[dict[str, Any], ConnectionReport | None]] = []
    for stream in truth["streams"]:
        got_report = _match(stream, reports, used)
        if got_report is not None:
            used.add(id(got_report))
        matched.append((stream, got_report))
    ooo: dict[int, dict[str, Any]] | None = None
    if ooo_cache is not None and any(_needs_ooo_view(s, r) for s, r in matched):
        ooo = tshark_ooo.tcp_streams(corpus_dir(), truth, Path(ooo_cache))
    rows: list[Row] = []
    ooo_compared: list[tuple[str, int]] = []
    for stream, got_report in matched:
        view = None
        if ooo is not None and _needs_ooo_view(stream, got_report):
            view = ooo.get(stream["stream"], {})
            ooo_compared.append((truth["file"], stream["stream"]))
        want = expected(stream, view)
        got = observed(got_report) if got_report is not None else {}
        for name in FIELDS:
            if name in want:
                rows.append((truth["file"], stream["stream"], name, want[name],
                             got.get(name, "(connection not found)" if got_report is None
                                     else None)))
    return rows, ooo_compared


def compare_corpus(workers: int = 2, ooo_cache: str | None = None
                   ) -> tuple[list[Row], list[tuple[str, int]]]:
    """compare_file over the whole corpus: every row, and the streams compared with
    tshark's out-of-order view."""
    paths = sorted(str(p) for p in (corpus_dir() / "truth").glob("*.json"))
    rows: list[Row] = []
    ooo_compared: list[tuple[str, int]] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for part, part_ooo in pool.map(partial(compare_file, ooo_cache=ooo_cache), paths,
                                       chunksize=4):
            rows.extend(part)
            ooo_compared.extend(part_ooo)
    return rows, ooo_compared


def documented() -> dict[tuple[str, str, str], str]:
    """(file, stream, field) -> reason, from the table in docs/PCAP_PARITY.md. Every row
    names its streams and fields (no wildcard): a row that does not parse is an error."""
    out: dict[tuple[str, str, str], str] = {}
    for line in PARITY_DOC.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        m = _ROW.match(line)
        if not m:
            raise ValueError(f"{PARITY_DOC.name}: row without named streams and fields: {line}")
        reason = line.rstrip(" |").split("|")[-1].strip()
        for stream in (s.strip() for s in m.group(2).split(",")):
            for name in (f.strip() for f in m.group(3).split(",")):
                out[(m.group(1), stream, name)] = reason
    return out


def is_documented(doc: dict[tuple[str, str, str], str], file: str, stream: int,
                  name: str) -> bool:
    return (file, str(stream), name) in doc


def agreement(rows: list[tuple[str, int, str, Any, Any]]) -> dict[str, tuple[int, int]]:
    """field -> (agreeing, compared)."""
    total: Counter[str] = Counter()
    same: Counter[str] = Counter()
    for _, _, name, want, got in rows:
        total[name] += 1
        same[name] += want == got
    return {name: (same[name], total[name]) for name in FIELDS if total[name]}


def main() -> int:
    cache = Path(tempfile.gettempdir()) / "tlsprobe-tshark-ooo"
    rows, ooo = compare_corpus(os.cpu_count() or 2,
                               str(cache) if tshark_ooo.available() else None)
    print(f"server side compared with tshark -o tcp.reassemble_out_of_order:TRUE: "
          f"{', '.join(f'{f} #{s}' for f, s in ooo) or 'none (tshark not installed)'}\n")
    doc = documented()
    print(f"{'field':<22} {'agree':>6} / {'total':<6}  documented differences")
    undoc: dict[str, list[str]] = defaultdict(list)
    for name, (ok, n) in agreement(rows).items():
        bad = [r for r in rows if r[2] == name and r[3] != r[4]]
        known = sum(is_documented(doc, f, s, name) for f, s, _, _, _ in bad)
        print(f"{name:<22} {ok:>6} / {n:<6}  {known}")
        for f, s, _, want, got in bad:
            if not is_documented(doc, f, s, name):
                undoc[name].append(f"{f} #{s}: tshark {want!r} ours {got!r}")
    for name, items in undoc.items():
        print(f"\nUNDOCUMENTED {name} ({len(items)}):")
        for item in items[:400]:
            print("  " + item[:300])
    return 1 if undoc else 0


if __name__ == "__main__":
    sys.exit(main())
