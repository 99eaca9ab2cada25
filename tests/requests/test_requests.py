"""The request layer (tlsprobe/requests/): the command line and the Python API build the
same request for the same inputs (the same ProbeOptions, AuditOptions and scheduler reach
the probe and the audit), and validate in one place: the same bad value gives the same
one-line message from both, told apart only by how the input is named (`--key-shares` on
the command line, `key_shares` in the API). Issue 31 item 2.

The entry points are the real ones (`cli.main`, `tlsprobe.probe`/`scan`/`read_capture`);
what reaches the probe or the audit is caught by replacing `run_probe` / `run_audit` /
`audit_many` with a recorder that stops the run there: no connection is made."""

from __future__ import annotations

import dataclasses
import functools
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tlsprobe
from tlsprobe import cli
from tlsprobe.errors import UsageError

TARGET = "127.0.0.1:9"   # never connected to: the recorder stops the run before
#: the command line's option -> the API's parameter, for comparing messages
API_NAME = {"--key-shares": "key_shares", "--groups": "groups", "--ciphersuites":
            "ciphersuites", "--ciphers": "ciphers", "--alpn": "alpn", "--sni": "server_name",
            "--no-sni": "send_sni=False", "--http-get": "http_get",
            "--first-flight-only": "first_flight_only", "--per-host": "per_host",
            "--retries": "retries", "--timeout": "timeout", "--delay": "delay",
            "--checks": "checks", "--extra-groups": "extra_groups", "--keylog": "keylog"}


class _Stop(Exception):
    """Raised by the recorder: the run ends where the request became options."""


def _recorder(seen: list[tuple[Any, ...]]) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append((*args, kwargs))
        raise _Stop
    return record


def _cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    code = cli.main(list(argv))
    monkeypatch.undo()
    return code, err.getvalue()


def _cli_seen(monkeypatch: pytest.MonkeyPatch, where: str, *argv: str) -> tuple[Any, ...]:
    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(where, _recorder(seen))
    code, err = _cli(monkeypatch, *argv)
    assert len(seen) == 1, (code, err)
    return seen[0]


def _api_seen(monkeypatch: pytest.MonkeyPatch, where: str, call: Callable[[], object]
              ) -> tuple[Any, ...]:
    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(where, _recorder(seen))
    with pytest.raises(_Stop):
        call()
    monkeypatch.undo()
    return seen[0]


PROBES: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--tls1_3", "--groups", "x25519:P-256", "--key-shares", "x25519", "--ciphersuites",
      "TLS_AES_128_GCM_SHA256,0x1302", "--alpn", "h2,http/1.1", "--sni", "Example.test"),
     {"versions": ["1.3"], "groups": ["x25519", "P-256"], "key_shares": ["x25519"],
      "ciphersuites": ["TLS_AES_128_GCM_SHA256", 0x1302], "alpn": "h2,http/1.1",
      "server_name": "Example.test"}),
    (("--http-get", "/", "--no-sni", "--grease", "--timeout", "4"),
     {"http_get": "/", "send_sni": False, "grease": True, "timeout": 4.0}),
    (("--tls1_2", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256:0x1301", "--sigalgs",
      "rsa_pss_rsae_sha256", "--key-shares", "none", "--first-flight-only", "--no-verify"),
     {"versions": ["1.2"], "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256", 0x1301],
      "sigalgs": ["rsa_pss_rsae_sha256"], "key_shares": [], "first_flight_only": True,
      "verify": False}),
]


def test_a_probe_from_argv_and_from_the_api_gets_the_same_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same target and ProbeOptions (the deadline aside: each counts from its own
    start) reach run_probe, for each of PROBES."""
    where = "tlsprobe.probes.probe.run_probe"
    for argv, kwargs in PROBES:
        by_cli = _cli_seen(monkeypatch, where, TARGET, *argv)
        by_api = _api_seen(monkeypatch, where, functools.partial(tlsprobe.probe, TARGET, **kwargs))
        assert by_cli[0] == by_api[0], argv      # the target
        cli_options, api_options = (dataclasses.replace(s[1], deadline=None) for s in
                                    (by_cli, by_api))
        assert cli_options == api_options, argv
        assert by_cli[1].deadline is not None and by_api[1].deadline is not None


SCANS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--checks", "rc4,dh", "--extra-groups", "0xfe30,x448", "--per-host", "2",
      "--concurrency", "3", "--delay", "0.5", "--retries", "1", "--timeout", "7",
      "--sni", "example.test", "--no-verify", "--policy", "modern"),
     {"checks": "rc4,dh", "extra_groups": "0xfe30,x448", "per_host": 2, "concurrency": 3,
      "delay": 0.5, "retries": 1, "timeout": 7.0, "server_name": "example.test",
      "verify": False, "policies": ["modern"]}),
    (("--checks", "groups", "--no-sni", "--no-policy"),
     {"checks": ["groups"], "send_sni": False, "policies": []}),
]


def test_a_scan_from_argv_and_from_the_api_gets_the_same_audit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same targets, AuditOptions, scheduler settings and concurrency reach the audit,
    for each of SCANS."""
    settings = ("per_host", "delay", "retries", "timeout")
    for argv, kwargs in SCANS:
        by_cli = _cli_seen(monkeypatch, "tlsprobe.probes.audit.run.run_audit", "scan",
                           TARGET, "--no-progress", *argv)
        by_api = _api_seen(monkeypatch, "tlsprobe.probes.audit.run.audit_many",
                           functools.partial(tlsprobe.scan, TARGET, **kwargs))
        (targets, options, scheduler, named), (targets2, options2, scheduler2, named2) = \
            by_cli, by_api
        assert targets == targets2 and options == options2, argv
        assert [getattr(scheduler, s) for s in settings] == \
            [getattr(scheduler2, s) for s in settings], argv
        assert named["concurrency"] == named2["concurrency"], argv


