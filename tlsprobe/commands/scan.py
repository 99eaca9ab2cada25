"""Audit TLS servers: groups per version in the server's order, post-quantum, suites, policies.

Also protocol versions, signature schemes and the certificate; findings with CI exit codes.

Targets come from the command line, a file (-f FILE) or stdin (-f -), one HOST[:PORT] per line.
A bad line in the file (no valid target, or not UTF-8: the file is decoded line by line) is
reported as `FILE:LINE: error` (on stderr, and as an error report of its own in --json) and
skipped; the other targets are still audited. A text run over several targets ends with a
summary (targets, errors by kind, findings by severity, the exit code and why).

Exit codes: 0 no finding at or above --fail-on, no rating below --fail-under and no error;
1 some target has findings at or above --fail-on or a rating below --fail-under (or, with
--baseline FILE and --fail-on-change, a regression since the baseline: docs/CHANGES.md); 2 usage (also a bad line in -f FILE); 3 a target could not be reached;
4 not TLS; 5 the server refused every hello with an alert; 6 no TLS answer could be read;
70 a bug in tlsprobe while auditing a target (the other targets are still audited).
With several targets, 1 wins (CI must fail on findings whatever else happened); otherwise
the highest error code of any target (70 > 6 > 5 > 4 > 3 > 2); the errors are all on stderr
(except when stderr is the terminal the text report is on: its "Error:" line says it once).
A host name that cannot be looked up ('a..b', a label over 63 characters) is a bad target
(2), on the command line or as a line of the file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

from tlsprobe.commands.common import (
    add_connection_arguments,
    add_limit_arguments,
    add_sni_arguments,
    add_trust_arguments,
    start_up,
)
from tlsprobe.errors import EXIT_FINDINGS, EXIT_OK, UsageError, exit_code_for
from tlsprobe.model.severity import Severity
from tlsprobe.model.units import host_port
from tlsprobe.probes.checks.catalog import ACTIVE, ALIASES, DEFAULT, DERIVED, PHASES

if TYPE_CHECKING:
    from tlsprobe.commands.scan_baseline import Baseline
    from tlsprobe.commands.scan_recording import RecordingFiles
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.net.targets import BadLine
    from tlsprobe.net.tcp import Target
    from tlsprobe.policy.load import Policy

CHECKS = PHASES
#: the audit model's SEVERITIES, written out so that building the parser (--fail-on's
#: choices and help) imports neither the model nor the registry under it; a test checks
#: that the two match (tests/project/test_startup.py)
SEVERITIES = (Severity.info, Severity.low, Severity.medium, Severity.high, Severity.critical)

#: the grades --fail-under takes, best first: model.rating.GRADE_ORDER written out so that
#: building the parser imports no model module (a test checks that the two match)
GRADES = ("A+", "A", "A-", "B", "C", "D", "E", "F")


def fail_under_grade(text: str) -> str:
    """--fail-under's value: a grade A+ .. F, any case."""
    grade = text.strip().upper()
    if grade not in GRADES:
        raise argparse.ArgumentTypeError(f"expected a grade ({', '.join(GRADES)}), got {text!r}")
    return grade


