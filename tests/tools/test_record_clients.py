"""tools/record_clients.py against real clients, and the stored client profiles.

The browsers are real browsers (Debian's chromium and firefox-esr, which CI installs): each
is started once, headless, against the recorder's listener, and its fresh ClientHello must
have the stored profile's JA4 (and JA3 where the profile says JA3 is stable). The
listener's reading of a hello (split over records and segments, hostile or stalled peers)
is tested with a real client process on loopback.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tlsprobe.model.clients import ClientProfile, SourceKind
from tlsprobe.probes.clients.profiles import (
    check_profile,
    fingerprints,
    load_profiles,
    profile_from_json,
    profile_to_json,
)
from tlsprobe.registry.lookup import group
from tlsprobe.wire import decode_handshake

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "record_clients.py"
STORED = ROOT / "tlsprobe" / "data" / "clients"


@functools.cache
def _tool() -> ModuleType:
    """tools/record_clients.py as a module (registered before it runs: its dataclasses)."""
    spec = importlib.util.spec_from_file_location("record_clients", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("record_clients", module)
    spec.loader.exec_module(module)
    return module


def run_tool(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The recorder run as a user runs it (it enters its own network namespace)."""
    env = {k: v for k, v in os.environ.items() if k != "NODE24"}
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, check=False, env=env)


def stored(profile_id: str) -> ClientProfile:
    return profile_from_json(json.loads((STORED / f"{profile_id}.json").read_text()))


# -- fresh recordings of real clients against the stored profiles ---------------------------

@pytest.mark.parametrize("recipe", ["chromium", "firefox-esr", "curl", "python"])
def test_a_fresh_recording_has_the_stored_fingerprints(recipe: str) -> None:
    out = run_tool("--check", "--only", recipe)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"record_clients --check --only {recipe} failed:\n{text}"
    m = re.search(rf"^{re.escape(recipe)}: same as stored \((\S+), JA4 (\S+), JA3 (\S+)\)$",
                  out.stdout, re.MULTILINE)
    assert m, text
    profile = stored(m.group(1))
    assert m.group(2) == profile.ja4
    if profile.ja3_stable:
        assert m.group(3) == profile.ja3


