"""What `tlsprobe pcap` imports for a capture that needs no decryption (issue 35: the start-up
is part of every run's CPU). The table and `--stats` of a TLS capture without keys read no
certificate and decrypt nothing, so they load no `cryptography`: a QUIC version's name
(wire/quic.py loads its ciphers) and the key log's limits (engine/keylog.py, whose package
loads AEADs for decryption) are imported where they are needed. Session 29's merges had put
both on every run's start-up: 33 ms and 30 M instructions (`--jsonl` and `--details` parse
the certificates with `cryptography`: not asked here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# the command line run in a child, its exit code and modules on stderr (scan's counter)
from tests.project.test_scan_imports import _MODULES

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "captures" / "tls12_x25519.pcap"


def pcap_modules(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _MODULES, "pcap", *argv], check=False,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    line = next(x for x in done.stderr.splitlines() if x.startswith("\0MODULES"))
    _, code, _collections, *modules = line.split()
    return int(code), set(modules)


@pytest.mark.parametrize("mode", [[], ["--stats"]])
def test_a_capture_without_keys_loads_no_cryptography(mode: list[str]) -> None:
    code, modules = pcap_modules("--no-progress", "--jobs", "1", *mode, str(CAPTURE))
    assert code == 0
    heavy = sorted(m for m in modules if m == "cryptography" or
                   m.startswith(("cryptography.", "tlsprobe.wire.quic")))
    assert heavy == [], f"pcap {' '.join(mode)} of a capture without keys imported {heavy}"
