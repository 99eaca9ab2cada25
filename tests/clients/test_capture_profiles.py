"""The client profiles taken from third-party captures (tlsprobe/data/clients/cap-*.json,
written by tools/profiles_from_captures.py).

Those whose capture is in the shared corpus (../shared/captures, always present in CI) are
extracted again here and must be byte-identical to the stored file, and their JA4 must be
the one tshark's ground truth (truth/*.json) gives for that stream. Those from fetched
repositories (zeek, nDPI: not in CI) must at least name their source completely: file,
frame, the capture's SHA-256 and the evidence of the client's identity.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.shared_data import CAPTURES_ENV, captures_dir, required
from tlsprobe.model.clients import ClientProfile, SourceKind
from tlsprobe.probes.clients.profiles import (
    check_profile,
    fingerprints,
    profile_from_json,
)
from tlsprobe.wire import decode_handshake
from tlsprobe.wire.hello import ClientHello
from tools import profiles_from_captures as tool
from tools.profiles_from_captures import ENTRIES, Entry

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tlsprobe" / "data" / "clients"
SHARED = [e for e in ENTRIES if e.corpus == "shared"]
FETCHED = [e for e in ENTRIES if e.corpus != "shared"]


def _stored(entry_id: str) -> ClientProfile:
    return profile_from_json(json.loads((DATA / f"cap-{entry_id}.json").read_text("utf-8")))


def _capture(rel: str) -> Path:
    return required(captures_dir() / rel, f"the shared capture {rel}", CAPTURES_ENV)


def _truth_hello(rel: str, frame: int) -> dict[str, object]:
    """tshark's view (the corpus's truth file) of the first ClientHello of the stream that
    holds `frame`."""
    truth = _capture("truth/" + rel.replace("/", "__") + ".json")
    for stream in json.loads(truth.read_text("utf-8"))["streams"]:
        frames = {h.get("frame") for h in stream.get("client_hellos") or []}
        if frame in frames:
            return dict(stream["client_hello"])
    raise AssertionError(f"{rel}: tshark saw no ClientHello in frame {frame}")


def test_every_capture_profile_comes_from_the_table() -> None:
    stored = sorted(p.stem for p in DATA.glob("cap-*.json"))
    assert stored == sorted(f"cap-{e.id}" for e in ENTRIES)
    assert len(stored) >= 14


@pytest.mark.parametrize("entry", SHARED, ids=[e.id for e in SHARED])
def test_shared_capture_profile_is_extracted_again_identically(entry: Entry) -> None:
    path = _capture(entry.file)
    built = tool.build(entry, path)
    stored_text = (DATA / f"{built.id}.json").read_text("utf-8")
    assert tool.profile_text(built) == stored_text
    stored = profile_from_json(json.loads(stored_text))
    assert check_profile(stored) == []
    truth = _truth_hello(entry.file, entry.frame)
    assert stored.ja4 == truth["ja4"]
    assert stored.ja3 == truth["tshark_ja3"]


def test_a_hello_split_over_tcp_segments_is_reassembled() -> None:
    """suricata-verify's MTU-300 capture splits one ClientHello over three TCP segments
    (frames 4-6): the extraction gives the whole message (tshark's JA4 of it)."""
    rel = "suricata-verify/tests/tls/tls-client-hello-frag-01/dump_mtu300.pcap"
    truth = _truth_hello(rel, 6)
    segments = truth["tcp_segment_frames"]
    assert isinstance(segments, list) and len(segments) > 1
    hello, record_version, _ = tool.first_client_hello(_capture(rel), 6)
    assert fingerprints(hello)[1] == truth["ja4"]
    assert hello[0] == 1 and len(hello) == 4 + int.from_bytes(hello[1:4], "big")
    assert f"0x{record_version:04x}" == truth["record_version"]


def test_a_frame_without_a_hello_is_an_error_naming_it() -> None:
    path = _capture(SHARED[0].file)
    with pytest.raises(ValueError, match="frame 1 "):
        tool.first_client_hello(path, 1)


@pytest.mark.parametrize("entry", FETCHED, ids=[e.id for e in FETCHED])
def test_fetched_capture_profile_names_its_source(entry: Entry) -> None:
    p = _stored(entry.id)
    s = p.source
    assert check_profile(p) == []
    assert s.kind is SourceKind.capture
    assert s.file == entry.file and s.frame == entry.frame
    assert s.sha256 is not None and re.fullmatch(r"[0-9a-f]{64}", s.sha256)
    assert s.identified_by and len(s.identified_by) > 20
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", s.when)
    repo, commit = tool.CORPORA[entry.corpus]
    assert repo in s.how and commit[:12] in s.how


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_capture_profile_is_a_first_hello(entry: Entry) -> None:
    """A resumption hello (pre_shared_key) cannot be replayed: profiles are first hellos."""
    assert not tool.resumes(_stored(entry.id).hello)


def test_a_resumption_hello_is_refused_by_the_tool() -> None:
    """FoxIO's latest.pcapng, frame 101: Slack's hello to app.slack.com resumes a session."""
    rel = "ja4/pcap/latest.pcapng"
    entry = Entry("shared", rel, 101, "x", "x", "x", "x", None, ENTRIES[0].trust, "x")
    with pytest.raises(ValueError, match="pre_shared_key"):
        tool.build(entry, _capture(rel))


def test_at_least_one_capture_profile_offers_a_post_quantum_share() -> None:
    pq = [e.id for e in ENTRIES if _offers(_stored(e.id).hello, {0x6399, 0x11EC})]
    assert pq, "no capture profile with a post-quantum key share"


def _offers(hello: bytes, groups: set[int]) -> bool:
    """Whether the hello's key_share extension carries one of `groups`."""
    msg = decode_handshake(hello).message
    assert isinstance(msg, ClientHello)
    return any(share.group in groups for share in msg.key_shares)