def _active_help() -> str:
    """The active checks for --help, the ones that can hurt a server marked."""
    return ", ".join(f"{n} (bounded)" if e.harmful else n for n, e in ACTIVE.items())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="HOST[:PORT]",
                   help="servers to audit (default port 443; IPv6 as [::1]:4433)")
    p.add_argument("-f", "--targets-file", metavar="FILE", help="read targets from FILE, one "
                   "per line ('-' for stdin; '#' starts a comment)")
    w = p.add_argument_group("what to check")
    w.add_argument("--checks", default=None, metavar="LIST",
                   help=f"comma list (default: {','.join(DEFAULT)}, the key-exchange audit "
                   f"and every check). The audit's phases: {', '.join(CHECKS)} ('audit' for "
                   "all of them; 'groups' alone runs only the group audit of TLS 1.3 and "
                   "TLS 1.2). Vulnerability checks read from the audit (no extra "
                   f"connection; they add the phases they read): {', '.join(DERIVED)}. "
                   f"Checks with connections of their own: {_active_help()}. Aliases: "
                   f"{', '.join(ALIASES)} (all of a section; 'all' for every check). "
                   "-NAME leaves a check or an alias out: all,-sct; -robot alone: the "
                   "default without robot")
    w.add_argument("--groups-only", action="store_true", help="same as --checks groups (not "
                   "with another --checks)")
    w.add_argument("--clients", action="store_true", help="after the checks, simulate real "
                   "clients: each packaged client profile's ClientHello, one connection "
                   "each; what each negotiates, or why it fails (docs/CLIENTS.md)")
    w.add_argument("--profiles", metavar="LIST", default=None, help="the client profiles to "
                   "simulate (ids or parts of them, comma list; implies --clients)")
    w.add_argument("--profiles-dir", metavar="DIR", default=None, help="read the client "
                   "profiles from DIR instead of the packaged ones (implies --clients)")
    w.add_argument("--extra-groups", metavar="LIST", default="", help="more group ids to try, "
                   "e.g. 0xfe30,0x2f3a (names work too)")
    add_sni_arguments(w)
    add_trust_arguments(w)
    from tlsprobe.commands.starttls_option import add_starttls_arguments
    add_starttls_arguments(w)
    from tlsprobe.commands.quic_option import add_quic_arguments
    add_quic_arguments(w, "audit", compare=True)
    pol = p.add_argument_group("policies and exit codes")
    pol.add_argument("--policy", action="append", metavar="NAME|FILE", help="policy to check "
                     "against (repeatable): modern, intermediate (Mozilla 6.0, with "
                     "X25519MLKEM768), old (5.7), mozilla-*-5.7 / -6.0, or a JSON/TOML file "
                     "(keys, types and examples: docs/POLICY.md; it may extend a built-in one); "
                     "default intermediate. Built-in checks always run besides")
    pol.add_argument("--no-policy", action="store_true", help="built-in checks only")
    pol.add_argument("--fail-on", choices=[str(s) for s in SEVERITIES], metavar="SEVERITY",
                     help="exit 1 when a "
                     f"finding is at or above SEVERITY ({', '.join(SEVERITIES)}); a waived "
                     "finding never counts, nor does an inconclusive one (what could not be "
                     "established) unless a policy's severity table names its code "
                     "(docs/POLICY.md)")
    pol.add_argument("--fail-under", type=fail_under_grade, metavar="GRADE", help="exit 1 "
                     "when a target's rating is below GRADE (A+, A, A-, B, C, D, E, F; T and M "
                     "count as below F; docs/RATING.md)")
    pol.add_argument("--list-policies", action="store_true", help="list the built-in "
                     "policies, then the --policy ones given (and what each extends)")
    from tlsprobe.commands.scan_baseline import add_baseline_arguments
    add_baseline_arguments(pol)     # --baseline FILE, --fail-on-change
    o = p.add_argument_group("output and politeness")
    o.add_argument("--json", action="store_true", help="JSON lines: one object per target")
    from tlsprobe.commands.common import add_json_out_argument
    add_json_out_argument(o, "the JSON lines (one object per target)", "in the input's "
                          "order (--json prints the same objects as targets finish)")
    o.add_argument("--full", action="store_true", help="never cut a list short (groups, a "
                   "finding's items); a terminal shows the first ones, piped output is whole")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    from tlsprobe.commands.scan_recording import add_recording_arguments
    add_recording_arguments(o)
    o.add_argument("--html", metavar="FILE", help="also write the whole audit as one "
                   "self-contained HTML page (every section, lists in full)")
    o.add_argument("--csv", metavar="FILE", help="also write versions, groups, suites, "
                   "signature schemes, checks and findings as one CSV (a 'section' column)")
    o.add_argument("--sarif", metavar="FILE", help="also write the findings as SARIF 2.1.0 "
                   "(code scanning: a rule per finding code, level from the severity, the "
                   "target as location, waived findings suppressed; docs/POLICY.md)")
    o.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test suite per "
                   "target, a test case per check and per finding code, failing on a "
                   "vulnerable or intolerant check or a finding at or above --fail-on "
                   "(default low); docs/POLICY.md")
    add_connection_arguments(o, concurrency=4, concurrency_help="targets audited at once")
    add_limit_arguments(o, "past it that connection's answer is inconclusive (over TCP and "
                        "--quic alike; a probe stops there with exit 8)")


