"""Damaged captures never raise out of the offline reader: bytes flipped anywhere in real
captures (headers, TLS records, certificates, QUIC) give reports, problems and warnings,
in every mode (fast, --msg, with keys)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.own_captures import CAPTURES
from tlsprobe.capture import CaptureError
from tlsprobe.engine.keylog import load_keylog
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.report.trace import TraceFormatter
from tlsprobe.report.offline_details import connection_rows
from tlsprobe.report.offline_tables import connection_row

FILES = sorted(p for p in CAPTURES.glob("*.pcap"))


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, len(FILES) - 1),
       flips=st.lists(st.tuples(st.integers(24, 20000), st.integers(0, 255)), min_size=1,
                      max_size=25),
       cut=st.one_of(st.none(), st.integers(24, 20000)))
def test_flipped_bytes_never_raise(tmp_path_factory, index: int,
                                   flips: list[tuple[int, int]], cut: int | None) -> None:
    source = FILES[index]
    data = bytearray(source.read_bytes())
    for at, value in flips:
        if at < len(data):
            data[at] = value
    if cut is not None:
        data = data[:cut]
    path: Path = tmp_path_factory.mktemp("fuzz") / "damaged.pcap"
    path.write_bytes(bytes(data))
    keys = source.with_suffix(".keys")
    keylog = load_keylog(keys) if keys.exists() else None
    for options in (AnalyzerOptions(), AnalyzerOptions(trace=True, keylog=keylog,
                                                               trace_formatter=TraceFormatter)):
        try:
            for report, _ in CaptureAnalysis(str(path), options):
                report.to_json()
                connection_row(report)
                connection_rows(report)
        except CaptureError:
            pass
