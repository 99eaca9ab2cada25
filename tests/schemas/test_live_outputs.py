"""Real outputs against the shipped schemas: `tlsprobe HOST --json`, `scan --json` (the
default checks, --clients, an unreachable target), `clients --json`, `pcap --jsonl` (the
repository's captures and some of ../shared's) and a survey's Parquet rows and JSON lines,
all made here by the command line against lab servers on loopback. A JSON member added
without re-running tools/gen_schemas.py, or a value outside its enum, fails here."""

from __future__ import annotations

import datetime
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.schemas.validate import assert_valid

REPO = Path(__file__).resolve().parents[2]
#: some of ../shared's captures: Wireshark's (TLS 1.3 decrypted, TLS 1.2, DTLS, RSA) and
#: JA4's (browsers, QUIC, a non-ASCII ALPN, a curveball certificate, GRE/ERSPAN tunnels)
WIRESHARK = ("tls13-rfc8446.pcap", "tls12-aes256gcm.pcap", "snakeoil-dtls.pcap",
             "rsasnakeoil2.pcap")
JA4 = ("browsers-x509.pcapng", "chrome-cloudflare-quic-with-secrets.pcapng",
       "tls-non-ascii-alpn.pcapng", "badcurveball.pcap", "gre-erspan-vxlan.pcap",
       "quic-tls-handshake.pcapng", "tls3.pcapng")


def _refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(out: str) -> list[object]:
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, "no JSON output"
    return lines


@pytest.mark.parametrize("impl, options", [("openssl", {}), ("gnutls", {}), ("nginx", {}),
                                           ("openssl", {"cert": "ecdsa", "proto": "tls1_2"})],
                         ids=["openssl", "gnutls", "nginx", "openssl-ecdsa-tls12"])
def test_probe_json(run_cli, server_cache, impl, options) -> None:
    server = server_cache(impl, **options)
    code, out, err = run_cli(f"127.0.0.1:{server.port}", "--json", "--no-verify",
                             "--timeout", "4")
    assert code == 0, err
    assert_valid("probe", json.loads(out), f"probe of {impl}")


def test_probe_json_of_an_unreachable_target(run_cli) -> None:
    code, out, err = run_cli(f"127.0.0.1:{_refused_port()}", "--json", "--timeout", "4")
    assert code != 0, err
    doc = json.loads(out)
    assert doc["error_kind"] == "network", doc
    assert_valid("probe", doc, "probe of a refused port")


def test_scan_json_default_checks_clients_and_an_error(run_cli, server_cache) -> None:
    server = server_cache("openssl")
    refused = f"127.0.0.1:{_refused_port()}"
    code, out, err = run_cli("scan", f"127.0.0.1:{server.port}", refused, "--json",
                             "--clients", "--timeout", "4", timeout=180)
    assert code != 0, err   # the refused target
    lines = _lines(out)
    assert len(lines) == 2
    reached = [d for d in lines if isinstance(d, dict) and not d["error"]]
    assert reached and reached[0]["clients"] and reached[0]["check_results"]
    assert reached[0]["rating"]
    for doc in lines:
        assert_valid("scan", doc, "scan --clients")


def test_clients_json(run_cli, server_cache) -> None:
    server = server_cache("openssl")
    code, out, err = run_cli("clients", f"127.0.0.1:{server.port}", "--json",
                             "--timeout", "4", timeout=180)
    assert code == 0, err
    (doc,) = _lines(out)
    assert isinstance(doc, dict) and doc["clients"]
    assert {c["status"] for c in doc["clients"]} >= {"connected"}
    assert_valid("clients", doc, "clients --json")


