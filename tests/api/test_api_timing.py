"""`tlsprobe.timing()` (tlsprobe/api.py): the handshake timing of `tlsprobe HOST --timing`
from Python, its options checked by the request layer the command uses (requests/timing.py),
against a real loopback server; bad arguments as UsageErrors naming the parameter, where the
command line names its option."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import tlsprobe
from tlsprobe.model.timing import MEASURED


@pytest.fixture(scope="module")
def target(server_cache: Callable[..., Any]) -> str:
    server = server_cache("openssl", groups=["X25519", "ffdhe3072"], proto="tls1_3")
    return f"127.0.0.1:{server.port}"


def test_timing_measures_what_the_command_line_measures(target: str,
                                                        run_cli: Callable[..., Any]) -> None:
    """The same entries, options and rankings' shape as `--timing --json` (the times of two
    runs differ, not what was timed)."""
    report = tlsprobe.timing(target, groups=["x25519", 0x0101], versions=["1.3"], runs=6,
                             warmup=1)
    assert isinstance(report, tlsprobe.TimingReport)
    cli = run_cli(target, "--timing", "--timing-groups", "x25519:ffdhe3072",
                  "--timing-versions", "1.3", "--timing-runs", "6", "--timing-warmup", "1",
                  "--json", timeout=120)
    assert cli.returncode == 0, cli.stderr
    line = json.loads(cli.stdout)
    mine = json.loads(report.to_json())
    keys = ("runs", "warmup", "timeout_s", "confidence", "discovery", "host", "port")
    assert {k: mine[k] for k in keys} == {k: line[k] for k in keys}
    # entries come ranked (cheapest median first): the same set, each measured 6 times
    assert sorted((e["label"], e["status"], e["runs"]) for e in mine["entries"]) == \
        sorted((e["label"], e["status"], e["runs"]) for e in line["entries"]) == \
        [("ffdhe3072 (0x0101)", MEASURED, 6), ("x25519 (0x001d)", MEASURED, 6)]
    for entry in report.entries:
        assert entry.status == MEASURED and len(entry.samples_ms) == 6
    (ranking,) = report.rankings
    assert set(ranking.order) == {"x25519 (0x001d)", "ffdhe3072 (0x0101)"}
    # a group is called the cheapest only where the intervals say so
    assert (ranking.cheapest is None) == (not ranking.distinct)


@pytest.mark.parametrize("kwargs, message", [
    ({"runs": 0}, "runs must be a whole number from 1 to 10000, not 0"),
    ({"warmup": -1}, "warmup must be a whole number from 0 to 1000"),
    ({"runs": True}, "runs must be"),
    ({"timeout": 0}, "timeout must be a positive number of seconds"),
    ({"confidence": 1.0}, "confidence must be in [0.5, 1)"),
    ({"versions": ["1.1"]}, "versions: unknown version '1.1'"),
    ({"versions": ["1.3", 0x0304]}, "versions: 772 repeats '1.3'"),
    ({"groups": ["nosuchgroup"]}, "groups: unknown group 'nosuchgroup'"),
    ({"groups": []}, "groups: empty list; give at least one, e.g. groups=['x25519'"),
    ({"groups": [0x9999]}, "none of the groups given can be timed (0x9999: no key share"),
    ({"suites": "TLS_NOPE"}, "suites: unknown cipher suite 'TLS_NOPE'"),
    ({"starttls": "nosuch"}, "starttls"),
    ({"server_name": "x.test", "send_sni": False}, ""),
])
def test_bad_arguments_are_usage_errors_naming_the_parameter(
        target: str, kwargs: dict[str, Any], message: str) -> None:
    if "send_sni" in kwargs:   # the probe's rule (server_name and send_sni=False) is not
        report = tlsprobe.timing(target, runs=1, warmup=0, versions=["1.3"],  # timing's:
                                 groups=["x25519"], **kwargs)                 # no SNI sent
        assert report.entries and report.entries[0].status == MEASURED
        return
    with pytest.raises(tlsprobe.UsageError) as info:
        tlsprobe.timing(target, **kwargs)
    assert message in str(info.value), str(info.value)
    assert "--" not in str(info.value)
    assert info.value.exit_code == 2


def test_an_unreachable_server_raises_its_kind() -> None:
    with pytest.raises(tlsprobe.TlsprobeError) as info:
        tlsprobe.timing("127.0.0.1:1", runs=1, warmup=0)
    assert tlsprobe.failure_kind(info.value) == tlsprobe.FailureKind.NETWORK


def test_the_command_line_keeps_its_option_names(target: str,
                                                 run_cli: Callable[..., Any]) -> None:
    for args, message in ((("--timing-runs", "0"), "--timing-runs"),
                          (("--timing-versions", "1.1"), "--timing-versions: unknown version"),
                          (("--timing-groups", "nosuchgroup"), "--timing-groups: unknown group"),
                          (("--timing-confidence", "1"), "--timing-confidence must be in"),
                          (("--timing-suites", "TLS_NOPE"), "--timing-suites: unknown")):
        done = run_cli(target, "--timing", *args)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
