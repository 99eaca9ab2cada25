#!/usr/bin/env python3
"""Record the project's own captures (captures/) on loopback, with their expected results.

Each case starts a real server on 127.0.0.1 or ::1 (the test suite's tests/helpers/servers.py:
openssl s_server, or pyOpenSSL for the post-quantum groups), captures the loopback
interface with `tcpdump -i lo --immediate-mode` while a real client (openssl s_client, gnutls-cli,
tlsprobe's own probe, or a Python ssl client that writes a few bytes per segment) talks to it, and writes ``captures/<case>.pcap``, the client's key log
``captures/<case>.keys`` and the case's expectation into ``captures/expected.json``.
Expectations come from the server and client configuration (what must be negotiated), not
from tlsprobe; every recording is checked against tshark before it is kept.

Derived captures are edits of recorded ones (real packets, rearranged): reordered and
duplicated segments, a lost segment (gap), a capture that starts mid-connection, a pcapng
with the key log embedded (editcap --inject-secrets) and a gzip-compressed copy.

Usage (root, for tcpdump):  python3 tools/record_captures.py [--only SUBSTR] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # tlsprobe and the test suite's helpers (tests is a package)

from tests.helpers.servers import Server, start_server

SHARES = {"X25519": (32, 32), "X448": (56, 56), "P-256": (65, 65), "P-384": (97, 97),
          "P-521": (133, 133), "ffdhe2048": (256, 256), "ffdhe3072": (384, 384),
          "X25519MLKEM768": (1120, 1216), "SecP256r1MLKEM768": (1153, 1249),
          "MLKEM768": (1088, 1184), "brainpoolP256r1tls13": (65, 65)}
CODES = {"X25519": "0x001d", "X448": "0x001e", "P-256": "0x0017", "P-384": "0x0018",
         "P-521": "0x0019", "ffdhe2048": "0x0100", "ffdhe3072": "0x0101",
         "X25519MLKEM768": "0x11ec", "SecP256r1MLKEM768": "0x11eb", "MLKEM768": "0x0201",
         "brainpoolP256r1tls13": "0x001f"}
GET = b"GET / HTTP/1.0\r\n\r\n"


@dataclass
class Case:
    name: str
    description: str
    server: dict[str, Any]
    client: Callable[[str, int, Path], None]
    expect: list[dict[str, Any]]
    host: str = "127.0.0.1"
    # derived capture name -> (edit, what it must still show)
    derived: dict[str, tuple[Callable[[bytes], bytes], list[dict[str, Any]]]] = \
        field(default_factory=dict)


# -- clients ------------------------------------------------------------------------------
def s_client(*args: str, data: bytes = GET, sess_in: bool = False) -> Callable[..., None]:
    """openssl s_client with these options; key log written next to the capture."""
    def run(host: str, port: int, keys: Path) -> None:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        argv = ["openssl", "s_client", "-connect", target, "-servername", "localhost",
                "-keylogfile", str(keys), "-ign_eof", *args]
        if sess_in:
            sess = Path(tempfile.gettempdir()) / f"{keys.stem}-{os.getpid()}.sess"
            subprocess.run(argv + ["-sess_out", str(sess)], input=data, capture_output=True,
                           timeout=15, check=False)
            argv += ["-sess_in", str(sess)]
        subprocess.run(argv, input=data, capture_output=True, timeout=15, check=False)
        if sess_in:
            sess.unlink(missing_ok=True)
    return run


def gnutls_cli(*args: str) -> Callable[..., None]:
    """gnutls-cli with these options, trusting only a CA of its own that signed nothing
    the server has: it refuses the certificate with an alert it encrypts (TLS 1.3, under
    its handshake keys), as browsers do; key log by SSLKEYLOGFILE."""
    def run(host: str, port: int, keys: Path) -> None:
        ca = keys.with_suffix(".ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", "/dev/null",
                        "-subj", "/CN=unrelated CA", "-days", "1", "-out", str(ca)],
                       capture_output=True, timeout=30, check=True)
        try:
            subprocess.run(["gnutls-cli", f"--x509cafile={ca}", "-p", str(port), *args, host],
                           input=b"", capture_output=True, timeout=15, check=False,
                           env={**os.environ, "SSLKEYLOGFILE": str(keys)})
        finally:
            ca.unlink(missing_ok=True)
    return run


def tlsprobe_client(*args: str) -> Callable[..., None]:
    """tlsprobe's own probe as the client (it offers groups s_client 3.0 cannot)."""
    def run(host: str, port: int, keys: Path) -> None:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        subprocess.run([sys.executable, "-m", "tlsprobe", target, "--sni", "localhost",
                        "--keylog", str(keys), "--no-verify", "--http-get", "/", *args],
                       cwd=ROOT, capture_output=True, timeout=30, check=False)
    return run


