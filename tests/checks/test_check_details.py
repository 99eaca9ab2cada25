"""The checks' typed details (model/check_details.py, JSON `details`) and the one shape of
every check (probes/checks/base.py, _template.py), the static catalog (active.py).

Against real loopback servers, the details hold what the check established, as values:
ROBOT's oracle and the probes it tells apart (tests/checks/tlslite_quirks_server.py strong
and weak oracles), client renegotiations accepted and secure renegotiation (gnutls-serv),
Heartbleed's bytes leaked and the CCS alert (tests/checks/vulnerable_openssl101.py),
resumption's counts (openssl s_server), DEFLATE chosen and SSLv2 cipher specs
(tests/checks/scripted_tls_server.py), HSTS directives, compressing encodings and the Server
banner (nginx), each tolerance variant's answer (openssl behind tests/checks/
intolerant_proxy.py); the JSON `details` of the report says the same.
Without a server: every check of the catalog declares its details type, the catalog is the
model's, and every check module has the one shape.
"""
from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import Server, accepting
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_catalog import ACTIVE
from tlsprobe.model.check_catalog import DERIVED as CATALOG_DERIVED
from tlsprobe.model.check_details import (CheckDetails, HeartbleedDetails,
                                          RenegotiationsDetails, ResumptionDetails,
                                          RobotDetails, RobotOracle)
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.probes.checks import active, derived
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.probes.checks.client_renegotiation import MAX_RENEGOTIATIONS

ServerFactory = Callable[..., Server]
ScriptServer = Callable[..., int]
CHECKS_DIR = Path(__file__).resolve().parents[2] / "tlsprobe" / "probes" / "checks"
#: modules of probes/checks that are not checks: the framework, the catalogs, the derived
#: checks (one module of data)
FRAMEWORK = {"__init__", "base", "catalog", "active", "derived"}


def audit(port: int, names: str, timeout: float = 5.0) -> tuple[AuditReport, dict[str, Any]]:
    """One audit of 127.0.0.1:port with the named checks: the report, and its JSON
    check results by name."""
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(names)),
                  Scheduler(retries=1, timeout=timeout))[0]
    assert r.error is None, r.error
    found = {c["name"]: c for c in json.loads(r.to_json())["check_results"]}
    return r, found


def result(r: AuditReport, name: str) -> CheckResult:
    return next(c for c in r.check_results if c.name == name)


@pytest.mark.needs_impl("tlslite")
@pytest.mark.parametrize(("oracle", "apart", "alert"), [
    ("strong", ["wrong first two bytes", "no 00 separator"], "illegal_parameter (47)"),
    ("weak", ["wrong version"], "decode_error (50)")])
def test_robot_details_name_the_oracle(script_server: ScriptServer,
                                       run_cli: Callable[..., Any], oracle: str,
                                       apart: list[str], alert: str) -> None:
    port = accepting(script_server("tlslite_quirks_server.py", "--robot", oracle))
    res = run_cli("scan", f"127.0.0.1:{port}", "--no-progress", "--no-verify", "--json",
                  "--checks", "robot", "--timeout", "5")
    (robot,) = json.loads(res.stdout.splitlines()[0])["check_results"]
    assert robot["verdict"] == "vulnerable", robot
    d = robot["details"]
    assert d["oracle"] == oracle and d["distinguished"] == apart, d
    assert d["version"] == "TLS 1.2" and d["rounds"] == 2 and not d["certificate_requested"]
    answers = {a["probe"]: a["answer"] for a in d["answers"]}
    assert list(answers) == ["valid", "wrong first two bytes", "00 in the wrong place",
                             "no 00 separator", "wrong version"]
    assert all(alert in answers[p] for p in apart), answers
    assert all(answers[p] == answers["valid"] for p in answers if p not in apart), answers
    assert robot["severity"] == ("high" if oracle == "strong" else "medium")


@pytest.mark.needs_impl("openssl")
def test_robot_details_without_an_oracle(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="all")
    r, found = audit(srv.port, "robot")
    typed = result(r, "robot").details
    assert isinstance(typed, RobotDetails) and typed.oracle is None and \
        typed.distinguished == (), typed
    assert len({a.answer for a in typed.answers}) == 1
    assert found["robot"]["details"]["oracle"] is None


@pytest.mark.needs_impl("gnutls")
def test_renegotiation_details_count_the_accepted(server_cache: ServerFactory) -> None:
    srv = server_cache("gnutls", proto="both")
    r, found = audit(srv.port, "client_renegotiation,renegotiation")
    typed = result(r, "client_renegotiation").details
    assert typed == RenegotiationsDetails(limit=MAX_RENEGOTIATIONS,
                                          accepted=MAX_RENEGOTIATIONS,
                                          answered=MAX_RENEGOTIATIONS, secure=True,
                                          refused=False), typed
    assert found["client_renegotiation"]["details"]["accepted"] == MAX_RENEGOTIATIONS
    assert found["renegotiation"]["details"] == {"version": "TLS 1.2",
                                                 "renegotiation_info": True,
                                                 "connections": 1}


