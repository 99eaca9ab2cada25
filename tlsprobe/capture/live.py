"""Live capture: the packets passing one or more network interfaces, as they pass.

`LiveCapture(interfaces, bpf)` opens each interface with libpcap (through scapy's ctypes
bindings, `scapy.libs.winpcapy`, imported on first use: scapy is the capture edge's
dependency and nothing else imports it), sets the BPF filter in the kernel, and hands its
packets to `CaptureStream` as a container reader does: `packets()` yields the same
`PacketRecord`s as a file's reader, so everything after the container (link layers, TCP
reassembly, the analysis) is the one a file goes through.

Why libpcap and not scapy's own sockets: libpcap reads the kernel's memory-mapped ring
(TPACKET_V3, here with a 32 MiB buffer, packets handed over within 100 ms), compiles
filters for every link type (also `any`, Linux's cooked capture) and counts the packets the
kernel dropped (`pcap_stats`); scapy's `L2ListenSocket` makes one `recv` system call per
packet on a socket with the default receive buffer. docs/INTERNALS.md ("capture/") has the
measured figures.

Stopping: `stop()` (from a signal handler too: it only sets a flag), or `stop_at` (a
`time.monotonic()` deadline); the loop wakes at least every `WAKE` seconds to see them.
`stats.live` holds what the kernel and libpcap say they received and dropped, refreshed
about once a second and at the end.
"""

from __future__ import annotations

import importlib
import io
import select
import socket
import time
from collections.abc import Callable, Generator, Sequence
from types import ModuleType
from typing import Protocol

from tlsprobe.capture.events import CaptureError, CaptureStats, LiveCounts, Secrets
from tlsprobe.capture.pcap import TICK_RECORD, PacketRecord
from tlsprobe.capture.source import OpenedSource

DEFAULT_FILTER = "tcp or udp"
SNAPLEN = 262144
BUFFER_BYTES = 32 << 20   # the kernel ring per interface: bursts wait here, not dropped
WAKE = 0.2                # seconds between looks at stop() / stop_at when idle
TIMEOUT_MS = 100          # the longest a captured packet waits in the kernel's ring
BATCH = 256               # packets read from one interface before looking at the others
DRAIN = 100_000           # packets still read once stopped (those captured before)
_NETMASK_UNKNOWN = 0xFFFFFFFF
_ERRORS = {-5: "no_interface", -8: "permission", -7: "permission", -11: "permission"}

#: what to do when capturing is not permitted (said with the error)
CAPABILITIES = ("capturing needs root or the capabilities CAP_NET_RAW and CAP_NET_ADMIN "
                "(e.g. sudo setcap cap_net_raw,cap_net_admin=eip on the Python "
                "interpreter, or run with sudo)")

class PacketWriter(Protocol):
    """Where the captured packets are also written (-w: capture.ring.RingWriter): each
    packet (interface index, timestamp, bytes, length on the wire), each interface's
    counts when refreshed, and a flush when the capture is idle."""

    def write(self, interface: int, ts: float, data: bytes, orig_len: int = 0, /) -> None: ...

    def counts(self, interface: int, received: int | None = None,
               dropped: int | None = None, /) -> None: ...

    def flush(self) -> None: ...


class LiveError(CaptureError):
    """Live capture cannot start: `kind` is "no_interface", "permission", "filter",
    "library" or "capture" (what the command's message and exit code are chosen by)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def pcap_library() -> ModuleType:
    """scapy's libpcap bindings; LiveError when scapy or libpcap is missing."""
    try:
        return importlib.import_module("scapy.libs.winpcapy")
    except ImportError:
        raise LiveError("live capture needs scapy: pip install scapy", "library") from None
    except OSError:
        raise LiveError("live capture needs libpcap: install it (Debian/Ubuntu: apt-get "
                        "install libpcap0.8; Fedora: dnf install libpcap)", "library") from None


