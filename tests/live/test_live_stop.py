"""How a live capture ends and what it says at its end: --duration (an idle capture uses
little CPU; a connection still open is reported at the end), Ctrl-C (exit 0 after the
summary), the kernel's drop counts (reported, never silent), and the Python API's
`capture_live`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tlsprobe
from tests.helpers.cpu import reaped_cpu
from tests.live.conftest import REPO, full_pipe, run_client, terminated_while_writing
from tlsprobe.capture import iter_stream_events
from tlsprobe.capture.live import LiveCapture


def test_duration_ends_an_idle_capture_cheaply(live_pcap: Any) -> None:
    """Nothing passes the filter: the capture waits without spinning and ends after
    --duration with the "nothing found" line and the summary."""
    with socket.socket() as unused:   # a port nothing talks to
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        before = reaped_cpu()
        run = live_pcap(f"tcp port {port}", "--duration", "2")
        code, lines, err = run.finish(timeout=30)
    assert code == 0, err
    assert lines[-1] == "no TLS connections found in lo"
    assert "captured 0 packets" in err and "dropped: 0 by the kernel" in err
    # start-up (imports, libpcap) and 2 s of waiting: far below a busy loop's 2 s of CPU
    assert reaped_cpu() - before < 1.5


def test_duration_reports_a_handshake_still_open_at_the_end(live_pcap: Any) -> None:
    """A ClientHello the server never answers is reported when --duration ends it."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        port = mute.getsockname()[1]
        run = live_pcap(f"tcp port {port}", "--jsonl", "--duration", "3")
        client = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                                   "-servername", "mute.test"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            code, lines, err = run.finish(timeout=30)
        finally:
            client.kill()
            client.wait(5)
    assert code == 0, err
    assert '"sni": "mute.test"' in lines[0] and '"close": "end"' in lines[0]


def test_ctrl_c_stops_with_the_summary_and_exit_0(tls_server: Any, live_pcap: Any) -> None:
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}")
    assert run.next_line(timeout=15.0) is not None   # the header
    run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}"])
    row = run.next_line(timeout=15.0)
    assert row is not None and f"127.0.0.1:{server.port}" in row[1]
    run.interrupt()
    code, lines, err = run.finish(timeout=30)
    assert code == 0, err
    assert lines[-1].startswith("Key S/C")
    assert "1 TLS connection (1 reported); dropped: 0 by the kernel or libpcap" in err
    assert "Traceback" not in err


def test_kernel_drops_are_counted_and_said(tmp_path: Path) -> None:
    """A capture that does not read while a burst passes a ring too small for it: the
    packets the kernel dropped are counted (pcap_stats) and said as a loss."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        capture = LiveCapture(["lo"], f"udp dst port {port}", buffer_bytes=64 << 10,
                              stop_at=time.monotonic() + 1.0)
        stream = iter_stream_events(capture, udp=True)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
                for _ in range(3000):   # not read meanwhile: the ring overflows
                    sender.sendto(b"\x00" * 1200, ("127.0.0.1", port))
            for _event in stream:
                pass
        finally:
            stream.close()
            capture.close()
    stats = stream.stats
    assert stats.live is not None and stats.live.dropped > 0
    assert stats.packets + stats.live.dropped <= stats.live.received
    assert any("dropped by the kernel or libpcap" in line for line in stats.losses())
    assert stats.to_dict()["live"]["dropped"] == stats.live.dropped


def test_capture_live_api_yields_reports(tls_server: Any) -> None:
    server = tls_server("openssl")
    reader = tlsprobe.capture_live("lo", bpf=f"tcp port {server.port}", count=1,
                                   duration=20)
    with reader:
        run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                    "-servername", "api.test"])
        reports = list(reader)
    assert [r.sni for r in reports] == ["api.test"]
    assert isinstance(reports[0], tlsprobe.ConnectionReport)
    summary = reader.summary
    assert summary is not None and summary.reported == 1
    live = summary.capture["live"]
    assert isinstance(live, dict) and live["interfaces"] == ["lo"]


@pytest.mark.parametrize("args", [{"interface": "nosuch9"},
                                  {"interface": "lo", "bpf": "tcp port"},
                                  {"interface": "lo\x00"}, {"interface": []},
                                  {"interface": "lo", "count": 0},
                                  {"interface": "lo", "duration": -1.0},
                                  {"interface": ["any", "lo"]}])
def test_capture_live_api_errors(args: dict[str, Any]) -> None:
    with pytest.raises(tlsprobe.TlsprobeError) as caught:
        tlsprobe.capture_live(**args)
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)


def test_stats_at_the_end_with_the_kernel_counts(tls_server: Any, live_pcap: Any) -> None:
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", "--stats", "-c", "1")
    run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}", "-tls1_2"])
    code, lines, err = run.finish(timeout=30)
    assert code == 0, err
    assert "Versions (1 connection)" in lines and any(
        line.startswith("TLS 1.2 (0x0303)") for line in lines)
    assert any(line.startswith("Live capture on lo: ") and line.endswith(
        "packets received, 0 dropped by the kernel or libpcap, 0 by the interface")
        for line in lines), lines


@pytest.mark.parametrize("dropped", [0, 3])
def test_a_connection_with_gaps_says_the_live_capture_dropped_packets(dropped: int) -> None:
    """The gaps of a connection seen while the capture had dropped packets may be those
    drops: its report says so (here the kernel's counts are set on a file's analysis, the
    one lost segment of tls12_split_gap.pcap standing for a dropped packet)."""
    from tlsprobe.capture.events import LiveCounts
    from tlsprobe.offline.analyzer import AnalyzerOptions, analyze
    path = Path(__file__).resolve().parents[2] / "captures" / "tls12_split_gap.pcap"
    with analyze(str(path), AnalyzerOptions(report_when_decided=True)) as analysis:
        analysis.stream.stats.live = LiveCounts(("lo",), "tcp", 100, dropped, 0)
        reports = [report for report, _trace in analysis]
    gapped = [r for r in reports if r.gap_bytes]
    assert gapped, "the capture has a connection with a gap"
    said = [p for r in gapped for p in r.problems if "dropped by the live capture" in p]
    assert len(said) == (len(gapped) if dropped else 0)


def test_drops_make_a_note_and_exit_7(live_pcap: Any) -> None:
    """The capture is stopped (SIGSTOP) while a burst passes a 1 MiB buffer: the kernel
    drops what does not fit, and the command says how many, in the summary line, a note
    and the JSON capture record, with exit code 7."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        run = live_pcap(f"udp dst port {port}", "--jsonl", "-B", "1", "--duration", "3")
        run.proc.send_signal(signal.SIGSTOP)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
                for _ in range(4000):   # 4 MB: four times the buffer
                    sender.sendto(b"\x00" * 1000, ("127.0.0.1", port))
        finally:
            run.proc.send_signal(signal.SIGCONT)
        code, lines, err = run.finish(timeout=30)
    assert code == 7, err
    capture = json.loads(lines[-1])
    dropped = capture["capture"]["live"]["dropped"]
    assert dropped > 0 and capture["losses"], capture
    assert f"tlsprobe: note: lo: {dropped} packets dropped by the kernel or libpcap" in err
    assert f"dropped: {dropped} by the kernel or libpcap" in err