@pytest.mark.needs_impl("tlslite")
def test_heartbleed_and_ccs_details(script_server: ScriptServer) -> None:
    port = accepting(script_server("vulnerable_openssl101.py", "--heartbleed", "--ccs"))
    r, found = audit(port, "heartbleed,ccs")
    # the over-long request claims 16384 bytes and carries 1: 16383 bytes of the server's
    assert result(r, "heartbleed").details == HeartbleedDetails(True, 16383)
    assert found["heartbleed"]["details"] == {"acknowledged": True, "bytes_leaked": 16383}
    assert found["ccs"]["details"] == {"second_sent": True, "alert": 21, "closed": False}
    port = accepting(script_server("vulnerable_openssl101.py"))
    _, found = audit(port, "heartbleed")
    assert found["heartbleed"]["verdict"] == "not vulnerable"
    assert found["heartbleed"]["details"]["bytes_leaked"] == 0


@pytest.mark.needs_impl("openssl")
def test_resumption_details_count_sessions(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_2-tls1_3")
    r, found = audit(srv.port, "resumption", timeout=10.0)
    typed = result(r, "resumption").details
    assert isinstance(typed, ResumptionDetails), typed
    assert (typed.tried, typed.resumed) == (3, 3), typed
    assert [(m.mechanism, m.resumed) for m in typed.mechanisms] == [
        ("TLS 1.2 session ID", True), ("TLS 1.2 session ticket", True),
        ("TLS 1.3 ticket", True)]
    assert all(m.issued >= 1 for m in typed.mechanisms), typed
    assert found["resumption"]["details"]["resumed"] == 3


@pytest.mark.needs_impl("tlslite")
def test_compression_and_sslv2_details(script_server: ScriptServer) -> None:
    port = accepting(script_server("scripted_tls_server.py", "--mode", "compression"))
    _, found = audit(port, "compression,renegotiation")
    assert found["compression"]["details"] == {"method": 1}
    assert found["renegotiation"]["details"]["renegotiation_info"] is True
    port = accepting(script_server("scripted_tls_server.py", "--mode", "sslv2"))
    _, found = audit(port, "sslv2")
    d = found["sslv2"]["details"]
    assert d["speaks_sslv2"] is True and len(d["cipher_specs"]) >= 2, d


@pytest.mark.needs_impl("nginx")
def test_http_details(server_cache: ServerFactory) -> None:
    srv = server_cache("nginx", proto="both", extra=(
        'add_header Strict-Transport-Security "max-age=31536000; includeSubDomains; '
        'preload" always;', "gzip on;", "gzip_types text/plain;", "gzip_min_length 1;"))
    _, found = audit(srv.port, "http")
    hsts = found["hsts"]["details"]
    assert (hsts["max_age"], hsts["include_subdomains"], hsts["preload"]) == \
        (31536000, True, True), hsts
    assert hsts["status"].startswith("HTTP/1.1 200") and "preload" in hsts["header"]
    assert found["breach"]["details"]["compressing"] == ["gzip"]
    banners = found["server_banner"]["details"]["banners"]
    assert len(banners) == 1 and banners[0].startswith("nginx/"), banners


@pytest.mark.needs_impl("openssl")
def test_tolerance_details_name_each_variant(server_cache: ServerFactory) -> None:
    """Through a proxy that resets hellos over 1500 bytes: the 600-byte variant answered,
    the 1800-byte one reset and the refusal confirmed."""
    from tests.checks.intolerant_proxy import IntolerantProxy
    srv = server_cache("openssl", proto="both")
    proxy = IntolerantProxy((srv.host, srv.port), "max_hello=1500")
    try:
        r, found = audit(proxy.port, "large_hello,grease")
    finally:
        proxy.close()
    assert result(r, "large_hello").verdict is Verdict.not_tolerated
    variants = found["large_hello"]["details"]["variants"]
    assert [(v["size"], v["answer"], v["confirmed"]) for v in variants] == [
        (600, "answered", False), (1800, "reset", True)], variants
    (grease,) = found["grease"]["details"]["variants"]
    assert grease["answer"] == "answered" and "GREASE" in grease["variant"]


def test_every_check_declares_its_details_type() -> None:
    """The static catalog is the model's (same names, same order), and every check, active
    or derived, declares a details type of its own kind."""
    assert list(active.CHECKS) == list(ACTIVE)
    assert tuple(derived.CHECKS) == CATALOG_DERIVED
    for name, check in [*active.CHECKS.items(), *derived.CHECKS.items()]:
        assert check.name == name
        assert issubclass(check.details, CheckDetails) and check.details is not \
            CheckDetails, (name, check.details)
    # docs/CHECKS.md describes each details type
    doc = (CHECKS_DIR.parents[2] / "docs" / "CHECKS.md").read_text("utf-8")
    missing = sorted({c.details.__name__ for c in [*active.CHECKS.values(),
                                                   *derived.CHECKS.values()]
                      if c.details.__name__ not in doc})
    assert missing == []


def _run_of(tree: ast.Module) -> ast.AsyncFunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)
                 and n.name == "run"), None)


