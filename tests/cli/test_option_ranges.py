"""Every numeric option of every command has a documented range (README "Numeric options"):
a value outside it, NaN, infinity or not a number is one usage line, exit 2, before any
connection or read, never a traceback, an internal error, a hang or a run without end.

The cases here are the ones that had no upper bound (or none at all): `--timing-runs
99999999999999999999` was accepted and would have run that many handshakes per group,
`--max-bytes` let a probe buffer whatever the server sent, `--concurrency` and `--per-host`
took any number, `survey --rate 1e-9` waited ~31 years between connections, and `pcap
--duration 1e20` or `--ring-size inf` ended in an internal error (OverflowError, exit 70).
Targets are 127.0.0.1:1, where nothing listens: a value let through ends in "connection
refused" (exit 3) and fails the test.
"""

from __future__ import annotations

import pytest

from tests.cli.test_cli_args import DEAD, assert_usage_error, cli

HUGE = "99999999999999999999"


@pytest.mark.parametrize("argv, fragments", [
    ((DEAD, "--max-message", "16777216"), ("--max-message: must be from 1 to 16777215",)),
    ((DEAD, "--max-chain", "1001"), ("--max-chain: must be from 1 to 1000",)),
    ((DEAD, "--max-records", HUGE), ("--max-records: must be from 1 to 1048576",)),
    ((DEAD, "--max-bytes", "1073741825"), ("--max-bytes: must be from 1 to 1073741824",)),
    ((DEAD, "--timing", "--timing-runs", HUGE), ("--timing-runs: must be from 1 to 10000",)),
    (("timing", DEAD, "--timing-runs", "10001"), ("--timing-runs: must be from 1 to 10000",)),
    (("timing", DEAD, "--timing-warmup", "1001"), ("--timing-warmup: must be from 0 to 1000",)),
    (("scan", DEAD, "--no-progress", "--per-host", "65"), ("--per-host must be from 1 to 64",)),
    (("scan", DEAD, "--no-progress", "--concurrency", HUGE),
     ("--concurrency must be from 1 to 1024",)),
    (("clients", DEAD, "--per-host", HUGE), ("--per-host must be from 1 to 64",)),
    (("clients", DEAD, "--concurrency", "1025"), ("--concurrency must be from 1 to 1024",)),
])
def test_numbers_past_their_range(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                  fragments: tuple[str, ...]) -> None:
    assert_usage_error(cli(capsys, *argv), *fragments)


@pytest.mark.parametrize("option, value, fragment", [
    ("--shard-size", "100001", "--shard-size must be from 1 to 100000 targets"),
    ("--rate", "1e-9", "--rate must be a number of connections per second from 0.001 to "
     "100000"),
    ("--rate", "1e9", "--rate must be a number of connections per second from 0.001 to "
     "100000"),
    ("--per-host", "65", "--per-host must be from 1 to 64"),
    ("--concurrency", "1025", "--concurrency must be from 1 to 1024"),
])
def test_survey_numbers_past_their_range(capsys: pytest.CaptureFixture[str], tmp_path,
                                         option: str, value: str, fragment: str) -> None:
    targets = tmp_path / "targets.txt"
    targets.write_text(DEAD + "\n")
    out = tmp_path / "out"
    assert_usage_error(cli(capsys, "survey", str(targets), "--out", str(out), "--workers",
                           "1", "--no-progress", option, value), fragment)
    assert not out.exists()     # refused before the survey began


@pytest.mark.parametrize("value", ["inf", "nan", "0", "1e7"])
def test_pcap_ring_size_range(capsys: pytest.CaptureFixture[str], tmp_path,
                              value: str) -> None:
    """Checked before the capture opens (so no capture permission is needed to see it)."""
    assert_usage_error(cli(capsys, "pcap", "-i", "lo", "-w", str(tmp_path / "r.pcapng"),
                           "--ring-size", value),
                       "--ring-size must be a number of MB above 0 and at most 1000000")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, shown", [
    (("pcap", "-i", "lo", "--duration", "2592000.5"), "2592000.5"),
    (("pcap", "-i", "lo", "--duration", "2592001"), "2592001"),
    (("pcap", "-i", "lo", "-B", "4096.00001"), "4096.00001"),
    (("pcap", "-i", "lo", "-w", "RING", "--ring-size", "1000000.5"), "1000000.5"),
    (("survey", "TARGETS", "--out", "OUT", "--rate", "100000.5"), "100000.5"),
])
def test_a_value_past_its_range_is_shown_as_given(capsys: pytest.CaptureFixture[str], tmp_path,
                                                  argv: tuple[str, ...], shown: str) -> None:
    """The error quotes the value given, not a rounding of it that reads as within the range
    ("at most 2592000 ... (got 2.592e+06)" for --duration 2592001)."""
    targets = tmp_path / "targets.txt"
    targets.write_text(DEAD + "\n")
    names = {"RING": str(tmp_path / "r.pcapng"), "TARGETS": str(targets),
             "OUT": str(tmp_path / "out")}
    result = cli(capsys, *(names.get(word, word) for word in argv))
    assert_usage_error(result, shown)
    assert list(tmp_path.iterdir()) == [targets]
