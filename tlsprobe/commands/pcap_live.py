"""`tlsprobe pcap -i IFACE`'s own steps (commands/pcap.py runs them): the live capture's
request and analysis, Ctrl-C as "stop and summarise", the summary line on stderr.

Exit codes of a live capture: 0 (stopped by -c, --duration or Ctrl-C, nothing lost),
2 when the capture cannot start (no such interface: the ones there are are listed; no
permission: the capabilities needed; an invalid filter: libpcap's message; libpcap or
scapy missing), and when the -w file cannot be written (the disk full: the capture stops
there, what it captured is reported and summarised, the file keeps the packets written
whole before), 7 when packets were dropped by the kernel, libpcap or the interface
(counted in the summary, in --stats and the JSON, and noted on connections with gaps).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.report.escape import shown

if TYPE_CHECKING:
    from tlsprobe.capture.events import LiveCounts
    from tlsprobe.capture.live import LiveCapture
    from tlsprobe.capture.ring import RingSpec, RingWriter
    from tlsprobe.model.capture import CaptureSummary
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis


def check_live_args(args: argparse.Namespace) -> RingSpec | None:
    """What does not go with -i (files, worker processes); the -w file or ring."""
    if args.files:
        raise UsageError("-i IFACE captures live: give no FILE with it (read captures in "
                         "another run)")
    if args.follow:
        raise UsageError("-i IFACE captures live and --follow FILE reads a file another "
                         "program writes: give one of them")
    if args.jobs is not None or args.scheduler is not None:
        raise UsageError("-i IFACE is one live capture: --jobs and --scheduler read files")
    from tlsprobe.capture.ring import RingSpec
    if args.write is None:
        if args.ring_size is not None or args.ring_files is not None:
            raise UsageError("--ring-size and --ring-files are -w's ring: add -w FILE")
        return None
    try:
        return RingSpec.parse(args.write, args.ring_size, args.ring_files)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def streamed_input(args: argparse.Namespace, files: tuple[str, ...]) -> bool:
    """Whether the reports are streamed as they come (rows flushed one at a time): stdin
    alone, or a file followed as it grows (--follow); a live capture always. --duration
    is for these only."""
    streaming = files == ("-",) or bool(args.follow)
    if args.duration is not None and not streaming:
        raise UsageError("--duration stops a capture that is still coming: with -i IFACE, "
                         "'-' (stdin) or --follow FILE")
    return streaming


def deadline(args: argparse.Namespace) -> float | None:
    """--duration as the `time.monotonic()` deadline of the capture's reading
    (AnalyzerOptions.stop_at: no read of stdin or a followed file waits past it)."""
    return None if args.duration is None else time.monotonic() + args.duration


def open_live(args: argparse.Namespace, options: AnalyzerOptions, ring: RingSpec | None
              ) -> tuple[LiveCapture, CaptureAnalysis, RingWriter | None] | str:
    """The capture, its analysis and its -w writer, or the one line that says why it
    cannot start."""
    from tlsprobe.capture.events import CaptureError
    from tlsprobe.capture.live import LiveError
    from tlsprobe.capture.ring import InterfaceInfo, RingWriter
    from tlsprobe.requests.live import LiveRequest
    from tlsprobe.requests.names import CLI
    request = LiveRequest.build(args.interface, bpf=args.bpf, count=args.count,
                                duration=args.duration, buffer_mb=args.buffer_size,
                                names=CLI)
    try:
        capture, analysis = request.open(options)
    except LiveError as exc:
        return str(exc)
    if ring is None:
        return capture, analysis, None
    try:
        writer = RingWriter(ring, [InterfaceInfo(name, lt)
                                   for name, lt in capture.link_types_of()])
    except (CaptureError, OSError) as exc:
        analysis.close()
        capture.close()
        if isinstance(exc, CaptureError):
            return str(exc)  # names the file already
        return f"-w {ring.path}: {os_error_text(exc)}"
    capture.attach(writer)
    return capture, analysis, writer


def close_writer(capture: LiveCapture, writer: RingWriter | None) -> str | None:
    """Close the -w file (its statistics blocks); why writing it failed, or None."""
    if writer is None:
        return None
    from tlsprobe.capture.events import CaptureError
    try:
        writer.close()
    except CaptureError as exc:
        return capture.write_error or str(exc)
    return capture.write_error


class StopSignals:
    """Ctrl-C (SIGINT) and SIGTERM stop the capture: what was captured is analysed to
    the end and summarised (exit 0); a second Ctrl-C interrupts at once (exit 130). Set
    from before the capture opens to after its summary (`installed`): one while it opens
    (a -w FIFO with no reader yet blocks there) interrupts it (exit 130), and one just
    after the "capturing on" line (which scripts wait for) is no longer the default
    SIGTERM that killed the process without its summary or -w file."""

    def __init__(self) -> None:
        self.capture: LiveCapture | None = None
        self.asked = False

    def attach(self, capture: LiveCapture) -> None:
        self.capture = capture

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        capture = self.capture
        if capture is None or self.asked and signum == signal.SIGINT and capture.stopped:
            raise KeyboardInterrupt
        self.asked = True
        capture.stop()

    @contextmanager
    def installed(self) -> Iterator[None]:
        with _on_stop_signals(self._stop):
            yield


@contextmanager
def interrupted_by_signals(active: bool, streaming: bool = True) -> Iterator[Reading]:
    """Ctrl-C (SIGINT) and SIGTERM stop the reading of the capture being read
    (`Reading.target`) as a --duration would: the connections still open are reported,
    the summary follows (for a capture still coming, `streaming`: stdin, --follow, exit 0,
    also where the process was started with SIGINT ignored, a background job of a shell
    without job control, where Python leaves it ignored; for capture FILEs the others are
    not read, exit 130, and an ignored SIGINT stays ignored). Before a capture is open (its header has not
    come) they raise KeyboardInterrupt, which the caller makes that capture's record; a
    second Ctrl-C interrupts at once (exit 130). Once the caller says the reading `ended`,
    until the block's end (the summary), there is nothing left to stop: a signal is let
    pass (the default SIGTERM killed the process in the middle of its summary)."""
    reading = Reading()
    if not active:
        yield reading
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        again = reading.asked and signum == signal.SIGINT
        if reading.ended and not again:
            reading.asked = True
            return
        if reading.target is not None and not again:
            reading.asked = True
            reading.signal = signal.Signals(signum)
            reading.target.stop()
            return
        raise KeyboardInterrupt

    with _on_stop_signals(interrupt, keep_ignored=not streaming):
        yield reading


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Reading:
    """`interrupted_by_signals`' state: the capture being read (`target`, stopped by a
    signal), whether the reading `ended` (the summary is being written), whether a signal
    came since and which stopped the reading (`signal`)."""

    def __init__(self) -> None:
        self.ended = False
        self.asked = False
        self.target: Stoppable | None = None
        self.signal: signal.Signals | None = None

    def stopped_note(self) -> str | None:
        """The note of a capture whose reading a signal stopped, or None."""
        if self.signal is None:
            return None
        how = "Ctrl-C (SIGINT)" if self.signal == signal.SIGINT else self.signal.name
        return (f"the reading was stopped by {how}: the capture was not read whole (the "
                "connections still open then are reported, as at the end of a cut capture)")


@contextmanager
def _on_stop_signals(handler: Callable[[int, FrameType | None], None],
                     keep_ignored: bool = False) -> Iterator[None]:
    """`handler` for SIGINT and SIGTERM while the block runs (`keep_ignored`: not for
    one the process was started with ignored), the previous handlers after."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, old in previous.items():
        if not (keep_ignored and old == signal.SIG_IGN):
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def summary_line(summary: CaptureSummary, live: LiveCounts | None, seconds: float) -> str:
    """What a live capture read, on stderr at its end: packets, connections, drops."""
    from tlsprobe.report.offline_tables import plural
    dropped = live.dropped if live is not None else "?"
    ifdropped = live.interface_dropped if live is not None else "?"
    return (f"tlsprobe: {shown(summary.file)}: captured {plural(summary.packets, 'packet')} "
            f"in {seconds:.1f} s, {plural(summary.tls_connections, 'TLS connection')} "
            f"({summary.reported} reported); dropped: {dropped} by the kernel or libpcap, "
            f"{ifdropped} by the interface")


def report_start(capture: LiveCapture) -> None:
    """One line on stderr once the interfaces are open and filtered, as tshark's
    "Capturing on ...": what is captured, and that the packets from now on are seen
    (scripts wait for it before starting traffic)."""
    print(f"tlsprobe: capturing on {shown(capture.name)} (filter {shown(repr(capture.bpf))}; "
          "Ctrl-C stops)", file=sys.stderr, flush=True)


__all__ = [
    "Reading",
    "StopSignals",
    "check_live_args",
    "close_writer",
    "deadline",
    "interrupted_by_signals",
    "open_live",
    "report_start",
    "streamed_input",
    "summary_line",
]
