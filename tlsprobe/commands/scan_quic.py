"""`scan --quic` (issue 15): the audit's connections go over QUIC (net/quic_async.py's
connector under the same scheduler, the same elimination method and report).

QUIC carries TLS 1.3 only (RFC 9001 4.2): the versions check asks TLS 1.3 alone, a hello
without TLS 1.3 is never sent (the connector refuses it, no connection), and the sections of
other versions the audit still lists (the TLS 1.2 group audit of `--checks groups`) say
"not applicable over QUIC" instead of an inconclusive result. The report and its JSON say
`"transport": "quic"`. `--compare-tcp` audits each target over TCP as well (the same port,
or `--tcp-port`) and adds a comparison of the TLS 1.3 answers (text section, or one JSON line
of kind "comparison" per target).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TextIO

from tlsprobe.errors import UsageError

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport, VersionSupport
    from tlsprobe.net.quic_async import AsyncQuicConnector
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.audit.run import AuditOptions
    from tlsprobe.requests.scan import ConnectionSettings


def quic_connector(args: argparse.Namespace) -> AsyncQuicConnector | None:
    """The scan's QUIC connector (None without --quic); --starttls with it is refused."""
    from tlsprobe.commands.quic_option import quic_versions
    if getattr(args, "tcp_port", None) is not None:
        if not getattr(args, "compare_tcp", False):
            raise UsageError("--tcp-port needs --compare-tcp")
        if not 1 <= args.tcp_port <= 65535:
            raise UsageError(f"--tcp-port: {args.tcp_port} is not from 1 to 65535")
    if not getattr(args, "quic", False):
        for name, option in (("quic_version", "--quic-version"),
                             ("compare_tcp", "--compare-tcp"), ("alpn", "--alpn")):
            if getattr(args, name, None) not in (None, False):
                raise UsageError(f"{option} needs --quic")
        return None
    if getattr(args, "starttls", None) is not None:
        raise UsageError("--starttls cannot be used with --quic (QUIC has no plain-text "
                         "preamble)")
    from tlsprobe.net.quic_async import AsyncQuicConnector
    from tlsprobe.requests.probe import limits_from_args
    return AsyncQuicConnector(args.timeout, quic_versions(args),
                              _alpn(getattr(args, "alpn", None)), limits_from_args(args))


def _alpn(given: str | None) -> tuple[str, ...] | None:
    """--alpn's protocols (None: not given, h3); QUIC needs one (RFC 9001 8.1)."""
    if given is None:
        return None
    from tlsprobe.requests.hello import alpn
    from tlsprobe.requests.names import Names
    protocols = alpn(given, Names(True))
    if not protocols:
        raise UsageError("--alpn: empty list; over QUIC a hello offers at least one "
                         "protocol (RFC 9001 8.1), e.g. --alpn h3 or --alpn doq")
    return protocols


def quic_options(options: AuditOptions, asked: str | None = None) -> AuditOptions:
    """The audit's options over QUIC: TLS 1.3 is the only version to ask about. The active
    checks (probes/checks/) speak TLS over TCP: one named in --checks (`asked`, the list as
    given; None: the default) is a usage error; those an alias brought (vulns, all,
    tolerance, ...) are left out, as from the default, unless nothing would be left."""
    from tlsprobe.engine.config import TLS13
    from tlsprobe.errors import UsageError
    from tlsprobe.model.check_catalog import expand_aliases
    from tlsprobe.probes.checks.catalog import ACTIVE
    named = tuple(n.strip() for n in asked.split(",")) if asked is not None else ()
    active = [c for c in options.checks if c in ACTIVE]
    # named alone, or the whole of what was asked (an alias of active checks only)
    only_active = bool(active) and all(c in ACTIVE for c in expand_aliases(named)
                                       if not c.startswith("-"))
    alone = [c for c in active if c in named] or ([asked] if asked and only_active else [])
    if alone:
        raise UsageError(f"--checks {alone[0]}: the active checks run over TCP (and "
                         "--starttls), not over QUIC; over QUIC ask for groups, pq, suites, "
                         "sigalgs, cert or the checks read from them")
    checks = tuple(c for c in options.checks if c not in ACTIVE)
    return replace(options, versions=(TLS13,), checks=checks)


