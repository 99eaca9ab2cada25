"""TLS 1.3 under vendor version numbers: Facebook's 0xfb17/0xfb1a (Fizz, mvfst) and other
versions a server picks in supported_versions (Google's 0x7eXX experiments): the handshake
is TLS 1.3's, so the server's key_share group is reported, over TCP and over QUIC, as tshark
reports it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.hostile import tls as H
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.offline.analyzer import analyze
from tlsprobe.wire import frame

from tests.offline import quicbuild as Q
from tests.helpers.capbuild import Conv, ether, pcap_bytes

TSHARK = shutil.which("tshark")


def tcp_capture(path: Path, version: int, offered: tuple[int, ...] = ()) -> Path:
    """ClientHello offering `version` (and TLS 1.2), a ServerHello choosing it in
    supported_versions with an x25519 share, then the server's protected records."""
    ch = build_client_hello(ClientConfig(server_name="variant.example",
                                         versions=offered or (version, 0x0303),
                                         groups=(0x1D, 0x17))).hello
    sh = H.server_hello_13(ch, version_ext=version)
    c = Conv()
    flight = H.handshake_records(sh) + H.record(20, b"\x01") + H.record(23, os.urandom(300))
    packets = c.handshake() + [c.c(H.handshake_records(frame(1, ch.serialize()),
                                                       version=0x0301)),
                               c.ack(False), c.s(flight), c.ack()]
    path.write_bytes(pcap_bytes([ether(p) for p in packets]))
    return path


def tshark_server_hello(path: Path) -> list[str]:
    """[selected version, key_share group] of the ServerHello as tshark reads it."""
    out = subprocess.run([TSHARK or "tshark", "-r", str(path), "-Y", "tls.handshake.type == 2",
                          "-T", "fields", "-e", "tls.handshake.extensions.supported_version",
                          "-e", "tls.handshake.extensions_key_share_group"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return out.split()


@pytest.mark.parametrize("version, name", [
    (0xFB1A, "TLS 1.3 Facebook draft 26"), (0xFB17, "TLS 1.3 Facebook draft 23"),
    (0x7E02, "0x7e02"), (0x7F1C, "TLS 1.3 draft 28")])
def test_key_share_of_a_tls13_variant_over_tcp(version: int, name: str,
                                               tmp_path: Path) -> None:
    path = tcp_capture(tmp_path / "v.pcap", version)
    (done,) = list(analyze(str(path)))
    r = done.report
    assert r.version.name == name and r.sni == "variant.example"
    assert r.key_exchange.kind == "ECDHE" and r.key_exchange.source == "key_share"
    assert r.key_exchange.group.name == "x25519"
    assert (r.key_exchange.server_share_bytes, r.key_exchange.client_share_bytes) == (32, 32)
    if TSHARK:
        assert tshark_server_hello(path) == [f"0x{version:04x}", "29"]


def test_a_tls12_server_hello_with_supported_versions_stays_tls12(tmp_path: Path) -> None:
    """Only a version above TLS 1.3 chosen in supported_versions makes a variant: a
    (non-conformant) ServerHello that names TLS 1.2 there is not read as TLS 1.3."""
    path = tcp_capture(tmp_path / "v.pcap", 0x0303, offered=(0x0304, 0x0303))
    (done,) = list(analyze(str(path)))
    assert done.report.version.name == "TLS 1.2"
    assert done.report.key_exchange.source != "key_share"


def test_mvfst_quic_with_facebook_tls13_draft(tmp_path: Path) -> None:
    """mvfst (QUIC 0xfaceb002) carrying Fizz's TLS 1.3 draft 0xfb1a."""
    ch, chm = Q.client_hello(versions=(0xFB1A, 0x0304))
    sh = H.server_hello_13(ch, version_ext=0xFB1A)
    v, d, c, s = 0xFACEB002, Q.cid(), Q.cid(), Q.cid()
    path = Q.write(tmp_path / "mvfst.pcap", [
        Q.datagram(Q.initial(v, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                             keys=Q.initial_keys(v, d, "client"))),
        Q.datagram(Q.initial(v, c, s, 0, Q.crypto(0, sh), keys=Q.initial_keys(v, d, "server")),
                   from_client=False)])
    (done,) = list(analyze(str(path)))
    r = done.report
    assert r.protocol == "quic" and r.version.name == "TLS 1.3 Facebook draft 26"
    assert r.key_exchange.group.name == "x25519"
    if TSHARK:
        assert tshark_server_hello(path) == ["0xfb1a", "29"]
