"""Shares over the targets that established a fact: `survey summary` and `survey diff`
against real loopback servers. A target whose answer did not settle a version or a group
(a TLS 1.2 server with RSA key exchange only: its ECDHE hellos are refused, so whether it
speaks TLS 1.2 is not established without the versions phase; a group audit that came
back inconclusive) was counted as refusing it: "TLS 1.2 on 50.0%" of two servers that
both speak it, and a share that moved by 50 points between two surveys of the same
servers."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.survey.test_survey_run import cli

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def servers(server_cache: Callable[..., Any]) -> tuple[str, str]:
    """(TLS 1.2 and 1.3 with x25519, TLS 1.2 with TLS_RSA_WITH_AES_128_CBC_SHA only)."""
    both = server_cache("openssl", groups=["X25519"], proto="both")
    rsa = server_cache("openssl", proto="tls1_2", ciphers="AES128-SHA")
    return f"127.0.0.1:{both.port}", f"127.0.0.1:{rsa.port}"


def _survey(targets: list[str], out: Path, *more: str) -> None:
    listing = out.parent / f"{out.name}.txt"
    listing.write_text("\n".join(targets) + "\n")
    proc = cli("survey", listing, "--out", out, "--workers", "1", "--no-progress",
               "--retries", "0", *more)
    assert proc.returncode == 0, proc.stderr


def test_a_version_not_established_is_not_counted_as_refused(servers, tmp_path):
    out = tmp_path / "s"
    _survey(list(servers), out)
    proc = cli("survey", "summary", out, "--json")
    assert proc.returncode == 0, proc.stderr
    versions = json.loads(proc.stdout)["versions"]
    # both speak TLS 1.2; the RSA-only one did not establish it: 1 of the 1 that did
    assert versions["TLS 1.2"] == {"targets": 1, "share": 1.0, "not_established": 1}
    # the RSA-only one does not speak TLS 1.3 (established: the server refuses it)
    assert versions["TLS 1.3"] == {"targets": 1, "share": 0.5, "not_established": 0}
    text = cli("survey", "summary", out).stdout
    assert "100.00%  (not established on 1)" in text, text


def test_a_target_become_inconclusive_moves_no_share(servers, tmp_path):
    """The new survey's documents of the dual server say its group audits were
    inconclusive (their groups neither accepted nor refused): no change for that target,
    and x25519's share of the targets that established it is unchanged."""
    old, new = tmp_path / "old", tmp_path / "new"
    both = f"127.0.0.1:{servers[0].rsplit(':', 1)[1]}"
    _survey([both, both.replace("127.0.0.1", "localhost")], old)
    shutil.copytree(old, new)
    for path in (new / "_jsonl").glob("*.jsonl"):
        docs = [json.loads(line) for line in path.read_text().splitlines()]
        for doc in docs:
            if doc["host"] == "localhost":
                for audit in doc["groups"]:
                    audit["inconclusive"] = audit["supported"] + audit["inconclusive"]
                    audit["supported"] = []
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    proc = cli("survey", "diff", old, new)
    assert proc.returncode == 0, proc.stderr
    assert "Targets with changes: 0" in proc.stdout, proc.stdout
    assert ("x25519 on 100.0 % of targets (1), unchanged; not established on 0 -> 1"
            in proc.stdout), proc.stdout


