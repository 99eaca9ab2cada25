"""`pcap --stats` alone writes nothing per connection: the run does not call the output's
per-report step (issue 35: once per connection, for nothing), and the statistics still
count every connection; with the table or --jsonl the step runs once per connection."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from tlsprobe import cli
from tlsprobe.commands import pcap_output

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "tls12_x25519.pcap"


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """`tlsprobe pcap --jobs 1 ARGS CAPTURE` in this process: (Output.report calls, stdout)."""
    calls = []
    report = pcap_output.Output.report

    def counted(self: pcap_output.Output, one: Any, trace: list[str] | None) -> None:
        calls.append(1)
        report(self, one, trace)

    monkeypatch.setattr(pcap_output.Output, "report", counted)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(["pcap", "--jobs", "1", "--no-progress", *args, str(CAPTURE)])
        except SystemExit as exc:
            assert not exc.code, exc.code
    return len(calls), out.getvalue()


def test_stats_alone_calls_no_per_report_output(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, out = _run(monkeypatch, "--stats")
    assert calls == 0
    assert "TLS 1.2" in out and "x25519" in out  # every connection counted all the same


@pytest.mark.parametrize("args", [(), ("--jsonl",), ("--stats", "--jsonl")])
def test_written_reports_call_the_output_once_each(monkeypatch: pytest.MonkeyPatch,
                                                   args: tuple[str, ...]) -> None:
    calls, out = _run(monkeypatch, *args)
    assert calls == 1 and out