def _bad_report(line: BadLine) -> AuditReport:
    """The error report of a line of -f FILE that is no target (reported and skipped)."""
    import time

    from tlsprobe.errors import FailureKind
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.model.encode import utc_stamp
    return AuditReport(host=line.text, port=0, error=line.error, error_kind=FailureKind.USAGE,
                       started_at=utc_stamp(time.time()))


def _checks(args: argparse.Namespace) -> tuple[str, ...]:
    """--checks LIST and --groups-only -> the audit's checks (requests/scan.py)."""
    from tlsprobe.requests.scan import checks_from_args
    return checks_from_args(args)


def parse_checks(text: str | None) -> tuple[str, ...]:
    """--checks LIST (None: the default, the audit and every check) -> the audit's checks,
    in their order (probes/checks/catalog.py resolve)."""
    from tlsprobe.requests import CLI
    from tlsprobe.requests.scan import checks_of
    return checks_of(text, CLI)


def _check_outputs(args: argparse.Namespace) -> None:
    """--html, --csv and --json-out can be written: checked before the audit, not after
    minutes of it."""
    from tlsprobe.commands.common import check_json_out
    check_json_out(args)
    if args.html or args.csv or args.sarif or args.junit:
        from tlsprobe.report.csv_out import check_writable
        for option, path in (("--html", args.html), ("--csv", args.csv),
                             ("--sarif", args.sarif), ("--junit", args.junit)):
            if path:
                check_writable(path, option)


def exit_code(reports: list[AuditReport], fail_on: str | None,
              fail_under: str | None = None) -> int:
    """1 when any target has findings at or above --fail-on or a rating below --fail-under
    (CI must fail on those whatever else happened); otherwise the highest error code of any
    target (70 internal > 6 protocol > 5 alert > 4 not TLS > 3 network > 2 bad target
    line); 0 when there is neither."""
    return exit_reason(reports, fail_on, fail_under)[0]


def _below(reports: list[AuditReport], fail_under: str | None) -> list[AuditReport]:
    """The targets rated below --fail-under (a target with an error has no rating: its
    error sets the exit code)."""
    if fail_under is None:
        return []
    from tlsprobe.model.rating import parse_grade
    gate = parse_grade(fail_under)
    return [r for r in reports if r.rating is not None and r.rating.below(gate)]


def exit_reason(reports: list[AuditReport], fail_on: str | None,
                fail_under: str | None = None) -> tuple[int, str]:
    """The exit code (see `exit_code`) and why, for the summary of a run."""
    from tlsprobe.policy.findings import at_or_above
    hit = [r for r in reports if fail_on and at_or_above(r.findings, fail_on)]
    low = _below(reports, fail_under)
    if hit or low:
        why = [f"{len(hit)} target(s) with findings at or above --fail-on {fail_on}"] \
            if hit else []
        grades = ", ".join(_grade_of(r) for r in low)
        why += [f"{len(low)} target(s) rated below --fail-under {fail_under} ({grades})"] \
            if low else []
        return EXIT_FINDINGS, "; ".join(why)
    errors = [(exit_code_for(r.error_kind), r.error_kind or "")
              for r in reports if r.error]
    if errors:
        code, kind = max(errors)
        return code, (f"{len(errors)} target(s) with an error, the highest code for "
                      f"{kind.replace('_', ' ') or 'an error'}")
    if fail_under:
        gates = f"--fail-on {fail_on} or " if fail_on else ""
        return EXIT_OK, (f"no error, no finding at or above {gates}rating below "
                         f"--fail-under {fail_under}{_not_counted(reports, fail_on)}")
    if fail_on:
        return EXIT_OK, (f"no error and no finding at or above --fail-on {fail_on}"
                         f"{_not_counted(reports, fail_on)}")
    return EXIT_OK, "no error (findings set the exit code only with --fail-on)"


