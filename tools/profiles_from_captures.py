#!/usr/bin/env python3
"""Client profiles from third-party captures: the clients that cannot be installed here.

Older and other-platform clients (Internet Explorer and SChannel, old Firefox and Chrome,
Chrome on Android, iOS, Safari, TLS 1.3 draft builds, Chrome with a post-quantum key share,
OpenJDK 25) are taken from captures that other projects recorded and published. Each entry
of `ENTRIES` names the capture (a path inside its corpus), the frame whose TCP stream holds
the hello (tshark's frame.number, 1-based), and the evidence the client's identity rests on
(`identified_by`): the file name its authors gave it, a cleartext User-Agent sent by the same
host in the same capture, a service only that client talks to. No entry is a guess from a
fingerprint. The hello must be a first hello (no pre_shared_key: a resumption attempt
cannot be replayed), which is why, for example, the Slack desktop hello of FoxIO's
latest.pcapng (identified by its User-Agent, but resuming a session) is not used.

The bytes are read by tlsprobe's own capture reader (tlsprobe.capture: pcap/pcapng/gzip,
TCP reassembly): the FIRST ClientHello handshake message of the frame's stream in the
client's direction, reassembled across records and segments. Each profile is written to
tlsprobe/data/clients/cap-<id>.json with probes/clients/profiles.py's `profile_to_json`
(source kind "capture", the file, frame, SHA-256 of the capture, the packet's date).

Corpora:
  shared  the captures corpus laid beside every clone and in CI (../shared/captures, or
          $TLSPROBE_SHARED/captures); tests/clients/test_capture_profiles.py re-extracts
          these and checks the bytes are identical.
  zeek    github:zeek/zeek at ZEEK_COMMIT (testing/btest/Traces/tls/: captures named by the
          client and version that made them).
  ndpi    github:ntop/nDPI at NDPI_COMMIT (tests/cfgs/default/pcap/: named by client).
A corpus folder is either a tree holding the files or a git directory (a clone or the
`fetch` mirror), read at the pinned commit with `git show`.

Usage:
  python3 tools/profiles_from_captures.py [--shared DIR] [--corpus zeek=DIR]
      [--corpus ndpi=DIR] [--only SUBSTR] [--out DIR] [--check]
Without a folder for a corpus its entries are skipped (named on stderr). --check writes
nothing and exits 1 when a stored profile differs from what its capture gives.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tlsprobe.capture import StreamData, iter_stream_events
from tlsprobe.model.clients import ClientProfile, ProfileSource, SourceKind, TrustStore
from tlsprobe.probes.clients.profiles import (
    check_profile,
    fingerprints,
    profile_to_json,
)
from tlsprobe.wire import decode_handshake
from tlsprobe.wire.hello import ClientHello

OUT = ROOT / "tlsprobe" / "data" / "clients"
PRE_SHARED_KEY = 41
ZEEK_COMMIT = "a13de64fbbdb01f90961c04719b308fbbb6d199e"
NDPI_COMMIT = "3b1286ab03b0c9223ac208a01868d8c1f6c0ae00"
#: per corpus: how a profile's source names it, and the pinned commit (None: a plain tree)
CORPORA: dict[str, tuple[str, str | None]] = {
    "shared": ("the captures corpus ../shared/captures (in CI)", None),
    "zeek": ("github:zeek/zeek test traces", ZEEK_COMMIT),
    "ndpi": ("github:ntop/nDPI test pcaps", NDPI_COMMIT),
}
_SV = "suricata-verify/tests/"
_WIKI = "wireshark/wiki/SampleCaptures/"
_ZT = "testing/btest/Traces/tls/"
_NP = "tests/cfgs/default/pcap/"
MS, MOZ, CHR, AND, APL, JAVA, UNK = (TrustStore.microsoft, TrustStore.mozilla,
                                     TrustStore.chrome, TrustStore.android, TrustStore.apple,
                                     TrustStore.java, TrustStore.unknown)


@dataclass(frozen=True)
class Entry:
    """One profile: where its hello is and who sent it (and why we know)."""

    corpus: str
    file: str                  # relative to the corpus
    frame: int                 # a frame of the hello's stream (tshark's numbering)
    id: str                    # without the "cap-" prefix
    client: str
    version: str
    platform: str
    library: str | None
    trust: TrustStore
    identified_by: str
    ja3_stable: bool = True    # False: the client permutes its extensions (Chromium >= 110)
    notes: str = ""


def _ua(ua: str, frame: int | str, what: str = "") -> str:
    """The wording of a User-Agent evidence."""
    return (f"the same host's cleartext HTTP in this capture carries User-Agent \"{ua}\" "
            f"(frame {frame}){what}")


ENTRIES: tuple[Entry, ...] = (
    # --- the shared corpus (in CI) --------------------------------------------------------
    Entry("shared", _WIKI + "twitter_login_logout.pcap", 4, "ie8-winxp", "Internet Explorer",
          "8.0", "Windows XP", "SChannel (Windows XP)", MS,
          _ua("Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 5.1; Trident/4.0; ...)", 20,
              "; this, that host's only hello, goes to 128.121.146.100, where its HTTP "
              "requests for twitter.com go")),
    Entry("shared", _WIKI + "new.pcap", 1023, "ie8-win7", "Internet Explorer", "8.0",
          "Windows 7", "SChannel (Windows 7)", MS,
          _ua("Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; Trident/4.0; ...)", 6,
              "; 31 of that host's 32 hellos, all those to www.dyndns.com, are this one")),
    Entry("shared", _SV + "tls/tls-subjectaltname/input.pcap", 996, "ie11-win7",
          "Internet Explorer", "11", "Windows 7", "SChannel (Windows 7)", MS,
          _ua("Mozilla/5.0 (Windows NT 6.1; Trident/7.0; rv:11.0) like Gecko", 504,
              " and its certificate checks \"Microsoft-CryptoAPI/6.1\"; this hello goes to "
              "www.coffeecircle.com, a site IE 11 fetched there (frame 504), and all 40 hellos of the "
              "host are the same")),
    Entry("shared", _WIKI + "wwwww.pcap", 771, "firefox-3.5-winxp", "Firefox", "3.5.2",
          "Windows XP", "NSS", MOZ,
          _ua("Mozilla/5.0 (Windows; U; Windows NT 5.1; en-US; rv:1.9.1.2) Gecko/20090729 "
              "Firefox/3.5.2", 722, "; the hello goes to services.addons.mozilla.org "
              "(Firefox's add-on service)")),
    Entry("shared", _WIKI + "Sanaullah.pcap", 1938, "firefox-3.6-winxp", "Firefox", "3.6.3",
          "Windows XP", "NSS", MOZ,
          _ua("Mozilla/5.0 (Windows; U; Windows NT 5.1; en-US; rv:1.9.2.3) Gecko/20100401 "
              "Firefox/3.6.3 ...", 1904, "; the only User-Agent of that host")),
    Entry("shared", _WIKI + "shark.pcap", 2541, "firefox-3.0-fedora10", "Firefox", "3.0.15",
          "Fedora 10 Linux, x86_64", "NSS", MOZ,
          _ua("Mozilla/5.0 (X11; U; Linux x86_64; en-US; rv:1.9.0.15) Gecko/2009102704 "
              "Fedora/3.0.15-1.fc10 Firefox/3.0.15", 1592,
              "; the hello goes to login.libero.it, the webmail it browses")),
    Entry("shared", _WIKI + "nb6-hotspot.pcap", 29, "firefox-26-linux", "Firefox", "26.0",
          "Linux x86_64", "NSS", MOZ,
          _ua("Mozilla/5.0 (X11; Linux x86_64; rv:26.0) Gecko/20100101 Firefox/26.0", 47,
              " (its OCSP request, just after this hello); the only User-Agent of that "
              "host")),
    Entry("shared", _WIKI + "LL1.pcap", 399, "chrome-3-vista", "Chrome", "3.0.195.38",
          "Windows Vista", None, MS,
          _ua("Mozilla/5.0 (Windows; U; Windows NT 6.0; en-US) AppleWebKit/532.0 (KHTML, "
              "like Gecko) Chrome/3.0.195.38 Safari/532.0", "207",
              " for http://10.200.200.68/ and its favicon (frame 362) just before this hello "
              "to the same server")),
    Entry("shared", _SV + "base64-decode-5885/input.pcap", 49, "chrome-86-win7", "Chrome",
          "86.0.4240.198", "Windows 7", "BoringSSL", MS,
          _ua("Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/86.0.4240.198 Safari/537.36", 349,
              " and SSDP \"Google Chrome/86.0.4240.198 Windows\"; the hello goes to "
              "clients2.google.com (Chrome's update/extension service)")),
    Entry("shared", "ja4/pcap/tls3.pcapng", 63, "chrome-116-win10", "Chrome", "116",
          "Windows 10", "BoringSSL", CHR,
          _ua("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like "
              "Gecko) Chrome/116.0.0.0 Safari/537.36", 78,
              "; every TCP hello of that host has this JA4's cipher part (8daaf6152771)"),
          ja3_stable=False, notes="Chrome permutes its extensions: JA3 changes per hello"),
    Entry("shared", _WIKI + "ws-cssp.tgz.d/win2k19-joined.cap", 1356, "schannel-win2019",
          "Windows SChannel (SmartScreen)", "Windows Server 2019", "Windows Server 2019",
          "SChannel", MS,
          "the capture's name (win2k19-joined: a Windows Server 2019 domain member, Wireshark "
          "wiki ws-cssp sample); the hello goes to smartscreen-prod.microsoft.com (Windows "
          "SmartScreen, a system component) and the host's HTTP carries "
          "\"MICROSOFT_DEVICE_METADATA_RETRIEVAL_CLIENT\" (frame 1319)"),
    Entry("shared", "wireshark/wiki/96afe21b136f715d5b96df4a646c57d9/pcapng-example.pcapng",
          42, "curl-7.68", "curl", "7.68.0", "Linux (not stated)", None, UNK,
          "the request decrypted from this same connection (the pcapng embeds its TLS keys) "
          "carries User-Agent \"curl/7.68.0\" (frame 57)"),
    Entry("shared", _SV + "ips-state-1/input.pcap", 14, "curl-7.79", "curl", "7.79.1",
          "not stated", None, UNK,
          _ua("curl/7.79.1", "4 and 53",
              "; this hello goes to the same host, evebox.org")),
    # --- zeek's test traces (github:zeek/zeek, not in CI) ---------------------------------
    Entry("zeek", _ZT + "chrome-1250-tls-x25519-kyber.pcap", 4, "chrome-125-kyber", "Chrome",
          "125.0", "not stated", "BoringSSL", UNK,
          "zeek's file name chrome-1250-tls-x25519-kyber.pcap and its commit 34225e83ba \"Add "
          "test for X25519Kyber768Draft00 (post-quantum key agreement)\" (2024-05-23)",
          ja3_stable=False,
          notes="post-quantum: a X25519Kyber768Draft00 (0x6399) key share; Chrome permutes "
                "its extensions"),
    Entry("zeek", _ZT + "chrome-34-google.pcap", 4, "chrome-34", "Chrome", "34",
          "not stated", None, UNK,
          "zeek's file name chrome-34-google.pcap (its tls-extension-events test)"),
    Entry("zeek", _ZT + "tls13draft16-chrome55.0.2879.0-canary.pcap", 4, "chrome-55-canary",
          "Chrome Canary", "55.0.2879.0", "not stated", "BoringSSL", UNK,
          "zeek's file name tls13draft16-chrome55.0.2879.0-canary.pcap (its tls13 test)",
          notes="offers TLS 1.3 draft 16 (0x7f10) beside TLS 1.2"),
    Entry("zeek", _ZT + "tls13draft16-ff52.a01.pcap", 4, "firefox-52a1", "Firefox Nightly",
          "52.0a1", "not stated", "NSS", MOZ,
          "zeek's file name tls13draft16-ff52.a01.pcap (its tls13 test)",
          notes="offers TLS 1.3 draft 16 (0x7f10) beside TLS 1.2"),
    Entry("zeek", _ZT + "chrome-63.0.3211.0-canary-tls_experiment.pcap", 4, "chrome-63-canary",
          "Chrome Canary", "63.0.3211.0", "not stated", "BoringSSL", UNK,
          "zeek's file name chrome-63.0.3211.0-canary-tls_experiment.pcap (its "
          "tls13-experiment test)",
          notes="offers the TLS 1.3 'experiment' variant (0x7e01/0x7e02) beside TLS 1.2"),
    Entry("zeek", _ZT + "tls13draft23-chrome67.0.3368.0-canary.pcap", 5, "chrome-67-canary",
          "Chrome Canary", "67.0.3368.0", "not stated", "BoringSSL", UNK,
          "zeek's file name tls13draft23-chrome67.0.3368.0-canary.pcap (its tls13-version "
          "test)", notes="offers TLS 1.3 draft 23 (0x7f17) beside TLS 1.2"),
    Entry("zeek", _ZT + "openjdk-25.0.2-zeek.org.pcap", 4, "openjdk-25", "OpenJDK HttpClient",
          "25.0.2", "not stated", "JSSE (SunJSSE)", JAVA,
          "zeek's file name openjdk-25.0.2-zeek.org.pcap and the program beside it "
          "(openjdk-25.0.2-zeek.org.pcap.java: java.net.http.HttpClient GET "
          "https://zeek.org)"),
    # --- nDPI's test pcaps (github:ntop/nDPI, not in CI) ----------------------------------
    Entry("ndpi", _NP + "android.pcap", 340, "chrome-79-android9", "Chrome", "79.0.3945.93",
          "Android 9 (Nokia 2.2)", "BoringSSL", AND,
          "nDPI's file name android.pcap; " + _ua(
              "Mozilla/5.0 (Linux; Android 9; Nokia 2.2) ... Chrome/79.0.3945.93 Mobile "
              "Safari/537.36", 227, " on Chrome's Data Saver probe check.googlezip.net/"
              "connect; this hello goes to proxy.googlezip.net, the Data Saver proxy")),
    Entry("ndpi", _NP + "googledns_android10.pcap", 10, "android10-private-dns",
          "Android Private DNS (DNS over TLS)", "Android 10", "Android 10", "Conscrypt",
          AND, "nDPI's file name googledns_android10.pcap; the hello goes to dns.google on "
               "port 853 (DNS over TLS), the system resolver's Private DNS mode"),
    Entry("ndpi", _NP + "iphone.pcap", 68, "ios-system", "iOS system services",
          "not stated (2020-02)", "iOS (iPhone)", None, APL,
          "nDPI's file name iphone.pcap; the same host's captive-portal probe carries "
          "\"CaptiveNetworkSupport-390.60.1 wispr\" (iOS); the hello goes to "
          "p26-fmfmobile.icloud.com (Find My Friends)"),
    Entry("ndpi", _NP + "443-safari.pcap", 4, "safari-2020", "Safari",
          "not stated (2020-02)", "Apple (not stated)", None, APL,
          "nDPI's file name 443-safari.pcap (with 443-chrome/-firefox/-curl.pcap: the same "
          "host fetching https://www.ntop.org with each client)"),
)


def corpus_file(entry: Entry, roots: dict[str, Path], tmp: Path) -> Path | None:
    """The capture file of `entry` (from a tree, or from a git directory at the pinned
    commit into `tmp`); None when its corpus has no folder."""
    root = roots.get(entry.corpus)
    if root is None:
        return None
    direct = root / entry.file
    if direct.is_file():
        return direct
    commit = CORPORA[entry.corpus][1]
    if commit is None:
        raise SystemExit(f"{entry.file}: not found in {root}")
    out = tmp / entry.corpus / entry.file
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        blob = subprocess.run(["git", "--git-dir", str(root), "show", f"{commit}:{entry.file}"],
                              capture_output=True, check=False)
        if blob.returncode:
            raise SystemExit(f"{entry.file}: git show failed in {root}: "
                             f"{blob.stderr.decode(errors='replace').strip()}")
        out.write_bytes(blob.stdout)
    return out


def first_client_hello(path: Path, frame: int) -> tuple[bytes, int, float]:
    """(ClientHello handshake message, record version of its first record, time of `frame`)
    of the TCP stream that carries `frame`, read with tlsprobe's capture reader."""
    streams: dict[tuple[int, int], bytearray] = {}
    target: tuple[int, int] | None = None
    when = 0.0
    for event in iter_stream_events(path, udp=False):
        if type(event) is not StreamData:
            continue
        key = (event.conn.id, event.direction)
        buf = streams.setdefault(key, bytearray())
        if len(buf) < 1 << 18:
            buf += event.data
        if event.frame == frame and target is None:
            target, when = key, event.ts
    if target is None:
        raise ValueError(f"{path.name}: frame {frame} carries no TCP payload")
    hello, version = _hello_in(bytes(streams[target]))
    if hello is None:
        raise ValueError(f"{path.name}: no ClientHello in the stream of frame {frame}")
    return hello, version, when


