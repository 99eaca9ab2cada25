"""Golden findings: `policy.findings.evaluate` (every built-in policy) and `judge` on audit
reports that reach every policy rule (versions allowed and missing, suites outside the
policy, the client's order, groups outside the policy and missing, DH parameters fixed and
negotiated under the minimum, certificate key type and size), pinned as (severity, code,
message, policy, items, version) in order. Regenerate with the command in
tests/golden/README.md."""
from __future__ import annotations

import dataclasses

from tlsprobe.model.audit import (AuditReport, DheAudit, DhParameters, GroupAudit, SuiteAudit,
                                  VersionSupport)
from tlsprobe.model.probe import CertificateInfo, Cipher, Codepoint
from tlsprobe.policy.findings import evaluate, judge
from tlsprobe.policy.load import builtin_names, load_policy

V, G = Codepoint.version, Codepoint.group


def _refused13(groups13: tuple[int, ...]) -> tuple[Codepoint, ...]:
    """What a real TLS 1.3 group audit refuses: every group it offers (and the policies'
    required ones) but the supported and the inconclusive secp384r1."""
    from tlsprobe.probes.audit.groups import candidate_groups
    offered = candidate_groups(0x0304, tuple(g for name in builtin_names()
                                             for g in load_policy(name).required_groups))
    return tuple(G(g) for g in offered if g not in groups13 and g != 0x18)


def _report(spoken: tuple[int, ...], refused: tuple[int, ...], suites12: tuple[int, ...],
            suites13: tuple[int, ...], groups13: tuple[int, ...], groups12: tuple[int, ...],
            dhe: DheAudit | None, key: tuple[str, int | None], order: str) -> AuditReport:
    versions = tuple(VersionSupport(V(v), "supported" if v in spoken else
                                    "not_supported" if v in refused else "inconclusive")
                     for v in (0x0304, 0x0303, 0x0302, 0x0301, 0x0300))
    leaf = CertificateInfo("CN=leaf", "CN=ca", key[0], key[1], "sha256WithRSAEncryption",
                           "2019-01-01T00:00:00+00:00", "2099-01-01T00:00:00+00:00", "1", "00",
                           san=("leaf",))
    return AuditReport(
        host="127.0.0.1", port=443, versions=versions,
        groups=(GroupAudit(V(0x0304), 0x0304 in spoken, "hello_retry_request",
                           supported=tuple(G(g) for g in groups13),
                           not_supported=_refused13(groups13),
                           inconclusive=(G(0x18),), order="server"),
                GroupAudit(V(0x0303), 0x0303 in spoken, "server_key_exchange",
                           supported=tuple(G(g) for g in groups12), order="client", dhe=dhe)),
        suites=(SuiteAudit(V(0x0304), tuple(Cipher.of(c) for c in suites13), "server"),
                SuiteAudit(V(0x0303), tuple(Cipher.of(c) for c in suites12), order),
                SuiteAudit(V(0x0301), (Cipher.of(0xC013), Cipher.of(0x002F)), order)),
        certificates=(leaf,))


REPORTS = {
    "legacy": _report(
        (0x0303, 0x0301, 0x0300), (0x0304, 0x0302), (0xC02F, 0x009C, 0x000A, 0x0005), (),
        (), (0x1D, 0x17, 0x18, 0x19),
        DheAudit("negotiated", negotiated=(G(0x0100), G(0x0101), G(0x0104))),
        ("RSA", 1024), "client"),
    "fixed_dh": _report(
        (0x0304, 0x0303), (0x0302, 0x0301, 0x0300), (0xC02B, 0x009E, 0xC02F),
        (0x1301, 0x1302, 0x1303, 0x1304), (0x1D, 0x1E, 0x0100, 0x11EC), (0x1D,),
        DheAudit("fixed", fixed=DhParameters("unknown 1536-bit modulus", 1536, None, None,
                                             "composite", "divisible by 3")),
        ("EC secp256r1", 256), "server"),
    "modern": _report(
        (0x0304,), (0x0303, 0x0302, 0x0301, 0x0300), (), (0x1301, 0x1303), (0x1D,), (),
        None, ("Ed25519", None), "server"),
    "fixed_and_negotiated": _report(
        (0x0304, 0x0303, 0x0302), (0x0300,), (0x009E, 0x009F), (0x1301,), (0x17,), (0x17,),
        DheAudit("negotiated", negotiated=(G(0x0100),),
                 fixed=DhParameters("modp_1024", 1024, None, "RFC 2409", "known", "")),
        ("RSA", 2048), "client"),
}