def _not_counted(reports: list[AuditReport], fail_on: str | None) -> str:
    """"; 2 inconclusive finding(s) not counted" when findings at or above --fail-on
    only say what could not be established (they fail no gate)."""
    from tlsprobe.model.audit import severity_rank
    n = sum(1 for r in reports for f in r.findings if fail_on and f.inconclusive
            and severity_rank(f.severity) >= severity_rank(fail_on))
    return f" ({n} inconclusive finding(s) at or above it, counted by no gate)" if n else ""


def _grade_of(r: AuditReport) -> str:
    if r.rating is None or r.rating.grade is None:
        return f"{host_port(r.host, r.port)} not rated"
    return f"{host_port(r.host, r.port)} {r.rating.grade.value}"


def _load_policy(spec: str) -> Policy:
    """A policy by name or file; one that cannot be loaded is a usage error (exit 2) with
    the policy's own one-line message."""
    from tlsprobe.policy.load import PolicyError, load_policy
    try:
        return load_policy(spec)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None




def _same_terminal(out: TextIO, err: TextIO) -> bool:
    """Whether `out` and `err` are one terminal (what is written to both is seen twice)."""
    try:
        if not (out.isatty() and err.isatty()):
            return False
        a, b = os.fstat(out.fileno()), os.fstat(err.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_rdev, a.st_ino, a.st_dev) == (b.st_rdev, b.st_ino, b.st_dev)


def _list_policies(out: TextIO, as_json: bool = False, given: list[str] | None = None) -> int:
    """The built-in policies, then the policies given with --policy (a file that extends a
    built-in one says which): a line each and the aliases; with --json, a JSON line each
    (name, title, source, the built-in policy it extends or null, the aliases naming it),
    as `clients --list --json` lists."""
    import json

    from tlsprobe.policy import load as pol
    listed = {(p.name, p.source): p for p in map(_load_policy, pol.builtin_names())}
    for p in map(_load_policy, given or ()):
        listed.setdefault((p.name, p.source), p)
    for p in listed.values():
        if as_json:
            aliases = [k for k, v in pol.ALIASES.items() if v == p.name and not p.extends]
            print(json.dumps({"name": p.name, "title": p.title, "source": p.source,
                              "extends": p.extends or None, "aliases": aliases}), file=out)
        else:
            base = f" (extends {p.extends})" if p.extends else ""
            print(f"{p.name:28} {p.title}{base}", file=out)
    if not as_json:
        print("aliases: " + ", ".join(f"{k} = {v}" for k, v in pol.ALIASES.items()),
              file=out)
    return EXIT_OK


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.list_policies:
        from tlsprobe.commands.common import listing_alone
        listing_alone(args, "--list-policies", "the built-in policies")
        return _list_policies(out, args.json, args.policy)
    from tlsprobe.commands.lazy_methods import deferred
    with deferred():    # also for the types imported after start-up (the checks' details)
        return _run(args, out)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    with start_up():    # the audit's modules (commands/common.py: the collector off)
        from tlsprobe.commands import scan_quic  # --quic: commands/scan_quic.py
        from tlsprobe.commands.scan_recording import attach, open_files, recording_for
        from tlsprobe.net.tcp import Target
        from tlsprobe.probes.audit.run import run_audit
        from tlsprobe.report.progress import ScanProgress
        from tlsprobe.requests.scan import ScanRequest
    _check_outputs(args)
    recording = recording_for(args)     # --msg/--pcap-out/--keylog
    request = ScanRequest.from_args(args)
    _import_checks(request.options.checks)
    items, targets = list(request.targets), request.good_targets
    from tlsprobe.commands.scan_baseline import load_baseline
    baseline = load_baseline(args, list(targets))     # a usage error before any connection
    place = {(i.host, i.port) if isinstance(i, Target) else i: n
             for n, i in enumerate(items, 1)}
    bad = {item: _gated(args, replace(_bad_report(item), index=place[item]), baseline)
           for item in items
           if not isinstance(item, Target)}
    if args.json:
        for report in bad.values():
            print(baseline.json_text(report) if baseline else report.to_json(), file=out,
                  flush=True)
    progress = ScanProgress(not args.no_progress and sys.stderr.isatty(), targets)
    quic = scan_quic.quic_connector(args)
    if quic is not None and request.options.clients:
        raise UsageError("--clients sends the clients' TLS-over-TCP hellos: it cannot be "
                         "combined with --quic")
    options = request.options if quic is None else \
        scan_quic.quic_options(request.options, asked=args.checks)
    scheduler = request.settings.scheduler(
        connector=quic or request.connector(), on_connection=progress.connection)

    def finished(report: AuditReport) -> AuditReport:
        if quic is not None:
            report = scan_quic.quic_report(report, options)
        return report

    def on_report(report: AuditReport) -> None:
        report = _gated(args, finished(replace(report,
                                               index=place.get((report.host, report.port)))),
                        baseline)
        progress.report(report)
        ended.append(report)
        if args.json:
            print(baseline.json_text(report) if baseline else report.to_json(), file=out,
                  flush=True)

    files = open_files(args, attach(scheduler, recording))   # before any connection
    audited: list[AuditReport] = []
    ended: list[AuditReport] = []   # the targets done, as they end (Ctrl-C: shown)
    if targets:
        # the progress bar (stderr) ends before the reports done are shown
        with _shown_when_interrupted(args, out, ended, baseline), \
                progress.progress or contextlib.nullcontext():
            audited = run_audit(targets, options, scheduler,
                                concurrency=request.settings.concurrency,
                                on_phase=progress.phase if progress.progress else None,
                                on_report=on_report)
    done = {t: _gated(args, finished(replace(r, index=place.get((r.host, r.port)))), baseline)
            for t, r in zip(targets, audited)}
    reports = [done[i] if isinstance(i, Target) else bad[i] for i in items]
    tcp = scan_quic.compare_tcp(args, targets, request.options, request.settings)
    return _finish(args, out, reports, tcp, done, files, baseline)