def _hello_in(data: bytes) -> tuple[bytes | None, int]:
    """The first ClientHello in a byte stream of TLS records (reassembled across records)."""
    start = 0
    while True:
        start = data.find(b"\x16\x03", start)
        if start < 0 or start + 6 > len(data):
            return None, 0
        if data[start + 5] == 1:
            break
        start += 1
    version = int.from_bytes(data[start + 1:start + 3], "big")
    payload, off = bytearray(), start
    while off + 5 <= len(data) and data[off] == 0x16:
        size = int.from_bytes(data[off + 3:off + 5], "big")
        payload += data[off + 5:off + 5 + size]
        off += 5 + size
        if len(payload) >= 4 and len(payload) >= 4 + int.from_bytes(payload[1:4], "big"):
            return bytes(payload[:4 + int.from_bytes(payload[1:4], "big")]), version
    return None, 0


def resumes(hello: bytes) -> bool:
    """Whether a ClientHello offers a pre-shared key (extension 41): a resumption."""
    msg = decode_handshake(hello).message
    return type(msg) is ClientHello and msg.extension(PRE_SHARED_KEY) is not None


def build(entry: Entry, path: Path) -> ClientProfile:
    """The profile of one entry from its capture file."""
    hello, version, ts = first_client_hello(path, entry.frame)
    if resumes(hello):
        raise ValueError(f"frame {entry.frame}: the hello offers pre_shared_key (a resumption "
                         "attempt, not a client's first hello)")
    j3, j4 = fingerprints(hello)
    how, commit = CORPORA[entry.corpus]
    if commit:
        how = f"{how} at {commit[:12]}"
    day = datetime.datetime.fromtimestamp(ts, datetime.UTC).date().isoformat()
    source = ProfileSource(SourceKind.capture, how, day, entry.file, entry.frame,
                           hashlib.sha256(path.read_bytes()).hexdigest(), entry.identified_by)
    return ClientProfile(id=f"cap-{entry.id}", client=entry.client, version=entry.version,
                         platform=entry.platform, library=entry.library, source=source,
                         hello=hello, record_version=version, ja3=j3, ja4=j4,
                         ja3_stable=entry.ja3_stable, trust_store=entry.trust,
                         notes=entry.notes)


