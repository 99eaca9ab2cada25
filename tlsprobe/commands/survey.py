"""Survey a population of TLS servers: sharded audits on this machine or Dask, Parquet + JSON
lines output.

`tlsprobe survey TARGETS --out DIR`: TARGETS is a file of HOST[:PORT] lines, '-' for stdin,
or a CIDR/port list (127.0.0.0/30:443,8443). Targets are sharded (all ports of one address in
one shard), each shard audited by the scan's asyncio scanner: on this machine by --workers
workers (default: one per core; 1 = this process; more: this process, on a thread, and
processes forked from it, no Dask: survey/local.py), or on an existing Dask cluster (--scheduler tcp://HOST:8786; pip install
'.[cluster]' in the checkout).
DIR gets per shard shard-NNNNN.parquet (one row per target, every audit result a column;
schema in tlsprobe/survey/rows.py), and, under names the Parquet readers skip,
_manifest.json and _jsonl/shard-NNNNN.jsonl (scan --json objects): pd.read_parquet(DIR)
reads the folder. While the audits run a shard's rows wait in _rows/shard-NNNNN.jsonl;
the Parquet files are written from them once the workers are stopped (also when the run
is interrupted or fails), so pyarrow is never in memory beside the workers. Running the same command again resumes with the shards not yet written
(also a folder of an older tlsprobe with manifest.json); DIR holding a survey of other
arguments is an error.

`tlsprobe survey diff OLD NEW [--jsonl FILE] [--parquet FILE]`: per target, what changed
between two surveys (commands/survey_diff.py, docs/CHANGES.md).

`tlsprobe survey summary DIR [--json] [--plot FILE] [--html FILE]`: each target counted
once; shares of the targets reached per TLS version, preferred group (or "follows the
client's order"), post-quantum verdict, supported group, servers enforcing their order,
checks found vulnerable; the unreachable targets on their own line and by kind; --plot
draws them (PNG or SVG), --html writes a page with the tables and the chart
(report/survey_charts.py).

Progress on stderr as targets finish (workers announce each target before its shard is
written; at most a line a second unless another whole percent is done; --no-progress: none);
at the end, one paragraph on stdout: where the output is and what it found.

An option of another form (--jsonl on a run, --out on summary, ...) is a usage error naming
the form that takes it, never silently ignored (check_form).

A line of the targets file that is no target is reported as `FILE:LINE: error` on stderr
and skipped; the other targets are surveyed, and the run then exits 2.

Exit codes: 0 done (per-target failures are results, counted in the summary); 2 usage (bad
lines in the targets file, after the other targets ran; no target at all, a bad CIDR, --out
not writable, a manifest of other arguments, pyarrow missing, --scheduler without Dask);
70 the local workers failed (a shard's worker died three times, or a worker's error outside
an audit; the shards written so far are kept); 130 interrupted (the shards written so far
are kept: run again to resume).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING

from tlsprobe.errors import EXIT_OK, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from tlsprobe.requests.survey import SurveyRequest
    from tlsprobe.survey.lanes import Audited
    from tlsprobe.survey.local import Pool
    from tlsprobe.survey.targets import Shard

DEFAULT_CHECKS = "groups,pq"
#: the Parquet files left to write at a run's end (about 10 ms each) from which a line says so
PENDING_SHOWN = 100


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tlsprobe.commands.common import add_sni_arguments
    p.add_argument("targets", metavar="TARGETS", help="file of HOST[:PORT] lines, '-' for "
                   "stdin, or CIDR[:PORT,...]; the word summary followed by DIR; or diff OLD NEW")
    p.add_argument("directory", nargs="?", metavar="DIR", help="(summary) the survey directory")
    p.add_argument("--out", metavar="DIR", help="output directory (created; resumed if it "
                   "holds a survey of the same arguments)")
    p.add_argument("--checks", default=DEFAULT_CHECKS, metavar="LIST", help="comma list as in "
                   f"scan (default {DEFAULT_CHECKS})")
    p.add_argument("--clients", action="store_true", help="simulate the packaged client "
                   "profiles after the checks (columns clients, client_results)")
    p.add_argument("--profiles", metavar="LIST", default=None, help="the client profiles "
                   "to simulate (ids or parts of them; implies --clients)")
    p.add_argument("--profiles-dir", metavar="DIR", default=None, help="client profiles "
                   "from DIR (implies --clients)")
    p.add_argument("--extra-groups", metavar="LIST", default="", help="more group ids to try")
    add_sni_arguments(p)
    p.add_argument("--shard-size", type=int, default=64, metavar="N", help="targets per shard, "
                   "1 to 100000 (default 64; all ports of one address stay together)")
    x = p.add_argument_group("execution")
    x.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="workers on this machine (default: one per core; 1: the audits run in "
                   "this process; N: this process and N-1 processes forked from it)")
    x.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler "
                   "(tcp://HOST:8786); workers need tlsprobe with its cluster extra")
    x.add_argument("--rate", type=float, default=None, metavar="N", help="connections per "
                   "second in all, split across the workers, 0.001 to 100000 (default: no "
                   "limit)")
    from tlsprobe.commands.common import add_connection_arguments
    add_connection_arguments(x, concurrency=16,
                             concurrency_help="targets audited at once per worker")
    x.add_argument("--no-progress", action="store_true", help="no progress lines on stderr (the "
                   "closing paragraph on stdout stays)")
    p.add_argument("--json", action="store_true", help="(summary, diff) the summary as JSON")
    p.add_argument("--plot", metavar="FILE", default=None, help="(summary) also draw the "
                   "shares of the targets per section, PNG or SVG by the extension (needs "
                   "matplotlib: pip install matplotlib)")
    p.add_argument("--html", metavar="FILE", default=None, help="(summary) also write an "
                   "HTML page with the summary's tables and its chart (needs matplotlib)")
    from tlsprobe.commands.survey_diff import add_diff_arguments
    add_diff_arguments(p)       # survey diff OLD NEW


def _need_pyarrow() -> None:
    """pyarrow imported, or a usage error naming the extra (the command's process never
    needs numpy: pyarrow is imported without it)."""
    from tlsprobe.survey.extra import parquet_without_numpy
    parquet_without_numpy()


def _pyarrow_installed() -> None:
    """A run's check that pyarrow is there (else a usage error naming the extra, before
    any audit), without importing it: the Parquet files are written once the workers are
    stopped (survey/store.py), and pyarrow is never in memory beside them."""
    from tlsprobe.survey.extra import HINT, has_pyarrow
    if not has_pyarrow():
        raise UsageError(f"survey files are Parquet: pyarrow is not installed ({HINT})")


def _need_dask(scheduler: str | None) -> None:
    """With --scheduler, dask.distributed imported now (a usage error naming the extra if it
    cannot be, before any file is written); without, Dask is not needed."""
    if scheduler is not None:
        from tlsprobe.survey.extra import distributed
        distributed()


#: the options of `survey summary DIR` and of `survey diff OLD NEW` (dests); a run
#: (`survey TARGETS --out DIR`) takes every other option and neither of these
SUMMARY_OPTIONS = frozenset({"json", "plot", "html"})
DIFF_OPTIONS = frozenset({"json", "jsonl", "parquet"})
_FORMS = {"summary": "tlsprobe survey summary DIR", "diff": "tlsprobe survey diff OLD NEW",
          "run": "tlsprobe survey TARGETS --out DIR"}


def _given(args: argparse.Namespace) -> list[str]:
    """The dests of the options given on the command line (`given_options`, set by cli.py:
    also one given at its default value, such as --workers N on N cores), else of those
    whose value is not their default."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    defaults = vars(parser.parse_args(["TARGETS"]))
    given = getattr(args, "given_options", None)
    return [dest for dest, default in defaults.items()
            if dest not in ("targets", "directory", "new")
            and (dest in given if given is not None else getattr(args, dest) != default)]