def interface_names() -> list[str]:
    """The interfaces this system has (and `any`, where the platform has it)."""
    try:
        names = [name for _index, name in socket.if_nameindex()]
    except OSError:
        names = []
    return names + ["any"] if hasattr(socket, "AF_PACKET") else names


class _Handle:
    """One opened interface: its pcap_t, selectable descriptor and link type."""

    def __init__(self, lib: ModuleType, name: str, bpf: str, buffer_bytes: int) -> None:
        self.lib = lib
        self.name = name
        import ctypes  # (in functions: importing the capture package stays cheap)
        self.pcap = None
        errbuf = ctypes.create_string_buffer(256)
        pcap = lib.pcap_create(name.encode(), errbuf)
        if not pcap:
            raise LiveError(f"{name}: {errbuf.value.decode(errors='replace')}", "capture")
        self.pcap = pcap
        try:
            self._activate(buffer_bytes)
            self._filter(bpf)
            if lib.pcap_setnonblock(pcap, 1, errbuf) < 0:
                raise LiveError(f"{name}: {errbuf.value.decode(errors='replace')}", "capture")
            self.fd: int = lib.pcap_get_selectable_fd(pcap)
            self.link_type: int = lib.pcap_datalink(pcap)
        except BaseException:
            self.close()
            raise

    def _error(self) -> str:
        return str(self.lib.pcap_geterr(self.pcap).decode(errors="replace"))

    def _activate(self, buffer_bytes: int) -> None:
        lib, pcap = self.lib, self.pcap
        lib.pcap_set_snaplen(pcap, SNAPLEN)
        lib.pcap_set_promisc(pcap, 0)
        # Not immediate mode: on Linux it makes libpcap use TPACKET_V2, whose ring has
        # one fixed slot per packet as large as the snaplen (256 KiB): 32 MiB held 256
        # packets, and a reader not scheduled for a few milliseconds dropped most of a
        # burst. TPACKET_V3 packs packets into blocks and hands a block over when it is
        # full or after the timeout: rows come within TIMEOUT_MS, bursts fill the buffer.
        lib.pcap_set_timeout(pcap, TIMEOUT_MS)
        lib.pcap_set_buffer_size(pcap, buffer_bytes)
        rc = lib.pcap_activate(pcap)
        if rc >= 0:
            return  # > 0: a warning (e.g. promiscuous mode not supported), not an error
        kind = _ERRORS.get(rc, "capture")
        if kind == "no_interface":
            there = ", ".join(interface_names()) or "none found"
            raise LiveError(f"no such interface: {self.name} (interfaces: {there})", kind)
        detail = self._error() or lib.pcap_statustostr(rc).decode(errors="replace")
        if kind == "permission" or "permission" in detail.lower() or \
                "not permitted" in detail.lower():
            raise LiveError(f"{self.name}: no permission to capture ({detail}); "
                            f"{CAPABILITIES}", "permission")
        raise LiveError(f"{self.name}: {detail}", kind)

    def _filter(self, bpf: str) -> None:
        import ctypes
        lib, pcap = self.lib, self.pcap
        program = lib.bpf_program()
        if lib.pcap_compile(pcap, ctypes.byref(program), bpf.encode(), 1,
                            _NETMASK_UNKNOWN) < 0:
            raise LiveError(f"invalid capture filter {bpf!r}: {self._error()}", "filter")
        try:
            if lib.pcap_setfilter(pcap, ctypes.byref(program)) < 0:
                raise LiveError(f"{self.name}: cannot set the filter: {self._error()}",
                                "filter")
        finally:
            lib.pcap_freecode(ctypes.byref(program))

    def counts(self) -> tuple[int, int, int] | None:
        """(received, dropped by the kernel or libpcap, dropped by the interface)."""
        if not self.pcap:
            return None
        import ctypes
        st = self.lib.pcap_stat()
        if self.lib.pcap_stats(self.pcap, ctypes.byref(st)) < 0:
            return None
        return int(st.ps_recv), int(st.ps_drop), int(st.ps_ifdrop)

    def close(self) -> None:
        if self.pcap:
            self.lib.pcap_close(self.pcap)
            self.pcap = None


