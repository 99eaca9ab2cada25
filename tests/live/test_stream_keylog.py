"""`tlsprobe pcap -i lo --keylog FILE` while the client is still writing FILE (as a
browser writes its SSLKEYLOGFILE): the client logs each connection's secrets only after the
capture has seen its ServerHello, and the row still comes decrypted; and `-w` with a ring
buffer turns its files while the capture runs, each readable by tshark and by tlsprobe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import pcap_jsonl, tshark_fields
from tests.live.conftest import logged_client_rows, run_client


def test_rows_are_decrypted_with_keys_the_client_logs_as_it_goes(
        tls_server: Any, live_pcap: Any, tmp_path: Path) -> None:
    server = tls_server("openssl")
    keys = tmp_path / "sslkeylog.txt"
    keys.write_text("")      # empty when the capture starts, as a browser's new log
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "--keylog", str(keys), "-c", "2")
    records, code, err = logged_client_rows(run, server.port, keys)
    assert code == 0, err
    assert [r["version"]["name"] for r in records] == ["TLS 1.3", "TLS 1.2"]
    assert [r["decrypted"] for r in records] == [True, True], [r["problems"] for r in records]
    # TLS 1.3: the server's certificate was read from the decrypted handshake
    assert records[0]["certificates"], records[0]
    assert "no key matched" not in err and "0 usable lines" not in err


def test_the_ring_of_a_live_capture_turns_and_each_file_reads_back(
        tls_server: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    server = tls_server("openssl")
    out = tmp_path / "ring" / "live.pcapng"
    out.parent.mkdir()
    # a handshake with openssl's certificate is some 5 kB: files of 6 kB turn often
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "-w", str(out), "--ring-size",
                    "0.006", "--ring-files", "3", "-c", "5")
    for _ in range(5):
        run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}"])
    for _ in range(5):
        assert run.next_record(timeout=15.0) is not None, "".join(run.stderr)
    code, _lines, err = run.finish()
    assert code == 0, err
    files = sorted(out.parent.iterdir())
    assert len(files) == 3, files          # more were written; the newest 3 are kept
    numbers = [int(f.name.split("_")[1]) for f in files]
    assert numbers == list(range(numbers[0], numbers[0] + 3)) and numbers[0] > 1
    for path in files:
        frames = tshark_fields(path, None, "frame.number")
        assert frames, path
        assert path.stat().st_size <= 6000 or len(frames) == 1
        code, _conns, [summary], err = pcap_jsonl(run_cli, path)
        assert summary["packets"] == len(frames) and summary["warnings"] == [], err


@pytest.mark.parametrize("earlier", ["sessions", "bytes"])
def test_a_long_growing_key_log_still_gives_the_newest_keys(
        tls_server: Any, live_pcap: Any, tmp_path: Path, earlier: str) -> None:
    """A browser's SSLKEYLOGFILE in a long live capture: 100,000 sessions, or 65 MiB, logged
    before this connection (the finished file's limits). The keys the client logs now are
    still read and used: the growing log forgot its oldest sessions (it refused the new
    ones) and reads past 64 MiB (it stopped there), and the row said "not decrypted"."""
    keys = tmp_path / "sslkeylog.txt"
    with keys.open("w") as log:
        if earlier == "sessions":
            log.writelines(f"CLIENT_RANDOM {i:064x} {'ab' * 48}\n" for i in range(100_000))
        else:
            line = "# " + "x" * 1000 + "\n"
            log.writelines(line for _ in range((65 << 20) // len(line) + 1))
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "--keylog", str(keys), "-c", "1")
    run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}", "-tls1_3",
                "-keylogfile", str(keys)])
    got = run.next_record(timeout=30.0)
    assert got is not None, "no row: " + "".join(run.stderr)
    code, _lines, err = run.finish()
    assert code == 0, err
    assert got[1]["decrypted"] is True, got[1]["problems"]
    assert got[1]["certificates"], got[1]