def test_diff_of_a_stopped_survey_reads_its_scan_documents_only(servers, tmp_path):
    """A survey killed while a shard waits (its target answers nothing) leaves the shards
    done as scan documents in `_jsonl/` and as Parquet rows in `_rows/`; `survey diff` read
    the rows files as scan documents too: "_rows/shard-00000.jsonl:1: not a tlsprobe scan
    document", exit 2, for a survey folder. And the target of the shard not done was
    "gone (only in the old survey)": not established, the new survey never audited it."""
    old, stopped = tmp_path / "old", tmp_path / "stopped"
    silent = socket.socket()
    silent.bind(("127.0.0.2", 0))
    silent.listen(16)           # connections complete in the backlog; nothing is sent
    waiting = f"127.0.0.2:{silent.getsockname()[1]}"
    listing = tmp_path / "stopped.txt"
    listing.write_text(f"{servers[0]}\n{waiting}\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        _survey([servers[0], waiting], old, "--timeout", "1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tlsprobe", "survey", str(listing), "--out", str(stopped),
             "--shard-size", "1", "--workers", "1", "--timeout", "120", "--no-progress"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not (stopped / "_rows" / "shard-00000.jsonl").exists():
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        finally:
            proc.kill()
            proc.wait()
    finally:
        silent.close()
    assert not list(stopped.glob("shard-*.parquet"))      # stopped before the end
    done = cli("survey", "diff", old, stopped)
    assert done.returncode == 0, done.stderr
    assert "Targets: 2 -> 1 (0 added, 0 removed, 1 compared)" in done.stdout, done.stdout
    assert f"{waiting}: in one survey only, the other incomplete" in done.stdout
    assert "The new survey is incomplete: 1 shard(s) not done" in done.stdout
    assert "gone" not in done.stdout


def test_a_fact_one_survey_did_not_check_has_no_share_there(servers, tmp_path):
    """The old survey ran the versions phase, the new one did not: its grades are
    established nowhere, and its versions only where a group audit settled them (the
    RSA-only server's TLS 1.2 audit has no ECDHE suite to ask with). The diff said "TLS 1.2
    now on 0.0 % of targets (0), -100.0 points (was 100.0 %)", a loss nothing observed;
    later it called TLS 1.2 established nowhere, though the group audit had seen it spoken
    (`survey summary` counted it)."""
    old, new = tmp_path / "old", tmp_path / "new"
    _survey(list(servers), old, "--checks", "versions,groups")
    _survey(list(servers), new, "--checks", "groups")
    proc = cli("survey", "diff", old, new)
    assert proc.returncode == 0, proc.stderr
    versions = proc.stdout.split("Versions", 1)[1].split("Groups", 1)[0]
    assert "TLS 1.2 on 100.0 % of targets (1), unchanged; not established on 0 -> 1" \
        in versions, proc.stdout
    assert "points" not in versions
    assert "A: not established (was 50.0 % (1)): no share to compare" in proc.stdout
    as_json = json.loads(cli("survey", "diff", old, new, "--json").stdout.splitlines()[-1])
    shares = {s["name"]: s for s in as_json["shares"]}
    assert (shares["TLS 1.2"]["old_percent"], shares["TLS 1.2"]["new_percent"]) == (100.0, 100.0)
    assert (shares["A"]["old_percent"], shares["A"]["new_percent"]) == (50.0, None)
    new_summary = json.loads(cli("survey", "summary", new, "--json").stdout)
    assert new_summary["versions"]["TLS 1.2"] == {"targets": 1, "share": 1.0,
                                                  "not_established": 1}


def test_a_version_established_nowhere_has_no_share(servers, tmp_path):
    """The RSA-only server alone: whether it speaks TLS 1.2 is established on no target,
    so TLS 1.2 has no share (null, "-"), in the JSON, the text, the closing paragraph, the
    HTML page and the chart; before, TLS 1.2 was left out as if no target spoke it."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (--plot, --html)")
    out = tmp_path / "s"
    listing = tmp_path / "s.txt"
    listing.write_text(servers[1] + "\n")
    run = cli("survey", listing, "--out", out, "--workers", "1", "--no-progress")
    assert run.returncode == 0, run.stderr
    assert "Of the targets reached: TLS 1.2 not established;" in run.stdout, run.stdout
    summary = json.loads(cli("survey", "summary", out, "--json").stdout)
    assert summary["versions"] == {"TLS 1.2": {"targets": 0, "share": None,
                                               "not_established": 1}}
    text = cli("survey", "summary", out).stdout
    assert "TLS 1.2                             0       -  (not established on 1)" in text
    drawn = cli("survey", "summary", out, "--html", tmp_path / "s.html", "--plot",
                tmp_path / "s.svg")
    assert drawn.returncode == 0, drawn.stderr
    assert "<td>TLS 1.2</td><td>0</td><td>not established on 1</td>" in \
        (tmp_path / "s.html").read_text()


def test_each_host_is_surveyed_once_whatever_its_spelling(server_cache, tmp_path):
    """'[::1]', '[0:0::1]' and '[::0001]' are one address, 'LOCALHOST' and 'localhost' one
    name: the survey audited each spelling as a target of its own (the same server three
    times, the spellings of one address in shards of their own, so --per-host did not
    hold across them), and survey diff matched none of them to the other spellings."""
    server = server_cache("openssl", groups=["X25519"], proto="tls1_3", host="::1")
    port = server.port
    out = tmp_path / "s"
    listing = tmp_path / "s.txt"
    listing.write_text(f"[::1]:{port}\n[0:0::1]:{port}\n[::0001]:{port}\n"
                       f"localhost:1\nLOCALHOST:1\n")
    run = cli("survey", listing, "--out", out, "--workers", "1", "--no-progress",
              "--shard-size", "1", "--retries", "0")
    assert run.returncode == 0, run.stderr
    docs = [json.loads(line) for path in sorted((out / "_jsonl").glob("*.jsonl"))
            for line in path.read_text().splitlines()]
    assert [(d["host"], d["port"]) for d in docs] == [("::1", port), ("localhost", 1)]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["identity"]["targets"] == 2 and len(manifest["shards"]) == 2
    # the same documents under another spelling of the address compare as one target
    renamed = tmp_path / "renamed"
    shutil.copytree(out, renamed)
    for path in (renamed / "_jsonl").glob("*.jsonl"):
        path.write_text(path.read_text().replace('"host": "::1"', '"host": "0:0::1"'))
    diff = cli("survey", "diff", out, renamed)
    assert diff.returncode == 0, diff.stderr
    assert "Targets: 2 -> 2 (0 added, 0 removed, 2 compared)" in diff.stdout, diff.stdout
    # a folder of an earlier tlsprobe, which surveyed both spellings: each target counted
    # once in the shares and the counts (it was 3 targets, one of them never compared)
    twice = tmp_path / "twice"
    shutil.copytree(out, twice)
    for path in (twice / "_jsonl").glob("*.jsonl"):
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines + [line.replace('"host": "::1"', '"host": "0:0::1"')
                                         for line in lines if '"host": "::1"' in line]))
    for old, new in ((out, twice), (twice, out)):
        diff = cli("survey", "diff", old, new)
        assert diff.returncode == 0, diff.stderr
        assert "Targets: 2 -> 2 (0 added, 0 removed, 2 compared)" in diff.stdout, diff.stdout


def test_a_folder_of_an_older_tlsprobe_with_two_spellings_resumes(server_cache, tmp_path):
    """An older tlsprobe surveyed '[::1]:P' and '[0:0::1]:P' as two targets in shards of
    their own (sharded by spelling), and its manifest says so. Stopped after its first
    shard, the same command refused to resume it ("holds a survey of different arguments
    (differs in targets, targets_sha256)", exit 2). It resumes on the folder's own shards:
    the address already surveyed is not audited again under its other spelling (that shard
    is done with no row), the targets not yet surveyed are, nothing is lost."""
    server = server_cache("openssl", groups=["X25519"], proto="tls1_3", host="::1")
    v4 = server_cache("openssl", groups=["X25519"], proto="tls1_3")
    spelled = [f"[::1]:{server.port}", f"127.0.0.1:{v4.port}", f"[0:0::1]:{server.port}",
               "127.0.0.1:1"]
    out = tmp_path / "older"
    # the first shard as the older run wrote it (it surveyed [::1] alone there) ...
    first = tmp_path / "first.txt"
    first.write_text(spelled[0] + "\n")
    run = cli("survey", first, "--out", out, "--workers", "1", "--no-progress",
              "--shard-size", "1", "--retries", "0", "--checks", "versions")
    assert run.returncode == 0, run.stderr
    written = (out / "_jsonl" / "shard-00000.jsonl").read_text()
    # ... and its manifest: four targets by spelling, in three shards by spelling (both
    # ports of 127.0.0.1 in one), the first done
    manifest = json.loads((out / "_manifest.json").read_text())
    displays = ["::1", "127.0.0.1", "0:0::1", "127.0.0.1"]
    ports = [server.port, v4.port, server.port, 1]
    old_digest = hashlib.sha256("".join(
        f"[{h}]:{p}\n" if ":" in h else f"{h}:{p}\n" for h, p in zip(displays, ports)
    ).encode()).hexdigest()
    manifest["identity"].update(targets=4, targets_sha256=old_digest)
    manifest["shards"] = [{"name": "shard-00000", "targets": 1, "first_index": 1},
                          {"name": "shard-00001", "targets": 2, "first_index": 2},
                          {"name": "shard-00002", "targets": 1, "first_index": 3}]
    manifest["done"] = ["shard-00000"]
    (out / "_manifest.json").write_text(json.dumps(manifest))
    listing = tmp_path / "all.txt"
    listing.write_text("\n".join(spelled) + "\n")
    again = cli("survey", listing, "--out", out, "--workers", "1", "--no-progress",
                "--shard-size", "1", "--retries", "0", "--checks", "versions")
    assert again.returncode == 0, again.stderr
    assert (out / "_jsonl" / "shard-00000.jsonl").read_text() == written   # not redone
    docs = [json.loads(line) for path in sorted((out / "_jsonl").glob("*.jsonl"))
            for line in path.read_text().splitlines()]
    assert [(d["host"], d["port"], d["index"]) for d in docs] == [
        ("::1", server.port, 1), ("127.0.0.1", v4.port, 2), ("127.0.0.1", 1, 4)]
    assert [d["error"] is None for d in docs] == [True, True, False]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["done"] == ["shard-00000", "shard-00001", "shard-00002"]
    summary = cli("survey", "summary", out, "--json")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["targets"] == 3
    # and once more: all done, nothing audited
    done = cli("survey", listing, "--out", out, "--workers", "1", "--no-progress",
               "--shard-size", "1", "--retries", "0", "--checks", "versions")
    assert done.returncode == 0 and "all 3 shards" in done.stderr, done.stderr
