"""--json-out FILE (scan, probe, clients, timing): the JSON --json prints written to FILE while
the text report goes to stdout, in one run with --html and --csv; a FILE that cannot be
written is one line and exit 2 before any connection (issue 33 section 3)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.clients.conftest import DATA

#: members that differ between two runs of the same command
RUN = ("started_at", "duration_s", "timings", "connections", "total_connections", "retries")


def _same(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in RUN}


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_scan_text_json_out_html_csv_in_one_run(server_cache, run_cli, tmp_path: Path) -> None:
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    args = ("scan", target, "127.0.0.1:1", "--checks", "versions", "--no-progress",
            "--retries", "0")
    code, out, err = run_cli(*args, "--json-out", tmp_path / "s.json", "--html",
                             tmp_path / "s.html", "--csv", tmp_path / "s.csv")
    assert code == 3, err                           # the refused target's code
    assert "Supported versions" in out or "TLS 1.3" in out   # the text report on stdout
    assert not out.lstrip().startswith("{")
    written = _lines((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert [(d["host"], d["port"]) for d in written] == [("127.0.0.1", server.port),
                                                         ("127.0.0.1", 1)]
    code, out, _ = run_cli(*args, "--json")
    printed = sorted(_lines(out), key=lambda d: d["index"])
    assert [_same(d) for d in written] == [_same(d) for d in printed]
    assert "<html" in (tmp_path / "s.html").read_text(encoding="utf-8").lower()
    rows = list(csv.reader((tmp_path / "s.csv").open(encoding="utf-8")))
    assert len(rows) > 1


def test_probe_and_clients_json_out_beside_the_text(server_cache, run_cli,
                                                   tmp_path: Path) -> None:
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    code, out, err = run_cli(target, "--json-out", tmp_path / "p.json")
    assert code == 0, err
    assert not out.lstrip().startswith("{") and "x25519" in out.lower()
    written = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    code, out, _ = run_cli(target, "--json")
    assert _same(written) == _same(json.loads(out))
    args = ("clients", target, "--profiles-dir", str(DATA), "--profiles", "curl")
    code, out, err = run_cli(*args, "--json-out", tmp_path / "c.json")
    assert code == 0, err
    assert not out.lstrip().startswith("{")
    written = _lines((tmp_path / "c.json").read_text(encoding="utf-8"))
    code, out, _ = run_cli(*args, "--json")
    assert [_same(d)["clients"][0]["status"] for d in written] == \
        [_same(d)["clients"][0]["status"] for d in _lines(out)]
    assert written[0]["kind"] == "clients"


@pytest.mark.parametrize("command", [("scan",), (), ("clients",), ("timing",)])
def test_an_unwritable_json_out_is_one_line_before_the_work(run_cli, tmp_path: Path,
                                                           command) -> None:
    """Port 1 refuses: an error about the file, not the network, proves it came first."""
    missing = tmp_path / "none" / "out.json"
    code, out, err = run_cli(*command, "127.0.0.1:1", "--json-out", missing)
    assert code == 2, err
    assert err.strip() == f"tlsprobe: error: --json-out {missing}: no such directory " \
        f"{missing.parent}"
    code, out, err = run_cli(*command, "127.0.0.1:1", "--json-out", tmp_path)
    assert code == 2 and err.strip() == f"tlsprobe: error: --json-out {tmp_path}: is a directory"


def test_timing_json_out_beside_the_table(server_cache, run_cli, tmp_path: Path) -> None:
    """`tlsprobe HOST --timing --json-out FILE` and `tlsprobe timing`: the table on stdout,
    the timing document in FILE."""
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    timing = ("--timing-groups", "x25519", "--timing-runs", "2", "--timing-warmup", "0",
              "--timing-versions", "1.3")
    for command in ((target, "--timing"), ("timing", target)):
        out_file = tmp_path / "t.json"
        code, out, err = run_cli(*command, *timing, "--json-out", out_file)
        assert code == 0, err
        assert "x25519" in out and not out.lstrip().startswith("{")
        doc = json.loads(out_file.read_text(encoding="utf-8"))
        assert doc["schema"] == "tlsprobe.timing/1" and doc["entries"][0]["group"]["name"] \
            == "x25519"
        out_file.unlink()


def test_scan_json_out_is_in_input_order_and_its_help_says_so(run_cli, tmp_path: Path) -> None:
    """`scan --json` prints a bad line's object at once and the others as targets finish;
    `--json-out FILE` writes the same objects in the input's order: the help says which
    (not "as --json prints it")."""
    targets = tmp_path / "targets.txt"
    targets.write_text("127.0.0.1:1\na..b\n", encoding="utf-8")   # refused, not a name
    args = ("scan", "-f", targets, "--checks", "versions", "--no-progress", "--retries", "0")
    code, out, err = run_cli(*args, "--json", "--json-out", tmp_path / "s.json")
    assert code != 0 and "Traceback" not in err
    printed = _lines(out)
    written = _lines((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert [d["index"] for d in printed] == [2, 1]      # the bad line first
    assert [d["index"] for d in written] == [1, 2]      # the input's order
    assert sorted(map(json.dumps, map(_same, printed))) == \
        sorted(map(json.dumps, map(_same, written)))
    code, out, _ = run_cli("scan", "--help")
    help_text = " ".join(out.split())
    assert "as --json prints it" not in help_text
    assert "--json-out FILE also write the JSON lines (one object per target) to FILE in " \
           "the input's order (--json prints the same objects as targets finish)" in help_text
