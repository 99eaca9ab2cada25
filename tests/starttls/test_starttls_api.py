"""The Python API over STARTTLS: `tlsprobe.scan(..., starttls="smtp")` against Postfix on
loopback reports what `tlsprobe scan HOST --starttls smtp --json` does (the same connector,
net/starttls_connect.py, under the same scheduler), `starttls` object included, and
refuses a protocol it does not know before connecting."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.lab_servers.daemons import DaemonFactory

import tlsprobe
from tlsprobe.errors import UsageError

Cli = Any
#: members that differ from one run to the next, and the command line's input position
VOLATILE = ("duration_s", "started_at", "connections", "total_connections", "retries", "index")


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in VOLATILE}


def test_api_starttls_scan_reports_what_the_command_line_does(daemon: DaemonFactory,
                                                              run_cli: Cli) -> None:
    server = daemon("postfix", curves="secp384r1")
    target = f"127.0.0.1:{server.ports['smtp']}"
    res = run_cli("scan", target, "--starttls", "smtp", "--checks", "versions,groups",
                  "--json", "--no-progress", "--no-policy", timeout=240)
    assert res.returncode == 0, res.stderr
    cli = json.loads(res.stdout)
    [report] = tlsprobe.scan(target, starttls="smtp", checks=["versions", "groups"],
                             policies=[])
    api = json.loads(report.to_json())
    assert api["error"] is None and api["starttls"] == cli["starttls"]
    assert api["starttls"]["protocol"] == "smtp" and api["starttls"]["chosen_by"] == "option"
    assert api["starttls"]["banner"].startswith("220 ")
    audit = next(g for g in api["groups"] if g["version"]["name"] == "TLS 1.3")
    assert [g["name"] for g in audit["supported"]] == ["secp384r1"]
    assert _stable(api) == _stable(cli)


def test_api_starttls_auto_chooses_by_the_port_and_bad_protocols_are_refused() -> None:
    with pytest.raises(UsageError, match=r"^starttls: unknown protocol 'smtps'"):
        tlsprobe.scan("127.0.0.1:25", starttls="smtps")
    with pytest.raises(UsageError, match=r"^starttls auto: port 443 has no well-known"):
        tlsprobe.scan("127.0.0.1:443", starttls="auto")
    with pytest.raises(UsageError, match="starttls must be a str or None"):
        tlsprobe.scan("127.0.0.1:25", starttls=25)  # type: ignore[arg-type]


def test_api_starttls_probe_reports_what_the_command_line_does(daemon: DaemonFactory,
                                                               run_cli: Cli) -> None:
    """`tlsprobe.probe(target, starttls=...)` (and `aprobe`) holds the preamble as `tlsprobe
    HOST --starttls` does: the same `starttls` object and negotiation, and a refusal or a
    server of another protocol raises ProbeError with the command line's message and kind
    (its hint naming the parameter: "try starttls='ftp'" for "try --starttls ftp")."""
    server = daemon("postfix", curves="secp384r1")
    target = f"127.0.0.1:{server.ports['smtp']}"
    res = run_cli(target, "--starttls", "smtp", "--json", "--no-verify", "--tls1_3")
    assert res.returncode == 0, res.stderr
    cli = json.loads(res.stdout)
    result = tlsprobe.probe(target, starttls="smtp", verify=False, versions=["1.3"])
    api = json.loads(result.to_json())
    assert api["starttls"] == cli["starttls"] and api["starttls"]["banner"].startswith("220 ")
    for key in ("version", "cipher", "key_exchange", "certificates", "handshake_complete"):
        assert api[key] == cli[key], key
    assert api["key_exchange"]["group"]["name"] == "secp384r1"
    later = asyncio.run(tlsprobe.aprobe(target, starttls="smtp", verify=False))
    assert later.starttls is not None and later.starttls.banner == api["starttls"]["banner"]
    other = daemon("vsftpd")
    ftp = f"127.0.0.1:{other.ports['ftp']}"
    res = run_cli(ftp, "--starttls", "smtp")
    with pytest.raises(tlsprobe.ProbeError) as caught:
        tlsprobe.probe(ftp, starttls="smtp")
    # the same message, its hint naming the API's parameter (docs/API.md), not the option
    assert res.returncode == 4 and res.stderr.endswith(": an FTP server? try --starttls ftp\n")
    assert res.stderr.replace("--starttls ftp", "starttls='ftp'") == \
        f"tlsprobe: {caught.value}\n"
    assert caught.value.result.error_kind == "not_tls"
    with pytest.raises(UsageError, match=r"^starttls: unknown protocol 'smtps'"):
        tlsprobe.probe(target, starttls="smtps")
    with pytest.raises(UsageError, match="starttls cannot be used with quic"):
        tlsprobe.probe(target, starttls="smtp", quic=True)