def test_every_check_module_has_the_one_shape() -> None:
    """Each check module (and the template): `async def run(ctx: CheckContext) ->
    CheckResult` written out (no decorator, no factory), and `CHECK = ActiveCheck(...)` with
    four arguments, the last its details type; each is in the static catalog and imports no
    other check."""
    modules = sorted(p for p in CHECKS_DIR.glob("*.py")
                     if p.stem not in FRAMEWORK and (not p.stem.startswith("_")
                                                     or p.stem == "_template"))
    assert len(modules) == len(ACTIVE) + 1
    registered = {c.run.__module__.rsplit(".", 1)[1] for c in active.CHECKS.values()}
    for path in modules:
        tree = ast.parse(path.read_text("utf-8"))
        run = _run_of(tree)
        assert run is not None and not run.decorator_list, path.name
        assert [a.arg for a in run.args.args] == ["ctx"] and \
            ast.unparse(run.args.args[0].annotation or ast.Constant(None)) == "CheckContext" \
            and ast.unparse(run.returns or ast.Constant(None)) == "CheckResult", path.name
        check = next(n for n in tree.body if isinstance(n, ast.Assign)
                     and [ast.unparse(t) for t in n.targets] == ["CHECK"])
        assert isinstance(check.value, ast.Call) and \
            ast.unparse(check.value.func) == "ActiveCheck" and len(check.value.args) == 4, \
            path.name
        assert ast.unparse(check.value.args[2]) == "run", path.name
        assert path.stem in registered or path.stem == "_template", path.name
        # a check imports the framework and the shared helpers (_NAME), never another check
        others = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  and (n.module or "").startswith("tlsprobe.probes.checks.")
                  and not n.module.rsplit(".", 1)[1].startswith("_")
                  and n.module.rsplit(".", 1)[1] != "base"]
        others += [f"{n.module}.{a.name}" for n in ast.walk(tree)
                   if isinstance(n, ast.ImportFrom) and n.module == "tlsprobe.probes.checks"
                   for a in n.names if not a.name.startswith("_")]
        assert others == [], path.name


def test_a_result_refuses_details_of_another_type() -> None:
    """ctx.result checks the details against the check's declared type (a bug otherwise),
    and a severity is a Severity whose JSON is today's string."""
    class Runner:       # what result() reads for the connection count
        class target:
            display = "x:1"

        class scheduler:
            connections: dict[tuple[str, str], int] = {}
    ctx = CheckContext(Runner(), AuditReport(host="x", port=1),  # type: ignore[arg-type]
                       "robot", "vulnerability", "ROBOT", RobotDetails)
    details = RobotDetails(RobotOracle.weak, ("wrong version",), (), "TLS 1.2", 2, False)
    got = ctx.result(Verdict.vulnerable, "weak oracle", severity=Severity.medium,
                     details=details)
    assert got.details is details and got.code == "check.robot"
    assert json.loads(AuditReport(host="x", port=1, check_results=(got,)).to_json())[
        "check_results"][0]["severity"] == "medium"
    with pytest.raises(TypeError, match="RobotDetails"):
        ctx.result(Verdict.vulnerable, "x", details=HeartbleedDetails(True, 1))


def test_severities_are_an_enum_not_strings() -> None:
    """No check module (nor the checks' and the certificate's findings) spells a severity as
    a string:
    they are `Severity` members, whose JSON is the same word; report sections are
    `Category` members."""
    from tlsprobe.model.check_catalog import Category
    words = set(map(str, Severity))
    files = [*sorted(CHECKS_DIR.glob("*.py")), CHECKS_DIR.parents[1] / "policy" / "checks.py",
             CHECKS_DIR.parents[1] / "policy" / "certificate.py"]
    found = [f"{path.name}:{n.lineno} {n.value!r}" for path in files
             for n in ast.walk(ast.parse(path.read_text("utf-8")))
             if isinstance(n, ast.Constant) and n.value in words]
    assert found == []
    assert {e.category for e in ACTIVE.values()} == set(Category)
    assert all(type(e.category) is Category for e in ACTIVE.values())
