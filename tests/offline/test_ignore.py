"""Connections whose handshake is over are ignored by the capture layer (their later bytes
only counted): the reports must be exactly those of reading every byte, in every mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers.shared_data import shared_missing

from tests.helpers.own_captures import CAPTURES
from tlsprobe.capture import CaptureError, CaptureStream
from tlsprobe.engine.keylog import load_keylog
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.report.trace import TraceFormatter

FILES = sorted(p for p in CAPTURES.glob("*.pcap*") if p.suffix != ".keys")


def _reports(path: Path, options: AnalyzerOptions) -> tuple[list[dict[str, Any]], Any]:
    try:
        analysis = CaptureAnalysis(str(path), options)
    except CaptureError:
        return [], None
    reports = [(r.to_dict(), trace) for r, trace in analysis]
    return reports, analysis.summary


def _without_ignore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CaptureStream, "ignore", lambda self, conn: False)


def _options(path: Path, mode: str) -> AnalyzerOptions:
    if mode == "trace":
        return AnalyzerOptions(trace=True, trace_formatter=TraceFormatter)
    keys = path.with_suffix(".keys")
    if mode == "keys" and keys.exists():
        return AnalyzerOptions(keylog=load_keylog(str(keys)))
    return AnalyzerOptions()


@pytest.mark.parametrize("mode", ["fast", "keys"])
def test_reports_are_the_same_with_and_without_ignoring(mode: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_ignore = CaptureStream.ignore

    def counting(self: CaptureStream, conn: Any) -> bool:
        calls.append(1)
        return real_ignore(self, conn)

    monkeypatch.setattr(CaptureStream, "ignore", counting)
    ignored = {p.name: _reports(p, _options(p, mode)) for p in FILES}
    # most recorded connections end their handshake; with keys, reading goes on for the
    # records after both Finished (tickets, alerts), which few short captures reach
    assert len(calls) >= (1 if mode == "keys" else len(FILES) - 3), len(calls)
    _without_ignore(monkeypatch)
    for p in FILES:
        assert ignored[p.name] == _reports(p, _options(p, mode)), p.name


def test_a_traced_connection_is_never_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """--msg prints every record to the end of each connection, so nothing is handed to
    CaptureStream.ignore in trace mode."""
    calls: list[int] = []
    monkeypatch.setattr(CaptureStream, "ignore", lambda self, conn: calls.append(1) or False)
    traced = [_reports(p, _options(p, "trace")) for p in FILES]
    assert calls == [] and any(reports for reports, _ in traced)


def test_corpus_reports_are_the_same_with_and_without_ignoring(
        captures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third-party corpus: retransmissions, holes, resets and odd stacks after the
    handshake change nothing in the reports (bytes, gaps, last frame, close reason)."""
    files = sorted(p for p in captures_dir.rglob("*") if p.is_file() and
                   p.suffix in (".pcap", ".pcapng", ".cap", ".gz", ".pcapng.gz"))
    if not files:
        shared_missing("captures", captures_dir, "TLSPROBE_CAPTURES")
    ignored = [_reports(p, AnalyzerOptions()) for p in files]
    _without_ignore(monkeypatch)
    for p, seen in zip(files, ignored):
        assert seen == _reports(p, AnalyzerOptions()), p