def quic_report(report: AuditReport, options: AuditOptions) -> AuditReport:
    """The report of an audit over QUIC: the transport named, the versions QUIC cannot carry
    not spoken and their sections marked not applicable (and the check verdicts, findings
    and rating derived again from what is left, as the audit derives them)."""
    from tlsprobe.engine.config import TLS13
    from tlsprobe.model.audit import GroupAudit
    from tlsprobe.model.vocab import GroupMethod
    from tlsprobe.net.quic_async import NOT_APPLICABLE
    before = report.groups, report.versions
    groups = tuple(g if g.version.id == TLS13 else
                   GroupAudit(version=g.version, spoken=False, method=GroupMethod.NOT_RUN,
                              notes=(NOT_APPLICABLE,)) for g in report.groups)
    report = replace(report, transport="quic", groups=groups,
                     versions=_versions_over_quic(report))
    if report.error:
        return report
    from tlsprobe.policy.rating import rated
    if (groups, report.versions) != before:
        from tlsprobe.policy.findings import with_findings
        from tlsprobe.probes.checks.derived import derive_checks
        active = tuple(c for c in report.check_results if c.method != "derived")
        report = replace(report, check_results=derive_checks(report) + active)
        report = with_findings(report, list(options.policies))
    return rated(report)   # rated again: the transport rules out SSL 2.0 too


def _versions_over_quic(report: AuditReport) -> tuple[VersionSupport, ...]:
    """The versions check's rows over QUIC: its TLS 1.3 answer, and every older version not
    spoken, for the reason that QUIC cannot carry it (RFC 9001 4.2) rather than "not tested"
    (so the checks and the rating read from them judge a fact); no rows without the check."""
    from tlsprobe.model.audit import VersionSupport
    from tlsprobe.model.probe import Codepoint
    from tlsprobe.model.vocab import VersionStatus
    from tlsprobe.net.quic_async import NOT_APPLICABLE
    from tlsprobe.probes.audit.versions import ALL_VERSIONS
    if not report.versions:
        return report.versions
    have = {v.version.id for v in report.versions}
    return report.versions + tuple(
        VersionSupport(Codepoint.version(v), VersionStatus.NOT_SUPPORTED, NOT_APPLICABLE)
        for v in ALL_VERSIONS if v not in have)


#: what a side says when it has no answer to compare: an audit that failed ("error: ..."),
#: a question not asked or not established
NO_ANSWER = ("-", "not checked", "inconclusive", "not_tested")


@dataclass(frozen=True)
class Row:
    """One line of the TCP / QUIC comparison: what, the two answers, whether they agree
    (None: not compared, one side has no answer)."""

    what: str
    tcp: str
    quic: str

    @property
    def same(self) -> bool | None:
        if any(a in NO_ANSWER or a.startswith("error: ") for a in (self.tcp, self.quic)):
            return None
        return self.tcp == self.quic


def all_same(rows: list[Row]) -> bool | None:
    """False when an answer differs, else None when a row was not compared, else True."""
    found = {r.same for r in rows}
    return False if False in found else None if None in found else True


def compare_rows(tcp: AuditReport, quic: AuditReport) -> list[Row]:
    """What the two audits of one server say about TLS 1.3: spoken, groups (in order, with
    the order verdict), cipher suites, post-quantum verdicts; an error as the answer."""
    from tlsprobe.engine.config import TLS13

    def spoken(r: AuditReport) -> str:
        if r.error:
            return f"error: {r.error_kind or 'error'}"
        found = next((v for v in r.versions if v.version.id == TLS13), None)
        return found.status if found is not None else "not checked"

    def groups(r: AuditReport) -> str:
        g = r.group_audit(TLS13)
        if g is None or r.error:
            return "-"
        names = ", ".join(c.name for c in g.supported) or "none"
        return f"{names} (order: {g.order})" + (
            f"; {len(g.inconclusive)} inconclusive" if g.inconclusive else "")

    def suites(r: AuditReport) -> str:
        s = r.suite_audit(TLS13)
        if s is None or r.error:
            return "-"
        return (", ".join(c.iana_name for c in s.supported) or "none") + f" (order: {s.order})"

    rows = [Row("TLS 1.3", spoken(tcp), spoken(quic)),
            Row("groups, TLS 1.3", groups(tcp), groups(quic)),
            Row("cipher suites, TLS 1.3", suites(tcp), suites(quic))]
    rows = [r for r in rows if not (r.tcp == r.quic and r.tcp in ("-", "not checked"))]
    pq_tcp = {(p.check, p.subject): p.verdict for p in tcp.post_quantum}
    pq_quic = {(p.check, p.subject): p.verdict for p in quic.post_quantum}
    for key in dict.fromkeys([*pq_tcp, *pq_quic]):
        rows.append(Row(f"post-quantum {key[0]} ({key[1]})", pq_tcp.get(key, "-"),
                        pq_quic.get(key, "-")))
    return rows