def trickle_client(chunk: int = 7, mss: int = 100) -> Callable[..., None]:
    """Python ssl writing `chunk` bytes per segment (TCP_NODELAY, a pause between writes),
    over a socket asking for a small MSS (loopback's segmentation offload still carries the
    server's flight in a few large segments, each record split across them)."""
    def run(host: str, port: int, keys: Path) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.keylog_filename = str(keys)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(10)
        sock.connect((host, port))
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")

        def flush() -> None:
            data = outgoing.read()
            for i in range(0, len(data), chunk):
                sock.sendall(data[i:i + chunk])
                time.sleep(0.002)

        def pump(step: Callable[[], Any]) -> Any:
            while True:
                try:
                    result = step()
                    flush()
                    return result
                except ssl.SSLWantReadError:
                    flush()
                    got = sock.recv(65536)
                    if not got:
                        raise ConnectionError("closed") from None
                    incoming.write(got)
        try:
            pump(tls.do_handshake)
            pump(lambda: tls.write(GET))
            try:
                while pump(lambda: tls.read(65536)):
                    pass
            except (ssl.SSLError, ConnectionError):
                pass
        finally:
            sock.close()
    return run


# -- pcap editing (real packets, rearranged) ----------------------------------------------
def _packets(data: bytes) -> tuple[bytes, list[bytes]]:
    header, out, p = data[:24], [], 24
    while p + 16 <= len(data):
        size = struct.unpack_from("<I", data, p + 8)[0]
        out.append(data[p:p + 16 + size])
        p += 16 + size
    return header, out


def _payload_len(packet: bytes) -> int:
    frame = packet[16:]  # Ethernet (tcpdump on lo) + IPv4/IPv6 + TCP
    if frame[12:14] == b"\x08\x00":
        ihl = (frame[14] & 15) * 4
        total = struct.unpack_from("!H", frame, 16)[0]
        tcp = 14 + ihl
        return total - ihl - (frame[tcp + 12] >> 4) * 4
    tcp = 14 + 40
    return struct.unpack_from("!H", frame, 18)[0] - (frame[tcp + 12] >> 4) * 4


def _sport(packet: bytes) -> int:
    frame = packet[16:]
    tcp = 14 + ((frame[14] & 15) * 4 if frame[12:14] == b"\x08\x00" else 40)
    return int(struct.unpack_from("!H", frame, tcp)[0])


def _data_indexes(packets: list[bytes], server_port: int | None, from_server: bool) -> list[int]:
    return [i for i, p in enumerate(packets) if _payload_len(p) > 0 and
            (server_port is None or (_sport(p) == server_port) == from_server)]


def reorder_and_duplicate(data: bytes) -> bytes:
    """Swap neighbouring data segments in both directions and send some twice."""
    header, packets = _packets(data)
    port = _sport(packets[1])  # the SYN+ACK comes from the server
    for from_server in (False, True):
        idx = _data_indexes(packets, port, from_server)
        for a, b in zip(idx[1:12:3], idx[2:13:3]):
            packets[a], packets[b] = packets[b], packets[a]
    out: list[bytes] = []
    for i, p in enumerate(packets):
        out.append(p)
        if _payload_len(p) > 0 and i % 4 == 0:
            out.append(p)
    return header + b"".join(out)