def test_pcap_jsonl_of_the_repository_captures(run_cli, tmp_path: Path) -> None:
    shutil.copytree(REPO / "captures", tmp_path / "captures")
    code, out, err = run_cli("pcap", "captures", "--jsonl", "--msg", timeout=180)
    assert code in (0, 7), err     # 7: the captures damaged on purpose
    records = _lines(out)
    kinds = {r["kind"] for r in records if isinstance(r, dict)}
    assert kinds == {"connection", "capture"}
    assert sum(1 for r in records if isinstance(r, dict) and r["kind"] == "capture") >= 20
    for record in records:
        assert_valid("pcap-connection", record)
    (tmp_path / "not-a-capture.pcap").write_text("hello\n")    # its error record
    code, out, err = run_cli("pcap", "captures", "not-a-capture.pcap", "--jsonl", "--stats",
                             timeout=180)
    assert code in (2, 7), err   # the unreadable file
    records = _lines(out)
    last = records[-1]
    assert isinstance(last, dict) and last["kind"] == "stats" and last["versions"], last
    assert_valid("pcap-connection", last, "pcap --jsonl --stats")
    unreadable = [r for r in records if isinstance(r, dict) and r.get("error")]
    assert [r["file"] for r in unreadable] == ["not-a-capture.pcap"], err
    assert_valid("pcap-connection", unreadable[0], "an unreadable file's record")


def test_pcap_json_document_with_stats(run_cli, tmp_path: Path) -> None:
    shutil.copytree(REPO / "captures", tmp_path / "captures")
    code, out, err = run_cli("pcap", "captures", "--json", "--stats", timeout=180)
    assert code in (0, 7), err
    doc = json.loads(out)
    assert doc["connections"] and doc["captures"] and doc["stats"]["versions"]
    assert_valid("pcap", doc, "pcap --json --stats")


def test_timing_json(run_cli, server_cache) -> None:
    server = server_cache("openssl")
    code, out, err = run_cli("timing", f"127.0.0.1:{server.port}", "--json",
                             "--timing-runs", "3", "--timing-warmup", "0",
                             "--timing-groups", "x25519,secp256r1", timeout=120)
    assert code == 0, err
    doc = json.loads(out)
    assert {e["group"]["name"] for e in doc["entries"]} == {"x25519", "secp256r1"}
    assert_valid("timing", doc, "timing --json")


def test_pcap_jsonl_of_shared_captures(run_cli, captures_dir: Path, tmp_path: Path) -> None:
    wireshark = captures_dir / "wireshark" / "test-captures"
    for name in WIRESHARK:
        shutil.copy(wireshark / name, tmp_path / name)
    for name in JA4:
        shutil.copy(captures_dir / "ja4" / "pcap" / name, tmp_path / name)
    shutil.copytree(wireshark / "keys", tmp_path / "keys")
    code, out, err = run_cli("pcap", *WIRESHARK, *JA4, "--jsonl", "--keylog",
                             "keys/tls13-rfc8446.keys", timeout=180)
    assert code in (0, 7), err
    records = _lines(out)
    protocols = {r.get("protocol") for r in records if isinstance(r, dict)}
    assert {"tls", "dtls", "quic"} <= protocols, protocols
    for record in records:
        assert_valid("pcap-connection", record)


