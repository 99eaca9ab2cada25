"""`tlsprobe HOST --keylog FILE` beside a live capture (`tlsprobe pcap -i lo --keylog FILE`):
the probe wrote its key log after the connection was closed, so the capture, which holds a
connection only briefly for keys still to come, had already reported it without them ("ALPN
not visible", no certificate in TLS 1.3) and its end note said the key log had "0 usable
lines". The probe now writes each handshake's secrets as its drive ends, before its
close_notify, as a browser or `openssl s_client -keylogfile` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("version", ["--tls1_3", "--tls1_2"])
def test_a_capture_beside_the_probe_decrypts_with_the_probes_key_log(
        tls_server: Any, live_pcap: Any, tmp_path: Path, version: str) -> None:
    server = tls_server("openssl")
    keys = tmp_path / "keys.log"
    keys.touch()          # the capture follows the file from its start, empty
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "--keylog", str(keys))
    done = subprocess.run(
        [sys.executable, "-m", "tlsprobe", f"127.0.0.1:{server.port}", version, "--keylog",
         str(keys), "--json"], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    got = run.next_record(20.0)
    assert got is not None, "".join(run.stderr)
    record = got[1]
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    assert "usable" not in err and "no key matched" not in err, err
    assert (record["decrypted"], record["handshake_complete"]) == (True, True), record
    assert record["version"] == probe["version"]
    assert [c["sha256"] for c in record["certificates"]] == \
        [c["sha256"] for c in probe["certificates"]]
    # each secret once in the file, though the probe also writes its lines at its end
    lines = keys.read_text().splitlines()
    assert lines and len(lines) == len(set(lines)), lines


@pytest.mark.needs_impl("openssl")
def test_keys_logged_after_the_connection_are_not_called_unusable(
        tls_server: Any, live_pcap: Any, tmp_path: Path) -> None:
    # a client that logs its keys only once the connection is over: the capture could not
    # decrypt it, but its end note said "0 usable lines" of a key log that had them
    server = tls_server("openssl")
    keys, late = tmp_path / "keys.log", tmp_path / "late.log"
    keys.touch()
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "--keylog", str(keys))
    subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                    "-keylogfile", str(late)], input="", capture_output=True, text=True,
                   timeout=30, check=True)
    got = run.next_record(20.0)
    assert got is not None and got[1]["decrypted"] is False, got
    keys.write_text(late.read_text())        # logged once the connection is over
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    assert (f"tlsprobe: note: lo: keylog {keys}: no key matched a connection while it was "
            "read; 1 session(s) were logged after (keys written once a connection is over "
            "come too late for a live capture)") in err.splitlines(), err
