"""The Python API (tlsprobe/api.py, docs/API.md): its examples run, its results are the
command line's JSON (one path), its errors carry their failure kind, and importing it
stays cheap.

One OpenSSL server (X25519 only, TLS 1.3 and 1.2) from the session's `server_cache` serves
every test here; the captures are the repository's own (captures/).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

import tlsprobe
from tlsprobe.errors import FailureKind

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "API.md"
CAPTURES = REPO / "captures"


@pytest.fixture(scope="module")
def server(server_cache: Callable[..., Any]) -> Any:
    return server_cache("openssl", groups=["X25519"], proto="both")


@pytest.fixture(scope="module")
def target(server: Any) -> str:
    return f"127.0.0.1:{server.port}"


def doc_examples() -> list[str]:
    """The ```python blocks of docs/API.md, in order."""
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"),
                      re.MULTILINE | re.DOTALL)


def test_the_documented_examples_run(server: Any, certs: Any,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Every example of docs/API.md, in order and in one namespace (as a notebook runs
    them), against the loopback server: HOST, PORT, CAFILE and CAPTURES come from here."""
    blocks = doc_examples()
    assert len(blocks) >= 6, "docs/API.md lost its examples"
    namespace: dict[str, Any] = {"HOST": "127.0.0.1", "PORT": server.port,
                                 "CAFILE": str(certs.ca), "CAPTURES": str(CAPTURES)}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"docs/API.md example {number}", "exec")
        exec(code, namespace)   # an assert in the example fails the test
    out = capsys.readouterr().out
    assert "TLS 1.3 TLS_AES" in out and "x25519" in out      # the probe's line
    assert "alert 5" in out                                   # the refused probe
    assert "127.0.0.1:" in out and "-> 127.0.0.1:" in out     # the capture's connection
    assert re.search(r"^x25519 \w+ \d+$", out, re.MULTILINE)  # a speed figure


def _without(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in keys}


def test_probe_is_the_command_lines_probe(target: str, certs: Any,
                                          run_cli: Callable[..., Any]) -> None:
    """`probe` gives the document `tlsprobe HOST --json` prints (timings, start and duration
    aside)."""
    cli = run_cli(target, "--json", "--cafile", certs.ca, "--timeout", "4")
    assert cli.returncode == 0, cli.stderr
    result = tlsprobe.probe(target, cafile=str(certs.ca), timeout=4)
    assert isinstance(result, tlsprobe.ProbeResult)
    aside = ("timings", "started_at", "duration_s")
    assert _without(result.to_dict(), *aside) == _without(json.loads(cli.stdout), *aside)
    assert result.key_exchange is not None and result.key_exchange.group is not None
    assert result.key_exchange.group.name == "x25519"
    # the asyncio form is the same probe
    again = asyncio.run(tlsprobe.aprobe(target, cafile=str(certs.ca), timeout=4))
    assert _without(again.to_dict(), *aside) == _without(result.to_dict(), *aside)


def test_scan_is_the_command_lines_scan(target: str, certs: Any,
                                        run_cli: Callable[..., Any]) -> None:
    """`scan` gives the reports `tlsprobe scan --json` prints, the failure of one target as
    a report with its kind. Aside: durations, the input index (the command prints each
    report as its target ends, the API returns them in input order) and the connection
    counts (a retry after a timeout on a busy machine adds one)."""
    cli = run_cli("scan", target, "127.0.0.1:1", "--json", "--checks", "groups",
                  "--no-progress", "--cafile", certs.ca, "--timeout", "4")
    assert cli.returncode == 3, cli.stderr     # the refused target's code
    lines = sorted((json.loads(line) for line in cli.stdout.splitlines()),
                   key=lambda line: line["index"])
    reports = tlsprobe.scan([target, "127.0.0.1:1"], checks=["groups"],
                            cafile=str(certs.ca), timeout=4)
    assert [type(r) for r in reports] == [tlsprobe.AuditReport] * 2
    aside = ("duration_s", "started_at", "index", "connections", "total_connections",
             "retries")
    assert [_without(r.to_dict(), *aside) for r in reports] == \
        [_without(line, *aside) for line in lines]
    assert reports[0].total_connections > 0 and lines[0]["total_connections"] > 0
    assert reports[0].error is None and reports[1].error_kind == FailureKind.NETWORK
    spoken = [g for g in reports[0].groups if g.supported]
    assert spoken and all([c.name for c in g.supported] == ["x25519"] for g in spoken)


def test_read_capture_is_the_command_lines_pcap(run_cli: Callable[..., Any]) -> None:
    """`read_capture` yields the connections `tlsprobe pcap --jsonl` prints, decrypted with
    the key log, and its summary counts them."""
    path, keys = CAPTURES / "tls13_hrr.pcap", CAPTURES / "tls13_hrr.keys"
    cli = run_cli("pcap", path, "--jsonl", "--keylog", keys, "--no-progress")
    assert cli.returncode == 0, cli.stderr
    lines = [json.loads(line) for line in cli.stdout.splitlines()]
    expected = [line for line in lines if line.get("kind") == "connection"]
    with tlsprobe.read_capture(str(path), keylog=str(keys)) as capture:
        reports = list(capture)
    assert [json.loads(json.dumps(r.to_dict())) for r in reports] == expected
    assert reports[0].decrypted and reports[0].hello_retry_request is not None
    assert capture.summary is not None and capture.summary.reported == len(expected) == 1


def test_errors_carry_their_failure_kind(target: str, tmp_path: Path) -> None:
    """Bad arguments are UsageError (kind usage, exit 2), a failed probe a ProbeError with
    the kind and exit code the command line gives, an unreadable capture kind bad_input."""
    usage = [lambda: tlsprobe.probe("127.0.0.1:99999"),
             lambda: tlsprobe.probe(target, timeout=float("nan")),
             lambda: tlsprobe.probe(target, groups=["no-such-group"]),
             lambda: tlsprobe.probe(target, key_shares=["x448"], groups=["x25519"]),
             lambda: tlsprobe.scan(target, checks=["nonsense"]),
             lambda: tlsprobe.scan(target, policies=[str(tmp_path / "missing.toml")]),
             lambda: tlsprobe.read_capture(str(CAPTURES / "tls13_hrr.pcap"),
                                           keylog=str(tmp_path / "none.keys")),
             lambda: tlsprobe.speed(["no-such-algorithm"]),
             lambda: tlsprobe.speed(["x25519"], seconds=0)]
    for call in usage:
        with pytest.raises(tlsprobe.UsageError) as info:
            call()
        assert tlsprobe.failure_kind(info.value) == FailureKind.USAGE
        assert info.value.exit_code == 2
    with pytest.raises(tlsprobe.ProbeError) as refused:
        tlsprobe.probe("127.0.0.1:1", timeout=4)
    assert refused.value.kind == FailureKind.NETWORK and refused.value.exit_code == 3
    assert refused.value.result.error_kind == "network"
    with pytest.raises(tlsprobe.ProbeError) as alert:
        tlsprobe.probe(target, groups=["secp384r1"], verify=False, timeout=4)
    assert alert.value.kind == FailureKind.ALERT and alert.value.exit_code == 5
    assert isinstance(alert.value, tlsprobe.TlsprobeError)
    (tmp_path / "not.pcap").write_bytes(b"this is no capture at all")
    for path in (tmp_path / "missing.pcap", tmp_path / "not.pcap"):
        with pytest.raises(tlsprobe.TlsprobeError) as bad:
            tlsprobe.read_capture(str(path))
        assert tlsprobe.failure_kind(bad.value) == FailureKind.BAD_INPUT, bad.value
        assert str(path) in str(bad.value)


def test_import_is_cheap_and_every_public_name_documented() -> None:
    """`import tlsprobe` loads none of the API's machinery (it comes on first use), and
    every name it exports has a docstring."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, tlsprobe; print(*sorted(sys.modules))"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    loaded = {m for m in done.stdout.split() if m.startswith(("tlsprobe.", "cryptography"))}
    assert loaded == {"tlsprobe._version"}, loaded    # the version: a constant, no import
    undocumented = [name for name in tlsprobe.__all__ if name != "__version__"
                    and not (getattr(tlsprobe, name).__doc__ or "").strip()]
    members = [f"CaptureReader.{n}" for n, v in vars(tlsprobe.CaptureReader).items()
               if not n.startswith("_") and not (v.__doc__ or "").strip()]
    assert undocumented + members == []
    assert set(tlsprobe.__all__) - {"__version__"} == set(tlsprobe.api.__all__)


def _boundary_cases(target: str) -> list[tuple[str, Callable[[], object]]]:
    capture = str(CAPTURES / "tls13_hrr.pcap")
    return [
        ("target not a str", lambda: tlsprobe.probe(123)),                  # type: ignore[arg-type]
        ("timeout a str", lambda: tlsprobe.probe(target, timeout="5")),     # type: ignore[arg-type]
        ("timeout a bool", lambda: tlsprobe.probe(target, timeout=True)),
        ("groups an int", lambda: tlsprobe.probe(target, groups=5)),        # type: ignore[arg-type]
        ("groups of floats", lambda: tlsprobe.probe(target, groups=[1.5])),  # type: ignore[list-item]
        ("alpn bytes", lambda: tlsprobe.probe(target, alpn=[b"h2"])),       # type: ignore[list-item]
        ("unknown keyword", lambda: tlsprobe.probe(target, sni="x")),       # type: ignore[call-arg]
        ("server_name with a space", lambda: tlsprobe.probe(target, server_name="a b")),
        ("server_name empty", lambda: tlsprobe.probe(target, server_name="")),
        ("server_name control", lambda: tlsprobe.probe(target, server_name="a\x00b")),
        ("server_name and no SNI", lambda: tlsprobe.probe(target, server_name="x.test",
                                                          send_sni=False)),
        ("total_timeout 0", lambda: tlsprobe.probe(target, total_timeout=0)),
        ("scan per_host a str", lambda: tlsprobe.scan(target, per_host="3")),  # type: ignore[arg-type]
        ("scan targets None", lambda: tlsprobe.scan(None)),                 # type: ignore[arg-type]
        ("scan server_name bad", lambda: tlsprobe.scan(target, server_name="a\tb")),
        ("ascan timeout a list", lambda: asyncio.run(tlsprobe.ascan(target,
                                                                    timeout=[1]))),  # type: ignore[arg-type]
        ("read_capture an int", lambda: tlsprobe.read_capture(5)),          # type: ignore[arg-type]
        ("read_capture keylog an int", lambda: tlsprobe.read_capture(capture, keylog=7)),  # type: ignore[arg-type]
        ("speed seconds a str", lambda: tlsprobe.speed("x25519", seconds="1")),  # type: ignore[arg-type]
        ("speed block_sizes a str", lambda: tlsprobe.speed("x25519", block_sizes="16")),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("case", range(20))
def test_every_bad_argument_is_a_usage_error_before_any_work(case: int, target: str) -> None:
    """docs/API.md: every exception is a TlsprobeError. Wrong types, server names the
    command line refuses and a zero total_timeout are UsageErrors naming the parameter
    (they were TypeError, AttributeError, or accepted: total_timeout=0 meant the default)."""
    name, call = _boundary_cases(target)[case]
    with pytest.raises(tlsprobe.TlsprobeError) as info:
        call()
    assert isinstance(info.value, tlsprobe.UsageError), (name, info.value)
    assert info.value.exit_code == 2 and tlsprobe.failure_kind(info.value) == FailureKind.USAGE


def test_boundary_cases_are_all_run(target: str) -> None:
    assert len(_boundary_cases(target)) == 20


def test_a_policy_given_as_one_name_is_that_policy(target: str) -> None:
    """`policies="modern"` is the policy of that name (it was read letter by letter:
    "unknown policy 'm'")."""
    [report] = tlsprobe.scan(target, checks=["versions"], policies="modern", verify=False)
    assert report.error is None and report.policies == ("mozilla-modern-6.0",), report.policies


def test_a_non_capture_exits_as_the_command_line_does(tmp_path: Path,
                                                      run_cli: Callable[..., Any]) -> None:
    """read_capture on a file that is no capture: the exit code `tlsprobe pcap` gives (2),
    kind bad_input; a pathlib.Path works as a str does."""
    path = tmp_path / "not.pcap"
    path.write_bytes(b"this is no capture at all")
    code, _, err = run_cli("pcap", str(path))
    with pytest.raises(tlsprobe.TlsprobeError) as bad:
        tlsprobe.read_capture(path)
    assert bad.value.exit_code == code == 2, err
    assert tlsprobe.failure_kind(bad.value) == FailureKind.BAD_INPUT
    with tlsprobe.read_capture(CAPTURES / "tls13_hrr.pcap") as reader:
        assert len(list(reader)) == 1


def test_scan_and_clients_work_where_an_event_loop_runs(target: str, certs: Any) -> None:
    """A notebook (Jupyter runs an event loop) or an async application calling the
    synchronous `scan` or `simulate_clients`: they raised asyncio's bare RuntimeError
    ('asyncio.run() cannot be called from a running event loop') and warned of a coroutine
    never awaited; now they run on a thread of their own and return the same reports."""
    seen: list[tlsprobe.AuditReport] = []

    async def in_a_loop() -> tuple[list[tlsprobe.AuditReport], list[Any]]:
        reports = tlsprobe.scan([target], checks=["versions"], cafile=str(certs.ca),
                                on_report=seen.append)
        clients = tlsprobe.simulate_clients(target, profiles=["curl-7.88"],
                                            cafile=str(certs.ca))
        return reports, clients

    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "coroutine ... was never awaited"
        reports, clients = asyncio.run(in_a_loop())
    assert len(reports) == 1 and reports[0].error is None and seen == reports
    assert "TLS 1.3" in [v.version.name for v in reports[0].versions
                         if v.status == "supported"]
    assert [c.status for c in clients[0].clients] == ["connected"], clients[0].clients

    async def bad_argument() -> None:
        tlsprobe.scan([target], checks=["nope"])

    with pytest.raises(tlsprobe.UsageError):
        asyncio.run(bad_argument())


def test_every_exception_of_the_documented_errors_is_the_packages() -> None:
    """docs/API.md's "Errors" table names the exceptions to catch: each is `tlsprobe.NAME`
    (UnreadableInput, what read_capture and capture_live raise, was not: `except
    tlsprobe.UnreadableInput` was an AttributeError) and is the class the API raises."""
    text = (REPO / "docs" / "API.md").read_text()
    table = text.split("## Errors", 1)[1].split("\n\n", 3)[2]
    names = re.findall(r"^\| `(\w+)`", table, re.MULTILINE)
    assert {"UsageError", "ProbeError", "UnreadableInput", "TlsprobeError"} <= set(names)
    for name in names:
        assert name in tlsprobe.__all__, name
        assert issubclass(getattr(tlsprobe, name), tlsprobe.TlsprobeError), name
    with pytest.raises(tlsprobe.UnreadableInput):
        tlsprobe.read_capture(REPO / "README.md")


def test_usage_errors_name_the_parameter_not_the_option(target: str, tmp_path: Path,
                                                        run_cli: Callable[..., Any]) -> None:
    """docs/API.md: a bad value gets the command line's message with the parameter's name
    where the command line names its option. The trust store and repeated policy checks
    said `--cafile` / `--policy` to Python callers too; the command line still says them."""
    (tmp_path / "empty.pem").write_text("no certificate here\n")
    stores = [str(tmp_path / "missing.pem"), str(tmp_path), str(tmp_path / "empty.pem")]
    calls: list[Callable[[], object]] = []
    for store in stores:
        calls += [lambda s=store: tlsprobe.probe(target, cafile=s),
                  lambda s=store: tlsprobe.scan(target, checks="groups", cafile=s),
                  lambda s=store: tlsprobe.simulate_clients(target, cafile=s)]
    calls.append(lambda: tlsprobe.scan(target, checks="groups",
                                       policies=["intermediate", "intermediate"]))
    for call in calls:
        with pytest.raises(tlsprobe.UsageError) as info:
            call()
        message = str(info.value)
        assert "--" not in message, message
        assert message.startswith(("cafile ", "policies ")), message
    for args in (["--cafile", stores[0]], ["--policy", "intermediate", "--policy",
                                           "intermediate"]):
        done = run_cli("scan", target, "--checks", "groups", *args)
        assert done.returncode == 2 and f"error: {args[0]} " in done.stderr, done.stderr


def test_no_target_is_a_usage_error_not_an_empty_answer() -> None:
    """docs/API.md: the lists must name at least one item. `scan([])` and `ascan([])`
    returned [] (a silent empty answer) where `simulate_clients([])` raised and the command
    line exits 2."""
    calls: list[Callable[[], object]] = [
        lambda: tlsprobe.scan([]), lambda: tlsprobe.scan(()),
        lambda: asyncio.run(tlsprobe.ascan([])), lambda: tlsprobe.simulate_clients([])]
    for call in calls:
        with pytest.raises(tlsprobe.UsageError) as info:
            call()
        assert str(info.value) == "targets: empty list; give at least one HOST[:PORT]"


def test_an_empty_checks_list_says_it_is_empty(run_cli: Callable[..., Any]) -> None:
    """`checks=[]` (and `--checks ""`) said "unknown check '(empty)'": an empty list is
    what went wrong, and what to do is to name one."""
    with pytest.raises(tlsprobe.UsageError) as info:
        tlsprobe.scan("127.0.0.1:1", checks=[])
    assert str(info.value).startswith("checks: empty list; give at least one check")
    done = run_cli("scan", "127.0.0.1:1", "--checks", "")
    assert done.returncode == 2
    assert "error: --checks: empty list; give at least one check" in done.stderr


def test_one_target_in_two_spellings_is_audited_once(server_cache: Callable[..., Any],
                                                     run_cli: Callable[..., Any]) -> None:
    """`scan` gives one report per distinct target: '[::1]' and '[0:0::1]' are one (the
    audit ran twice against the same server), as `survey` and `survey diff` count them."""
    server = server_cache("openssl", groups=["X25519"], proto="tls1_3", host="::1")
    spellings = [f"[::1]:{server.port}", f"[0:0::1]:{server.port}"]
    reports = tlsprobe.scan(spellings, checks="groups", timeout=4)
    assert [(r.host, r.port, r.error) for r in reports] == [("::1", server.port, None)]
    done = run_cli("scan", *spellings, "--checks", "groups", "--json")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["host"] for line in done.stdout.splitlines()] == ["::1"]


def test_an_empty_file_name_is_a_usage_error(target: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A parameter naming a file or folder given '' (an unset variable): `profiles_dir=''`
    read the client profiles of the current folder, `policies=['']` said "cannot read
    policy file .", `cafile=''` "--cafile : no such file". Each is one UsageError naming
    the parameter, before any work."""
    monkeypatch.chdir(tmp_path)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("profiles_dir", lambda: tlsprobe.simulate_clients(target, profiles_dir="")),
        ("profiles_dir", lambda: tlsprobe.scan(target, checks="groups", profiles_dir=" ")),
        ("policies", lambda: tlsprobe.scan(target, checks="groups", policies=[""])),
        ("cafile", lambda: tlsprobe.probe(target, cafile="")),
        ("path", lambda: tlsprobe.read_capture("")),
        ("keylog", lambda: tlsprobe.read_capture(str(CAPTURES / "tls13_hrr.pcap"),
                                                 keylog="")),
    ]
    for name, call in calls:
        with pytest.raises(tlsprobe.UsageError) as info:
            call()
        assert f"(): {name}: an empty name" in str(info.value), str(info.value)
