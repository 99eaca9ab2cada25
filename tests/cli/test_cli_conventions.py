"""Command-line conventions (issue 30, item 5): `--version` in every subcommand (pcap's TLS
version filter is --tls-version), a closed stdout is exit 141 with nothing on stderr (never
1, the code of findings at or above --fail-on), and a mistyped option, choice, group, suite,
signature scheme or check name names the closest known ones in its one-line error."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tlsprobe import __version__
from tlsprobe.cli import SUBCOMMANDS

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "captures" / "tls12_x25519.pcap"


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("command", [(), *((c,) for c in SUBCOMMANDS)],
                         ids=lambda c: " ".join(c) or "tlsprobe")
def test_every_command_prints_the_program_version(run_cli, command) -> None:
    code, out, err = run_cli(*command, "--version")
    # the build the suite runs is the sources' (pure Python: no extension beside them)
    assert (code, out, err) == (0, f"tlsprobe {__version__} (pure Python)\n", "")


def test_pcap_version_with_a_value_points_to_tls_version(run_cli) -> None:
    code, out, err = run_cli("pcap", "--version", "1.2", SEED)
    assert code == 2 and out == "" and "--tls-version 1.2" in _one_line(err)
    code, out, err = run_cli("pcap", "--tls-version", "1.2", "--jsonl", SEED)
    assert code == 0 and '"connection"' in out, err


def _with_closed_stdout(*args: object, timeout: float = 90) -> tuple[int, str]:
    """`python -m tlsprobe ARGS` whose stdout is a pipe with no reader left (closed before
    the command writes anything, as `| head -1` is after its line): exit code, stderr."""
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120", NO_COLOR="1")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "tlsprobe", *map(str, args)],
                              stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env=env, timeout=timeout, text=True, cwd=REPO)
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("args", [
    ("scan", "{target}", "--checks", "versions", "--no-progress"),
    ("scan", "{target}", "--checks", "versions", "--no-progress", "--json"),
    ("{target}", "--json"),
    ("{target}",),
], ids=["scan", "scan --json", "probe --json", "probe"])
def test_a_closed_pipe_is_exit_141_and_quiet(server_cache, args) -> None:
    srv = server_cache("openssl", groups="X25519")
    target = f"127.0.0.1:{srv.port}"
    code, err = _with_closed_stdout(*(a.format(target=target) for a in args))
    assert (code, err) == (141, "")


@pytest.mark.parametrize("args", [(SEED,), ("--jsonl", SEED), ("--msg", SEED)],
                         ids=["table", "jsonl", "msg"])
def test_a_closed_pipe_on_pcap_is_exit_141_and_quiet(args) -> None:
    code, err = _with_closed_stdout("pcap", *args)
    assert (code, err) == (141, "")


@pytest.mark.parametrize(("args", "words"), [
    (("scan", "127.0.0.1:1", "--jsn"), "did you mean --json"),
    (("scan", "127.0.0.1:1", "--fail-on", "hihg"), "did you mean high"),
    (("127.0.0.1:1", "--grups", "x25519"), "did you mean --groups"),
    (("127.0.0.1:1", "--groups", "x2559"), "unknown group 'x2559' (did you mean X25519?)"),
    (("scan", "127.0.0.1:1", "--extra-groups", "secp256r"), "did you mean secp256r1"),
    (("127.0.0.1:1", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA265"),
     "did you mean ECDHE-RSA-AES128-GCM-SHA256"),
    (("127.0.0.1:1", "--ciphersuites", "TLS_AES_128_GCM_SHA25"),
     "did you mean TLS_AES_128_GCM_SHA256"),
    (("127.0.0.1:1", "--sigalgs", "rsa_pss_rsae_sha265"), "did you mean rsa_pss_rsae_sha256"),
    (("scan", "127.0.0.1:1", "--checks", "hearbleed"), "did you mean heartbleed"),
    (("pcap", "--group", "x2559", SEED), "did you mean X25519"),
    # a misspelt command read as a probe target, its arguments then unrecognized
    (("scna", "127.0.0.1:1"), "is 'scna' a command? did you mean tlsprobe scan?"),
    (("clinets", "127.0.0.1:1", "--profiles", "curl"),
     "is 'clinets' a command? did you mean tlsprobe clients?"),
    (("survy", "summary", "x"), "did you mean tlsprobe survey?"),
])
def test_a_mistyped_name_suggests_the_closest(run_cli, args, words) -> None:
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and words in _one_line(err)


@pytest.mark.parametrize("args", [
    ("scan", "127.0.0.1:1", "--fail-on", "hihg"),
    ("scan", "127.0.0.1:1", "--fail-on-change=al", "--baseline", "x.json"),
])
def test_a_bad_choice_lists_the_choices_as_the_user_types_them(run_cli, args) -> None:
    # the choices as words to type, not Python reprs ("<Severity.info: 'info'>")
    code, out, err = run_cli(*args)
    line = _one_line(err)
    assert code == 2 and out == "" and "invalid choice" in line
    choices = line[line.index("(choose from "):].split(")")[0]
    assert "<" not in choices and "Severity" not in choices, line
    if "--fail-on" in args:
        assert "(choose from 'info', 'low', 'medium', 'high', 'critical')" in line


@pytest.mark.parametrize("args, first, second", [
    (("scan", "127.0.0.1:9", "--sarif", "{d}/r", "--junit", "{d}/r"), "--sarif", "--junit"),
    (("scan", "127.0.0.1:9", "--html", "{d}/r", "--json-out", "{d}/./r"), "--json-out", "--html"),
    (("scan", "127.0.0.1:9", "--msg", "{d}/k", "--keylog", "{d}/k"), "--msg", "--keylog"),
    (("127.0.0.1:9", "--keylog", "{d}/k", "--pcap-out", "{d}/k"), "--pcap-out", "--keylog"),
    (("timing", "127.0.0.1:9", "--plot", "{d}/t.svg", "--json-out", "{d}/t.svg"),
     "--json-out", "--plot"),
    (("clients", "127.0.0.1:9", "--csv", "{d}/c", "--html", "{d}/c"), "--html", "--csv"),
    (("survey", "summary", "{d}/none", "--plot", "{d}/s.svg", "--html", "{d}/s.svg"),
     "--html", "--plot"),
    (("survey", "diff", "{d}/a", "{d}/b", "--jsonl", "{d}/x", "--parquet", "{d}/x"),
     "--jsonl", "--parquet"),
])
def test_two_file_options_naming_one_file_are_a_usage_error(run_cli, tmp_path, args, first,
                                                             second) -> None:
    # the second file written replaced the first in silence (exit 0, one report lost);
    # refused before any work: port 9 has no server, so exit 2 and not 3
    code, out, err = run_cli(*(a.format(d=tmp_path) for a in args))
    line = _one_line(err)
    assert code == 2 and out == "", err
    assert f"{first} and {second} name the same file" in line and "give each its own" in line
    assert not any(tmp_path.iterdir())
