"""The loop over one capture: stream events in, one report per TLS connection out.

`analyze(source, options)` returns a `CaptureAnalysis`; iterating it yields an
`Analyzed(report, trace)` as each connection ends (FIN/RST, eviction, end of capture), so
reports can be streamed and memory stays flat: a connection's state is dropped as soon as
it is reported. QUIC, DTLS and OpenVPN handshakes come from UDP datagrams (offline.udp).
Keys come from `options.keylog` and from the capture's own Decryption Secrets Blocks; with
keys or a trace the Flow reader is used, otherwise the fast one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from types import GeneratorType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from tlsprobe.capture import (
    SECRETS_TLS_KEYLOG,
    CaptureStream,
    ConnKey,
    Datagram,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    StreamSkipped,
    iter_stream_events,
)
from tlsprobe.capture.pipe import PipedStream, can_pipe
from tlsprobe.capture.streaming import FinishedFile, open_finished, streaming_source
from tlsprobe.model.capture import CaptureSummary
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.connection import Connection
from tlsprobe.offline.datagram import Analyzed
from tlsprobe.offline.facts import Facts
from tlsprobe.offline.fast import FastReader
from tlsprobe.offline.notes import eviction_note, keylog_limits_note, keys_note
from tlsprobe.offline.udp import UdpHandshakes

if TYPE_CHECKING:
    from tlsprobe.capture.live import LiveCapture
    from tlsprobe.engine.keylog import KeyLog
    from tlsprobe.offline.datagram_trace import MessageTrace
    from tlsprobe.offline.flowreader import FlowReader, FormatterFactory

MAX_GAP_NOTES: Final = 256  # connections whose lost handshake messages are remembered for notes


def flow_reader_needed(keylog: KeyLog, data: bytes,
                       sessions: dict[bytes, bytes] | None = None) -> bool:
    """Whether a connection whose first bytes are `data` may be decrypted with `keylog`
    (it is then read by the Flow reader, else by the fast one). Only a connection that
    starts with a ClientHello record whose client random the log has no keys for is
    known to need none: keys are looked up by that random (offline.decrypt), unless the
    log holds TLS 1.2 master secrets by session id (known at the ServerHello) or is still
    being written (its keys may come later), or the hello offers a session (id or ticket)
    of `sessions`, the master secrets of the connections decrypted so far. A capture's
    embedded key log thus costs only the connections it has keys for."""
    if keylog.grows or keylog.session_ids or len(data) < 43 or data[0] != 22 or \
            data[1] != 3 or data[5] != 1:
        return True
    if bytes(data[11:43]) in keylog.sessions:
        return True
    if not sessions:
        return False
    from tlsprobe.wire.summary import offered_session
    session_id, ticket = offered_session(bytes(data[5:5 + ((data[3] << 8) | data[4])]))
    return bool(ticket) and b"t" + ticket in sessions or \
        bool(session_id) and b"i" + session_id in sessions


@dataclass
class AnalyzerOptions:
    """`trace`: keep the `--msg` lines of each connection; `keylog`: keys for decryption;
    `embedded_keys`: also use keys from pcapng Decryption Secrets Blocks; `quic`: read
    QUIC Initial packets; `max_trace_records`: records traced (and, with keys, decrypted)
    per connection before the rest is only counted; `trace_formatter`: makes the object
    that turns a connection's events into trace lines (report.trace.TraceFormatter, passed
    in by the caller: the renderer is not this layer's), needed with `trace`;
    `brief`: connections come as `model.capture.BriefReport` (what the table and the
    statistics show) instead of whole reports; `json_text`: as `model.capture.ReportText`
    (their report's JSON text and id: what --json/--jsonl write); `pipe_min_bytes`: a
    capture file of at least this size is read by a second process (capture.pipe: the
    same results in 10-30 % less time on two free CPUs, for more CPU time in all),
    where the system can (`can_pipe`); None: never. `follow`: the capture file is still
    being written: read it as it grows, as `tail -f` (capture.streaming.FollowedFile);
    `stop_at`: a `time.monotonic()` deadline for a capture still being written (stdin, a
    pipe, `follow`): no read waits past it, and the capture ends there as if it ended.
    `report_when_decided`: a TCP
    connection is reported as soon as its handshake is decided (both directions only
    counted from then on: what the report says can no longer change), not when it
    closes, and not again then (live capture, stdin, --follow: rows as handshakes end).
    `live_gap_note`: a connection with capture gaps while a live capture had dropped
    packets says so in its report."""

    trace: bool = False
    keylog: KeyLog | None = None
    embedded_keys: bool = True
    quic: bool = True
    max_trace_records: int = 2000
    hex_limit: int | None = None
    trace_formatter: FormatterFactory | None = None
    brief: bool = False
    json_text: bool = False
    pipe_min_bytes: int | None = None
    follow: bool = False
    stop_at: float | None = None
    report_when_decided: bool = False

    def __post_init__(self) -> None:
        if self.trace and self.trace_formatter is None:
            raise ValueError("a trace needs a trace_formatter (e.g. report.trace."
                             "TraceFormatter)")


@dataclass
class Progress:
    """Called now and then with (bytes read, total bytes or None, packets)."""

    callback: Callable[[int, int | None, int], None]
    every: int = 4096


class _Reports:
    """One iteration's reports. Dropped before its end (a caller's `break`), it closes the
    generator so that its `finally` releases the analysis' state: a generator compiled by
    mypyc (the optional fast path) is freed without running it."""

    __slots__ = ("_gen",)

    def __init__(self, gen: Generator[Analyzed, None, None]) -> None:
        self._gen = gen

    def __iter__(self) -> Iterator[Analyzed]:
        return self

    def __next__(self) -> Analyzed:
        return next(self._gen)

    def __del__(self) -> None:
        self._gen.close()


def _piped(source: str | LiveCapture, min_bytes: int | None) -> bool:
    """Whether to read `source` in a second process (AnalyzerOptions.pipe_min_bytes)."""
    if min_bytes is None or not isinstance(source, str) or source == "-" or not can_pipe():
        return False
    try:
        info = os.stat(source)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size >= min_bytes


class CaptureAnalysis:
    """Iterable of `Analyzed` for one capture; `summary` is complete once exhausted or
    closed. Its memo tables and memory budget (`caches`) are its own. A caller that may
    stop early uses it as a context manager (or calls `close`): the open connections,
    their partial messages and the capture file are released then, whatever the state of
    the iteration."""

    def __init__(self, source: str | LiveCapture, options: AnalyzerOptions | None = None,
                 progress: Progress | None = None, display_name: str | None = None) -> None:
        self.options = options or AnalyzerOptions()
        self.name = display_name or (source if isinstance(source, str) else source.name)
        self._progress = progress
        self._counter: FinishedFile | None = None   # the progress bar's count
        self._total: int | None = None
        self._streaming = streaming_source(source, self.options.follow,
                                           self.options.stop_at) \
            if isinstance(source, str) else None
        #: a capture FILE, opened here so that `stop` can end its reading
        self._file = open_finished(source) \
            if isinstance(source, str) and self._streaming is None else None
        if progress is not None and isinstance(self._file, FinishedFile):
            self._counter = self._file
            try:
                self._total = os.fstat(self._file.fileno()).st_size
            except OSError:
                self._total = None
        try:
            stream = iter_stream_events(self._streaming or self._file or source,
                                        udp=self.options.quic)
        except BaseException:
            if self._file is not None:
                self._file.close()
            if self._streaming is not None:
                self._streaming.close()
            raise
        self.stream: CaptureStream | PipedStream = stream
        if self._streaming is None and _piped(source, self.options.pipe_min_bytes):
            try:
                self.stream = PipedStream(stream)
                self.stream.plain_data = True  # its data events read by position below
            except OSError:
                pass  # no second process to be had (fork failed): this one reads
            except BaseException:
                stream.close()
                if self._file is not None:
                    self._file.close()
                raise
        if self.stream is stream:  # its data events too read by position below
            stream.plain_data = True
        self.keylog: KeyLog | None = self.options.keylog
        self.connections = 0
        self.tls_connections = 0
        #: (connection id, note): handshake messages lost in capture gaps
        self._gap_warnings: list[tuple[int, str]] = []
        self._secrets_notes: list[str] = []   # embedded key logs of which nothing is usable
        self.keys_matched = 0  # TLS connections the key log had secrets for
        #: why matched keys were not used: (suite name or "", reason) -> connections
        self.undecrypted: dict[tuple[str, str], int] = {}
        self.summary: CaptureSummary | None = None
        self.caches = AnalysisCaches()
        #: open connections; those opened without payload yet (most of a SYN scan): only
        #: their StreamOpen is kept, the readers are built on the first bytes
        self._conns: dict[int, Connection] = {}
        self._opened: dict[int, StreamOpen] = {}
        #: connections reported when their handshake was decided, until their close
        self._decided: set[int] = set()
        self._released = False
        self._udp = UdpHandshakes(
            self.name, self.caches, self.options.brief, self._logged,
            self._message_trace if self.options.trace and self.options.trace_formatter
            else None)

    # -- readers --------------------------------------------------------------------------
    def _new(self, key: ConnKey, ts: float, frame: int, data: bytes = b"") -> Connection:
        """A connection's readers, built on its first bytes (`data`; b"" for a gap): the
        Flow reader for a trace and for the connections the key log may have keys for,
        the fast one otherwise (both read a connection without keys the same way:
        tests/offline/test_reader_agreement.py)."""
        facts = Facts(self.caches)
        opts = self.options
        if opts.trace or self.keylog is not None and flow_reader_needed(
                self.keylog, data, self.caches.sessions):
            from tlsprobe.offline.flowreader import FlowReader
            formatter = opts.trace_formatter(hex_limit=opts.hex_limit) \
                if opts.trace and opts.trace_formatter is not None else None
            reader: FlowReader | FastReader = FlowReader(
                facts, formatter=formatter, keylog=self.keylog,
                max_records=opts.max_trace_records)
        else:
            reader = FastReader(facts)
        self.connections += 1
        return Connection(key, ts, frame, reader, facts)

    def _secrets(self, ev: Secrets) -> None:
        if ev.secrets_type != SECRETS_TLS_KEYLOG or not self.options.embedded_keys:
            return
        from tlsprobe.engine.keylog import KeyLog, parse_keylog
        embedded = parse_keylog(ev.data.decode("ascii", "replace"))
        if not embedded.usable and len(self._secrets_notes) < MAX_GAP_NOTES:
            bad = f" ({embedded.bad_lines} malformed)" if embedded.bad_lines else ""
            self._secrets_notes.append(
                "keys embedded in the capture (Decryption Secrets Block at file offset "
                f"{ev.offset}): 0 usable lines{bad}")
        if self.keylog is None:
            self.keylog = embedded
        else:
            merged = KeyLog(dict(self.keylog.sessions), self.keylog.bad_lines,
                            self.keylog.skipped_lines, self.keylog.dropped,
                            {**self.keylog.session_ids, **embedded.session_ids},
                            self.keylog.source, self.keylog.follower, self.keylog.cut,
                            self.keylog.forgotten)
            for random, secrets in embedded.sessions.items():
                merged.sessions.setdefault(random, {}).update(secrets)
            self.keylog = merged

    def _finish(self, conn: Connection, reason: str | None) -> Analyzed | None:
        reader = conn.reader
        reader.release()
        if not conn.is_tls:
            return None
        self.tls_connections += 1
        decryptor = reader.decryptor
        if decryptor is not None and decryptor.matched:
            self.keys_matched += 1
            if decryptor.unsupported is not None:
                why = decryptor.unsupported
                self.undecrypted[why] = self.undecrypted.get(why, 0) + 1
        opts = self.options
        if conn.gap_bytes and self.stream.stats.live is not None:
            self._dropped_note(conn)
        report = conn.brief() if opts.brief else conn.json_text(self.name, reason) \
            if opts.json_text else conn.report(self.name, reason)
        if conn.facts.handshake_gap[1] and len(self._gap_warnings) < MAX_GAP_NOTES:
            missing = conn.facts.missing_server_key_exchange()
            if missing is not None:
                self._gap_warnings.append((report.id, f"connection #{report.id}: {missing}"))
        return tuple.__new__(Analyzed, (report, reader.trace_lines()))  # Analyzed(...)

    # -- the loop ------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Analyzed]:
        gen = self._reports()
        # a Python generator runs its `finally` when freed: no wrapper (no call per report)
        return gen if type(gen) is GeneratorType else _Reports(gen)

    def _reports(self) -> Generator[Analyzed, None, None]:
        conns = self._conns
        opened = self._opened
        stream = self.stream
        # The hot loop: events told apart by type() (isinstance on every event, with a call
        # per open, cost about 3 % of `tlsprobe pcap`'s CPU), data, opens and counts inline.
        events: Iterator[Any] = iter(stream)
        ignore = stream.ignore
        progress = self._progress
        every = progress.every if progress is not None else 0
        decided, early = self._decided, self.options.report_when_decided
        tick = 0
        # the event types as locals, and the fields used as indexes declared: compiled, a
        # module's imported name is a dict lookup per use, an undeclared index a generic call
        data_t, close_t, open_t, skipped_t = StreamData, StreamClose, StreamOpen, StreamSkipped
        d: int
        size: int
        gaps: int
        frame: int
        try:
            for ev in events:
                t = type(ev)
                if t is data_t or t is tuple:  # a tuple: PipedStream.plain_data,
                    key, d, data, ts, frame = ev   # StreamData's fields, in their order,
                    cid = key if t is tuple else key[0]  # the id in the key's place; key.id
                    conn = conns.get(cid)
                    if conn is None:
                        if cid in decided:
                            continue  # reported; queued before it was only counted
                        if t is tuple:
                            key = stream.key_of(cid)
                        okey, ots, oframe = opened.pop(cid, (key, ts, frame))
                        conn = conns[cid] = self._new(okey, ots, oframe, data)
                    conn.nbytes[d] += len(data)
                    conn.last_ts = ts
                    conn.last_frame = frame
                    half = conn.halves[d]
                    if half.counting:
                        continue
                    reader = conn.reader
                    reader.feed(half, data, ts, frame)
                    if reader.swapped:
                        new = stream.swap_direction(cid)
                        conn.swapped(new if new is not None else key.swapped())
                    if conn.halves[0].counting and conn.halves[1].counting:
                        ignore(cid)  # nothing more to read: the capture only counts
                        if early:
                            done = self._decide(cid)
                            if done is not None:
                                yield done
                    if progress is not None:
                        tick += 1
                        if tick >= every:
                            tick = 0
                            self._tick()
                elif t is close_t:
                    done = self._close(ev)
                    if done is not None:
                        yield done
                elif t is open_t:
                    cid = ev[0][0]  # (ev.conn.id: two generic lookups fewer)
                    if cid not in conns:
                        opened[cid] = ev  # built when its first bytes come
                elif t is skipped_t:   # an ignored connection's count: many
                    key, d, size, gaps, ts, frame = ev  # (at once, as a close's)
                    conn = conns.get(key[0])
                    if conn is not None:  # (Connection.skipped, inline)
                        conn.nbytes[d] += size
                        conn.gap_bytes += gaps
                        if size and frame >= conn.last_frame:
                            conn.last_frame, conn.last_ts = frame, ts
                elif t is Datagram:
                    for done in self._udp.datagram(ev):
                        self.tls_connections += 1
                        yield done
                else:
                    self._other(ev)
            yield from self._end()
        finally:
            self.close()

    def _dropped_note(self, conn: Connection) -> None:
        """A live connection with gaps while the capture had dropped packets: the gaps may
        be those drops, not losses on the network (said in its report)."""
        dropped = self.stream.stats.dropped()
        if dropped:
            conn.facts.problem(f"{dropped} packets were dropped by the live capture so far: "
                               "this connection's gaps may be those drops")

    def _close(self, ev: StreamClose) -> Analyzed | None:
        """A connection's end: its report (None: no TLS, or no payload)."""
        # unpacked at once: each field of a NamedTuple is a generic lookup compiled
        key, reason, ts, frame = ev
        cid = key[0]  # key.id
        conn = self._conns.pop(cid, None)
        if conn is None:
            if self._decided:
                self._decided.discard(cid)  # reported already
            if self._opened.pop(cid, None) is not None:
                self.connections += 1  # no payload: nothing was built for it
            return None
        if reason == "fin" or reason == "rst":
            conn.last_ts = max(conn.last_ts, ts)
            conn.last_frame = max(conn.last_frame, frame)
        return self._finish(conn, reason)

    def _decide(self, cid: int) -> Analyzed | None:
        """`report_when_decided`: the report of a connection whose handshake is decided,
        made now; its later counts and its close are not reported."""
        conn = self._conns.pop(cid)
        self._decided.add(cid)
        return self._finish(conn, None)

    def _other(self, ev: StreamGap | Secrets) -> None:
        """The events other than data, opens, counts, ends and datagrams."""
        conns = self._conns
        if isinstance(ev, StreamGap):
            conn = conns.get(ev.conn.id)
            if conn is None and ev.conn.id in self._opened:
                conn = conns[ev.conn.id] = self._new(*self._opened.pop(ev.conn.id))
            if conn is not None:
                conn.gap(ev.direction, ev.size, ev.ts, ev.frame)
        else:
            self._secrets(ev)

    def _end(self) -> Iterator[Analyzed]:
        """The end of the capture: what is still open."""
        self.connections += len(self._opened)
        self._opened.clear()
        conns = self._conns
        while conns:  # the capture layer closes all; just in case
            done = self._finish(conns.pop(next(iter(conns))), "end")
            if done is not None:
                yield done
        for done in self._udp.finish():
            self.tls_connections += 1
            yield done

    def stop(self) -> None:
        """End the reading of the capture (stdin, --follow, a FILE) as a deadline would:
        the connections still open are then reported, as at the end of a cut capture, and
        the iteration ends. Safe in a signal handler (Ctrl-C, SIGTERM):
        it only tells the input (capture/streaming.py; a capture FILE too, also when read
        by a second process). No effect on a live capture (LiveCapture.stop)."""
        source = self._streaming or self._file
        if source is not None:
            source.stop()

    def close(self) -> None:
        """Release what the analysis holds, also when the caller stops early (a `head`,
        --limit, an exception): per-connection state goes (partial messages stop counting
        against the analysis's budget), the capture is closed and `summary` is made. Runs
        once; the iteration ends with it."""
        if self._released:
            return
        self._released = True
        for conn in self._conns.values():
            conn.reader.release()
        self._conns.clear()
        self._opened.clear()
        self.stream.close()
        if self._streaming is not None:
            self._streaming.close()
        if self._progress is not None:
            self._tick()
        if self._file is not None:
            self._file.close()
        self._summarise()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _tick(self) -> None:
        if self._progress is None:
            return
        done = self._counter.count if self._counter is not None else 0
        self._progress.callback(done, self._total, self.stream.stats.packets)

    def _summarise(self) -> None:
        stats = self.stream.stats
        self.summary = CaptureSummary(
            file=self.name, file_format=stats.file_format, packets=stats.packets,
            connections=self.connections + self._udp.connections(),
            tls_connections=self.tls_connections, reported=0, complete=stats.complete,
            warnings=tuple(str(w) for w in stats.warnings), capture=stats.to_dict(),
            notes=self.notes_for(None), losses=tuple(stats.losses() + self._udp.unwrapped()))

    def notes_for(self, reported: set[int] | None) -> tuple[str, ...]:
        """The summary's notes, those about one connection only for the `reported` ids
        (None: all): a connection the filters left out is not talked about."""
        gaps = [text for conn_id, text in self._gap_warnings
                if reported is None or conn_id in reported][:8]
        evicted = eviction_note(self.stream.stats)
        return tuple(self._keylog_warnings()) + tuple(self._secrets_notes) + tuple(gaps) + \
            evicted

    def _keylog_warnings(self) -> list[str]:
        """A --keylog file that gave nothing: no usable line, or no key for any connection
        (a wrong file or a capture of other sessions) is said, not silently ignored."""
        given = self.options.keylog
        if given is None:
            return []
        name = f"keylog {given.source}" if given.source else "keylog"
        before = given.usable
        if given.follower is not None:   # what it holds now, not at its last lookup
            given.follower.read_more(given)
        limits = keylog_limits_note(name, given)
        if not given.usable:
            bad = f" ({given.bad_lines} malformed)" if given.bad_lines else ""
            return [f"{name}: 0 usable lines{bad}", *limits]
        notes = keys_note(name, self.tls_connections, self.keys_matched, self.undecrypted,
                          *self._udp.keyed())
        if given.usable > before and notes and notes[0].endswith("no key matched any "
                                                                 "connection"):
            notes = [(f"{name}: no key matched a connection while it was read; "
                      f"{given.usable - before} session(s) were logged after (keys written "
                      "once a connection is over come too late for a live capture)")]
        return notes + limits

    def _message_trace(self) -> MessageTrace:
        """A datagram conversation's `--msg` trace (QUIC, DTLS: their handshake messages)."""
        from tlsprobe.offline.datagram_trace import MessageTrace
        opts = self.options
        assert opts.trace_formatter is not None
        return MessageTrace(opts.trace_formatter(hex_limit=opts.hex_limit),
                            opts.max_trace_records)

    def _logged(self, client_random: bytes) -> dict[str, bytes] | None:
        """The secrets the key log (the --keylog file and keys embedded so far) has for
        this client random."""
        return self.keylog.secrets(client_random) if self.keylog is not None else None


def analyze(source: str, options: AnalyzerOptions | None = None,
            progress: Progress | None = None) -> CaptureAnalysis:
    """Open a capture (path or "-") for analysis. Raises CaptureError when nothing can
    be read from it; damage later on ends the iteration with warnings in the summary."""
    return CaptureAnalysis(source, options, progress)


__all__ = ["Analyzed", "AnalyzerOptions", "CaptureAnalysis", "Progress", "analyze", "field"]