def drop_server_segment(data: bytes) -> bytes:
    """Lose one server data segment in the middle of the server's first flight."""
    header, packets = _packets(data)
    idx = _data_indexes(packets, _sport(packets[1]), True)
    victim = idx[len(idx) // 4]
    return header + b"".join(p for i, p in enumerate(packets) if i != victim)


def start_midstream(data: bytes) -> bytes:
    """Start the capture after the ClientHello (no handshake, no ClientHello)."""
    header, packets = _packets(data)
    first = _data_indexes(packets, None, False)[0]
    return header + b"".join(packets[first + 1:])


# -- the cases ----------------------------------------------------------------------------
#: s_client options that trust no CA and stop at the failed verification (alert unknown_ca)
UNTRUSTING = ("-no-CAfile", "-no-CApath", "-no-CAstore", "-verify_return_error")


def srv(**options: Any) -> dict[str, Any]:
    """start_server() keyword arguments of a case."""
    return options


def _hs(version: str, suite: str, group: str | None, source: str | None, **more: Any) -> dict:
    out: dict[str, Any] = {"version": version, "cipher_suite": suite,
                           "group": CODES.get(group or "", group), "group_source": source,
                           "sni": "localhost"}
    if group in SHARES:
        out["server_share_bytes"], out["client_share_bytes"] = SHARES[group]
    out.update(more)
    return out


def cases() -> list[Case]:
    out = [Case("tls12_x25519",
                "TLS 1.2 ECDHE-RSA-AES128-GCM-SHA256 with X25519 against openssl s_server",
                srv(impl="openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                     proto="tls1_2"), s_client("-tls1_2"),
                [_hs("0x0303", "0xc02f", "X25519", "server_key_exchange", certificates=2)],
                derived={"tls12_x25519_midstream": (start_midstream, [
                    {"version": "0x0303", "cipher_suite": "0xc02f", "group": "0x001d",
                     "client_share_bytes": 32, "sni": None, "midstream": True}])})]
    for group in ("X25519", "X448", "P-256", "P-384", "P-521", "ffdhe2048", "ffdhe3072"):
        out.append(Case(f"tls13_{group.lower().replace('-', '')}",
                        f"TLS 1.3 with {group} against openssl s_server",
                        srv(impl="openssl", groups=[group], proto="tls1_3"),
                        s_client("-tls1_3", "-groups", group),
                        [_hs("0x0304", "0x1302", group, "key_share")]))
    for group in ("X25519MLKEM768", "SecP256r1MLKEM768", "MLKEM768", "brainpoolP256r1tls13"):
        out.append(Case(f"tls13_{group.lower()}",
                        f"TLS 1.3 with {group} (pyOpenSSL server, tlsprobe client)",
                        srv(impl="pyopenssl", groups=[group], proto="tls1_3"),
                        tlsprobe_client("--tls1_3", "--groups", group, "--key-shares", group),
                        [_hs("0x0304", None, group, "key_share")]))
    out += [
        Case("tls13_hrr", "TLS 1.3 HelloRetryRequest: key share for X25519, server wants P-256",
             srv(impl="openssl", groups=["P-256"], proto="tls1_3"),
             s_client("-tls1_3", "-groups", "X25519:P-256"),
             [_hs("0x0304", "0x1302", "P-256", "hello_retry_request",
                  hello_retry_request="0x0017")]),
        Case("tls12_dhe", "TLS 1.2 DHE-RSA-AES128-GCM-SHA256 with ffdhe2048 parameters",
             srv(impl="openssl", ciphers="DHE-RSA-AES128-GCM-SHA256", proto="tls1_2",
                  dhparam="ffdhe2048"), s_client("-tls1_2"),
             [_hs("0x0303", "0x009e", "ffdhe2048", "dhe_parameters", dh_prime_bits=2048)]),
        Case("tls12_rsa", "TLS 1.2 AES128-GCM-SHA256: RSA key transport (2048-bit key)",
             srv(impl="openssl", ciphers="AES128-GCM-SHA256", proto="tls1_2"),
             s_client("-tls1_2"),
             [_hs("0x0303", "0x009c", None, "rsa", client_share_bytes=256)]),
        Case("tls12_alert", "TLS 1.2 without a shared cipher: the server's handshake_failure",
             srv(impl="openssl", ciphers="ECDHE-RSA-AES128-GCM-SHA256", proto="tls1_2"),
             s_client("-tls1_2", "-cipher", "AES256-SHA256", data=b""),
             [{"version": None, "sni": "localhost", "alerts": [["server", 2, 40]]}]),
        Case("tls12_unknown_ca", "TLS 1.2 failed after the ServerHello: the client trusts "
             "no CA and sends unknown_ca",
             srv(impl="openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                  proto="tls1_2"), s_client("-tls1_2", *UNTRUSTING, data=b""),
             [_hs("0x0303", "0xc02f", "X25519", "server_key_exchange",
                  client_share_bytes=None, alerts=[["client", 2, 48]])]),
        Case("tls13_unknown_ca", "TLS 1.3 failed after the ServerHello: the client trusts "
             "no CA and sends unknown_ca",
             srv(impl="openssl", groups=["X25519"], proto="tls1_3"),
             s_client("-tls1_3", *UNTRUSTING, data=b""),
             [_hs("0x0304", "0x1302", "X25519", "key_share", alerts=[["client", 2, 48]])]),
        Case("tls13_encrypted_alert", "TLS 1.3 failed after the ServerHello: gnutls-cli "
             "trusts another CA and sends bad_certificate encrypted under its handshake keys",
             srv(impl="openssl", groups=["X25519"], proto="tls1_3"),
             gnutls_cli("--priority=NORMAL:-VERS-ALL:+VERS-TLS1.3", "--sni-hostname=localhost"),
             [_hs("0x0304", "0x1302", "X25519", "key_share", alerts=[["client", None, None]])]),
        Case("tls13_resumption", "TLS 1.3 full handshake, then PSK resumption with its ticket",
             srv(impl="openssl", groups=["X25519"], proto="tls1_3"),
             s_client("-tls1_3", sess_in=True),
             [_hs("0x0304", "0x1302", "X25519", "key_share"),
              _hs("0x0304", "0x1302", "X25519", "key_share", resumption="psk")]),
        Case("tls12_resumption", "TLS 1.2 full handshake, then session-ticket resumption",
             srv(impl="openssl", groups=["X25519"], proto="tls1_2",
                  ciphers="ECDHE-RSA-AES256-GCM-SHA384"), s_client("-tls1_2", sess_in=True),
             [_hs("0x0303", "0xc030", "X25519", "server_key_exchange"),
              {"version": "0x0303", "cipher_suite": "0xc030", "resumption": "session_ticket"}]),
        Case("tls13_ipv6", "TLS 1.3 X25519 over ::1",
             srv(impl="openssl", groups=["X25519"], proto="tls1_3", host="::1"),
             s_client("-tls1_3"), [_hs("0x0304", "0x1302", "X25519", "key_share")],
             host="::1"),
        Case("tls12_split", "TLS 1.2 X25519: the client writes 7 bytes per segment; the server's flight spans several segments",
             srv(impl="openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                  proto="tls1_2"), trickle_client(),
             [_hs("0x0303", "0xc02f", "X25519", "server_key_exchange", sni="localhost")],
             derived={"tls12_split_reordered": (reorder_and_duplicate, [
                 _hs("0x0303", "0xc02f", "X25519", "server_key_exchange")]),
                      "tls12_split_gap": (drop_server_segment, [
                 {"version": "0x0303", "cipher_suite": "0xc02f", "client_share_bytes": 32,
                  "session_ticket_lifetime": 7200, "gap": True}])}),
    ]
    return out + client_auth_cases()


def client_auth_cases() -> list[Case]:
    """Mutual TLS: the server (ECDSA) asks for a client certificate (-Verify: requires one,
    -verify: asks), the client sends the test CA's RSA leaf and the CA, or nothing. (An
    ECDSA client certificate against s_server's ECDHE-RSA-only cipher list fails with
    illegal_parameter: OpenSSL 3.0's own limit, not the capture's.)"""
    from tests.helpers.servers import default_certs
    certs = default_certs()
    mine = ("-cert", str(certs["rsa"].cert), "-key", str(certs["rsa"].key),
            "-cert_chain", str(certs.ca))
    asks = ["-Verify", "1"]
    return [
        Case("tls12_client_auth", "TLS 1.2 mutual authentication: the server requires a "
             "client certificate, the client sends its RSA leaf and CA",
             srv(impl="openssl", groups=["X25519"], ciphers="ECDHE-ECDSA-AES128-GCM-SHA256",
                 proto="tls1_2", cert="ecdsa", extra=asks), s_client("-tls1_2", *mine),
             [_hs("0x0303", "0xc02b", "X25519", "server_key_exchange",
                  client_auth=[True, True, 2])]),
        Case("tls12_client_auth_empty", "TLS 1.2: the server asks for a client certificate, "
             "the client has none (an empty Certificate)",
             srv(impl="openssl", groups=["X25519"], ciphers="ECDHE-ECDSA-AES128-GCM-SHA256",
                 proto="tls1_2", cert="ecdsa", extra=["-verify", "1"]), s_client("-tls1_2"),
             [_hs("0x0303", "0xc02b", "X25519", "server_key_exchange",
                  client_auth=[True, True, 0])]),
        Case("tls13_client_auth", "TLS 1.3 mutual authentication (seen only with the key "
             "log): the client sends its RSA leaf and CA to an ECDSA server",
             srv(impl="openssl", groups=["X25519"], proto="tls1_3", cert="ecdsa", extra=asks),
             s_client("-tls1_3", *mine), [_hs("0x0304", "0x1302", "X25519", "key_share")]),
    ]


# -- recording ----------------------------------------------------------------------------
def record(case: Case, out: Path, tmp: Path) -> dict[str, Any]:
    server: Server = start_server(workdir=tmp / case.name, **case.server)
    pcap, keys = out / f"{case.name}.pcap", out / f"{case.name}.keys"
    keys.unlink(missing_ok=True)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0",
                             "-w", str(pcap), f"tcp port {server.port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert dump.stderr is not None
        dump.stderr.readline()  # "listening on lo ..." once the capture runs
        time.sleep(0.2)
        case.client(case.host, server.port, keys)
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
        server.stop()
    entry = {"description": case.description, "server": {k: v for k, v in case.server.items()},
             "server_port": server.port, "connections": case.expect}
    if keys.exists() and any(line.strip() and not line.startswith("#")
                             for line in keys.read_text().splitlines()):
        entry["keylog"] = keys.name
    else:
        keys.unlink(missing_ok=True)
    check_with_tshark(pcap, case.expect)
    return entry


def check_with_tshark(pcap: Path, expect: list[dict[str, Any]]) -> None:
    """The independent check: tshark must see the same versions and suites."""
    fields = ["tcp.stream", "tls.handshake.type", "tls.handshake.ciphersuite",
              "tls.handshake.extensions.supported_version"]
    res = subprocess.run(["tshark", "-r", str(pcap), "-Y", "tls.handshake.type==2", "-T",
                          "fields", *[arg for f in fields for arg in ("-e", f)]],
                         capture_output=True, text=True, timeout=60, check=False)
    seen = [line.split("\t") for line in res.stdout.splitlines() if line.strip()]
    wanted = [e for e in expect if e.get("cipher_suite")]
    suites = [int(s[2].split(",")[-1], 16) for s in seen]
    for e in wanted:
        if int(e["cipher_suite"], 16) not in suites:
            raise SystemExit(f"{pcap.name}: tshark sees suites {suites}, expected "
                             f"{e['cipher_suite']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "captures"))
    ap.add_argument("--only", help="record only cases whose name contains this")
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("tcpdump"):
        print("record_captures: needs root and tcpdump", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    expected_path = out / "expected.json"
    expected = json.loads(expected_path.read_text()) if expected_path.exists() else {}
    with tempfile.TemporaryDirectory(prefix="tlsprobe-rec-") as tmp:
        for case in cases():
            if args.only and args.only not in case.name:
                continue
            entry = record(case, out, Path(tmp))
            expected[f"{case.name}.pcap"] = entry
            print(f"recorded {case.name}.pcap")
            for name, (edit, expect) in case.derived.items():
                (out / f"{name}.pcap").write_bytes(edit((out / f"{case.name}.pcap").read_bytes()))
                expected[f"{name}.pcap"] = {**entry, "description": f"{case.description}; "
                                            f"derived: {edit.__doc__}", "derived_from":
                                            f"{case.name}.pcap", "connections": expect}
                if edit is not reorder_and_duplicate:  # bytes are lost: keys cannot apply
                    expected[f"{name}.pcap"].pop("keylog", None)
                print(f"  derived {name}.pcap")
            if case.name == "tls13_x25519":
                embed(out, case.name, expected, entry)
    expected_path.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


def embed(out: Path, name: str, expected: dict[str, Any], entry: dict[str, Any]) -> None:
    """A pcapng with the key log inside (Decryption Secrets Block) and a gzip copy."""
    pcapng = out / f"{name}_dsb.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{out / (name + '.keys')}",
                    str(out / f"{name}.pcap"), str(pcapng)], check=True)
    expected[pcapng.name] = {**entry, "description": entry["description"] +
                             "; key log embedded (editcap --inject-secrets)",
                             "derived_from": f"{name}.pcap", "embedded_keys": True}
    expected[pcapng.name].pop("keylog", None)
    gz = out / f"{name}.pcap.gz"
    gz.write_bytes(gzip.compress((out / f"{name}.pcap").read_bytes(), mtime=0))
    expected[gz.name] = {**entry, "derived_from": f"{name}.pcap", "gzip": True}


if __name__ == "__main__":
    sys.exit(main())
