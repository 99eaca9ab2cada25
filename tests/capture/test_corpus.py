"""The third-party corpus (../shared/captures) checked against tshark's view of it.

Fails when the corpus is absent (tests/helpers/shared_data.py: TLSPROBE_CAPTURES or
TLSPROBE_SHARED point elsewhere).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.helpers.shared_data import CAPTURES_ENV, captures_dir, required, shared_missing
from tests.helpers.capbuild import collect, streams

from tlsprobe.capture import (
    SECRETS_TLS_KEYLOG,
    CaptureError,
    Datagram,
    StreamData,
    StreamOpen,
    iter_stream_events,
)

REPO = Path(__file__).resolve().parents[2]
CAPTURES = captures_dir()


@pytest.fixture(autouse=True)
def _corpus() -> None:
    if not (CAPTURES / "truth").is_dir():
        shared_missing("capture corpus", CAPTURES, "TLSPROBE_CAPTURES")

TCP_TROUBLE = {"tcp_retransmission", "tcp_out_of_order", "tcp_lost_segment"}
CAPINFOS_LINK = {"Ethernet": 1, "NULL/Loopback": 0, "Linux cooked-mode capture v1": 113}


def truths() -> list[dict]:
    found = sorted(required(CAPTURES / "truth", "tshark's truth of the corpus",
                            CAPTURES_ENV).glob("*.json"))
    if not found:
        shared_missing("tshark's truth files (*.json)", CAPTURES / "truth", CAPTURES_ENV)
    return [json.loads(p.read_text()) for p in found]


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


def test_corpus_matches_truth_streams_frames_and_counts() -> None:
    checked_tcp = checked_udp = 0
    for truth in truths():
        path = CAPTURES / truth["file"]
        stream = iter_stream_events(str(path))  # every capture of the truth is readable
        frames: dict[frozenset[str], set[int]] = defaultdict(set)
        conns: set[frozenset[str]] = set()
        datagrams: set[frozenset[str]] = set()
        for ev in stream:
            if isinstance(ev, StreamOpen):
                conns.add(pair(ev.conn.client, ev.conn.server))
            elif isinstance(ev, StreamData):
                frames[pair(ev.conn.client, ev.conn.server)].add(ev.frame)
            elif isinstance(ev, Datagram):
                datagrams.add(pair(f"{ev.src}:{ev.sport}", f"{ev.dst}:{ev.dport}"))
        where = truth["file"]
        capinfos = truth.get("capinfos") or {}
        if capinfos.get("number_of_packets") is not None:
            assert stream.stats.packets == int(capinfos["number_of_packets"]), where
        damaged = "file_truncated_or_damaged" in truth.get("file_flags", [])
        assert bool(stream.stats.warnings) == damaged, (where, stream.stats.warnings)
        for st in truth["streams"]:
            p = pair(st["client"], st["server"])
            if st["transport"] == "tcp":
                checked_tcp += 1
                assert p in conns, (where, st["stream"], st["client"], st["server"])
                ch_frame = (st.get("client_hello") or {}).get("frame")
                if ch_frame is not None:  # frame numbering agrees with tshark's
                    assert ch_frame in frames[p], (where, st["stream"], ch_frame)
            elif st["transport"] == "udp":
                checked_udp += 1
                assert p in datagrams, (where, st["stream"])
    assert checked_tcp > 700 and checked_udp > 80


def test_every_file_in_corpus_reads_or_refuses_cleanly() -> None:
    n = 0
    for path in sorted(CAPTURES.rglob("*")):
        if not path.is_file() or path.suffix in (".json", ".md", ".py", ".tsv", ".yaml"):
            continue
        try:
            stream = iter_stream_events(str(path))
        except CaptureError as exc:
            assert "\n" not in str(exc)
            continue
        for _ in stream:
            pass
        n += 1
    assert n > 180


def _tshark_follow(path: Path, stream_ids: list[int], extra: list[str]) -> dict[int, tuple]:
    args = ["tshark", "-r", str(path), *extra, "-q"]
    for sid in stream_ids:
        args += ["-z", f"follow,tcp,raw,{sid}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False).stdout
    result = {}
    for block in out.split("Filter: tcp.stream eq ")[1:]:
        lines = block.split("\n")
        sid = int(lines[0])
        node0 = lines[1].split(": ", 1)[1]
        c2s = s2c = b""
        for line in lines[3:]:
            if line.startswith("==="):
                break
            if line.startswith("\t"):
                s2c += bytes.fromhex(line.strip())
            elif line.strip():
                c2s += bytes.fromhex(line.strip())
        result[sid] = (node0, c2s, s2c)
    return result


def _with_markers(data: bytes, gaps: list[tuple[int, int]]) -> bytes:
    """Our bytes with tshark follow's text for a hole inserted where each gap is."""
    out, last = b"", 0
    for at, size in gaps:
        out += data[last:at] + f"[{size} bytes missing in capture file]\0".encode()
        last = at
    return out + data[last:]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_reassembly_agrees_with_tshark_follow_on_troubled_streams() -> None:
    jobs = []
    for truth in truths():
        sel = [s for s in truth["streams"]
               if s["transport"] == "tcp" and TCP_TROUBLE & set(s["flags"])]
        if sel:
            jobs.append((truth, sel))
    # the corpus has such streams (a truth without them is a broken corpus, not a pass)
    assert jobs, "no stream with retransmissions or lost segments in the truth"

    def follow(job: tuple[dict, list[dict]]) -> dict[int, tuple]:
        truth, sel = job
        return _tshark_follow(CAPTURES / truth["file"], [s["stream"] for s in sel],
                              truth.get("tshark_extra_args") or [])

    with ThreadPoolExecutor(max_workers=2) as pool:
        followed = list(pool.map(follow, jobs))
    compared = exact = 0
    for (truth, sel), theirs in zip(jobs, followed):
        events, stream = collect(str(CAPTURES / truth["file"]))
        ours = defaultdict(list)
        for st in streams(events).values():
            ours[pair(st["key"].client, st["key"].server)].append(st)
        for s in sel:
            node0, t_c2s, t_s2c = theirs[s["stream"]]
            candidates = []
            for st in ours[pair(s["client"], s["server"])]:
                first, second = (0, 1) if st["key"].client == node0 else (1, 0)
                candidates.append((st, first, second))
            compared += 1
            marked = [(_with_markers(st["data"][a], st["gaps"][a]),
                       _with_markers(st["data"][b], st["gaps"][b])) for st, a, b in candidates]
            if (t_c2s, t_s2c) in marked:
                exact += 1
                continue
            ok = any(_explained(t_c2s, st, a, stream.stats) and _explained(t_s2c, st, b, stream.stats)
                     for st, a, b in candidates)
            assert ok, (truth["file"], s["stream"], [len(x) for m in marked for x in m],
                        len(t_c2s), len(t_s2c))
    print(f"tshark follow: {exact} of {compared} streams byte-identical")
    assert compared >= 50 and exact >= 0.9 * compared


