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
from collections.abc import Iterator
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



@pytest.fixture
def quiet_after_handshake(certs: Any) -> Iterator[int]:
    """A TLS server (Python's ssl) that completes each handshake and then neither reads
    nor closes for 3 s: the client's close_notify waits unanswered, its connection (and a
    scan's record of it) stays open after the keys were derived."""
    import socket
    import ssl
    import threading
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["ecdsa"].chain, certs["ecdsa"].key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.settimeout(5)
                    stop.wait(3.0)
            except (OSError, ssl.SSLError):
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()[0]
            except OSError:
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


def test_a_capture_beside_a_scan_decrypts_with_the_scans_key_log(
        quiet_after_handshake: int, live_pcap: Any, tmp_path: Path) -> None:
    """`scan --keylog FILE` wrote each connection's secrets when its record closed, after
    the connection: against a server that leaves the close_notify unanswered, seconds
    after the capture beside it had read the connection past its handshake without keys
    (undecrypted, "logged after"). Now each handshake's lines are written as its drive
    ends: every connection the key log has secrets of is decrypted by the capture."""
    port = quiet_after_handshake
    keys = tmp_path / "keys.log"
    keys.touch()
    run = live_pcap(f"tcp port {port}", "--jsonl", "--keylog", str(keys))
    done = subprocess.run(
        [sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{port}", "--checks",
         "versions,resumption", "--keylog", str(keys), "--json", "--no-progress",
         "--timeout", "2", "--no-verify"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert done.stdout, done.stderr
    connections = json.loads(done.stdout)["total_connections"]
    records = []
    while len(records) < connections:
        got = run.next_record(20.0)
        if got is None:
            break
        records.append(got[1])
    run.interrupt()
    code, _lines, err = run.finish()
    assert code == 0, err
    assert len(records) == connections, (len(records), connections, err)
    lines = keys.read_text().splitlines()
    sessions = {line.split()[1] for line in lines if not line.startswith("#")}
    assert sessions, lines
    decrypted = [r for r in records if r["decrypted"]]
    assert len(decrypted) == len(sessions), (len(decrypted), len(sessions), err)
    assert "logged after" not in err and "usable" not in err, err