def check_form(args: argparse.Namespace) -> str:
    """Which form of the command this is ("run", "summary" or "diff"), after refusing an
    option or an argument that only another form takes (a usage error naming the form
    that takes it), so that no option is silently left without effect."""
    form = args.targets if args.targets in ("summary", "diff") else "run"
    if form == "run" and args.directory is not None:
        raise UsageError(f"survey TARGETS takes one argument, not also {args.directory!r}: "
                         f"the output directory is --out DIR ({_FORMS['run']})")
    if form == "summary" and args.new is not None:
        raise UsageError(f"survey summary takes one directory, not also {args.new!r} "
                         f"({_FORMS['summary']}; two surveys compare with "
                         f"{_FORMS['diff']})")
    own = {"summary": SUMMARY_OPTIONS, "diff": DIFF_OPTIONS}.get(form)
    for dest in _given(args):
        if own is not None and dest in own or own is None and \
                dest not in SUMMARY_OPTIONS | DIFF_OPTIONS:
            continue
        option = "--" + dest.replace("_", "-")
        if dest in ("plot", "html"):
            raise UsageError("--plot and --html draw a survey's summary: tlsprobe survey "
                             "summary DIR --plot FILE (or --html FILE)")
        takers = [_FORMS[f] for f, opts in (("summary", SUMMARY_OPTIONS),
                                             ("diff", DIFF_OPTIONS)) if dest in opts]
        where = " or ".join(takers) if takers else _FORMS["run"]
        this = {"run": "a survey run", "summary": "survey summary",
                "diff": "survey diff"}[form]
        raise UsageError(f"{option} applies to {where}, not to {this}")
    return form