MARKER = re.compile(rb"\[\d+ bytes missing in capture file\][.\0]")


def _explained(theirs: bytes, st: dict, direction: int, stats) -> bool:  # type: ignore[no-untyped-def]
    """The known, intended differences from tshark's follow output:
    * after a RST we drop the peer's in-flight data (tshark keeps it): ours is a prefix;
    * tshark invents a ~2**30-byte hole when one SYN gets SYN+ACKs with two ISNs, where we
      follow the data: equal once tshark's hole marker is removed;
    * we use the bytes of a first IP fragment whose other fragments were not captured
      (tshark shows none of them): tshark's pieces appear, in order, in ours;
    * data waiting behind a hole that the receiver never acknowledged is dropped by tshark's
      follow; we deliver it after a gap at the end: tshark's is ours cut at a gap;
    * data that starts at the SYN's own sequence number (synthetic captures): tshark's
      follow drops its first byte as already sent (its TLS dissector, reading the packet,
      keeps it), we follow the data: tshark's is ours without the first byte, maybe cut
      at a gap."""
    data = st["data"][direction]
    mine = _with_markers(data, st["gaps"][direction])
    if mine == theirs or (st["close"] == "rst" and theirs.startswith(mine)):
        return True
    if mine.startswith(theirs) and MARKER.match(mine, len(theirs)):
        return True
    if MARKER.sub(b"", theirs) == data and stats.tcp_resyncs:
        return True
    if stats.tcp_resyncs and mine[1:].startswith(theirs) and (
            len(mine) == len(theirs) + 1 or MARKER.match(mine, len(theirs) + 1)):
        return True
    if stats.ip_first_fragments:
        pos = 0
        for piece in MARKER.split(theirs):
            found = data.find(piece, pos)
            if found < 0:
                return False
            pos = found + len(piece)
        return True
    return False


def test_decryption_secrets_blocks_of_real_pcapng() -> None:
    path = CAPTURES / "ja4/pcap/chrome-cloudflare-quic-with-secrets.pcapng"
    if not path.exists():
        shared_missing("a capture of the corpus", path, "TLSPROBE_CAPTURES")
    events, stream = collect(str(path))
    assert stream.secrets and stream.secrets[0].secrets_type == SECRETS_TLS_KEYLOG
    labels = {line.split()[0] for line in stream.tls_keylog().decode().splitlines() if line}
    assert {"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET"} <= labels
    assert events.index(stream.secrets[0]) < min(
        i for i, e in enumerate(events) if isinstance(e, Datagram))


def test_pcapng_with_eleven_interfaces_and_mixed_link_types() -> None:
    for name in ("wireshark/wiki/Development/PcapNg/many_interfaces.pcapng",
                 "wireshark/wiki/96afe21b136f715d5b96df4a646c57d9/pcapng-example.pcapng"):
        path = CAPTURES / name
        truth = json.loads((CAPTURES / "truth" / (name.replace("/", "__") + ".json")).read_text())
        expected = {}
        for enc in truth["capinfos"]["encapsulations"]:
            label, count = re.fullmatch(r"(.*) \((\d+)\)", enc).groups()  # type: ignore[union-attr]
            expected[CAPINFOS_LINK[label]] = int(count)
        _, stream = collect(str(path))
        assert stream.stats.link_types == expected
