"""The capture half of the public Python API (re-exported by `tlsprobe.api`): `read_capture`
reads a capture file as `tlsprobe pcap --jsonl` does, `capture_live` an interface as
`tlsprobe pcap -i IFACE --jsonl` does, each through a `CaptureReader` that yields one
`ConnectionReport` per TLS or QUIC connection. A capture that cannot be read at all raises
an `UnreadableInput` (kind "bad_input"), a bad argument a `UsageError`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Self

from tlsprobe.apiargs import checked
from tlsprobe.errors import UnreadableInput
from tlsprobe.model.capture import CaptureSummary, ConnectionReport

if TYPE_CHECKING:
    from tlsprobe.capture.live import LiveCapture
    from tlsprobe.offline.analyzer import CaptureAnalysis

__all__ = ["CaptureReader", "LiveCaptureReader", "capture_live", "read_capture"]


class CaptureReader:
    """The TLS and QUIC connections of one capture, as `ConnectionReport`s in the order
    they end (as `tlsprobe pcap --jsonl` streams them). `summary` (a `CaptureSummary`:
    packets, warnings about damage, notes) is set once the iteration has ended. Use it as a
    context manager, or iterate to the end, so that the file is closed."""

    def __init__(self, analysis: CaptureAnalysis) -> None:
        self._analysis = analysis
        self._reported = 0

    def __iter__(self) -> Iterator[ConnectionReport]:
        for analyzed in self._analysis:
            if isinstance(analyzed.report, ConnectionReport):
                self._reported += 1
                yield analyzed.report

    @property
    def summary(self) -> CaptureSummary | None:
        """What was read from the capture (`reported`: the connections yielded); None until
        the iteration has ended."""
        summary = self._analysis.summary
        return None if summary is None else replace(summary, reported=self._reported)

    def close(self) -> None:
        """Release the file and whatever the analysis still holds."""
        self._analysis.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@checked
def read_capture(path: str | os.PathLike[str], keylog: str | os.PathLike[str] | None = None,
                 *, embedded_keys: bool = True, quic: bool = True) -> CaptureReader:
    """Read a pcap or pcapng capture (gzip too; `path` a str or a `pathlib.Path`) as
    `tlsprobe pcap` does: a `CaptureReader` yielding one `ConnectionReport` per TLS or QUIC
    connection.

    `keylog` is an SSLKEYLOGFILE to decrypt TLS 1.3 handshakes and TLS 1.2 records with
    (keys embedded in a pcapng are used too unless `embedded_keys` is False); `quic` reads
    QUIC Initial packets. Raises a `TlsprobeError` of kind "usage" for a key log that cannot
    be read and an `UnreadableInput` (kind "bad_input", exit 2 as the command line's) when
    nothing can be read from the capture (missing, not a capture); damage later on ends the iteration and is said in `summary.warnings`."""
    from tlsprobe.requests.capture import CaptureRequest, open_capture
    path = os.fspath(path)
    if os.path.isdir(path):     # one capture file here; `tlsprobe pcap DIR` reads a folder
        raise UnreadableInput(f"{path}: a directory: read_capture reads one capture file "
                              "(call it for each capture under it)")
    request = CaptureRequest.build([path], keylog=None if keylog is None else
                                   os.fspath(keylog), embedded_keys=embedded_keys, quic=quic)
    analysis, error = open_capture(path, path, request.options())
    if analysis is None:
        raise UnreadableInput(f"{path}: {error}")
    return CaptureReader(analysis)


class LiveCaptureReader(CaptureReader):
    """The connections of a live capture (`capture_live`), each `ConnectionReport` as
    soon as its handshake is decided, until `count` connections, `duration` seconds or
    `stop()`; then `summary` (its `capture["live"]`: packets received and dropped)."""

    def __init__(self, capture: LiveCapture, analysis: CaptureAnalysis,
                 count: int | None) -> None:
        super().__init__(analysis)
        self._capture = capture
        self._count = count

    def __iter__(self) -> Iterator[ConnectionReport]:
        try:
            for report in super().__iter__():
                yield report
                if self._reported == self._count:
                    break
        finally:
            self.close()

    def stop(self) -> None:
        """End the capture: the iteration ends within a fraction of a second (the
        connections still open are reported first). Safe from another thread or a signal
        handler."""
        self._capture.stop()

    def close(self) -> None:
        """Release the interfaces and whatever the analysis still holds."""
        self._analysis.close()
        self._capture.close()


@checked
def capture_live(interface: str | Sequence[str], *, bpf: str | None = None,
                 count: int | None = None, duration: float | None = None,
                 keylog: str | os.PathLike[str] | None = None,
                 quic: bool = True, buffer_mb: float | None = None) -> LiveCaptureReader:
    """Capture live on `interface` (a name, `"any"`, or several names) as
    `tlsprobe pcap -i IFACE --jsonl` does: a `LiveCaptureReader` yielding one
    `ConnectionReport` per TLS or QUIC connection as soon as its handshake is decided.

    `bpf` is the capture filter (tcpdump's syntax; default "tcp or udp"); the capture ends
    after `count` connections, after `duration` seconds, or on the reader's `stop()`.
    `keylog` is an SSLKEYLOGFILE to decrypt with, read as it grows (a browser's, say);
    `buffer_mb` the kernel's capture buffer per interface (MiB, default 32).
    Raises a `UsageError` for a bad value
    and an `UnreadableInput` (kind "bad_input", exit 2 as the command line's) when the
    capture cannot start: no such interface (the message lists those there are), no
    permission (it names the capabilities needed), an invalid filter (libpcap's words)."""
    from tlsprobe.capture.live import LiveError
    from tlsprobe.requests.capture import CaptureRequest
    from tlsprobe.requests.live import LiveRequest
    live = LiveRequest.build(interface, bpf=bpf, count=count, duration=duration,
                             buffer_mb=buffer_mb)
    request = CaptureRequest.build([], keylog=None if keylog is None else os.fspath(keylog),
                                   quic=quic, live=True)
    try:
        capture, analysis = live.open(request.options())
    except LiveError as exc:
        raise UnreadableInput(str(exc)) from None
    return LiveCaptureReader(capture, analysis, count)
