"""`scan --msg FILE`, `--pcap-out FILE`, `--keylog FILE`: every connection of the audit,
labelled with its target, phase and number ("groups TLS 1.3, connection 3"), so that a user
who doubts a verdict can open exactly what was sent and received (issue 13 item 4).

The scheduler records the connections (net/recording.py: a tape per connection, filled by
a RecordingConnector right above TCP, so a STARTTLS preamble is recorded too; `attach`
puts it there); this module adds the options, opens the files before any connection (a
file that cannot be written is a usage error, exit 2, before the audit) and writes each
connection as it ends, so that a long run holds only the connections in flight:
- --msg: per connection a header line `=== TARGET PHASE, connection N ===`, then the same
  trace the probe's --msg prints (the STARTTLS plain-text lines first), then `---`;
- --pcap-out: pcapng, one TCP stream per connection (its real client port), the label as
  the comment of its SYN (capture/pcapng_writer.py);
- --keylog: appended in SSLKEYLOGFILE format, a comment line `# TARGET PHASE, connection N`
  before the secrets of each connection that derived any, written as each handshake ends,
  before its connection is closed, for a capture running beside (the TLS 1.3 connections that read
  the server's encrypted flight, and the active checks' handshakes, TLS 1.2 ones too: the
  driver puts every handshake's secrets on its connection's tape; the audit's other
  connections stop before any key).
The --msg and --pcap-out files are in the order the connections ended, the key log in the
order the handshakes did. A file that fails while the audit runs
is closed and its error reported at the end (exit 2 unless the audit set another code).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Protocol, TextIO

from tlsprobe.errors import UsageError, os_error_text

if TYPE_CHECKING:
    from tlsprobe.capture.pcapng_writer import PcapngWriter
    from tlsprobe.net.recording import Recording, Tape
    from tlsprobe.probes.audit.scheduler import Scheduler
    from tlsprobe.session.flow import Event

OPTIONS = (("msg", "--msg"), ("pcap_out", "--pcap-out"), ("keylog", "--keylog"))


def add_recording_arguments(g: argparse._ArgumentGroup) -> None:
    """The three recording options of `scan`."""
    g.add_argument("--msg", metavar="FILE", help="write every connection of the audit to "
                   "FILE as the probe's --msg trace (s_client -msg style), each under a "
                   "header line naming its phase and number")
    g.add_argument("--pcap-out", metavar="FILE", help="write every connection of the audit "
                   "as a pcapng file (one TCP stream each; its label, e.g. 'groups TLS 1.3, "
                   "connection 3', is the comment of its first packet)")
    g.add_argument("--keylog", metavar="FILE", help="append the secrets of the audit's "
                   "connections to FILE (SSLKEYLOGFILE), each after a '# PHASE, connection "
                   "N' comment line")


def header(tape: Tape) -> str:
    """"127.0.0.1:25 groups TLS 1.3, connection 3"."""
    return f"{tape.target} {tape.label}"


class _File(Protocol):
    """One option's open file: adds a connection, closes (each may raise OSError)."""

    def write(self, tape: Tape) -> None: ...

    def close(self) -> None: ...


class _MsgFile:
    """--msg FILE: the connection's trace under its header line."""

    def __init__(self, path: str) -> None:
        self.out = open(path, "w", encoding="utf-8")   # noqa: SIM115 - closed by close()

    def write(self, tape: Tape) -> None:
        _msg_section(tape, self.out)

    def close(self) -> None:
        self.out.close()


class _PcapFile:
    """--pcap-out FILE: pcapng, one labelled TCP stream per connection."""

    def __init__(self, path: str) -> None:
        from tlsprobe.capture.pcapng_writer import PcapngWriter
        self.out: IO[bytes] = open(path, "wb")   # noqa: SIM115 - closed by close()
        try:
            self.writer = PcapngWriter(self.out)
        except OSError:
            self.out.close()
            raise

    def write(self, tape: Tape) -> None:
        _pcap_connection(tape, self.writer)

    def close(self) -> None:
        self.out.close()


class _KeylogFile:
    """--keylog FILE: the secrets of the connections that derived any, each handshake's as
    its drive ends (before the connection is closed: a capture beside the scan, `tlsprobe
    pcap -i --keylog` or Wireshark, decrypts it), after a comment line naming the
    connection (again when another connection's lines came between)."""

    def __init__(self, path: str) -> None:
        from tlsprobe.engine.keylog import KeyLogWriter
        self.writer = KeyLogWriter(path)
        self.last: Tape | None = None   # the connection the last lines were of

    def secrets(self, tape: Tape, lines: Sequence[str]) -> None:
        named = [] if self.last is tape else [f"# {header(tape)}"]
        self.writer.write_lines([*named, *lines])
        self.last = tape

    def write(self, tape: Tape) -> None:
        pass    # every line was written as it came (`secrets`)

    def close(self) -> None:
        self.writer.close()


_FILES: dict[str, Callable[[str], _File]] = {
    "--msg": _MsgFile, "--pcap-out": _PcapFile, "--keylog": _KeylogFile}


