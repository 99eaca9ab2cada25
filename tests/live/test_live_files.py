"""The files around a capture: what `tlsprobe pcap` writes (-w, --csv, --plot) never
replaces what it reads (the captures, the --keylog), live or not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "tls13_client_auth.pcap"
KEYS = REPO / "captures" / "tls13_client_auth.keys"


@pytest.mark.parametrize("args, first, second", [
    (["cap.pcap", "--csv", "cap.pcap"], "FILE", "--csv"),
    (["cap.pcap", "--csv", "link.pcap"], "FILE", "--csv"),            # a hard link
    (["cap.pcap", "--keylog", "keys.log", "--csv", "keys.log"], "--csv", "--keylog"),
    (["cap.pcap", "--stats", "--plot", "./cap.pcap"], "FILE", "--plot"),
    (["-i", "lo", "-f", "tcp port 9", "--duration", "1", "-w", "keys.log", "--keylog",
      "keys.log"], "--keylog", "-w"),
    (["-i", "lo", "-f", "tcp port 9", "--duration", "1", "-w", "out.csv", "--csv",
      "out.csv"], "--csv", "-w"),
])
def test_an_output_never_replaces_a_file_that_is_read(run_cli: Any, tmp_path: Path,
                                                      args: list[str], first: str,
                                                      second: str) -> None:
    shutil.copy(CAPTURE, tmp_path / "cap.pcap")
    os.link(tmp_path / "cap.pcap", tmp_path / "link.pcap")
    shutil.copy(KEYS, tmp_path / "keys.log")
    (tmp_path / "out.csv").write_text("kept\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = run_cli("pcap", *args, "--no-progress")
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and f"{first} and {second} name the same file" in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # read with the same files, a capture and its key log still work
    code, out, err = run_cli("pcap", "cap.pcap", "cap.pcap", "--keylog", "keys.log",
                             "--no-progress")
    assert code == 0 and "note" not in err, err