BAD: list[tuple[tuple[str, ...], Callable[[], object]]] = [
    ((TARGET, "--groups", "x25519:nosuchgroup"),
     lambda: tlsprobe.probe(TARGET, groups=["x25519", "nosuchgroup"])),
    ((TARGET, "--groups", "x25519", "--key-shares", "x448"),
     lambda: tlsprobe.probe(TARGET, groups=["x25519"], key_shares=["x448"])),
    ((TARGET, "--ciphersuites", "ECDHE-RSA-AES128-GCM-SHA256"),
     lambda: tlsprobe.probe(TARGET, ciphersuites=["ECDHE-RSA-AES128-GCM-SHA256"])),
    ((TARGET, "--ciphers", "HIGH:!aNULL"),
     lambda: tlsprobe.probe(TARGET, ciphers=["HIGH", "!aNULL"])),
    ((TARGET, "--alpn", "h2,bad proto"),
     lambda: tlsprobe.probe(TARGET, alpn=["h2", "bad proto"])),
    ((TARGET, "--sni", "a b"), lambda: tlsprobe.probe(TARGET, server_name="a b")),
    ((TARGET, "--sni", "x.test", "--no-sni"),
     lambda: tlsprobe.probe(TARGET, server_name="x.test", send_sni=False)),
    ((TARGET, "--http-get", "/", "--first-flight-only"),
     lambda: tlsprobe.probe(TARGET, http_get="/", first_flight_only=True)),
    ((TARGET, "--alpn", "x" * 300), lambda: tlsprobe.probe(TARGET, alpn=["x" * 300])),
    (("scan", TARGET, "--per-host", "0"), lambda: tlsprobe.scan(TARGET, per_host=0)),
    (("scan", TARGET, "--retries", "11"), lambda: tlsprobe.scan(TARGET, retries=11)),
    (("scan", TARGET, "--timeout", "5000.5"), lambda: tlsprobe.scan(TARGET, timeout=5000.5)),
    (("scan", TARGET, "--delay", "-1.0"), lambda: tlsprobe.scan(TARGET, delay=-1.0)),
    (("scan", TARGET, "--checks", "rc4,nosuchcheck"),
     lambda: tlsprobe.scan(TARGET, checks=["rc4", "nosuchcheck"])),
    (("scan", TARGET, "--extra-groups", "nosuchgroup"),
     lambda: tlsprobe.scan(TARGET, extra_groups=["nosuchgroup"])),
    (("scan", TARGET, "--sni", "x.test", "--no-sni"),
     lambda: tlsprobe.scan(TARGET, server_name="x.test", send_sni=False)),
    (("scan", TARGET, "--sni", "a\tb"), lambda: tlsprobe.scan(TARGET, server_name="a\tb")),
]


def _as_api(message: str) -> str:
    for option in sorted(API_NAME, key=len, reverse=True):
        message = message.replace(option, API_NAME[option])
    return message


def test_a_bad_value_is_refused_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """For each of BAD, the command line's one line (exit 2) and the API's UsageError say
    the same, with the input named as each caller names it."""
    for argv, call in BAD:
        code, err = _cli(monkeypatch, *argv)
        assert code == 2 and err.startswith("tlsprobe: error: ") and \
            err.count("\n") == 1, (argv, err)
        with pytest.raises(UsageError) as refused:
            call()
        assert str(refused.value) == _as_api(err.removeprefix("tlsprobe: error: ").strip()), \
            argv


def test_a_capture_request_is_checked_once(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """`pcap --keylog` and `read_capture(keylog=)`: the same check; a missing capture is
    the same reason from both (the one-file reader, requests/capture.py)."""
    capture = Path(__file__).resolve().parents[2] / "captures" / "tls13_hrr.pcap"
    keys = tmp_path / "none.keys"
    code, err = _cli(monkeypatch, "pcap", str(capture), "--keylog", str(keys))
    assert code == 2
    with pytest.raises(UsageError) as refused:
        tlsprobe.read_capture(capture, keylog=keys)
    assert str(refused.value) == _as_api(err.removeprefix("tlsprobe: error: ").strip())
    missing = tmp_path / "missing.pcap"
    code, err = _cli(monkeypatch, "pcap", str(missing))
    with pytest.raises(tlsprobe.TlsprobeError) as unreadable:
        tlsprobe.read_capture(missing)
    assert code == unreadable.value.exit_code == 2
    assert err == f"tlsprobe: {unreadable.value}\n"


def test_pcap_reads_one_file_without_the_survey_package() -> None:
    """`tlsprobe pcap FILE` (and `read_capture`) open the file with the one-file reader of
    the request layer: the survey package (Dask, Parquet, worker pools) is not loaded."""
    import subprocess
    repo = Path(__file__).resolve().parents[2]
    code = ("import sys\nfrom tlsprobe.cli import main\nimport tlsprobe\n"
            "assert main(['pcap', '--no-progress', sys.argv[1]]) == 0\n"
            "with tlsprobe.read_capture(sys.argv[1]) as reader:\n    list(reader)\n"
            "print(*sorted(m for m in sys.modules if m.startswith('tlsprobe.')))\n")
    done = subprocess.run([sys.executable, "-c", code,
                           str(repo / "captures" / "tls13_hrr.pcap")],
                          capture_output=True, text=True, cwd=repo, timeout=60,
                          env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "tlsprobe.requests.capture" in loaded
    assert not [m for m in loaded if m.startswith("tlsprobe.survey")], loaded