class RecordingFiles:
    """The open files of the options given; `write` (the recording's sink) adds one
    connection to each; `close` returns the first failure as an error line."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.error: str | None = None
        self.paths = {option: getattr(args, name) for name, option in OPTIONS
                      if getattr(args, name, None) is not None}
        self.files: dict[str, _File] = {}     # option -> its open file
        for option, path in self.paths.items():
            try:
                self.files[option] = _FILES[option](path)
            except OSError as exc:
                self.close()
                raise UsageError(f"{option} {path}: {os_error_text(exc)}") from None

    def write(self, tape: Tape) -> None:
        for option, handle in list(self.files.items()):
            try:
                handle.write(tape)
            except OSError as exc:
                self._failed(option, exc)
                self._close(option)

    def secrets(self, tape: Tape, lines: Sequence[str]) -> None:
        """A handshake's new key log lines, written at once (--keylog)."""
        handle = self.files.get("--keylog")
        if isinstance(handle, _KeylogFile):
            try:
                handle.secrets(tape, lines)
            except OSError as exc:
                self._failed("--keylog", exc)
                self._close("--keylog")

    def close(self) -> str | None:
        for option in list(self.files):
            self._close(option)
        return self.error

    def _close(self, option: str) -> None:
        handle = self.files.pop(option)
        try:
            handle.close()
        except OSError as exc:
            self._failed(option, exc)

    def _failed(self, option: str, exc: OSError) -> None:
        if self.error is None:
            self.error = f"{option} {self.paths[option]}: {os_error_text(exc)}"


def recording_for(args: argparse.Namespace) -> Recording | None:
    """A Recording when any of the options is given, its files checked (a missing folder or
    a folder given as the file: a usage error) but not yet open (`open_files`)."""
    given = False
    for name, option in OPTIONS:
        path = getattr(args, name, None)
        if path is None:
            continue
        given = True
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: directory {folder} does not exist")
        if os.path.isdir(path):
            raise UsageError(f"{option} {path}: is a directory")
    if not given:
        return None
    from tlsprobe.net.recording import Recording
    return Recording(lambda tape: None, trace=args.msg is not None)


def open_files(args: argparse.Namespace, recording: Recording | None) -> RecordingFiles | None:
    """Open the files (a usage error when one cannot be, before any connection) and make
    them the recording's sink."""
    if recording is None:
        return None
    files = RecordingFiles(args)
    recording.sink = files.write
    recording.secrets = files.secrets
    return files


def attach(scheduler: Scheduler, recording: Recording | None) -> Recording | None:
    """Record every connection `scheduler` opens: a RecordingConnector right above TCP
    (under the STARTTLS connector, so that the preamble is recorded too). Transports that are
    not TCP (QUIC) cannot be recorded this way: a usage error."""
    if recording is None:
        return None
    from tlsprobe.net.recording import RecordingConnector
    from tlsprobe.net.starttls_connect import AsyncStartTlsConnector
    from tlsprobe.net.tcp_async import TcpConnector
    connector = scheduler.connector
    if isinstance(connector, AsyncStartTlsConnector) and \
            isinstance(connector.inner, TcpConnector):
        connector.inner = RecordingConnector(connector.inner, recording)
    elif isinstance(connector, TcpConnector):
        scheduler.connector = RecordingConnector(connector, recording)
    else:
        raise UsageError("--msg FILE, --pcap-out and --keylog record the audit's TCP "
                         "connections (plain or --starttls) only")
    scheduler.recording = recording
    return recording


#: a line end, not shown after a plain-text segment
_EOL = b"\r\n"


def _msg_section(tape: Tape, out: TextIO) -> None:
    from tlsprobe.escaping import escaped_bytes
    from tlsprobe.report.escape import shown
    from tlsprobe.report.trace import TraceFormatter
    lines = [f"=== {shown(header(tape))} ==="]
    if tape.preamble is not None and tape.preamble.lines:
        from tlsprobe.report.starttls import preamble_lines
        lines += preamble_lines(tape.preamble)
    elif tape.preamble is not None:     # nothing understood (another protocol): the bytes
        lines += [f"{'>>>' if seg.from_client else '<<<'} plain text ({tape.preamble.protocol}"
                  f", before TLS, not understood): "
                  f"{escaped_bytes(seg.data.rstrip(_EOL))}"
                  for seg in tape.segments]
    events = tape.events
    if not events and tape.segments and tape.preamble is None:
        events = _read_back(tape)
    lines += TraceFormatter().lines(events)
    out.write("\n".join(lines) + "\n---\n")


def _read_back(tape: Tape) -> list[Event]:
    """The trace events of a connection an active check drove itself (the scheduler's
    `converse`: no engine events of ours), read from its bytes by the session Flow as the
    pcap reader would: the plain-text records in full, encrypted ones as such."""
    from tlsprobe.session.flow import CLIENT, SERVER, Flow
    flow = Flow(annotate=True)
    return [event for seg in tape.segments
            for event in flow.feed(CLIENT if seg.from_client else SERVER, seg.data)]


def _pcap_connection(tape: Tape, writer: PcapngWriter) -> None:
    if tape.client is None or tape.server is None:
        return
    from tlsprobe.capture.pcapng_writer import LabelledConnection
    writer.add(LabelledConnection(header(tape), tape.client, tape.server, tuple(tape.segments),
                                  tape.started, max(tape.ended, tape.started)))


__all__ = ["RecordingFiles", "add_recording_arguments", "attach", "header", "open_files",
           "recording_for"]