def run(args: argparse.Namespace) -> int:
    form = check_form(args)
    from tlsprobe.commands.common import distinct_files
    distinct_files(args)
    if form == "summary":
        return _summary(args)
    if form == "diff":
        from tlsprobe.commands import survey_diff
        return survey_diff.run(args)
    from tlsprobe.requests.survey import SurveyRequest
    from tlsprobe.survey.local import local_workers
    request = SurveyRequest.from_args(args)
    _need_dask(request.scheduler)
    _pyarrow_installed()
    with local_workers(request.workers if request.scheduler is None else 1, request.options,
                       request.settings, progress=not args.no_progress) as pool:
        return _survey(args, request, pool)


def _survey(args: argparse.Namespace, request: SurveyRequest, pool: Pool | None) -> int:
    from tlsprobe.survey import execute
    from tlsprobe.survey.store import SurveyDir
    from tlsprobe.survey.targets import (
        digest,
        older_plan,
        once_by_key,
        read_spellings,
        remaining,
        shard_targets,
    )
    spelled, bad = read_spellings(request.targets)
    targets = once_by_key(spelled)
    from tlsprobe.report.escape import shown
    for line in bad:    # each named FILE:LINE; the good targets still run
        print(f"tlsprobe: error: {shown(line.error)}", file=sys.stderr)
    if not targets:
        raise UsageError(f"no target in {args.targets} ({len(bad)} bad "
                         f"line{'s' if len(bad) > 1 else ''})")
    out = SurveyDir(request.out)
    out.prepare()
    shards = shard_targets(targets, request.shard_size)
    identity = {"targets_sha256": digest(targets), "targets": len(targets),
                **request.identity()}
    old = out.manifest()
    identity, shards = older_plan(spelled, request.shard_size, old and old.get("identity"),
                                  identity) or (identity, shards)
    from tlsprobe.commands.common import written_to
    with written_to("--out", request.out):
        done = out.start(identity, request.arguments(), shards)
        todo, emptied = remaining(shards, done)
        for shard in emptied:   # all its targets are in shards done: done with no row
            out.write_shard(shard, [])
    began = time.monotonic()
    options, settings = request.options, request.settings
    progress = execute.Progress(len(targets), len(targets) - sum(len(s.targets) for s in todo),
                                not args.no_progress, {s.name: len(s.targets) for s in todo})
    on_target = None if args.no_progress else progress.target

    def finished(shard: Shard, reports: list[Audited]) -> None:
        with written_to("--out", args.out):
            out.write_shard(shard, reports)
        progress.add(shard)

    try:
        if not todo:
            print(f"tlsprobe survey: all {len(shards)} shards of {shown(args.out)} are done",
                  file=sys.stderr)
        elif request.scheduler is not None:
            execute.run_on_dask(todo, options, settings, finished,
                                scheduler=request.scheduler, on_target=on_target)
        else:
            from tlsprobe.survey.local import run_local
            run_local(todo, options, settings, finished, pool=pool, on_target=on_target)
    except BaseException as exc:
        # interrupted or failed: the shards done so far become Parquet files too (what
        # cannot be written now stays in _rows/, which a resumed run converts)
        if pool is not None:
            pool.stop(failed=True)
        with contextlib.suppress(Exception):
            out.write_parquet()
            if isinstance(exc, KeyboardInterrupt):
                # Ctrl-C or SIGTERM: what the shards done hold, as a finished run says it
                # ("N of M shards"), then "tlsprobe: interrupted", exit 130 (cli.py)
                _finished_paragraph(request.out, time.monotonic() - began)
        raise
    if pool is not None:
        pool.stop()     # the Parquet files are written, and read, without them
    if not args.no_progress and out.pending() >= PENDING_SHOWN:
        print(f"tlsprobe survey: writing the Parquet files of {out.pending()} shards",
              file=sys.stderr)
    with written_to("--out", request.out):
        out.write_parquet()
    _finished_paragraph(request.out, time.monotonic() - began)
    if bad:
        print(f"tlsprobe: error: {len(bad)} line{'s' if len(bad) > 1 else ''} of "
              f"{shown(args.targets)} {'are' if len(bad) > 1 else 'is'} no target (above); "
              f"the other {len(targets)} targets were surveyed", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _finished_paragraph(directory: str, seconds: float) -> None:
    """Where the output is and what it holds, on stdout once the run is done."""
    _need_pyarrow()     # imported by the Parquet files' writing, unless none was left
    from tlsprobe.report.escape import shown
    from tlsprobe.survey.summary import paragraph, summarize
    sys.stdout.write(paragraph(summarize(directory), shown(directory), seconds))
    sys.stdout.flush()


def _summary(args: argparse.Namespace) -> int:
    if args.directory is None:
        raise UsageError("survey summary needs the survey directory: tlsprobe survey "
                         "summary DIR")
    _need_pyarrow()
    _check_chart_files(args)
    from tlsprobe.model.encode import dumps
    from tlsprobe.survey.summary import render_text, summarize
    summary = summarize(args.directory)
    if args.json:
        print(dumps(summary))
    else:
        sys.stdout.write(render_text(summary))
    _write_charts(args, summary)
    return EXIT_OK


def _check_chart_files(args: argparse.Namespace) -> None:
    """`survey summary --plot/--html`: the files can be written and matplotlib is there,
    before the summary is read (each a usage error)."""
    from tlsprobe.report.plots import check_plot
    if args.plot:
        check_plot(args.plot)
    if args.html:
        from tlsprobe.report.csv_out import check_writable
        check_writable(args.html, "--html")
        _need_matplotlib()


def _need_matplotlib() -> None:
    import importlib.util

    from tlsprobe.report.plots import MISSING
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(MISSING.replace("--plot", "--plot and --html"))


def _write_charts(args: argparse.Namespace, summary: dict[str, object]) -> None:
    from tlsprobe.commands.common import written_to
    if args.plot:
        from tlsprobe.report.survey_charts import plot_summary
        with written_to("--plot", args.plot):
            plot_summary(summary, args.plot)
    if args.html:
        from tlsprobe.report.survey_charts import write_summary_page
        with written_to("--html", args.html):
            write_summary_page(summary, args.html)