def test_a_burst_waits_in_the_default_buffer_without_drops() -> None:
    """5,000 packets pass while the capture does not read: the default 32 MiB buffer holds
    them all (libpcap's immediate mode held 256: one slot of the snaplen per packet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        capture = LiveCapture(["lo"], f"udp dst port {port}")
        stream = iter_stream_events(capture, udp=True)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
                for _ in range(5000):
                    sender.sendto(b"\x00" * 100, ("127.0.0.1", port))
            time.sleep(0.3)   # more than the kernel's 100 ms before it hands packets over
            capture.stop_at = time.monotonic() + 0.5
            for _event in stream:
                pass
        finally:
            stream.close()
            capture.close()
    assert stream.stats.live is not None and stream.stats.live.dropped == 0
    assert stream.stats.packets == 5000


def test_packets_captured_before_the_stop_are_still_read() -> None:
    """Ctrl-C right after packets passed: those the kernel captured before the stop are
    read (their block is handed over within the kernel's 100 ms), not left behind."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        capture = LiveCapture(["lo"], f"udp dst port {port}")
        stream = iter_stream_events(capture, udp=True)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
                for _ in range(10):
                    sender.sendto(b"\x00" * 100, ("127.0.0.1", port))
            capture.stop()
            events = list(stream)
        finally:
            stream.close()
            capture.close()
    assert stream.stats.packets == 10 and len(events) == 10


@pytest.mark.parametrize("form", ["--jsonl", "--json"])
def test_live_json_matches_the_shipped_schemas(tls_server: Any, live_pcap: Any,
                                                form: str) -> None:
    """The capture record of a live capture carries `capture.live` (its interfaces' counts,
    README "Live capture"); the schemas did not name it, so every `pcap -i --jsonl` or
    `--json` failed validation (docs/SCHEMAS.md: closed objects)."""
    from tests.schemas.validate import assert_valid
    server = tls_server("openssl")
    run = live_pcap(f"tcp port {server.port}", form, "--stats", "-c", "1")
    run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}"])
    code, lines, err = run.finish(timeout=30)
    assert code == 0, err
    if form == "--json":
        doc = json.loads("\n".join(lines))
        assert doc["captures"][0]["capture"]["live"]["interfaces"] == ["lo"]
        assert_valid("pcap", doc, "pcap -i lo --json --stats")
        return
    records = [json.loads(line) for line in lines]
    assert [r["kind"] for r in records] == ["connection", "capture", "stats"], records
    assert records[1]["capture"]["live"]["per_interface"][0]["interface"] == "lo"
    for record in records:
        assert_valid("pcap-connection", record, f"pcap -i lo --jsonl: {record['kind']}")


def test_sigterm_right_after_the_capturing_line_still_summarises(tmp_path: Path) -> None:
    """Scripts wait for the "capturing on" line, then may stop the capture at once. Here
    stderr is a pipe this test filled, so that tlsprobe's write of that line waits: the
    SIGTERM sent then is handled (the capture stops, the summary follows, exit 0, the -w
    file whole); it was the default SIGTERM until the handler was set a moment after the
    line, and it killed the process without its summary or the -w file's packets."""
    with socket.socket() as unused:   # a port nothing talks to
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    written = tmp_path / "live.pcapng"
    read_end, write_end, filled = full_pipe()
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", "-i", "lo", "-f",
                             f"tcp port {port}", "-w", str(written)],
                            stdout=subprocess.DEVNULL, stderr=write_end, env=env)
    os.close(write_end)
    code, err = terminated_while_writing(proc, read_end, filled, 30)
    assert code == 0, (code, err)
    assert err.startswith("tlsprobe: capturing on lo") and "captured 0 packets" in err, err
    assert subprocess.run(["tshark", "-r", str(written)], capture_output=True,
                          timeout=60, check=False).returncode == 0
