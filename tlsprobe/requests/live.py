"""`LiveRequest`: a live capture as asked (`tlsprobe pcap -i IFACE ...` or the API's
`capture_live(...)`), checked once: the interfaces, the BPF filter, the stop conditions
(connections reported, seconds), and its analysis, which reports each connection as soon
as its handshake is decided (`AnalyzerOptions.report_when_decided`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.names import API, Names

if TYPE_CHECKING:
    from tlsprobe.capture.live import LiveCapture
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis

DEFAULT_FILTER = "tcp or udp"  # TLS on any port, STARTTLS, QUIC and DTLS (capture.live's)
BUFFER_MB = 32.0       # the kernel's ring per interface (capture.live.BUFFER_BYTES)
MAX_BUFFER_MB = 4096.0
MAX_DURATION = 30 * 86400.0


def check_count(count: int | None, names: Names) -> None:
    """-c N: a positive number of connections."""
    if count is not None and (isinstance(count, bool) or count < 1):
        raise UsageError(f"{names('count')} must be a positive number of connections "
                         f"(got {count})")


def check_duration(duration: float | None, names: Names) -> None:
    """--duration S: a positive number of seconds, at most 30 days (a longer one overflows
    the clock's timestamps; without --duration a capture runs until it is stopped)."""
    if duration is not None and not (0 < duration <= MAX_DURATION):
        raise UsageError(f"{names('duration')} must be a number of seconds above 0 and at "
                         f"most {MAX_DURATION:.0f} (30 days; without it the capture runs until "
                         f"Ctrl-C) (got {duration:.15g})")


@dataclass(frozen=True)
class LiveRequest:
    """Interfaces to capture on (`any`: all, where the platform has it), the BPF filter,
    and when to stop: after `count` connections reported, after `duration` seconds, or
    when stopped (Ctrl-C)."""

    interfaces: tuple[str, ...]
    bpf: str = DEFAULT_FILTER
    count: int | None = None
    duration: float | None = None
    buffer_mb: float = BUFFER_MB

    @classmethod
    def build(cls, interfaces: str | Sequence[str], *, bpf: str | None = None,
              count: int | None = None, duration: float | None = None,
              buffer_mb: float | None = None, names: Names = API) -> LiveRequest:
        """The request, or a UsageError naming the value at fault."""
        ifaces = (interfaces,) if isinstance(interfaces, str) else tuple(interfaces)
        if not ifaces or any(not i or not i.strip() for i in ifaces):
            raise UsageError(f"{names('interface')} needs an interface name (e.g. lo, "
                             "eth0, any)")
        if any("\x00" in i for i in ifaces) or bpf is not None and "\x00" in bpf:
            raise UsageError(f"{names('interface')} and {names('bpf')} cannot hold a NUL "
                             "character")
        if "any" in ifaces and len(set(ifaces)) > 1:
            others = ", ".join(dict.fromkeys(i for i in ifaces if i != "any"))
            raise UsageError(f"{names('interface')} any already captures every interface: "
                             f"give it alone, or the interfaces without it (with {others} "
                             "each packet would be read twice, each connection reported "
                             "twice)")
        if bpf is not None and not bpf.strip():
            raise UsageError(f"{names('bpf')} is empty: give a capture filter "
                             f"(e.g. 'tcp port 443') or leave it out ({DEFAULT_FILTER!r})")
        check_count(count, names)
        check_duration(duration, names)
        if buffer_mb is not None and not (1 / 1024 <= buffer_mb <= MAX_BUFFER_MB):
            raise UsageError(f"{names('buffer_mb')} must be between 0.001 and "
                             f"{MAX_BUFFER_MB} MiB (got {buffer_mb:.15g})")
        return cls(ifaces, bpf or DEFAULT_FILTER, count, duration,
                   BUFFER_MB if buffer_mb is None else buffer_mb)

    def open(self, options: AnalyzerOptions) -> tuple[LiveCapture, CaptureAnalysis]:
        """Start capturing: the capture (its `stop()` ends it) and its analysis, reporting
        each connection when its handshake is decided. Raises capture.live.LiveError
        (one line, its `kind`) when the capture cannot start."""
        from tlsprobe.capture.live import LiveCapture
        from tlsprobe.offline.analyzer import CaptureAnalysis
        stop_at = None if self.duration is None else time.monotonic() + self.duration
        capture = LiveCapture(self.interfaces, self.bpf, stop_at=stop_at,
                              buffer_bytes=round(self.buffer_mb * (1 << 20)))
        try:
            analysis = CaptureAnalysis(capture, replace(options, report_when_decided=True,
                                                        pipe_min_bytes=None))
        except BaseException:
            capture.close()
            raise
        return capture, analysis


__all__ = ["DEFAULT_FILTER", "MAX_DURATION", "LiveRequest", "check_count", "check_duration"]