def compare_json(tcp: AuditReport, quic: AuditReport) -> str:
    """One JSON line: {"kind": "comparison", host, tcp_port, quic_port, rows, same} and the
    run members every JSON document carries: the comparison's work is the two audits (run
    one after the other), so it started with the earlier and lasted both."""
    from tlsprobe.model.encode import dumps, run_head
    from tlsprobe.model.encode import started_at as started
    rows = compare_rows(tcp, quic)
    duration = round(tcp.duration_s + quic.duration_s, 6)
    stamps = [s for s in (tcp.started_at, quic.started_at) if s]
    doc: dict[str, object] = {
        "schema": 1, "tool": "tlsprobe", "kind": "comparison", "host": quic.host,
        "tcp_port": tcp.port, "quic_port": quic.port,
        "rows": [{"what": r.what, "tcp": r.tcp, "quic": r.quic, "same": r.same} for r in rows],
        "same": all_same(rows), **run_head(),
        "started_at": min(stamps) if stamps else started(duration), "duration_s": duration}
    return dumps(doc, indent=None)


def compare_text(tcp: AuditReport, quic: AuditReport) -> list[str]:
    """The text section: a heading, one block per row, and the verdict."""
    rows = compare_rows(tcp, quic)
    out = ["", f"TCP ({tcp.port}) vs QUIC ({quic.port}) for {quic.host}, TLS 1.3"]
    for row in rows:
        if row.same:
            out.append(f"  {row.what}: same: {row.tcp}")
        else:
            out += [f"  {row.what}: {'DIFFERENT' if row.same is False else 'not compared'}",
                    f"    TCP:  {row.tcp}", f"    QUIC: {row.quic}"]
    differ = sum(r.same is False for r in rows)
    unknown = sum(r.same is None for r in rows)
    verdict = f"{differ} difference(s)" if differ else "the same answers" if not unknown \
        else "no difference"
    if unknown:
        verdict += f", {unknown} not compared (an answer missing on one side)"
    out.append(f"  {verdict} (connections: TCP {tcp.total_connections}, QUIC "
               f"{quic.total_connections})")
    return out


def compare_tcp(args: argparse.Namespace, targets: list[Target], options: AuditOptions,
                settings: ConnectionSettings) -> dict[Target, AuditReport]:
    """--compare-tcp: the same audit over TCP (the target's port, or the option's), after
    the QUIC one; {} without the option."""
    if not getattr(args, "compare_tcp", False) or not targets:
        return {}
    port = getattr(args, "tcp_port", None)
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.audit.run import run_audit
    tcp_targets = {t: Target(t.host, port or t.port) for t in targets}
    audited = run_audit(list(tcp_targets.values()), options, settings.scheduler(),
                        concurrency=settings.concurrency)
    return dict(zip(targets, audited))


def print_comparisons(args: argparse.Namespace, tcp: dict[Target, AuditReport],
                      quic: dict[Target, AuditReport], out: TextIO) -> None:
    """The comparison of each target: a text section, or (--json) the TCP audit's report
    and then the comparison, one JSON line each."""
    for target, report in tcp.items():
        if args.json:
            print(report.to_json(), file=out)
            print(compare_json(report, quic[target]), file=out, flush=True)
        else:
            print("\n".join(compare_text(report, quic[target])), file=out)