def _line(f: object) -> str:
    return " | ".join(str(v) for v in dataclasses.astuple(f))   # type: ignore[call-overload]


def test_policy_findings(golden) -> None:
    lines = []
    policies = [load_policy(name) for name in builtin_names()]
    strict = dataclasses.replace(policies[0], name="strict", dh_min_bits=4096,
                                 rsa_min_bits=3072, server_preferred_order=True,
                                 certificate_types=("rsa",), required_versions=(0x0304, 0x0303),
                                 required_groups=(0x11EC, 0x1D, 0x18))
    # the order rule only where the policy names the version's suites
    order_only = dataclasses.replace(policies[0], name="order-only", cipher_suites=None,
                                     server_preferred_order=True)
    for name, report in REPORTS.items():
        for policy in [*policies, strict, order_only]:
            lines.append(f"--- {name}, {policy.name}")
            lines += [_line(f) for f in evaluate(report, policy)]
        found, waived = judge(report, [policies[1], strict])
        lines.append(f"--- {name}, judged")
        lines += [_line(f) for f in found] + ["waived:"] + [_line(f) for f in waived]
    golden.text("policy_findings.txt", "\n".join(lines) + "\n")


def test_builtin_certificate_findings(golden) -> None:
    """The certificate rules at a fixed time: dates (expired, within 7 and 30 days, hours
    left, not yet valid, unreadable), key size, MD5/SHA-1 signatures (a self-issued root
    excepted), no subjectAltName, and each outcome of the chain check."""
    from datetime import datetime, timezone

    from tlsprobe.model.audit import TrustCheck
    from tlsprobe.policy.findings import builtin_findings
    now = datetime(2030, 6, 1, 12, 0, tzinfo=timezone.utc)

    def cert(subject: str, issuer: str, not_before: str, not_after: str, key: str = "RSA",
             bits: int | None = 2048, sig: str = "sha256WithRSAEncryption",
             san: tuple[str, ...] = ("x",)) -> CertificateInfo:
        return CertificateInfo(subject, issuer, key, bits, sig, not_before, not_after, "1",
                               "00", san)
    root = cert("CN=root", "CN=root", "2020-01-01T00:00:00+00:00", "2040-01-01T00:00:00+00:00",
                sig="md5WithRSAEncryption")
    leaves = {
        "expired": cert("CN=a", "CN=root", "2020-01-01T00:00:00+00:00",
                        "2030-05-01T00:00:00+00:00"),
        "in 3 days": cert("CN=b", "CN=root", "2020-01-01T00:00:00+00:00",
                          "2030-06-04T12:00:00+00:00"),
        "in 20 days": cert("CN=c", "CN=root", "2020-01-01T00:00:00+00:00",
                           "2030-06-21T12:00:00+00:00"),
        "in 5 hours": cert("CN=d", "CN=root", "2020-01-01T00:00:00+00:00",
                           "2030-06-01T17:00:00+00:00"),
        "not yet valid": cert("CN=e", "CN=root", "2031-01-01T00:00:00+00:00",
                              "2032-01-01T00:00:00+00:00"),
        "unreadable dates, weak key, md5, no SAN": cert(
            "CN=f", "CN=root", "yesterday", "tomorrow", bits=1024, sig="md5WithRSAEncryption",
            san=()),
        "sha1 ecdsa": cert("CN=g", "CN=root", "2020-01-01T00:00:00+00:00",
                           "2040-01-01T00:00:00+00:00", key="EC secp256r1", bits=256,
                           sig="ecdsa-with-SHA1"),
    }
    trusts = [None, TrustCheck("trusted"), TrustCheck("not_checked", detail="--no-verify"),
              TrustCheck("untrusted", 18, "self-signed certificate"),
              TrustCheck("untrusted", 62, "hostname mismatch", hostname="h.example"),
              TrustCheck("untrusted", 10, "certificate has expired"),
              TrustCheck("untrusted", 20, "unable to get local issuer certificate",
                         "the chain ends at CN=root")]
    lines = []
    for name, leaf in leaves.items():
        for trust in trusts:
            report = AuditReport("h.example", 443, certificates=(leaf, root), trust=trust)
            lines.append(f"--- {name}, {trust.status if trust else 'no trust check'} "
                         f"{trust.code if trust else ''}")
            lines += [_line(f) for f in builtin_findings(report, now)]
    lines.append("--- no certificate")
    for trust in trusts:
        lines += [_line(f) for f in builtin_findings(AuditReport("h", 1, trust=trust), now)]
    golden.text("certificate_findings.txt", "\n".join(lines) + "\n")