@contextlib.contextmanager
def _shown_when_interrupted(args: argparse.Namespace, out: TextIO, ended: list[AuditReport],
                            baseline: Baseline | None) -> Iterator[None]:
    """Ctrl-C or SIGTERM during the audit: the text reports of the targets done before it
    (in the input's order) and their errors on stderr, then the interruption goes on
    ("tlsprobe: interrupted", exit 130: cli.py). --json printed them as they ended."""
    try:
        yield
    except KeyboardInterrupt:
        if not args.json:
            from tlsprobe.report.audit_tables import render_audit
            for report in sorted(ended, key=lambda r: r.index or 0):
                render_audit(report, out, full=args.full or not out.isatty())
                if baseline is not None:
                    baseline.render(report, out)
            out.flush()
        _errors_on_stderr(ended, _said_once(args, out))
        raise


def _said_once(args: argparse.Namespace, out: TextIO) -> bool:
    """Whether the text reports' "Error: ..." lines are on the terminal stderr is on
    (then the errors are not said twice)."""
    return not args.json and _same_terminal(out, sys.stderr)


def _errors_on_stderr(reports: list[AuditReport], said: bool = False) -> None:
    """Each report's error on stderr, unless `said` (on stderr's terminal already)."""
    from tlsprobe.report.escape import shown
    for report in reports:
        if report.error and not said:
            print(f"tlsprobe: {shown(report.error)}", file=sys.stderr)


def _import_checks(checks: tuple[str, ...]) -> None:
    """The asked checks' modules, imported before the first connection (start_up)."""
    from tlsprobe.probes.checks.catalog import ACTIVE, DERIVED
    with start_up():
        if set(checks) & set(DERIVED):
            from tlsprobe.probes.checks import derived  # noqa: F401 (for the audit's end)
        if set(checks) & set(ACTIVE):
            from tlsprobe.probes.checks.active import check
            for name in (n for n in checks if n in ACTIVE):
                check(name)


