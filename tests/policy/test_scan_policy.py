"""Policy checks, findings and the rendered audit table, on audit reports built in the test
(the policy engine and the renderer are pure functions of the report)."""
from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest

from tlsprobe.model.audit import (AuditReport, DheAudit, DhParameters, GroupAudit, SuiteAudit,
                                  VersionSupport)
from tlsprobe.model.probe import CertificateInfo, Cipher, Codepoint
from tlsprobe.policy.findings import at_or_above, builtin_findings, evaluate, findings_for
from tlsprobe.policy.load import PolicyError, load_policy
from tlsprobe.report.audit_tables import render_audit

V = Codepoint.version
G = Codepoint.group


def report(spoken=(0x0304, 0x0303), suites12=(0xC02F,), groups13=(0x1D, 0x17),
           dhe: DheAudit | None = None, order12="server", cert_bits=2048,
           not_after="2030-01-01T00:00:00+00:00", refused13=(0x11EC,)) -> AuditReport:
    versions = tuple(VersionSupport(V(v), "supported" if v in spoken else "not_supported")
                     for v in (0x0304, 0x0303, 0x0302, 0x0301, 0x0300))
    cert = CertificateInfo("CN=x", "CN=ca", "RSA", cert_bits, "sha256WithRSAEncryption",
                           "2024-01-01T00:00:00+00:00", not_after, "1", "00", san=("x",))
    return AuditReport(
        host="127.0.0.1", port=443, versions=versions,
        groups=(GroupAudit(V(0x0304), True, "hello_retry_request",
                           supported=tuple(G(g) for g in groups13), order="server",
                           not_supported=tuple(G(g) for g in refused13)),
                GroupAudit(V(0x0303), True, "server_key_exchange", supported=(G(0x1D),),
                           order="single", dhe=dhe)),
        suites=(SuiteAudit(V(0x0304), (Cipher.of(0x1301),), "single"),
                SuiteAudit(V(0x0303), tuple(Cipher.of(c) for c in suites12), order12)),
        certificates=(cert,), connections={"versions": 5, "groups TLS 1.3": 4},
        total_connections=9)


def codes(findings) -> dict[str, str]:
    return {f.code: f.severity for f in findings}


def test_versions_against_modern_and_old():
    modern = load_policy("mozilla-modern-6.0")
    found = codes(evaluate(report(), modern))
    assert found["version.not_allowed"] == "medium"        # TLS 1.2 is not in modern
    legacy = report(spoken=(0x0303, 0x0301, 0x0300))
    f = evaluate(legacy, load_policy("old"))
    sev = {x.message: x.severity for x in f if x.code == "version.not_allowed"}
    assert sev == {"SSL 3.0 is enabled": "critical"}       # old allows TLS 1.0
    assert codes(f)["version.missing"] == "medium"          # TLS 1.3 missing
    f = evaluate(legacy, load_policy("intermediate"))
    sev = {x.message: x.severity for x in f if x.code == "version.not_allowed"}
    assert sev == {"SSL 3.0 is enabled": "critical", "TLS 1.0 is enabled": "high"}


def test_suites_groups_dh_and_order():
    r = report(suites12=(0xC02F, 0x009C, 0x000A),
               dhe=DheAudit("fixed", fixed=DhParameters("modp_1024", 1024, None, "RFC 2409")),
               order12="client")
    old = evaluate(r, load_policy("old"))
    assert codes(old)["order.not_server"] == "low"
    assert "dh.too_small" not in codes(old)                 # old allows 1024-bit DH
    inter = evaluate(r, load_policy("intermediate"))
    msg = next(f.message for f in inter if f.code == "suite.not_allowed")
    assert msg == ("TLS 1.2: 2 cipher suite(s) outside the policy: "
                   "TLS_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_3DES_EDE_CBC_SHA")
    assert codes(inter)["dh.too_small"] == "medium"
    assert "order.not_server" not in codes(inter)           # intermediate does not ask
    assert codes(inter)["group.missing"] == "low"           # no X25519MLKEM768
    assert "group.missing" not in codes(evaluate(r, load_policy("mozilla-intermediate-5.7")))
    # whatever the policy, a prime under 2048 bits is a builtin finding (Logjam)
    assert codes(builtin_findings(r))["dh.weak"] == "medium"
    weak = [f for f in builtin_findings(r) if f.code == "suite.weak"]
    assert [(f.severity, f.message, f.items) for f in weak] == [
        ("high", "TLS 1.2: weak cipher suite(s): TLS_RSA_WITH_3DES_EDE_CBC_SHA (3DES)",
         ("TLS_RSA_WITH_3DES_EDE_CBC_SHA",))]


