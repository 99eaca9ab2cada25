"""`tlsprobe speed` at the command line: Ctrl-C, --openssl checks, names it cannot time, --list
(text and JSON), the --seconds floor, the --bytes note, and an openssl too old for ML-KEM.

Everything runs `python -m tlsprobe speed` as a subprocess with tiny --seconds; the Ctrl-C
tests start it in its own process group and send SIGINT as a terminal would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cryptography
import pytest
from cryptography.hazmat.primitives.asymmetric import mlkem

from tests.helpers.cpu import reaped_cpu, tree_cpu, used_cpu

from tlsprobe.speed import catalog
from tlsprobe.speed import openssl as openssl_compare
from tlsprobe.model.speed import AlgorithmResult, Figure

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="no openssl binary on PATH")

# 9 curves x 2 figures x 0.5 s: far longer than the moment before Ctrl-C.
ECDH = ["x25519", "x448", "p256", "p384", "p521", "secp256k1", "brainpoolp256r1",
        "brainpoolp384r1", "brainpoolp512r1"]


# --- Ctrl-C --------------------------------------------------------------------------------

def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COLUMNS="120", NO_COLOR="1")
    # SIGINT as in a terminal: a shell's background job (a CI runner's, say) starts with it
    # ignored, which children inherit, and Python then installs no KeyboardInterrupt handler
    return subprocess.Popen([sys.executable, "-m", "tlsprobe", "speed", *args], cwd=tmp_path,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _workers(pid: int) -> list[int]:
    """The benchmark workers among `pid`'s children: spawned processes, told apart by their
    command line from multiprocessing's resource tracker, which is started first (a
    snapshot of "two children" taken early holds the tracker and one worker)."""
    found = []
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def _wait_for_workers(proc: subprocess.Popen[str], count: int,
                      timeout: float = 20.0) -> list[int]:
    end = time.monotonic() + timeout
    while len(workers := _workers(proc.pid)) < count:
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            pytest.fail(f"speed did not start {count} workers: {proc.communicate()[1][-500:]}")
        time.sleep(0.05)
    return workers


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for_cpu(proc: subprocess.Popen[str], pids: list[int], seconds: float,
                  timeout: float = 90.0, count: int = 1) -> None:
    """Until `count` processes of `pids` have used `seconds` of CPU each: past start-up
    (about 0.3 s of CPU) and then measuring, so at least one 0.5 s figure is complete whatever
    the machine's load (a figure's wall time is at least the CPU time it used). Judged by CPU
    time, not by a sleep: on a busy machine start-up alone can take seconds of wall time."""
    end = time.monotonic() + timeout
    while sorted((_cpu_seconds(pid) for pid in pids), reverse=True)[count - 1] < seconds:
        if proc.poll() is not None or time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"speed did not use {seconds} s of CPU in {timeout} s: "
                        f"{proc.communicate()[1][-500:]}")
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen[str], whole_group: bool) -> tuple[int, str, str, float]:
    """SIGINT to speed; its exit code, output and the CPU seconds it and its workers used
    after the signal (judged by CPU, not by the clock: a busy machine stretches the wall
    time of an exit, not its CPU; measuring on would add seconds of CPU)."""
    reaped = reaped_cpu()           # speed is not waited for yet: not in it
    before = tree_cpu(proc.pid)     # speed, its workers, the workers it waited for
    out, err = _sigint(proc, whole_group)
    return proc.returncode, out, err, reaped_cpu() - reaped - before


def _sigint(proc: subprocess.Popen[str], whole_group: bool = False) -> tuple[str, str]:
    """SIGINT to speed (`whole_group`: to its process group, as Ctrl-C in a terminal sends
    it) and its output once it ended; fails the test after 20 s."""
    if whole_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("speed did not end within 20 s of SIGINT")


def _assert_one_interrupt_line(code: int, err: str, cpu_after: float) -> None:
    assert code == 130
    assert err == "tlsprobe: interrupted\n"  # one line: no worker traceback, no warning
    assert cpu_after < 1.5, f"used {cpu_after:.2f} s of CPU after Ctrl-C: did not stop"


def _table_rows(out: str) -> dict[str, list[str]]:
    """Key exchange table of the text report: description -> cells."""
    lines = out.split("\nKey exchange:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    header = lines[0].split()
    rows = {}
    for line in lines[1:]:
        label, cells = line[:line.index(")") + 1], line[line.index(")") + 1:].split()
        assert len(cells) == len(header)
        rows[label] = cells
    return rows


@pytest.mark.parametrize("whole_group", [True, False], ids=["process-group", "parent-only"])
def test_ctrl_c_with_workers_stops_at_once_and_prints_what_was_measured(
        tmp_path: Path, whole_group: bool) -> None:
    proc = _start(tmp_path, "--seconds", "0.5", "--multi", "2", *ECDH)
    workers = _wait_for_workers(proc, 2)
    _wait_for_cpu(proc, workers, 1.2, count=2)  # start-up, then figures
    code, out, err, cpu_after = _interrupt(proc, whole_group)
    _assert_one_interrupt_line(code, err, cpu_after)
    assert "2 processes (figures are sums)" in out
    assert "interrupted: only the figures completed before Ctrl-C" in out
    rows = _table_rows(out)
    assert "253 bits ecdh (X25519)" in rows
    rates = [float(cell) for cells in rows.values() for cell in cells[:-1]   # [-1]: the bar
             if not cell.endswith("s") and cell != "-"]
    assert rates and all(rate > 0 for rate in rates)
    assert len(rates) < 2 * len(ECDH)  # stopped early: not every figure is there
    time.sleep(0.2)
    assert _children(proc.pid) == []  # no worker left behind


def test_a_worker_that_dies_is_exit_70_in_one_line(tmp_path: Path) -> None:
    """A benchmark worker killed (OOM killer, kill -9) is exit 70, as pcap's reader process
    dying is (README, exit codes): never 1, which belongs to scan's --fail-on."""
    proc = _start(tmp_path, "--seconds", "0.5", "--multi", "2", *ECDH)
    workers = _wait_for_workers(proc, 2)
    os.kill(workers[0], signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("speed did not end within 30 s of a worker's death")
    assert proc.returncode == 70, (proc.returncode, err)
    assert err == "tlsprobe: a benchmark worker process ended without reporting\n", err
    time.sleep(0.2)
    assert _children(proc.pid) == []  # the other worker is stopped too


def test_ctrl_c_in_one_process_gives_partial_json(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--seconds", "0.5", "--json", *ECDH)
    _wait_for_cpu(proc, [proc.pid], 1.5)  # start-up, then a few 0.5 s figures of the 18
    code, out, err, cpu_after = _interrupt(proc, whole_group=True)
    _assert_one_interrupt_line(code, err, cpu_after)
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["processes"] == 1
    figures = [(r["algorithm"], f) for r in doc["results"] for f in r["figures"]]
    assert 1 <= len(figures) < 2 * len(ECDH)
    assert [r["algorithm"] for r in doc["results"]] == ECDH[:len(doc["results"])]
    for _, fig in figures:  # only whole figures: each ran its full time
        assert fig["count"] >= 1 and fig["seconds"] >= 0.5
        assert fig["per_second"] == pytest.approx(fig["count"] / fig["seconds"])


def test_a_complete_run_says_it_was_not_interrupted(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.01", "--json", "x25519")
    assert code == 0, err
    assert json.loads(out)["interrupted"] is False
    code, out, err = run_cli("speed", "--seconds", "0.01", "x25519")
    assert code == 0 and "interrupted" not in out


# --- --openssl -----------------------------------------------------------------------------

def _one_usage_line(result: Any, *needles: str) -> None:
    code, out, err = result
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("tlsprobe: ")
    for needle in needles:
        assert needle in err


def test_explicit_openssl_that_does_not_exist_is_a_usage_error(run_cli: Any,
                                                              tmp_path: Path) -> None:
    missing = tmp_path / "no-such-openssl"
    cpu = used_cpu()
    result = run_cli("speed", "x25519", "--seconds", "5", "--compare-openssl", "--openssl",
                     missing)
    _one_usage_line(result, str(missing), "no such file")
    # refused before measuring anything: 5 s of x25519 would cost 5 s of CPU
    assert used_cpu() - cpu < 2.5
    _one_usage_line(run_cli("speed", "x25519", "--seconds", "0.01", "--openssl",
                            "no-such-openssl-anywhere"), "no such file on PATH")


def test_explicit_openssl_that_is_not_executable_is_a_usage_error(run_cli: Any,
                                                                 tmp_path: Path) -> None:
    plain = tmp_path / "openssl"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    _one_usage_line(run_cli("speed", "x25519", "--seconds", "0.01", "--compare-openssl",
                            "--openssl", plain), "not an executable file")
    _one_usage_line(run_cli("speed", "x25519", "--seconds", "0.01", "--compare-openssl",
                            "--openssl", tmp_path), "not an executable file")


def test_a_program_that_is_not_openssl_is_refused(run_cli: Any, tmp_path: Path) -> None:
    true = shutil.which("true")
    assert true is not None
    _one_usage_line(run_cli("speed", "x25519", "--seconds", "0.01", "--compare-openssl",
                            "--openssl", true), "not openssl", "printed nothing")
    impostor = tmp_path / "fake-openssl"
    impostor.write_text("#!/bin/sh\necho 'GnuTLS 3.8'\n")
    impostor.chmod(0o755)
    _one_usage_line(run_cli("speed", "x25519", "--seconds", "0.01", "--compare-openssl",
                            "--openssl", impostor), "not openssl", "'GnuTLS 3.8'")


@needs_openssl
def test_explicit_openssl_implies_the_comparison(run_cli: Any) -> None:
    assert OPENSSL is not None
    code, out, err = run_cli("speed", "x25519", "--seconds", "0.01", "--json", "--openssl",
                             OPENSSL, timeout=90)
    assert code == 0, err
    comparison = json.loads(out)["openssl_comparison"]
    assert comparison["binary"] == OPENSSL and comparison["error"] is None
    assert comparison["version"].startswith("OpenSSL ")
    derive = [r for r in comparison["rows"] if r["operation"] == "derive"]
    assert len(derive) == 1 and derive[0]["openssl"] > 0


# --- names it cannot time, --list ----------------------------------------------------------

@pytest.mark.skipif(hasattr(mlkem, "MLKEM512PrivateKey"),
                    reason="this cryptography has ML-KEM-512: it is measured")
@pytest.mark.parametrize("name", ["mlkem512", "ML-KEM-512", "MLKEM512"])
def test_mlkem512_is_named_with_the_reason_it_is_not_timed(run_cli: Any, name: str) -> None:
    _one_usage_line(run_cli("speed", name, "--seconds", "0.01"),
                    f"ML-KEM-512: not available in cryptography {cryptography.__version__}; "
                    "the probe computes it with kyber-py (pure Python)")


@pytest.mark.skipif(not hasattr(mlkem, "MLKEM512PrivateKey"),
                    reason="this cryptography has no ML-KEM-512")
def test_mlkem512_is_measured_when_cryptography_has_it(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "mlkem512", "--seconds", "0.01", "--json")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert [f["operation"] for f in result["figures"]] == ["keygen", "encaps", "decaps"]


@pytest.mark.parametrize("name, message", [
    ("X25519Kyber768Draft00", "X25519Kyber768Draft00: not available in cryptography"),
    ("curveSM2", "curveSM2: not available in cryptography"),
    ("secp192r1", "secp192r1: a TLS group tlsprobe speed does not time"),
    ("rot13", "unknown algorithm 'rot13'"),
])
def test_other_names_say_why_they_are_not_timed(run_cli: Any, name: str, message: str) -> None:
    _one_usage_line(run_cli("speed", "x25519", name, "--seconds", "0.01"), message)


def test_list_applies_the_selection(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "rsa", "ed25519", "--list")
    assert code == 0, err
    names = [line.split()[1] for line in out.splitlines()[1:]
             if len(line.split()) > 2 and line.split()[0] in ("kex", "kem", "sig", "aead")]
    assert names == [a.name for a in catalog.resolve(["rsa", "ed25519"])]
    assert names[:2] == ["rsa2048", "rsa2048-pss"] and names[-1] == "ed25519"
    code, out, _ = run_cli("speed", "--list")
    assert code == 0
    everything = [line.split()[1] for line in out.splitlines()[1:]
                  if len(line.split()) > 2 and line.split()[0] in ("kex", "kem", "sig", "aead")]
    assert everything == [a.name for a in catalog.ALGORITHMS]
    _one_usage_line(run_cli("speed", "rot13", "--list"), "unknown algorithm 'rot13'")


def test_list_json_gives_names_operations_and_what_they_need(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--list", "--json", "x25519", "mlkem", "mldsa65",
                             "aes-128-gcm")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "tlsprobe.speed-list/1"
    entries = {entry["name"]: entry for entry in doc["algorithms"]}
    assert list(entries) == [a.name for a in catalog.resolve(["x25519", "mlkem", "mldsa65",
                                                               "aes-128-gcm"])]
    assert entries["x25519"]["kind"] == "kex"
    assert entries["x25519"]["operations"] == ["keygen", "derive"]
    assert entries["x25519"]["openssl_speed"] == ["ecdhx25519"]
    assert entries["x25519"]["needs"] == {"openssl_speed": None}
    assert entries["mlkem768"]["operations"] == ["keygen", "encaps", "decaps"]
    assert entries["mlkem768"]["needs"] == {"openssl_speed": "OpenSSL 3.5+"}
    assert entries["mldsa65"]["needs"] == {"openssl_speed": "OpenSSL 3.5+"}
    assert entries["aes-128-gcm"]["operations"] == ["encrypt"]
    assert entries["aes-128-gcm"]["openssl_speed"][0] == "-evp"
    assert "x25519" in doc["groups"]["ecdh"]
    code, out, _ = run_cli("speed", "--json", "--list")  # every algorithm, either order
    assert code == 0
    assert [e["name"] for e in json.loads(out)["algorithms"]] == [
        a.name for a in catalog.ALGORITHMS]


@pytest.mark.parametrize("value", ["1e-9", "0.001", "0.0099"])
def test_seconds_below_the_floor_is_a_usage_error(run_cli: Any, value: str) -> None:
    _one_usage_line(run_cli("speed", "--seconds", value, "x25519"),
                    f"--seconds must be at least 0.01 and at most 3600, not {value}")


def test_seconds_at_the_floor_measures_more_than_one_call(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.01", "--json", "x25519")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    for fig in result["figures"]:
        assert fig["seconds"] >= 0.01 and fig["count"] > 1


def test_bytes_without_an_aead_is_one_note_and_the_run_goes_on(run_cli: Any) -> None:
    code, out, err = run_cli("speed", "--seconds", "0.01", "--bytes", "16", "--json", "x25519")
    assert code == 0
    assert err == ("tlsprobe: note: --bytes sets AEAD block sizes and no AEAD is selected "
                   "(add aead or a cipher name); ignored\n")
    assert [r["algorithm"] for r in json.loads(out)["results"]] == ["x25519"]
    code, out, err = run_cli("speed", "--seconds", "0.01", "--bytes", "16", "--json",
                             "x25519", "aes-128-gcm")
    assert code == 0 and err == ""  # an AEAD takes it: no note
    (aead,) = [r for r in json.loads(out)["results"] if r["kind"] == "aead"]
    assert [f["block_size"] for f in aead["figures"]] == [16]
    _one_usage_line(run_cli("speed", "--bytes", "0", "x25519"), "--bytes must be between")


# --- an openssl too old for ML-KEM ---------------------------------------------------------

_FAKE_OPENSSL = """#!{python}
import sys
with open({log!r}, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] == ["version"]:
    print({version!r})
    sys.exit(0)
if "ecdhx25519" in sys.argv:
    print("                              op      op/s")
    print(" 253 bits ecdh (X25519)   0.0000s  30000.0")
if "ML-KEM-768" in sys.argv:
    print("               keygen    encaps    decaps keygens/s  encaps/s  decaps/s")
    print("  ML-KEM-768 0.000020s 0.000010s 0.000020s   50000.0  100000.0   50000.0")
"""


def _fake_openssl(tmp_path: Path, version: str) -> tuple[Path, Path]:
    binary, log = tmp_path / "openssl", tmp_path / "calls.log"
    binary.write_text(_FAKE_OPENSSL.format(python=sys.executable, log=str(log),
                                           version=version))
    binary.chmod(0o755)
    return binary, log


def _measured(*names: str) -> tuple[list[Any], list[AlgorithmResult]]:
    algorithms = catalog.resolve(names)
    results = [AlgorithmResult(a.name, a.kind, a.description,
                               tuple(Figure(op, 100, 1.0, 100.0) for op in a.operations))
               for a in algorithms]
    return algorithms, results


@pytest.mark.parametrize("version, asked", [
    ("OpenSSL 3.0.22 25 Aug 2026 (Library: OpenSSL 3.0.22 25 Aug 2026)", False),
    ("OpenSSL 3.4.1 11 Feb 2025", False),
    ("OpenSSL 3.5.0 8 Apr 2025", True),
    ("LibreSSL 4.0.0", True),  # its numbers say nothing about OpenSSL's: asked, as before
])
def test_mlkem_is_not_asked_of_an_openssl_older_than_3_5(tmp_path: Path, version: str,
                                                         asked: bool) -> None:
    binary, log = _fake_openssl(tmp_path, version)
    algorithms, results = _measured("x25519", "mlkem768")
    comparison = openssl_compare.compare(algorithms, results, seconds=0.01, binary=str(binary))
    assert comparison.error is None and comparison.version == version
    speed_calls = [line for line in log.read_text().splitlines() if line.startswith("speed")]
    assert ("ML-KEM-768" in " ".join(speed_calls)) is asked
    assert ("ML-KEM-768" in " ".join(comparison.commands)) is asked
    rows = {(r.algorithm, r.operation): r for r in comparison.rows}
    assert rows[("x25519", "derive")].openssl == 30000.0
    for operation, theirs in (("keygen", 50000.0), ("encaps", 100000.0), ("decaps", 50000.0)):
        row = rows[("mlkem768", operation)]
        if asked:
            assert row.openssl == theirs and row.note is None
        else:
            minor = version.split()[1].split(".")[1]
            assert row.openssl is None
            assert row.note == f"openssl 3.{minor} has no ML-KEM (3.5+)"


def test_only_old_primitives_selected_runs_no_openssl_speed(tmp_path: Path) -> None:
    binary, log = _fake_openssl(tmp_path, "OpenSSL 3.0.22 25 Aug 2026")
    algorithms, results = _measured("mldsa44")
    comparison = openssl_compare.compare(algorithms, results, seconds=0.01, binary=str(binary))
    assert comparison.commands == ()
    assert not any(line.startswith("speed") for line in log.read_text().splitlines())
    assert {r.note for r in comparison.rows} == {"openssl 3.0 has no ML-DSA (3.5+)"}


@needs_openssl
def test_the_system_openssl_and_mlkem_at_the_command_line(run_cli: Any) -> None:
    assert OPENSSL is not None
    version = openssl_compare.binary_version(OPENSSL)
    number = openssl_compare.version_number(version)
    code, out, err = run_cli("speed", "--seconds", "0.01", "--json", "--compare-openssl",
                             "mlkem768", timeout=90)
    assert code == 0, err
    comparison = json.loads(out)["openssl_comparison"]
    if number is not None and number < (3, 5):
        assert comparison["commands"] == []
        assert {r["note"] for r in comparison["rows"]} == {
            f"openssl {number[0]}.{number[1]} has no ML-KEM (3.5+)"}
    else:
        assert any("ML-KEM-768" in command for command in comparison["commands"])


@needs_openssl
def test_multi_compare_reads_openssl_aead_figures_and_public_key_ones(run_cli: Any) -> None:
    # `openssl speed -multi N -evp C -aead` prints its summed row without the "type ...
    # bytes" header (the sizes only in its children's "+H:" lines): the figure is there and
    # must be read, as the public-key rows are.
    code, out, err = run_cli("speed", "--multi", "2", "--seconds", "0.05", "--bytes", "16,1024",
                             "--json", "--compare-openssl", "x25519", "aes-128-gcm",
                             timeout=120)
    assert code == 0, err
    comparison = json.loads(out)["openssl_comparison"]
    assert comparison["error"] is None
    assert all("-multi 2" in command for command in comparison["commands"])
    rows = {(r["algorithm"], r["block_size"]): r for r in comparison["rows"]
            if r["operation"] in ("derive", "encrypt")}
    assert set(rows) == {("x25519", None), ("aes-128-gcm", 16), ("aes-128-gcm", 1024)}
    for row in rows.values():
        assert row["note"] is None and row["openssl"] > 0, row
        assert row["ratio"] == pytest.approx(row["tlsprobe"] / row["openssl"])


def test_cipher_table_parser_reads_the_multi_form() -> None:
    # What `openssl speed -multi 2 -evp aes-128-gcm -aead -bytes 16` prints on stdout.
    sample = ("Forked child 0\nForked child 1\nGot: +H:16 from 0\n"
              "Got: +F:25:AES-128-GCM:22620912.00 from 0\nGot: +H:16 from 1\n"
              "Got: +F:25:AES-128-GCM:29251632.00 from 1\nversion: 3.0.19\n"
              "options: bn(64,64)\nAES-128-GCM      51872.54k\n")
    assert openssl_compare.parse_cipher_table(sample) == {
        "AES-128-GCM": {16: pytest.approx(51872540.0)}}


def test_an_openssl_that_cannot_be_run_for_speed_costs_only_the_comparison(
        run_cli: Any, tmp_path: Path) -> None:
    # openssl on PATH answers `version`, then can no longer be run (removed or changed
    # during the minutes of measuring): our figures are printed, each comparison row says
    # why it has no openssl figure; no "internal error" that throws the figures away.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "openssl"
    fake.write_text('#!/bin/sh\nif [ "$1" = version ]; then echo "OpenSSL 3.0.19 27 Jan 2026"; '
                    'chmod -x "$0"; exit 0; fi\nexit 1\n')
    fake.chmod(0o755)
    code, out, err = run_cli("speed", "--seconds", "0.01", "--bytes", "16", "--json",
                             "--compare-openssl", "x25519", "aes-128-gcm",
                             env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert code == 0 and err == "", err
    doc = json.loads(out)
    assert [r["algorithm"] for r in doc["results"]] == ["x25519", "aes-128-gcm"]
    comparison = doc["openssl_comparison"]
    notes = {r["note"] for r in comparison["rows"]}
    assert notes == {f"openssl speed failed: cannot run {fake}: permission denied"}, notes


def _openssl_speed_tree(pid: int) -> list[int]:
    """The `openssl speed` processes under `pid`: the one speed runs and, with -multi, the
    children it forked."""
    found: list[int] = []
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"speed" in cmdline and os.path.basename(cmdline[0]) == b"openssl":
            found += [child, *_openssl_speed_tree(child)]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@needs_openssl
def test_ctrl_c_during_openssl_speed_ends_it_and_its_children_quietly(tmp_path: Path) -> None:
    # SIGINT to tlsprobe alone (kill -INT, or a terminal whose process group openssl is not
    # in): openssl speed -multi and the children it forked stop with us, and nothing but
    # our own line reaches stderr (no ResourceWarning about a subprocess still running).
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COLUMNS="120", NO_COLOR="1",
               PYTHONWARNINGS="default")
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "speed", "--seconds", "0.01",
                             "--multi", "2", "--compare-openssl", "rsa2048", "rsa3072",
                             "rsa4096", "ecdsap256", "ecdsap384", "ed25519", "ed448"],
                            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    end = time.monotonic() + 90
    while len(openssl := _openssl_speed_tree(proc.pid)) < 3:   # openssl and its 2 children
        if proc.poll() is not None or time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"openssl speed -multi 2 never ran: {proc.communicate()[1][-500:]}")
        time.sleep(0.05)
    out, err = _sigint(proc)
    assert proc.returncode == 130 and err == "tlsprobe: interrupted\n", err
    assert "rsa 2048 bits PKCS#1 v1.5" in out   # our figures were complete
    left = [pid for pid in openssl if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "openssl speed processes outlived tlsprobe"