def profile_text(p: ClientProfile) -> str:
    """The stored form of a profile (one JSON file)."""
    return json.dumps(profile_to_json(p), indent=2) + "\n"


def _roots(args: argparse.Namespace) -> dict[str, Path]:
    shared = args.shared or Path(os.environ.get("TLSPROBE_SHARED") or ROOT.parent / "shared")
    roots = {"shared": Path(shared) / "captures" if (Path(shared) / "captures").is_dir()
             else Path(shared)}
    for item in args.corpus:
        name, _, folder = item.partition("=")
        if name not in CORPORA or not folder:
            raise SystemExit(f"--corpus {item!r}: expected NAME=DIR with NAME in "
                             f"{', '.join(CORPORA)}")
        roots[name] = Path(folder)
    return roots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, help="the shared folder (or its captures/)")
    ap.add_argument("--corpus", action="append", default=[], metavar="NAME=DIR",
                    help="a folder (tree or git directory) for the zeek or ndpi corpus")
    ap.add_argument("--only", default="", help="only the ids containing this text")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    args = ap.parse_args(argv)
    roots, bad = _roots(args), 0
    with tempfile.TemporaryDirectory() as tmp:
        for entry in ENTRIES:
            if args.only not in entry.id:
                continue
            path = corpus_file(entry, roots, Path(tmp))
            if path is None:
                print(f"skipped cap-{entry.id}: no folder for corpus {entry.corpus}",
                      file=sys.stderr)
                continue
            try:
                profile = build(entry, path)
            except ValueError as exc:
                print(f"cap-{entry.id}: {exc}", file=sys.stderr)
                bad += 1
                continue
            problems = check_profile(profile)
            target = args.out / f"{profile.id}.json"
            if problems:
                print("\n".join(problems), file=sys.stderr)
                bad += 1
            elif args.check:
                same = target.is_file() and target.read_text("utf-8") == profile_text(profile)
                bad += not same
                print(f"{'ok' if same else 'DIFFERS'} {profile.id}")
            else:
                target.write_text(profile_text(profile), "utf-8")
                print(f"{profile.id}: {profile.ja4} {len(profile.hello)} bytes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
