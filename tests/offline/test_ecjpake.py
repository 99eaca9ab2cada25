"""EC J-PAKE (suite 0xC0FF, draft-cragie-tls-ecjpake: mbedTLS, Thread commissioning): the
ServerKeyExchange's curve is reported as tshark reports it, the kind is ECJPAKE (not an
ECDHE key share: its key pairs and proofs have no share size), over TCP built here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.hostile import tls as H
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.offline.analyzer import analyze
from tlsprobe.wire import frame

from tests.helpers.capbuild import Conv, ether, pcap_bytes

TSHARK = shutil.which("tshark")


def test_ecjpake_curve_is_read(tmp_path: Path) -> None:
    ch = build_client_hello(ClientConfig(server_name="thread.example", versions=(0x0303,),
                                         groups=(0x17,), cipher_suites_12=(0xC0FF,))).hello
    sh = H.server_hello_12(ch, suite=0xC0FF)
    # ServerECJPAKEParams: ECParameters (named_curve secp256r1), then two ECJPAKEKeyKP
    # (a 65-byte point, a 65-byte ZKP point and a 32-byte scalar each)
    kp = bytes([65]) + b"\x04" + os.urandom(64) + bytes([65]) + b"\x04" + os.urandom(64) + \
        bytes([32]) + os.urandom(32)
    ske = frame(12, b"\x03\x00\x17" + kp + kp)
    c = Conv()
    packets = c.handshake() + [c.c(H.handshake_records(frame(1, ch.serialize()))),
                               c.s(H.handshake_records(sh, ske, H.server_hello_done())),
                               c.ack()]
    path = tmp_path / "ecjpake.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in packets]))
    (done,) = list(analyze(str(path)))
    kx = done.report.key_exchange
    assert done.report.cipher.hex == "0xc0ff" and done.report.problems == ()
    assert (kx.kind, kx.source, kx.group.name) == ("ECJPAKE", "server_key_exchange",
                                                   "secp256r1")
    assert kx.server_share_bytes is None and kx.server_temp_key is None
    if TSHARK:
        out = subprocess.run([TSHARK, "-r", str(path), "-Y", "tls.handshake.type == 12",
                              "-T", "fields", "-e", "tls.handshake.server_named_curve"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert out.split() == ["0x0017"]
