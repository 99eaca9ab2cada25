"""Read pcap/pcapng captures: every TLS connection's offer, choice, key exchange and fingerprints.

Connections are found by content (not by port), read as a stream (memory stays flat), and
described with the live probe's words: `--msg` prints each connection's records exactly as
`tlsprobe HOST --msg` does. Exit code 7 when a capture is damaged or some of its data could
not be read (what could be read is still reported, and what was not is said).
`--jobs N` / `--scheduler ADDRESS` read many files in worker processes or on Dask, one file
per task, with the same output as one after another (tlsprobe/survey/captures.py). One large
capture (or one file with --jobs 2 or more) is read by two processes: the capture layer in
the second (tlsprobe/capture/pipe.py), the same output; --jobs 1 keeps to one process.
`-i IFACE` captures live instead (`_run_live`, commands/pcap_live.py, capture/live.py): rows as
handshakes are decided, until -c, --duration or Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from collections.abc import Generator, Iterator
from typing import IO, TYPE_CHECKING

from tlsprobe.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from tlsprobe.report.escape import shown

if TYPE_CHECKING:
    from tlsprobe.capture.live import LiveCapture
    from tlsprobe.capture.ring import RingWriter
    from tlsprobe.commands.pcap_live import Reading
    from tlsprobe.commands.pcap_output import Output
    from tlsprobe.model.capture import (
        BriefReport,
        CaptureSummary,
        ConnectionReport,
        ReportText,
    )
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    from tlsprobe.offline.filters import ConnectionFilter
    from tlsprobe.report.progress import CaptureBar
    from tlsprobe.requests.capture import CaptureRequest
    from tlsprobe.survey.captures import Finished, Opened

    Report = ConnectionReport | BriefReport | ReportText


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", metavar="FILE", nargs="*",
                   help="pcap or pcapng capture (gzip-compressed too), or a directory (the "
                   "captures under it, by path); '-' reads stdin (rows as handshakes "
                   "complete); or -i IFACE instead")
    _add_live_arguments(p)
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="one JSON document; connections "
                   "in the order they end (streamed), each with its first_frame (the table "
                   "sorts by file and first frame)")
    o.add_argument("--jsonl", action="store_true", help="JSON lines, one per connection as "
                   "it ends (streamed, each with its first_frame), then one per capture "
                   "(with an \"error\" when the file could not be read)")
    o.add_argument("--details", action="store_true", help="a block per connection with the "
                   "probe's labels instead of the table (with --stats: then the summary; not "
                   "with --json/--jsonl, which hold every detail)")
    o.add_argument("--msg", action="store_true", help="print each connection's records as "
                   "`openssl s_client -msg` does (the live probe's --msg format); with "
                   "--json/--jsonl as each connection's \"trace\"")
    o.add_argument("--stats", action="store_true", help="summary: connections per version, "
                   "cipher suite and group (instead of the table)")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    o.add_argument("--csv", metavar="FILE", help="also write one CSV row per connection (the "
                   "table's columns, the capture file first)")
    o.add_argument("--plot", metavar="FILE", help="with --stats: also draw connections per "
                   "version and per negotiated group over the capture's time (PNG or SVG)")
    o.add_argument("--full", action="store_true", help="name every problem of a damaged "
                   "capture on stderr (else the first, and how many more)")
    x = p.add_argument_group("many captures")
    x.add_argument("--jobs", type=int, default=None, metavar="N", help="read N files at "
                   "once in worker processes (one file per task; the output is the same as "
                   "one after another; no progress bar). One file, or files read one after "
                   "another without --jobs: a capture of 8 MiB or more (any size with "
                   "--jobs 2 or more) is read by two processes, the packets in the second "
                   "(the same output in 10-30%% less time on two free CPUs, for more "
                   "CPU time in all); --jobs 1, or -c N: one process only")
    x.add_argument("--scheduler", metavar="ADDRESS", help="read the files on an existing "
                   "Dask cluster (tcp://HOST:8786; its workers must see the same paths and "
                   "have tlsprobe with its cluster extra)")
    k = p.add_argument_group("decryption")
    k.add_argument("--keylog", metavar="FILE", help="SSLKEYLOGFILE secrets: decrypt TLS 1.3 "
                   "handshakes and TLS 1.2 records (keys embedded in pcapng are used too)")
    k.add_argument("--no-embedded-keys", action="store_true", help="ignore keys stored in "
                   "the capture (pcapng Decryption Secrets Blocks)")
    # `--version` prints the program's version, as in every command: the TLS version filter
    # is --tls-version (cli.py turns the old `pcap --version VALUE` into a usage error).
    f = p.add_argument_group("filters (repeatable; comma-separated lists allowed)")
    f.add_argument("--host", action="append", metavar="ADDR|NAME[:PORT]",
                   help="either endpoint's address, or the SNI; with :PORT ([v6]:PORT) that "
                   "endpoint's port too")
    f.add_argument("--port", action="append", metavar="PORT", help="either endpoint's port")
    f.add_argument("--sni", action="append", metavar="PATTERN",
                   help="server name, shell pattern (*.example.com)")
    f.add_argument("--group", action="append", metavar="GROUP",
                   help="negotiated group (or the group a HelloRetryRequest asked for): "
                   "name, hex (0x001d) or decimal id as tshark shows it (29)")
    f.add_argument("--tls-version", dest="tls_version", action="append",
                   metavar="VERSION",
                   help="negotiated version: 1.3, TLSv1.2, ssl3, 0x0303")
    f.add_argument("--no-quic", action="store_true", help="skip UDP (QUIC Initial packets)")
    _add_streaming_arguments(p)


def _add_live_arguments(p: argparse.ArgumentParser) -> None:
    """`-i IFACE` and what goes with a live capture (commands/pcap_live.py)."""
    live = p.add_argument_group("live capture (README: Live capture)")
    live.add_argument("-i", "--interface", action="append", metavar="IFACE",
                      help="capture live on IFACE (repeatable; 'any': every interface, on "
                      "Linux): each connection's row as soon as its handshake is decided; "
                      "Ctrl-C stops (exit 0 after the summary). Needs root or CAP_NET_RAW "
                      "and CAP_NET_ADMIN")
    live.add_argument("-f", "--filter", dest="bpf", metavar="EXPR", help="with -i: BPF "
                      "capture filter, as tcpdump's (default: 'tcp or udp': TLS on any "
                      "port, STARTTLS, QUIC, DTLS)")
    live.add_argument("-B", "--buffer-size", type=float, metavar="MB", help="with -i: "
                      "the kernel's capture buffer per interface, in MiB, 0.001 to 4096 (default 32; "
                      "tshark's -B): bursts wait there while tlsprobe catches up, and what "
                      "does not fit is dropped (counted and said)")
    live.add_argument("-c", "--count", type=int, metavar="N", help="stop after N "
                      "connections reported (live capture, stdin, or a file)")
    live.add_argument("--duration", type=float, metavar="S", help="with -i, '-' or "
                      "--follow: stop after S seconds, at most 2592000 (30 days) (the "
                      "connections still open are reported)")
    live.add_argument("-w", "--write", dest="write", metavar="FILE", help="with -i: also "
                      "write the captured packets to FILE (pcapng), to read again later")
    live.add_argument("--ring-size", type=float, metavar="MB", help="with -w: a ring of "
                      "files, a new one past MB megabytes, at most 1000000 (named as tshark's -b "
                      "names them)")
    live.add_argument("--ring-files", type=int, metavar="N", help="with --ring-size: keep "
                      "only the newest N files, 1 to 100000")


def _add_streaming_arguments(p: argparse.ArgumentParser) -> None:
    """Captures still being written (issue 34): --follow."""
    s = p.add_argument_group("captures still being written")
    s.add_argument("--follow", action="store_true", help="FILE is a capture another "
                   "program is still writing (tcpdump -w, dumpcap): read it as it grows and "
                   "wait for more at its end, as tail -f, until interrupted; each "
                   "connection is reported as it ends. A file that shrinks or is replaced "
                   "ends the reading (exit 7). stdin ('-') is read as it comes without it")


def _options(args: argparse.Namespace, stop_at: float | None = None
             ) -> tuple[CaptureRequest, AnalyzerOptions]:
    """The request (requests/capture.py: files, key log, filters, processes) and the
    analysis options the output asks for (`stop_at`: --duration's deadline); a bad option
    is a usage error before any read."""
    from tlsprobe.requests.capture import CaptureRequest
    from tlsprobe.requests.live import check_count, check_duration
    from tlsprobe.requests.names import CLI
    check_count(args.count, CLI)   # as a live capture checks them (requests/live.py)
    check_duration(args.duration, CLI)
    if args.json and args.jsonl:
        raise UsageError("--json and --jsonl exclude each other")
    if args.details and (args.json or args.jsonl):
        raise UsageError(f"--details and --{'json' if args.json else 'jsonl'} exclude each "
                         "other (the JSON holds every detail)")
    if args.plot and not args.stats:
        raise UsageError("--plot draws the --stats summary: add --stats")
    from tlsprobe.commands.common import READ_FILES, distinct_files
    # what is written (--csv, --plot, -w without a ring) replaces no capture or key log
    # that is read, nor another output
    distinct_files(args, [("FILE", path) for path in args.files],
                   [("-w", args.write)] if args.write and args.ring_size is None else [],
                   reads=READ_FILES)
    from tlsprobe.report.csv_out import check_writable
    if args.csv:
        check_writable(args.csv, "--csv")
    if args.plot:
        from tlsprobe.report.plots import check_plot
        check_plot(args.plot)
    request = CaptureRequest.from_args(args)
    filtering = request.filter.active
    from tlsprobe.report.trace import TraceFormatter
    return request, request.options(
        trace_formatter=TraceFormatter if args.msg else None,
        # the table and --stats need no whole reports
        brief=not (args.json or args.jsonl or args.details or args.msg or filtering or
                   args.plot),
        # JSON that nothing else reads: its text, no report built (the CSV rows and the
        # plot read reports)
        json_text=(args.json or args.jsonl) and not (
            args.msg or args.stats or filtering or args.csv or args.plot),
        pipe_min_bytes=None if request.parallel else _pipe_min_bytes(args.jobs, args.count),
        stop_at=stop_at)


class _Sinks:
    """Where each reported connection goes besides the output: the statistics, the --csv
    rows, the --plot timeline; and what each capture's summary was."""

    def __init__(self, args: argparse.Namespace) -> None:
        from tlsprobe.commands.common import written_to
        from tlsprobe.model.capture import ReportText
        from tlsprobe.offline.stats import Statistics
        from tlsprobe.report.csv_out import PcapCsv
        from tlsprobe.report.plots import CaptureTimeline
        self.stats = Statistics()
        self.counting = bool(args.stats)
        self.csv_path = args.csv
        self.csv: PcapCsv | None = None
        if args.csv:
            with written_to("--csv", args.csv):
                self.csv = PcapCsv(args.csv)
        self.timeline = CaptureTimeline() if args.plot else None
        self.summaries: list[CaptureSummary] = []
        self._text = ReportText

    @property
    def files(self) -> bool:
        """Whether a report goes to a file too (--csv, --plot): `to_files`."""
        return self.csv is not None or self.timeline is not None

    def to_files(self, name: str, report: Report) -> None:
        if isinstance(report, self._text):   # JSON text only: no --csv or --plot asked
            return
        if self.csv is not None:
            self.csv.add(name, report)
        if self.timeline is not None:
            self.timeline.add(report)

    def close(self) -> None:
        if self.csv is not None:
            from tlsprobe.commands.common import written_to
            with written_to("--csv", self.csv_path):
                self.csv.close()


def _read_one(name: str, analysis: CaptureAnalysis | Finished, flt: ConnectionFilter,
              output: Output, sinks: _Sinks, limit: int | None = None,
              whole: bool = True) -> CaptureSummary:
    """Report the connections of one opened capture (the first `limit` only: -c); its
    summary (with `reported`; not `complete` when -c stopped the reading of a file or of
    stdin; `whole` False: a live capture, which ends where it is stopped, by -c too).
    (Ctrl-C and SIGTERM stop a capture still coming, stdin or --follow, through its
    analysis's `stop`: the iteration then ends as at a deadline.)"""
    from tlsprobe.requests.capture import passes
    output.begin()
    reported = 0
    filtering = flt.active
    reported_ids: set[int] = set()
    # once per connection: what does not change is looked up before the loop
    stats, counting, files, emit = sinks.stats, sinks.counting, sinks.files, output.report
    emitting = output.per_report
    close = getattr(analysis, "close", None)   # (a worker's capture is read already)
    cut = False     # stopped by -c before the end: the file was not read whole
    for report, trace in analysis:
        if filtering:
            if not passes(flt, report):
                continue
            reported_ids.add(report.id)
        reported += 1
        if counting:
            stats.add(report)
        else:
            stats.connections += 1
        if files:
            sinks.to_files(name, report)
        if emitting:
            emit(report, trace)
        if reported == limit and close is not None:
            close()   # -c N: the rest is not read; the summary is made now
            cut = True
            break
    summary = analysis.summary
    assert summary is not None  # set when the iteration ends
    if filtering:  # notes about connections only for those reported
        summary = dataclasses.replace(summary, notes=analysis.notes_for(reported_ids))
    # `complete`: the whole file read without a warning; after -c N it was not read whole
    return dataclasses.replace(summary, reported=reported,
                               complete=summary.complete and not (cut and whole))


def _read_all(request: CaptureRequest, opened: Iterator[Opened], output: Output, sinks: _Sinks,
              args: argparse.Namespace, reading: Reading) -> tuple[bool, bool]:
    """Every opened capture in turn, until -c N connections were reported: (a capture was
    damaged, one could not be read). A capture a signal stopped (`reading`) is not
    `complete`, and a note says why."""
    from tlsprobe.model.capture import CaptureSummary
    broken = unreadable = False
    left = args.count
    for path, (analysis, error) in zip(request.files, opened):
        name = "<stdin>" if path == "-" else path
        if analysis is None:
            # one line, a JSON record, and the other files are still read (exit 2)
            print(f"tlsprobe: {shown(f'{name}: {error}')}", file=sys.stderr)
            unreadable = True
            summary = CaptureSummary.unreadable(name, error or "")
        else:
            summary = _read_one(name, analysis, request.filter, output, sinks, left)
            note = reading.stopped_note()
            if note is not None:
                summary = dataclasses.replace(summary, complete=False,
                                              notes=(*summary.notes, note))
            broken = _warn(name, summary, args.full) or broken
            left = None if left is None else left - summary.reported
        sinks.summaries.append(summary)
        output.capture(summary)
        if left is not None and left <= 0:
            break   # -c N connections reported: the other files are not read
    return broken, unreadable


def run(args: argparse.Namespace) -> int:
    """Read every capture in turn. A capture that cannot be read at all (not a capture,
    empty, corrupt gzip, unreadable) is one line on stderr and the others are still read;
    the exit code is then 2 (usage: unreadable file), else 7 when a capture was damaged or
    holds data that was not read (snaplen cuts, packets skipped: what could be read is
    reported), else 0."""
    if args.interface:
        return _run_live(args)
    if not args.files:
        raise UsageError("give a capture FILE (or '-' for stdin), or -i IFACE to capture "
                         "live")
    if args.ring_size is not None or args.ring_files is not None:
        raise UsageError("--ring-size and --ring-files are -w's ring, for a live capture: "
                         "with -i IFACE -w FILE")
    if args.bpf is not None or args.write is not None or args.buffer_size is not None:
        flag = "-f/--filter" if args.bpf is not None else "-w" if args.write is not None \
            else "-B/--buffer-size"
        hint = " (the filters of a file's connections are --host, --port, --sni ...)" \
            if args.bpf is not None else ""
        raise UsageError(f"{flag} is for a live capture: with -i IFACE{hint}")
    from tlsprobe.commands.pcap_output import whole_writes
    with whole_writes(sys.stdout) as stdout:
        return _run_files(args, stdout)


def _run_files(args: argparse.Namespace, stdout: IO[str]) -> int:
    """`run`'s reading of the capture files (or stdin), its output to `stdout`."""
    from tlsprobe.commands import pcap_live
    from tlsprobe.report.progress import CaptureBar
    request, options = _options(args, pcap_live.deadline(args))
    streaming = pcap_live.streamed_input(args, request.files)
    sinks = _Sinks(args)
    from tlsprobe.commands.pcap_output import Output
    output = Output(args, stdout, streaming=streaming)
    bar = CaptureBar(not args.no_progress and not args.msg and not request.parallel
                     and not request.follow)
    # Reading a capture allocates many short-lived objects and few cycles: keep what is
    # loaded out of the collector's scans and let it run less often (about 10% faster).
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    with pcap_live.interrupted_by_signals(not request.parallel, streaming) as reading:
        opened = _opened(request, options, bar, reading)
        try:
            broken, unreadable = _read_all(request, opened, output, sinks, args, reading)
        finally:
            reading.ended = True
            opened.close()  # stopped early: the worker processes go too
            bar.stop()
            output.flush()  # what was read stays written, even when interrupted
            sinks.close()
        # the table or statistics written at the end make many objects and no cycles: the
        # collector would only scan them (once up to 0.14 s on 71,000 rows, in some runs)
        gc.disable()
        try:
            output.finish(sinks.stats, sinks.summaries)
        finally:
            gc.enable()
        if sinks.timeline is not None:
            from tlsprobe.commands.common import written_to
            with written_to("--plot", args.plot):
                sinks.timeline.write(args.plot)
        stdout.flush()   # while a signal still stops nothing (the default SIGTERM kills)
    if reading.signal is not None and not streaming:
        return EXIT_INTERRUPTED   # a capture FILE not read to its end: reported as far as read
    if unreadable:
        return EXIT_USAGE
    return EXIT_BAD_INPUT if broken else EXIT_OK


def _run_live(args: argparse.Namespace) -> int:
    """`pcap -i IFACE`: rows as handshakes are decided until -c, --duration or Ctrl-C;
    then the summary (commands/pcap_live.py has the exit codes). Ctrl-C and SIGTERM stop
    the capture from before it opens to the end of its summary."""
    from tlsprobe.commands import pcap_live
    ring = pcap_live.check_live_args(args)
    request, options = _options(args)
    sinks = _Sinks(args)
    start = time.monotonic()
    signals = pcap_live.StopSignals()
    from tlsprobe.commands.pcap_output import whole_writes
    with signals.installed(), whole_writes(sys.stdout) as stdout:
        opened = pcap_live.open_live(args, options, ring)
        if isinstance(opened, str):
            print(f"tlsprobe: {shown(opened)}", file=sys.stderr)
            sinks.close()
            return EXIT_USAGE
        signals.attach(opened[0])
        return _capture_live(args, request, opened, sinks, start, stdout)


def _capture_live(args: argparse.Namespace, request: CaptureRequest,
                  opened: tuple[LiveCapture, CaptureAnalysis, RingWriter | None],
                  sinks: _Sinks, start: float, stdout: IO[str]) -> int:
    """The opened live capture's rows, then its summary; the exit code."""
    from tlsprobe.commands import pcap_live
    from tlsprobe.commands.pcap_output import Output
    capture, analysis, writer = opened
    output = Output(args, stdout, streaming=True)
    try:
        pcap_live.report_start(capture)
        summary = _read_one(analysis.name, analysis, request.filter, output, sinks,
                            limit=args.count, whole=False)
        live = analysis.stream.stats.live   # the counts the summary has (not recounted)
    finally:
        analysis.close()
        capture.close()
        write_error = pcap_live.close_writer(capture, writer)
        output.flush()
        sinks.close()
    broken = _warn(analysis.name, summary, args.full)
    sinks.summaries.append(summary)
    output.capture(summary)
    output.finish(sinks.stats, sinks.summaries)
    print(pcap_live.summary_line(summary, live, time.monotonic() - start), file=sys.stderr)
    if sinks.timeline is not None:
        from tlsprobe.commands.common import written_to
        with written_to("--plot", args.plot):
            sinks.timeline.write(args.plot)
    if write_error is not None:
        print(f"tlsprobe: {shown(write_error)}: the capture stopped there (the file holds "
              "the packets written before, each whole)", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_BAD_INPUT if broken else EXIT_OK


#: a capture this large is read by two processes unless --jobs says how many (pipe.py)
PIPE_MIN_BYTES = 8 << 20


def _pipe_min_bytes(jobs: int | None, count: int | None = None) -> int | None:
    """The analysis's pipe_min_bytes when the files are read here one after another: none
    with --jobs 1 or -c N, any size with --jobs 2 or more (then there is one file), else
    large. -c N stops after N connections: a second process would read ahead of them (up to
    the pipe's megabyte, work thrown away), and its counters, sent at the capture's end,
    would never come, so the capture's record said 0 packets and 0 TCP connections."""
    if count is not None:
        return None
    if jobs is None:
        return PIPE_MIN_BYTES
    return None if jobs == 1 else 0


def _opened(request: CaptureRequest, options: AnalyzerOptions, bar: CaptureBar,
            reading: Reading) -> Generator[Opened, None, None]:
    """(analysis, None) or (None, why it cannot be read) per file, in order: opened here one
    after another by the one-file reader (requests/capture.py; the analysis streams as the
    loop reads it), or read whole by --jobs worker processes or on the --scheduler's Dask
    workers (survey/captures.py). Each analysis opened here is `reading`'s target: the one
    a signal stops."""
    if request.parallel:
        from tlsprobe.survey import captures
        yield from captures.read_in_order(list(request.files), options, request.filter,
                                          jobs=request.jobs or 1, scheduler=request.scheduler)
        return
    from tlsprobe.offline.analyzer import Progress
    from tlsprobe.requests.capture import open_capture
    for path in request.files:
        if reading.signal is not None:
            return   # stopped by a signal: the other files are not read
        name = "<stdin>" if path == "-" else path
        update = bar.start(name)
        # a capture still being written: each connection reported when its handshake is
        # decided (as a live capture's), not when it closes
        opts = dataclasses.replace(options, report_when_decided=True) \
            if path == "-" or request.follow else options
        try:
            opened = open_capture(path, name, opts, None if update is None else Progress(update))
        except KeyboardInterrupt:
            if not (request.follow or tuple(request.files) == ("-",)):
                raise
            # Ctrl-C or SIGTERM before the header of a capture still coming (stdin, a
            # followed file still empty): its summary, as a stop by --duration gives
            opened = None, "stopped before the capture's header came: nothing was read"
        reading.target = opened[0]
        yield opened


def _warn(name: str, summary: CaptureSummary, full: bool = False) -> bool:
    """One line on stderr for a damaged capture; True when there was something to say.
    Notes (a key log that matched nothing, messages lost in capture gaps) are said as
    `tlsprobe: note:` lines and do not make the exit code; losses (packets skipped: unknown
    link type or interface, too deep, fragments never completed) are note lines too and
    make it 7."""
    for note in summary.notes + summary.losses:
        print(f"tlsprobe: note: {shown(f'{name}: {note}')}", file=sys.stderr)
    problems = list(summary.warnings)
    cut = summary.capture.get("snaplen_cut", 0)
    if cut:
        problems.append(f"{cut} packets cut short by the capture's snaplen (their missing "
                        "bytes are gaps)")
    if not problems:
        return bool(summary.losses)  # data the capture holds was not read: exit 7
    more = f" (+{len(problems) - 1} more; --full names them)" if len(problems) > 1 else ""
    if full:
        problems, more = ["; ".join(problems)], ""
    print(f"tlsprobe: {shown(f'{name}: {problems[0]}')}{more}; read {summary.packets} "
          "packets, reported what could be read", file=sys.stderr)
    return True