class LiveCapture:
    """Packets of live interfaces as a container reader's records (see the module's
    docstring). Opening checks everything that can be wrong before the first packet (the
    interfaces, the permission, the filter) and raises one `LiveError`."""

    format_name = "live"

    def __init__(self, interfaces: Sequence[str], bpf: str = DEFAULT_FILTER, *,
                 stop_at: float | None = None, buffer_bytes: int = BUFFER_BYTES) -> None:
        if not interfaces:
            raise LiveError("no interface to capture on", "no_interface")
        self.interfaces = list(dict.fromkeys(interfaces))
        self.bpf = bpf
        self.stop_at = stop_at
        self.writer: PacketWriter | None = None
        #: why writing the packets (-w) failed (disk full): the capture then stopped
        self.write_error: str | None = None
        self.name = ",".join(self.interfaces)
        self.secrets: list[Secrets] = []   # the surface of a file's reader: none live
        self.link_types: dict[int, int] = {}
        self.stats: CaptureStats | None = None
        self.last_ts = 0.0     # the last packet's time (a tick record's)
        self._stopped = False
        self._broken = False   # an interface failed (went down): nothing more is read
        self._counted = 0.0
        lib = pcap_library()
        self._handles: list[_Handle] = []
        try:
            for name in self.interfaces:
                self._handles.append(_Handle(lib, name, bpf, buffer_bytes))
        except BaseException:
            self.close()
            raise

    def link_types_of(self) -> list[tuple[str, int]]:
        """Each interface's name and pcap link type (Ethernet for lo, Linux cooked for
        any), in the order the writer numbers them."""
        return [(h.name, h.link_type) for h in self._handles]

    def attach(self, writer: PacketWriter) -> None:
        """Also write every packet with `writer` (-w), from the next one on."""
        self.writer = writer

    def stop(self) -> None:
        """End the capture at the next wake-up (safe in a signal handler)."""
        self._stopped = True

    @property
    def stopped(self) -> bool:
        """Whether `stop()` was called or the deadline passed."""
        return self._stopped or self.stop_at is not None and time.monotonic() >= self.stop_at

    def open(self, stats: CaptureStats) -> tuple[LiveCapture, OpenedSource]:
        """The reader and its (empty) source for `CaptureStream`, which counts into
        `stats`."""
        self.stats = stats
        stats.file_format = "live"
        self._count()
        empty = io.BytesIO()
        return self, OpenedSource(empty, b"", self.name, False, None, empty)

    def packets(self) -> Generator[PacketRecord, None, None]:
        """The packets as they come, until `stop()` or `stop_at`; then those the kernel
        had captured by then (up to `DRAIN` per interface) are still read."""
        fds = [h.fd for h in self._handles]
        by_fd = {h.fd: (i, h) for i, h in enumerate(self._handles)}
        read = self._reader()
        stats = self.stats if self.stats is not None else CaptureStats()
        try:
            while not self.stopped:
                wait = WAKE if self.stop_at is None else \
                    max(0.0, min(WAKE, self.stop_at - time.monotonic()))
                ready, _, _ = select.select(fds, [], [], wait)
                if not ready:
                    if self.writer is not None:
                        try:
                            self.writer.flush()  # idle: what was written is in the file
                        except CaptureError as exc:
                            self._write_failed(exc)
                    # idle: capture time goes on (a reset connection's linger ends); the
                    # record keeps the last packet's time, now is in microseconds as `orig`
                    yield (stats.packets, self.last_ts, TICK_RECORD, b"", 0, 0,
                           round(time.time() * 1e6))
                for fd in ready:
                    yield from read(*by_fd[fd], BATCH, None)
                if time.monotonic() - self._counted >= 1.0:
                    self._count()
            # what the kernel captured before the stop, its last block handed over
            # within TIMEOUT_MS: read until then (packets after the stop are left)
            until, end = time.time(), time.monotonic() + TIMEOUT_MS / 1000 + 0.05
            left = 0 if self._broken else DRAIN
            while left > 0 and (wait := end - time.monotonic()) > 0:
                ready, _, _ = select.select(fds, [], [], wait)
                for fd in ready:
                    before = stats.packets
                    yield from read(*by_fd[fd], left, until)
                    left -= stats.packets - before
        finally:
            self._count()

    def _reader(self) -> Callable[[int, _Handle, int, float | None],
                                  Generator[PacketRecord, None, None]]:
        """The function that reads up to `limit` packets waiting on one interface (those
        captured before `until`, epoch seconds, when given): libpcap's pcap_next_ex, the
        packet copied out, counted, written (-w) and yielded as a record."""
        import ctypes
        lib = self._handles[0].lib
        header = ctypes.POINTER(lib.pcap_pkthdr)()
        data = ctypes.POINTER(ctypes.c_ubyte)()
        next_ex, string_at = lib.pcap_next_ex, ctypes.string_at
        hdr_ref, data_ref = ctypes.byref(header), ctypes.byref(data)
        link_types = self.link_types
        stats = self.stats if self.stats is not None else CaptureStats()
        self.stats = stats
        frame = 0

        def read(index: int, handle: _Handle, limit: int, until: float | None
                 ) -> Generator[PacketRecord, None, None]:
            nonlocal frame
            lt, write = handle.link_type, \
                self.writer.write if self.writer is not None else None
            ts = self.last_ts
            try:
                for _ in range(limit):
                    rc = next_ex(handle.pcap, hdr_ref, data_ref)
                    if rc != 1:
                        if rc < 0:
                            self._failed(handle, rc)
                        return
                    h = header.contents
                    caplen = h.caplen
                    ts = h.ts.tv_sec + h.ts.tv_usec * 1e-6
                    if until is not None and ts > until:
                        return
                    buf = string_at(data, caplen)
                    frame += 1
                    stats.packets += 1
                    link_types[lt] = link_types.get(lt, 0) + 1
                    if write is not None:
                        try:
                            write(index, ts, buf, h.len)
                        except CaptureError as exc:
                            self._write_failed(exc)
                            write = None
                    yield frame, ts, lt, buf, 0, caplen, h.len
            finally:
                self.last_ts = ts
        return read

    def _write_failed(self, exc: CaptureError) -> None:
        """The -w file cannot be written (disk full, removed): the capture stops there,
        as dumpcap's does, and says why (`write_error`); what was captured is still
        analysed and summarised."""
        self.write_error = str(exc)
        self.writer = None
        self._stopped = True

    def _failed(self, handle: _Handle, rc: int) -> None:
        """pcap_next_ex's error (the interface went down): said, and the capture ends."""
        if self.stats is not None and rc == -1:
            self.stats.warn(0, f"{handle.name}: {handle._error()}")
        self._stopped = self._broken = True

    def counts(self) -> LiveCounts:
        """What each interface's kernel ring says it received and dropped."""
        per = [(h.name, *got) for h in self._handles if (got := h.counts()) is not None]
        return LiveCounts(tuple(self.interfaces), self.bpf, sum(p[1] for p in per),
                          sum(p[2] for p in per), sum(p[3] for p in per), tuple(per))

    def _count(self) -> None:
        """Refresh `stats.live` (about once a second, and at the end)."""
        self._counted = time.monotonic()
        if self.stats is not None and self._handles and self._handles[0].pcap:
            live = self.stats.live = self.counts()
            if self.writer is not None:
                for i, (_name, received, dropped, ifdropped) in enumerate(live.per_interface):
                    self.writer.counts(i, received, dropped + ifdropped)

    def close(self) -> None:
        """Release the interfaces (the kernel's counts are read first)."""
        if self._handles and self._handles[0].pcap:
            self._count()
        for handle in self._handles:
            handle.close()


__all__ = ["CAPABILITIES", "DEFAULT_FILTER", "LiveCapture", "LiveError", "PacketWriter",
           "interface_names", "pcap_library"]