def _gated(args: argparse.Namespace, report: AuditReport,
           baseline: Baseline | None = None) -> AuditReport:
    """`report` with its verdict against --fail-on / --fail-under / --fail-on-change
    (policy/gate.py), when one is given: the summary and the JSON name the targets that
    failed and why."""
    fail_under = getattr(args, "fail_under", None)
    changes = baseline is not None and baseline.gate is not None
    if not (args.fail_on or fail_under or changes):
        return report
    from tlsprobe.policy.gate import gate_verdict
    more = baseline.gate_reasons(report) if baseline is not None else []
    return replace(report, gate=gate_verdict(report, args.fail_on, fail_under, more))


def _write_files(args: argparse.Namespace, reports: list[AuditReport], code: int,
                 reason: str, baseline: Baseline | None = None,
                 tcp: list[AuditReport] | None = None) -> None:
    """--html, --csv, --json-out, --sarif and --junit, each as asked (checked writable
    before the audit; a failure now is that option's usage error). `tcp`: the audits of
    --compare-tcp, written after the others (never compared with the baseline)."""
    from tlsprobe.commands.common import write_json_out, written_to
    tcp = tcp or []
    every = reports + tcp
    if args.html or args.csv:
        from tlsprobe.report.html import write_scan_files
        with written_to("--html" if args.html else "--csv", args.html or args.csv):
            write_scan_files(args.html, args.csv, every, code, reason)
    if args.json_out:
        write_json_out(args.json_out, [baseline.json_text(r) if baseline else r.to_json()
                                       for r in reports] + [r.to_json() for r in tcp])
    if args.sarif:
        from tlsprobe.report.sarif import write_sarif
        with written_to("--sarif", args.sarif):
            write_sarif(args.sarif, every, code, reason)
    if args.junit:
        from tlsprobe.report.junit import write_junit
        with written_to("--junit", args.junit):
            gate = baseline.gate_reasons if baseline is not None and baseline.gate else None
            write_junit(args.junit, every, args.fail_on, getattr(args, "fail_under", None),
                        gate, compared=reports)


def _finish(args: argparse.Namespace, out: TextIO, reports: list[AuditReport],
            tcp: dict[Target, AuditReport], done: dict[Target, AuditReport],
            files: RecordingFiles | None, baseline: Baseline | None = None) -> int:
    """The text reports, the comparisons, the summary, --html/--csv, the errors on stderr,
    the recording files closed; the exit code."""
    from tlsprobe.commands import scan_quic
    from tlsprobe.report.escape import shown
    # --compare-tcp: the TCP audits count toward the exit code, so they are gated and
    # written like the others (the summary, JUnit, SARIF, HTML, CSV, --json-out)
    tcp = {t: _gated(args, r) for t, r in tcp.items()}
    audited = reports + list(tcp.values())
    if not args.json:
        from tlsprobe.report.audit_tables import render_audit
        for report in reports:
            render_audit(report, out, full=args.full or not out.isatty())
            if baseline is not None:
                baseline.render(report, out)
    scan_quic.print_comparisons(args, tcp, done, out)
    code, reason = exit_reason(audited, args.fail_on, getattr(args, "fail_under", None))
    if baseline is not None:
        code, reason = baseline.exit_gate(reports, code, reason)
    if not args.json and len(audited) > 1:
        from tlsprobe.report.audit_tables import render_summary
        render_summary(audited, code, reason, out)
    _write_files(args, reports, code, reason, baseline, list(tcp.values()))
    _errors_on_stderr(reports, _said_once(args, out))
    _errors_on_stderr(list(tcp.values()))     # in no text report
    failed = files.close() if files is not None else None
    if failed is not None:
        print(f"tlsprobe: error: {shown(failed)}", file=sys.stderr)
        if code == EXIT_OK:     # a file the run could not write: a usage error (2)
            return UsageError(failed).exit_code
    return code