def _plain(value: Any) -> Any:
    """A Parquet row as JSON holds it: timestamps as ISO 8601 strings (the schema's form)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def test_survey_rows_lines_summary_and_diff(run_cli, server_cache, tmp_path: Path) -> None:
    """A small real survey (two lab servers and a refused port, one Dask worker): every
    Parquet row as pyarrow reads it, every line of its JSON lines (the scan's), its
    `survey summary --json` and the records of a `survey diff --jsonl` against it."""
    import pyarrow.parquet as pq  # the test extra has it: missing is a failure
    targets = tmp_path / "targets.txt"
    targets.write_text("".join(f"127.0.0.1:{p}\n" for p in (
        server_cache("openssl").port, server_cache("gnutls").port, _refused_port())))
    out = tmp_path / "out"
    code, _out, err = run_cli("survey", targets, "--out", out, "--workers", "1",
                              "--no-progress", "--timeout", "4", timeout=240)
    assert code in (0, 1), err
    rows = [_plain(row) for path in sorted(out.glob("*.parquet"))
            for row in pq.read_table(path).to_pylist()]
    assert {r["port"] for r in rows} and any(r["error_kind"] for r in rows), rows
    for row in rows:
        assert_valid("survey-row", row, f"survey row {row.get('host')}:{row.get('port')}")
    lines = [line for path in sorted((out / "_jsonl").glob("*.jsonl"))
             for line in _lines(path.read_text())]
    assert len(lines) == 3
    for line in lines:
        assert_valid("scan", line, "survey JSON line")
    _summary_and_diff(run_cli, out, tmp_path)


def _summary_and_diff(run_cli, out: Path, tmp_path: Path) -> None:
    """`survey summary OUT --json`, and `survey diff OLD OUT --jsonl` where OLD is OUT's JSON
    lines with one more target (so NEW lost it: a "removed" record) and the refused target
    reachable (a "compared" record with a change); the summary with its run members."""
    code, text, err = run_cli("survey", "summary", out, "--json")
    assert code == 0, err
    summary = json.loads(text)
    assert summary["targets"] == 3 and summary["unreachable"] == 1, summary
    assert_valid("survey-summary", summary, "survey summary --json")
    old = tmp_path / "old" / "_jsonl"
    old.mkdir(parents=True)
    docs = [doc for path in sorted((out / "_jsonl").glob("*.jsonl"))
            for doc in _lines(path.read_text())]
    reached = next(d for d in docs if not d["error"])
    was = [d if not d["error"] else dict(reached, host=d["host"], port=d["port"])
           for d in docs]   # the refused target answered in OLD: an "unreachable" change
    extra = dict(reached, port=_refused_port())
    (old / "shard-00000.jsonl").write_text("".join(json.dumps(d) + "\n"
                                                   for d in [*was, extra]))
    code, text, err = run_cli("survey", "diff", tmp_path / "old", out, "--json")
    assert code == 0, err
    records = _lines(text)
    assert [r["kind"] for r in records if isinstance(r, dict)][-1] == "survey_diff_summary"
    assert {r.get("status") for r in records if isinstance(r, dict)} >= {"removed",
                                                                          "compared"}, records
    assert any(c["kind"] == "unreachable" for r in records if isinstance(r, dict)
               for c in r.get("changes", ())), records
    for record in records:
        assert_valid("survey-diff", record, "survey diff --json record")


def test_speed_json_with_the_openssl_comparison(run_cli) -> None:
    """A short `speed --json` (a key exchange and an AEAD, 20 ms a figure; openssl's
    shortest run is 1 s of one primitive pair) validates, comparison rows included."""
    code, out, err = run_cli("speed", "x25519", "aes-128-gcm", "--seconds", "0.02",
                             "--bytes", "16", "--json", "--compare-openssl", timeout=120)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["results"] and doc["openssl_comparison"]["rows"], doc["openssl_comparison"]
    assert_valid("speed", doc, "speed --json --compare-openssl")


def test_the_list_outputs_of_speed_and_clients(run_cli) -> None:
    """`speed --list --json` (the whole catalog: a document with the run members) and
    `clients --list --json` (every packaged profile: one profile file per line)."""
    code, out, err = run_cli("speed", "--list", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["algorithms"] and doc["groups"], doc
    assert_valid("speed-list", doc, "speed --list --json")
    code, out, err = run_cli("clients", "--list", "--json")
    assert code == 0, err
    profiles = _lines(out)
    assert len(profiles) >= 5
    for profile in profiles:
        assert_valid("client-profile", profile, "clients --list --json line")


def test_the_list_of_built_in_policies(run_cli) -> None:
    """`scan --list-policies --json` is a JSON output too: each line a built-in policy,
    valid against policy-list.schema.json (it had no schema)."""
    code, out, err = run_cli("scan", "--list-policies", "--json")
    assert code == 0, err
    policies = _lines(out)
    assert {p["name"] for p in policies} >= {"mozilla-intermediate-6.0", "mozilla-old-5.7"}
    for policy in policies:
        assert_valid("policy-list", policy, "scan --list-policies --json line")
