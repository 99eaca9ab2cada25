"""A ServerHello choosing a cipher suite against the rules (a TLS 1.3 suite in TLS 1.2, a
TLS 1.2 suite in TLS 1.3 or in a HelloRetryRequest, a suite never offered) is named as a
protocol violation by `tlsprobe pcap` in the live probe's words: the scripted server's
exchange is recorded by the probe itself (`--pcap-out`), whose one-line verdict names the
violation, and the capture's table, CSV, details and JSON must name the same one."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from .catalog import all_scenarios
from .server import HostileServer

SCENARIOS = {s.name: s for s in all_scenarios()}
VIOLATIONS = ("tls13_suite_in_tls12", "tls12_suite_in_tls13", "tls12_suite_in_hrr",
              "suite_not_offered_12", "suite_not_offered_13")


@pytest.mark.parametrize("name", VIOLATIONS)
def test_capture_names_the_suite_violation_as_the_probe(run_cli, tmp_path: Path,
                                                        hostile_server: HostileServer,
                                                        name: str) -> None:
    sc = SCENARIOS[name]
    listener = hostile_server.serve(sc.script)
    pcap = tmp_path / "v.pcap"
    code, _out, err = run_cli(f"127.0.0.1:{listener.port}", "--pcap-out", pcap,
                              "--timeout", "5", *sc.args)
    assert code in sc.exit_codes and re.search(sc.verdict, err), err
    text = re.search(r"(?:server chose|\S+ ServerHello chose|HelloRetryRequest chose).*?\)"
                     r"(?: which was not offered)?(?: \(protocol violation, [^)]*\))|"
                     r"(?:TLS 1\.\d ServerHello|HelloRetryRequest) chose .*?\(protocol "
                     r"violation, [^)]*\)", err)
    assert text is not None, err
    violation = text.group(0)
    code, out, err = run_cli("pcap", pcap, "--csv", tmp_path / "v.csv")
    assert code == 0, err
    row = next(line for line in out.splitlines() if "127.0.0.1" in line)
    assert violation in row, (violation, row)
    with open(tmp_path / "v.csv", encoding="utf-8", newline="") as fh:
        assert violation in next(csv.DictReader(fh))["Version"]
    code, out, _ = run_cli("pcap", "--details", pcap)
    assert f"Problem {violation}" in " ".join(out.split()), out  # (a long line is folded)
    code, out, _ = run_cli("pcap", "--jsonl", pcap)
    conn = next(json.loads(line) for line in out.splitlines() if '"connection"' in line)
    assert violation in conn["problems"], conn["problems"]


def test_a_conformant_choice_is_no_violation(run_cli, tmp_path: Path) -> None:
    """The project's recordings of real servers name nothing of the kind."""
    captures = Path(__file__).resolve().parents[2] / "captures"
    code, out, err = run_cli("pcap", captures / "tls12_x25519.pcap",
                             captures / "tls13_hrr.pcap", "--jsonl")
    assert code == 0, err
    for line in out.splitlines():
        record = json.loads(line)
        if record["kind"] == "connection":
            assert not any("protocol violation" in p for p in record["problems"]), record
