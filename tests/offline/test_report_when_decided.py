"""AnalyzerOptions.report_when_decided (live capture, stdin): a TCP connection is reported
where its handshake is decided (both directions only counted from then on), once, with the
handshake facts of the report made at its close."""

from __future__ import annotations

from pathlib import Path

import pytest

from tlsprobe.model.encode import to_json_object as to_dict
from tlsprobe.offline.analyzer import AnalyzerOptions, analyze

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
HANDSHAKE = ("client", "server", "sni", "offer", "version", "cipher", "key_exchange",
             "hello_retry_request", "alpn", "fingerprints", "first_frame", "alerts")


def reports(path: Path, early: bool) -> list[dict[str, object]]:
    with analyze(str(path), AnalyzerOptions(report_when_decided=early)) as analysis:
        return [to_dict(report) for report, _trace in analysis]


@pytest.mark.parametrize("name", ["tls13_x25519.pcap", "tls12_dhe.pcap", "tls13_hrr.pcap",
                                  "tls12_alert.pcap"])
def test_each_connection_once_with_the_same_handshake(name: str) -> None:
    at_close, decided = reports(CAPTURES / name, False), reports(CAPTURES / name, True)
    assert sorted(r["id"] for r in decided) == sorted(r["id"] for r in at_close)
    by_id = {r["id"]: r for r in at_close}
    for report in decided:
        closed = by_id[report["id"]]
        assert {k: report[k] for k in HANDSHAKE} == {k: closed[k] for k in HANDSHAKE}
        assert report["last_frame"] <= closed["last_frame"]


def test_a_decided_handshake_is_reported_before_the_connection_ends() -> None:
    """tls13_x25519.pcap: the handshake is decided before the application data and the
    FIN; the report says so (no close reason yet, an earlier last frame)."""
    closed, = reports(CAPTURES / "tls13_x25519.pcap", False)
    early, = reports(CAPTURES / "tls13_x25519.pcap", True)
    assert closed["close"] == "fin" and early["close"] is None
    assert early["last_frame"] < closed["last_frame"]