def test_builtin_certificate_pq_and_thresholds():
    r = report(cert_bits=1024, not_after="2020-01-01T00:00:00+00:00")
    f = builtin_findings(r, now=datetime(2025, 1, 1, tzinfo=timezone.utc))
    assert codes(f)["certificate.expired"] == "high"
    assert codes(f)["certificate.weak_key"] == "high"
    assert codes(f)["pq.none"] == "info"
    pq = report(groups13=(0x11EC, 0x1D))
    assert "pq.none" not in codes(builtin_findings(pq))
    all_f = findings_for(r, [load_policy("intermediate")])
    ranks = [f.severity for f in all_f]
    assert ranks == sorted(ranks, key=["critical", "high", "medium", "low", "info"].index)
    assert {f.code for f in at_or_above(all_f, "high")} == {"certificate.expired",
                                                            "certificate.weak_key"}
    assert at_or_above(findings_for(pq, []), "low") == []


def test_user_policy_files(tmp_path):
    toml = tmp_path / "strict.toml"
    toml.write_text('extends = "modern"\nversions = ["TLS 1.3"]\ngroups = ["x25519"]\n'
                    'required_groups = []\n[severity]\n"group.not_allowed" = "critical"\n')
    p = load_policy(str(toml))
    assert p.name == "strict" and p.groups == frozenset({0x1D})
    f = evaluate(report(groups13=(0x1D, 0x17)), p)
    assert [(x.code, x.severity, x.message) for x in f if x.code.startswith("group")] == \
        [("group.not_allowed", "critical", "TLS 1.3: 1 group(s) outside the policy: secp256r1")]
    js = tmp_path / "p.json"
    js.write_text('{"name": "j", "versions": ["TLSv1.2", "TLSv1.3"], "groups": ["0x001d"]}')
    assert load_policy(str(js)).versions == frozenset({0x0303, 0x0304})
    for text, needle in (('{"groups": ["nope"]}', "unknown group"),
                         ('{"versions": ["TLS 9"]}', "unknown version"),
                         ('{"severity": {"x": "fatal"}}', "severity"),
                         ('[1, 2]', "top level"), ('{"groups": ', "p.json")):
        js.write_text(text)
        with pytest.raises(PolicyError, match=needle):
            load_policy(str(js))


def test_rendered_table_states_order_method_and_connections():
    dhe = DheAudit("rfc7919", negotiated=(G(0x101), G(0x100)), order="server", connections=3)
    r = report(dhe=dhe)
    out = io.StringIO()
    render_audit(findings_and(r), out, width=100)
    text = out.getvalue()
    assert "Groups, TLS 1.3: offers without key shares, HelloRetryRequest" in text
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("Groups, TLS 1.3"))
    assert lines[i + 3].split()[:2] == ["1", "x25519"]
    assert lines[i + 4].split()[:2] == ["2", "secp256r1"]
    assert "Order: the server enforces its own order" in text
    assert "DHE (RFC 7919): ffdhe3072, ffdhe2048; the server enforces its own order " \
           "(3 connections)" in text
    assert "Connections: 9 in 0.00 s (versions 5, groups TLS 1.3 4)" in text
    assert "Findings (intermediate)" in text and "X25519MLKEM768 is recommended" in text


def findings_and(r: AuditReport) -> AuditReport:
    from dataclasses import replace
    return replace(r, policies=("intermediate",),
                   findings=findings_for(r, [load_policy("intermediate")]))


def test_policy_error_is_a_one_line_usage_error_of_the_command(run_cli, tmp_path):
    """Loading raises the policy's own error (not the CLI's UsageError); `scan` turns it
    into exit 2 with exactly that message on one stderr line."""
    from tlsprobe.errors import UsageError
    bad = tmp_path / "p.json"
    bad.write_text('{"groups": ["x25519"], "curvez": []}')
    for spec in (str(bad), "nonsense"):
        with pytest.raises(PolicyError) as raised:
            load_policy(spec)
        assert not isinstance(raised.value, UsageError)
        code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", spec)
        assert (code, out) == (2, "")
        assert err == f"tlsprobe: error: {raised.value}\n"


def test_policy_and_no_policy_together_are_a_usage_error(run_cli, server_cache):
    """`--policy modern --no-policy` audited against no policy, dropping --policy in
    silence; like --sni with --no-sni it is a usage error (exit 2, before any connection)."""
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    for args in (("--policy", "modern", "--no-policy"), ("--no-policy", "--policy", "old")):
        code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "versions",
                                 "--no-progress", *args)
        assert (code, out) == (2, ""), out
        assert err == ("tlsprobe: error: --policy and --no-policy cannot be combined "
                       "(--no-policy: the built-in checks only)\n")
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "versions",
                             "--no-progress", "--no-policy")
    assert code == 0 and "Findings\n" in out, err
