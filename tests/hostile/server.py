"""A scripted hostile TLS server: asyncio on 127.0.0.1, one listener per scenario.

`HostileServer` runs an event loop in a daemon thread. `serve(script)` opens a listener on a
free loopback port and runs `script(conn)` for every connection it accepts; `conn` wraps the
stream with helpers to read the client's ClientHello (parsed by tlsprobe.wire), send bytes,
close, or reset (SO_LINGER 0). Everything the server does is bounded in time and bytes
(see `MAX_SEND_BYTES` / `MAX_SCRIPT_SECONDS`) so an endless-stream script stops by itself even
if the client never goes away. What happened is kept per listener in `Listener.log`.
"""
from __future__ import annotations

import asyncio
import select
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tlsprobe.wire import (
    ClientHello,
    DecodeError,
    HandshakeReassembler,
    Record,
    RecordReader,
    decode_handshake,
)

MAX_SEND_BYTES = 64 << 20   # per connection, for endless-stream scripts
MAX_SCRIPT_SECONDS = 30.0   # per connection
READ_TIMEOUT = 10.0         # waiting for the ClientHello


class ScriptDone(Exception):
    """The client went away or a bound was reached; the script just ends."""


class Conn:
    """One accepted connection as a script sees it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 log: list[str]) -> None:
        self.reader = reader
        self.writer = writer
        self.log = log
        self.sent = 0
        self.started = time.monotonic()
        self.hellos: list[ClientHello] = []
        self.hello_raw: list[bytes] = []  # each ClientHello as framed (for transcripts)
        self._records = RecordReader()
        self._handshake = HandshakeReassembler()
        self._queue: list[bytes] = []       # whole plaintext handshake messages, in order
        self.ccs_seen = False               # the client's ChangeCipherSpec
        self.protected: list[Record] = []   # records after it (still encrypted)

    # -- reading -------------------------------------------------------------------------
    async def _fill(self, deadline: float, what: str) -> None:
        """Read once more from the client and sort its records."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise ScriptDone(f"no {what} in time")
        try:
            data = await asyncio.wait_for(self.reader.read(65536), left)
        except (asyncio.TimeoutError, ConnectionError) as exc:
            raise ScriptDone(f"reading: {exc!r}") from None
        if not data:
            raise ScriptDone(f"client closed before its {what}")
        for rec in self._records.feed(data):
            if not isinstance(rec, Record):
                continue
            if self.ccs_seen:
                self.protected.append(rec)
            elif rec.content_type == 20:
                self.ccs_seen = True
            elif rec.content_type == 22:
                self._queue += self._handshake.feed(rec.fragment)

    async def handshake_message(self, msg_type: int, what: str) -> bytes:
        """The next plaintext handshake message, which must be of `msg_type` (framed)."""
        deadline = time.monotonic() + READ_TIMEOUT
        while not self._queue:
            await self._fill(deadline, what)
        raw = self._queue.pop(0)
        if raw[0] != msg_type:
            raise ScriptDone(f"expected {what}, got handshake type {raw[0]}")
        return raw

    async def client_hello(self) -> ClientHello:
        """The next ClientHello from the client (the first, or the one after an HRR)."""
        raw = await self.handshake_message(1, "ClientHello")
        hello = decode_handshake(raw).message
        self.hellos.append(hello)
        self.hello_raw.append(raw)
        self.log.append(f"ClientHello #{len(self.hellos)}")
        return hello

    async def protected_record(self) -> Record:
        """The next record after the client's ChangeCipherSpec."""
        deadline = time.monotonic() + READ_TIMEOUT
        while not self.protected:
            await self._fill(deadline, "encrypted Finished")
        return self.protected.pop(0)

    async def wait_closed_by_client(self, timeout: float) -> bool:
        """Drain what the client sends until it closes (True) or `timeout` passes."""
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                data = await asyncio.wait_for(self.reader.read(65536), end - time.monotonic())
                if not data:
                    return True
        except (asyncio.TimeoutError, ConnectionError):
            pass
        return False

    # -- writing -------------------------------------------------------------------------
    def _check_bounds(self) -> None:
        if self.sent > MAX_SEND_BYTES:
            raise ScriptDone("send bound reached")
        if time.monotonic() - self.started > MAX_SCRIPT_SECONDS:
            raise ScriptDone("time bound reached")

    async def send(self, data: bytes) -> None:
        self._check_bounds()
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ScriptDone(f"client gone: {exc!r}") from None
        self.sent += len(data)

    async def send_all(self, *chunks: bytes) -> None:
        for chunk in chunks:
            await self.send(chunk)

    async def trickle(self, data: bytes, interval: float) -> None:
        """Send one byte every `interval` seconds."""
        for i in range(len(data)):
            await self.send(data[i:i + 1])
            await asyncio.sleep(interval)

    async def hold(self, seconds: float, *, watch: bool = True) -> None:
        """Keep the connection open, sending nothing, until the client closes it or
        `seconds` pass. With `watch`, what the client sends is read and dropped (so its close
        is seen and the connection counts as closed); without, nothing is read at all."""
        if not watch:
            await self._hold_unread(seconds)
            return
        if await self.wait_closed_by_client(seconds):
            raise ScriptDone("client closed")

    async def _hold_unread(self, seconds: float) -> None:
        """Sleep without reading a byte, but notice the client's close (POLLRDHUP on the raw
        socket), so that the connection's span ends when the client gave up."""
        sock = self.writer.get_extra_info("socket")
        poller = select.poll()
        if sock is not None:
            poller.register(sock.fileno(), select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if sock is not None and poller.poll(0):
                raise ScriptDone("client closed (seen without reading)")
            await asyncio.sleep(0.05)

    # -- ending --------------------------------------------------------------------------
    def close(self) -> None:
        self.writer.close()

    def reset(self) -> None:
        """Abort with a TCP RST (SO_LINGER on, linger 0)."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()
        self.log.append("RST sent")


Script = Callable[[Conn], Awaitable[None]]


@dataclass
class Listener:
    port: int
    server: asyncio.base_events.Server
    log: list[str] = field(default_factory=list)
    connections: int = 0
    spans: list[tuple[float, float]] = field(default_factory=list)  # (accepted, ended)
    #: bytes each ended connection's script sent, in the order of `spans`: a trickle's
    #: count bounds how long the client stayed (at most one byte per interval, however busy
    #: the machine: load only lowers it), where a span measured on the clock would not
    sent: list[int] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)  # accept times, in order
    #: connections being served (their sockets), and the most that were open at once
    serving: set[Any] = field(default_factory=set)
    peak: int = 0

    def accept(self, sock: Any) -> None:
        """A new connection: count it with the served ones the client has not closed yet.
        The kernel knows of a client's close at once (POLLRDHUP), however late the busy
        event loop reads it: the count does not depend on the machine's load."""
        poller = select.poll()
        # a socket asyncio already closed (the client went away; its script has not noticed
        # yet) has fileno -1: it is not alive, and poll() refuses it
        open_ = [other for other in self.serving if other.fileno() >= 0]
        for other in open_:
            poller.register(other.fileno(), select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        closed = {fd for fd, _ in poller.poll(0)}
        alive = sum(1 for other in open_ if other.fileno() not in closed)
        self.peak = max(self.peak, alive + 1)
        self.serving.add(sock)

    def first_accept(self) -> float | None:
        """time.monotonic() when the first connection was accepted (None: none yet)."""
        return self.accepted[0] if self.accepted else None

    def last_end(self) -> float:
        """time.monotonic() when the last finished connection ended (inf: none ended)."""
        return max((end for _, end in self.spans), default=float("inf"))

    def max_concurrent(self) -> int:
        """Most connections the client had open at once, counted at each accept (`accept`)."""
        return self.peak


class HostileServer:
    """An event loop in a thread that serves scripts on loopback ports."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="hostile-server",
                                        daemon=True)
        self._thread.start()
        self.listeners: list[Listener] = []

    def serve(self, script: Script, *, reuse_addr: bool = True,
              host: str = "127.0.0.1") -> Listener:
        """Start a listener on HOST (127.0.0.1, or ::1) and a free port, running `script`
        per connection."""
        future = asyncio.run_coroutine_threadsafe(self._start(script, host), self.loop)
        listener = future.result(10)
        self.listeners.append(listener)
        return listener

    async def _start(self, script: Script, host: str) -> Listener:
        holder: list[Listener] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            listener = holder[0]
            listener.connections += 1
            conn = Conn(reader, writer, listener.log)
            listener.accepted.append(conn.started)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                listener.accept(sock)
            try:
                await asyncio.wait_for(script(conn), MAX_SCRIPT_SECONDS)
            except ScriptDone as exc:
                listener.log.append(f"done: {exc}")
            except (asyncio.TimeoutError, ConnectionError, DecodeError) as exc:
                listener.log.append(f"ended: {exc!r}")
            except asyncio.CancelledError:  # the server is stopping
                pass
            except Exception as exc:  # noqa: BLE001 -- a broken script must show in the test
                listener.log.append(f"SCRIPT ERROR: {exc!r}")
            finally:
                listener.spans.append((conn.started, time.monotonic()))
                listener.sent.append(conn.sent)
                listener.serving.discard(sock)
                if not writer.is_closing():
                    writer.close()

        server = await asyncio.start_server(handle, host, 0)
        port = server.sockets[0].getsockname()[1]
        holder.append(Listener(port, server))
        return holder[0]

    def stop(self) -> None:
        async def shutdown() -> None:
            for listener in self.listeners:
                listener.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
