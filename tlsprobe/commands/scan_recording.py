"""`scan --msg FILE`, `--pcap-out FILE`, `--keylog FILE`: every connection of the audit,
labelled with its target, phase and number ("groups TLS 1.3, connection 3"), so that a user
who doubts a verdict can open exactly what was sent and received (issue 13 item 4).

The scheduler records the connections (net/recording.py: a tape per connection, filled by
a RecordingConnector right above TCP, so a STARTTLS preamble is recorded too); this module
adds the options, checks the output files before any connection, and writes the files once
the audit is over, in the order the connections opened:
- --msg: per connection a header line `=== TARGET PHASE, connection N ===`, then the same
  trace the probe's --msg prints (the STARTTLS plain-text lines first), then `---`;
- --pcap-out: pcapng, one TCP stream per connection (its real client port), the label as
  the comment of its SYN (capture/pcapng_writer.py);
- --keylog: appended in SSLKEYLOGFILE format, a comment line `# TARGET PHASE, connection N`
  before the secrets of each connection that derived any (TLS 1.3 connections that read
  the server's encrypted flight; the audit's other connections stop before any key).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, TextIO

from tlsprobe.errors import UsageError

if TYPE_CHECKING:
    from tlsprobe.net.recording import Recording, Tape
    from tlsprobe.net.transport import AsyncConnector

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


def recording_for(args: argparse.Namespace) -> Recording | None:
    """A Recording when any of the options is given (their files checked first: a missing
    folder or a folder given as the file is a usage error, before any connection)."""
    paths: list[tuple[str, str]] = [(option, getattr(args, name)) for name, option in OPTIONS
                                     if getattr(args, name, None) is not None]
    if not paths:
        return None
    for option, path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: directory {folder} does not exist")
        if os.path.isdir(path):
            raise UsageError(f"{option} {path}: is a directory")
    from tlsprobe.net.recording import Recording
    return Recording(trace=args.msg is not None)


def recording_connector(inner: AsyncConnector, recording: Recording | None) -> AsyncConnector:
    """`inner` (TCP) with every connection recorded, or `inner` when nothing is recorded."""
    if recording is None:
        return inner
    from tlsprobe.net.recording import RecordingConnector
    return RecordingConnector(inner, recording)


def header(tape: Tape) -> str:
    return f"{tape.target} {tape.label}"


def write_recording(args: argparse.Namespace, recording: Recording | None) -> str | None:
    """Write the files asked for; the first failure as an error line (None: all written)."""
    if recording is None:
        return None
    tapes = recording.tapes
    writers = ((args.msg, "--msg", _write_msg), (args.pcap_out, "--pcap-out", _write_pcap),
               (args.keylog, "--keylog", _write_keylog))
    for path, option, write in writers:
        if path is None:
            continue
        try:
            write(path, tapes)
        except OSError as exc:
            return f"{option} {path}: {exc.strerror or exc}"
    return None


def _write_msg(path: str, tapes: list[Tape]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for tape in tapes:
            _msg_section(tape, out)


def _msg_section(tape: Tape, out: TextIO) -> None:
    from tlsprobe.report.escape import shown
    from tlsprobe.report.trace import TraceFormatter
    out.write(f"=== {shown(header(tape))} ===\n")
    if tape.preamble is not None and tape.preamble.lines:
        from tlsprobe.report.starttls import preamble_lines
        out.writelines(line + "\n" for line in preamble_lines(tape.preamble))
    elif tape.preamble is not None:     # nothing understood (another protocol): the bytes
        for seg in tape.segments:
            text = shown(seg.data.decode("latin-1").rstrip("\r\n"))
            out.write(f"{'>>>' if seg.from_client else '<<<'} plain text "
                      f"({tape.preamble.protocol}, before TLS, not understood): {text}\n")
    out.writelines(line + "\n" for line in TraceFormatter().lines(tape.events))
    out.write("---\n")


def _write_pcap(path: str, tapes: list[Tape]) -> None:
    from tlsprobe.capture.pcapng_writer import LabelledConnection, write_connections_pcapng
    write_connections_pcapng(path, [
        LabelledConnection(header(t), t.client, t.server, tuple(t.segments), t.started,
                           max(t.ended, t.started))
        for t in tapes if t.client is not None and t.server is not None])


def _write_keylog(path: str, tapes: list[Tape]) -> None:
    from tlsprobe.engine.keylog import KeyLogWriter
    with KeyLogWriter(path) as writer:
        for tape in tapes:
            if tape.keylog_lines:
                writer.write_lines([f"# {header(tape)}", *tape.keylog_lines])


__all__ = ["add_recording_arguments", "recording_connector", "recording_for",
           "write_recording"]