def test_check_reports_a_stored_profile_that_differs(tmp_path: Path) -> None:
    """A stored curl profile carrying wget's hello: the fresh curl hello differs in JA4."""
    curl = stored("curl-7.88-openssl-3.0-debian12")
    wget = stored("wget-1.21-gnutls-3.7-debian12")
    ja3, ja4 = fingerprints(wget.hello)
    fake = profile_to_json(curl) | {"hello": wget.hello.hex(), "ja3": ja3, "ja4": ja4}
    (tmp_path / f"{curl.id}.json").write_text(json.dumps(fake))
    out = run_tool("--check", "--only", "curl", "--out", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert (f"curl: DIFFERS: JA4 {curl.ja4} but the stored profile {curl.id} has {ja4}"
            in out.stdout)


def test_recording_writes_a_profile_and_keeps_an_unchanged_one(tmp_path: Path) -> None:
    out = run_tool("--only", "curl", "--out", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    (written,) = load_profiles(tmp_path)
    assert check_profile(written) == []
    assert written.id == "curl-7.88-openssl-3.0-debian12"
    assert written.source.kind is SourceKind.recorded and written.ja3_stable
    assert written.source.how == "/usr/bin/curl -s -o /dev/null https://localhost:PORT/"
    assert written.ja4 == stored(written.id).ja4
    before = (tmp_path / f"{written.id}.json").read_bytes()
    again = run_tool("--only", "curl", "--out", str(tmp_path))
    assert "curl: unchanged, kept" in again.stdout, again.stdout + again.stderr
    assert (tmp_path / f"{written.id}.json").read_bytes() == before


def test_recording_again_keeps_the_key_sizes_the_client_enforces(tmp_path: Path) -> None:
    """A profile's key_minimums (the client's library build: Debian's OpenSSL at security
    level 2) are not in its hello: recording the same client again (--force writes it)
    keeps them rather than dropping the rule."""
    stored_curl = STORED / "curl-7.88-openssl-3.0-debian12.json"
    assert stored(stored_curl.stem).key_minimums is not None
    (tmp_path / stored_curl.name).write_bytes(stored_curl.read_bytes())
    out = run_tool("--only", "curl", "--force", "--out", str(tmp_path))
    assert out.returncode == 0 and "curl: wrote" in out.stdout, out.stdout + out.stderr
    (written,) = load_profiles(tmp_path)
    assert written.key_minimums == stored(written.id).key_minimums


def test_a_client_sending_another_clients_hello_is_noted_not_profiled(tmp_path: Path) -> None:
    """lynx and gnutls-cli both send GnuTLS's default hello: one profile, lynx in its notes."""
    out = run_tool("--only", "gnutls-cli", "lynx", "--out", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    (kept,) = load_profiles(tmp_path)
    assert kept.id.startswith("gnutls-cli-")
    assert "is sent by recipe lynx (Lynx " in kept.notes
    assert f"lynx: same hello as {kept.id}" in out.stdout
    check = run_tool("--check", "--only", "lynx", "--out", str(tmp_path))
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith(f"lynx: same as stored ({kept.id}, JA4 {kept.ja4}, ")


def test_a_requested_client_that_is_not_installed_fails_with_one_line(tmp_path: Path) -> None:
    out = run_tool("--only", "node24", "--out", str(tmp_path))   # NODE24 unset here
    assert out.returncode == 1
    assert out.stdout.strip() == ("node24: not installed (it comes with the npm package "
                                  "node@24 (npm install node@24; then set NODE24 to "
                                  "node_modules/node/bin/node))")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_recipe_is_a_usage_error() -> None:
    out = run_tool("--only", "netscape")
    assert out.returncode == 2
    assert "unknown recipe netscape" in out.stderr and "Traceback" not in out.stderr


# -- the listener, with a real client process on loopback ---------------------------------

_CLIENT = """import socket, sys, time
data = bytes.fromhex(sys.argv[2])
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(0, len(data), int(sys.argv[3])):
    s.sendall(data[i:i + int(sys.argv[3])])
    time.sleep(0.002)
time.sleep(float(sys.argv[4]))
"""


def _records(payload: bytes, sizes: list[int], version: int = 0x0301, ctype: int = 22) -> bytes:
    out, i = b"", 0
    for n in [*sizes, len(payload)]:
        chunk = payload[i:i + n]
        if chunk:
            out += bytes([ctype]) + version.to_bytes(2, "big") + len(chunk).to_bytes(2, "big")
            out += chunk
        i += n
    return out


def _listen(data: bytes, segment: int, linger: float, within: float) -> object:
    """What the tool's listener makes of a client sending `data` (in `segment`-byte writes,
    then idle for `linger` s): a Captured, or the HelloError raised."""
    tool = _tool()
    listener = tool.Listener()
    proc = subprocess.Popen([sys.executable, "-c", _CLIENT, str(listener.port), data.hex(),
                             str(segment), str(linger)])
    try:
        return listener.wait_hello(proc, time.monotonic() + within)
    except tool.HelloError as exc:
        return exc
    finally:
        proc.kill()
        proc.wait()
        listener.close()


def test_a_hello_split_over_records_and_segments_is_read_whole() -> None:
    firefox = stored("firefox-esr-153-debian12")
    got = _listen(_records(firefox.hello, [3, 700, 1000]) + b"\x17\x03\x03\x00\x01x",
                  segment=97, linger=0, within=30)
    assert not isinstance(got, Exception), got
    assert got.hello == firefox.hello and got.record_version == 0x0301
    assert got.ja4 == firefox.ja4


def test_a_connection_without_a_hello_is_a_clear_error() -> None:
    got = _listen(_records(b"GET / HTTP/1.1\r\n", [], ctype=23), segment=100, linger=0,
                  within=30)
    assert isinstance(got, Exception)
    assert "a record of content type 23, not a handshake record" in str(got)


def test_a_hello_larger_than_the_limit_is_not_read() -> None:
    huge = b"\x01" + (1 << 20).to_bytes(3, "big") + bytes(200)
    got = _listen(_records(huge, []), segment=100, linger=0, within=30)
    assert isinstance(got, Exception)
    assert "a ClientHello of 1048580 bytes (limit 65536)" in str(got)


def test_a_stalled_hello_ends_at_the_deadline() -> None:
    hello = stored("curl-7.88-openssl-3.0-debian12").hello
    start = time.process_time()
    got = _listen(_records(hello, [])[:200], segment=200, linger=60, within=2)
    assert isinstance(got, Exception)
    assert "did not arrive whole in time" in str(got)
    assert time.process_time() - start < 1.5      # waiting, not spinning


# -- the stored profiles -----------------------------------------------------------------

def _iso_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def provenance_problems(p: ClientProfile) -> list[str]:
    s = p.source
    missing = [name for name, value in (("client", p.client), ("version", p.version),
                                       ("platform", p.platform), ("how", s.how)) if not value]
    if s.kind is SourceKind.recorded and not _iso_date(s.when):
        missing.append(f"when (an ISO date, not {s.when!r})")
    if s.kind is SourceKind.capture:
        if not (_iso_date(s.when) or s.when == "unknown"):
            missing.append(f"when ({s.when!r})")
        missing += [name for name, value in (("file", s.file), ("frame", s.frame),
                                             ("sha256", s.sha256),
                                             ("identified_by", s.identified_by)) if not value]
    return [f"{p.id}: no {m}" for m in missing]


def test_every_stored_profile_is_consistent_and_says_where_it_came_from() -> None:
    profiles = load_profiles()
    assert profiles
    problems = [q for p in profiles for q in check_profile(p) + provenance_problems(p)]
    assert problems == []
    files = sorted(f.stem for f in STORED.glob("*.json"))
    assert files == [p.id for p in profiles]


def test_at_least_16_distinct_clients_are_recorded_here() -> None:
    recorded = [p for p in load_profiles() if p.source.kind is SourceKind.recorded]
    assert len(recorded) >= 16
    shapes = {(p.ja4, p.ja3 if p.ja3_stable else p.id) for p in recorded}
    assert len(shapes) == len(recorded)      # no two with the same hello


def pq_share_groups(p: ClientProfile) -> list[str]:
    msg = decode_handshake(p.hello).message
    found = [group(e.group) for e in msg.key_shares]
    return [g.name for g in found if g is not None and g.kind in ("mlkem", "hybrid")]


def test_at_least_four_profiles_offer_a_post_quantum_key_share() -> None:
    pq = {p.id: pq_share_groups(p) for p in load_profiles()}
    pq = {k: v for k, v in pq.items() if v}
    assert len(pq) >= 4, pq
    for browser in ("chromium-156-debian12", "firefox-esr-153-debian12"):
        assert pq.get(browser) == ["X25519MLKEM768"]
