"""A connection reset after its ClientHello, read from `pcap -` (a pipe) or `pcap --follow
FILE` whose writer then goes quiet: its row comes once the reset's linger (RST_LINGER, 2 s
of capture time) has passed on the clock while the input is idle, as a live capture's
does, not at the next packet or the input's end. Was: the row waited for the next packet
(documented as a limit)."""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.capbuild import ether, ipv4, sll, tcp
from tests.live.test_stop_signal import hello_only
from tests.live.test_stop_streams import PCAP_HEADER
from tlsprobe.capture.tcp import RST_LINGER

REPO = Path(__file__).resolve().parents[2]
#: the linger, then the reading and the row on a busy 2-core machine
WITHIN = RST_LINGER + 8.0


def _reset_after_hello() -> bytes:
    """The handshake and ClientHello of a TLS 1.3 connection, then the client's RST."""
    packets = hello_only()
    at, last = 0, b""
    while at < len(packets):
        sec, usec, incl, _orig = struct.unpack_from("<IIII", packets, at)
        last = packets[at + 16:at + 16 + incl]
        at += 16 + incl
    ip = last[14:]
    src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
    l4 = ip[(ip[0] & 15) * 4:]
    sport, dport, seq, ack = struct.unpack_from("!HHII", l4)
    payload = len(ip) - (ip[0] & 15) * 4 - (l4[12] >> 4) * 4
    rst = ether(ipv4(src, dst, 6, tcp(sport, dport, seq + payload, ack, "RA", src=src,
                                      dst=dst)))
    usec += 10000
    return packets + struct.pack("<IIII", sec + usec // 1000000, usec % 1000000, len(rst),
                                 len(rst)) + rst


def _as_sll(records: bytes) -> bytes:
    """The same pcap records as Linux cooked frames (`tcpdump -i any`): the capture
    loop's general path, not the one for Ethernet."""
    out, at = [], 0
    while at < len(records):
        sec, usec, incl, _orig = struct.unpack_from("<IIII", records, at)
        frame = sll(records[at + 16 + 14:at + 16 + incl])
        out.append(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
        at += 16 + incl
    return b"".join(out)


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else b""


@pytest.mark.parametrize("how", ["stdin", "follow", "stdin-sll"])
def test_a_reset_connection_is_reported_while_the_input_is_quiet(how: str,
                                                                tmp_path: Path) -> None:
    capture = PCAP_HEADER + _reset_after_hello()
    if how == "stdin-sll":
        capture = PCAP_HEADER[:-4] + struct.pack("<I", 113) + _as_sll(_reset_after_hello())
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    path = tmp_path / "growing.pcap"
    read_end = write_end = -1
    if how.startswith("stdin"):
        read_end, write_end = os.pipe()
        args = ["-"]
    else:
        path.write_bytes(capture)
        args = ["--follow", str(path)]
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", *args, "--jsonl",
                             "--no-progress"], stdin=read_end if read_end >= 0 else
                            subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        if read_end >= 0:
            os.close(read_end)
            os.write(write_end, capture)        # and the pipe stays open, quiet
        began = time.monotonic()
        line = _first_line(proc, WITHIN)
        waited = time.monotonic() - began
        assert proc.poll() is None, proc.communicate()
        assert line, f"no row within {WITHIN} s of a quiet input"
        record = json.loads(line)
        assert record["kind"] == "connection", record
        assert record["close"] == "rst", record
        assert waited >= RST_LINGER * 0.9, waited     # the linger was waited, not skipped
    finally:
        if write_end >= 0:
            os.close(write_end)
        if proc.poll() is None:
            proc.terminate()
        proc.communicate(timeout=30)
