"""The one driver (net/driver.py drive and adrive) and the one not-TLS verdict
(net/not_tls.py), against scripted transports and real servers on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest

from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.net.driver import Progress, adrive, drive
from tlsprobe.net.not_tls import is_not_tls, not_tls_message
from tlsprobe.net.tcp import Target, open_channel
from tlsprobe.net.tcp_async import TcpConnector
from tlsprobe.net.transport import Recorder, Transport

HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
SSH = b"SSH-2.0-OpenSSH_9.2\r\n"
GARBAGE = bytes(range(0x30, 0x80))
SSLV2 = b"\x80\x2e\x04\x00\x01\x00\x02"     # an SSLv2 SERVER-HELLO header


class Scripted:
    """A transport that hands out `chunks` one per receive, then stalls until the deadline
    (the per-read timeout of a real transport is not modelled: only the deadline)."""

    peer = ("127.0.0.1", 443)
    local = ("127.0.0.1", 50000)

    def __init__(self, *chunks: bytes, eof: bool = False) -> None:
        self.chunks = list(chunks)
        self.eof = eof
        self.sent: list[bytes] = []
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def receive(self, deadline: float) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        if self.eof:
            return b""
        time.sleep(max(0.0, deadline - time.monotonic()))
        raise NetworkError("scripted: timed out: total time limit reached", "deadline")

    def close(self) -> None:
        self.closed = True


class AsyncScripted(Scripted):
    async def send(self, data: bytes) -> None:  # type: ignore[override]
        self.sent.append(data)

    async def receive(self, deadline: float) -> bytes:  # type: ignore[override]
        if self.chunks:
            return self.chunks.pop(0)
        if self.eof:
            return b""
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        raise NetworkError("scripted: timed out: total time limit reached", "deadline")

    async def close(self) -> None:  # type: ignore[override]
        self.closed = True


def _handshake() -> ClientHandshake:
    return ClientHandshake(ClientConfig(server_name="localhost"), annotate=False)


def _one_at_a_time(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


# -- the verdict --------------------------------------------------------------------------------
@pytest.mark.parametrize("head, verdict", [
    (HTTP, True), (SSH, True), (GARBAGE, True), (b"220 mail ESMTP\r\n", True),
    (b"\x63\x03\x03\x00\x05", True),            # content type 99
    (b"\x16\x07", True),                        # handshake, but major version 7
    (b"\x16\x03\x03\x00\x30", False),           # a TLS record header
    (b"\x16\x03\x09\x00\x30", False),           # TLS-shaped, broken: a protocol error
    (b"\x16\x03\x03\xff\xff", False),           # length over the limit: a protocol error
    (SSLV2, False),                             # SSLv2: the engine names it
    (b"\x16", None), (b"\x16\x03\x03", None),   # too few bytes to tell
])
def test_verdict_on_first_bytes(head, verdict):
    assert is_not_tls(head) is verdict


@pytest.mark.parametrize("data, expected", [
    (HTTP, r"not a TLS server: it sent an HTTP response ('HTTP/1.1 400 Bad Request\r\n')"),
    (GARBAGE, r"not a TLS server: it sent non-TLS data ('0123456789:;<=>?@ABCDEFGHIJKLMNOPQRS"
              r"TUVW'...)"),
    (SSH, r"not a TLS server: it sent an SSH banner ('SSH-2.0-OpenSSH_9.2\r\n')"),
    (b"\x00\x1b[2J\x9b\x07", r"not a TLS server: it sent non-TLS data ('\x00\x1b[2J\x9b\x07')"),
])
def test_message_names_the_service_and_escapes_what_it_sent(data, expected):
    message = not_tls_message(data)
    assert message == expected
    assert message.isprintable()


# -- the sync driver ----------------------------------------------------------------------------
@pytest.mark.parametrize("banner, what", [(HTTP, "an HTTP response"),
                                          (SSH, "an SSH banner"), (GARBAGE, "non-TLS data")])
@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_drive_gives_the_not_tls_verdict_however_the_bytes_come(banner, what, split):
    chunks = _one_at_a_time(banner) if split else [banner]
    transport = Scripted(*chunks)
    progress = Progress()
    with pytest.raises(HandshakeFailure) as exc:
        drive(_handshake(), transport, time.monotonic() + 5, progress=progress)
    assert exc.value.kind is FailureKind.NOT_TLS
    assert str(exc.value) == not_tls_message(banner)    # the same message however cut
    assert str(exc.value).startswith(f"not a TLS server: it sent {what} (")
    assert progress.not_tls is True
    assert len(transport.sent) == 1            # the ClientHello, nothing after the verdict


def test_drive_hands_sslv2_to_the_engine_as_a_protocol_error():
    progress = Progress()
    with pytest.raises(HandshakeFailure) as exc:
        drive(_handshake(), Scripted(SSLV2 + bytes(60), eof=True), time.monotonic() + 5,
              progress=progress)
    assert exc.value.kind is FailureKind.PROTOCOL and progress.sslv2


def test_drive_stops_at_the_deadline_of_a_stalled_server():
    transport = Scripted(b"\x16\x03\x03")       # a record header begun, then nothing
    started, cpu = time.monotonic(), time.process_time()
    with pytest.raises(NetworkError) as exc:
        drive(_handshake(), transport, time.monotonic() + 0.3)
    assert exc.value.cause == "deadline" and exc.value.kind is FailureKind.NETWORK
    assert time.monotonic() - started >= 0.3
    assert time.process_time() - cpu < 1.0     # waited, did not spin


def test_drive_tells_the_engine_when_the_server_closes():
    progress = Progress()
    with pytest.raises(HandshakeFailure) as exc:
        drive(_handshake(), Scripted(eof=True), time.monotonic() + 5, progress=progress)
    assert exc.value.kind is FailureKind.CLOSED and progress.closed


class OneByte(Transport):
    """Delivers the server's bytes one at a time (a reader of whole records would stall);
    a transport as net/transport.py defines them (its hooks' defaults inherited)."""

    def __init__(self, inner):
        self.inner, self.pending = inner, b""

    @property
    def peer(self):
        return self.inner.peer

    @property
    def local(self):
        return self.inner.local

    def send(self, data):
        self.inner.send(data)

    def receive(self, deadline):
        if not self.pending:
            self.pending = self.inner.receive(deadline)
        head, self.pending = self.pending[:1], self.pending[1:]
        return head

    def close(self):
        self.inner.close()


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_drive_completes_a_real_handshake(server_cache, split):
    srv = server_cache("openssl")
    channel = open_channel(Target("127.0.0.1", srv.port), timeout=5)
    recorder = Recorder(OneByte(channel) if split else channel)
    hs = ClientHandshake(ClientConfig(server_name="localhost"), annotate=False,
                         stop_after_first_flight=False)
    try:
        progress = drive(hs, recorder, time.monotonic() + 10)
    finally:
        recorder.close()
    assert hs.handshake_complete and progress.not_tls is False
    assert recorder.segments[0].from_client and not recorder.segments[1].from_client
    if split:
        assert all(len(s.data) == 1 for s in recorder.segments if not s.from_client)


def test_drive_until_stops_without_sending_the_answer():
    """`until` is checked after each chunk; the engine's answer to that chunk is not sent."""
    seen = []

    def until(hs):
        seen.append(hs)
        return True

    transport = Scripted(b"\x16\x03\x03\x00\x04", eof=True)   # an incomplete record header
    drive(_handshake(), transport, time.monotonic() + 5, until=until)
    assert len(seen) == 1 and len(transport.sent) == 1


# -- the async driver ---------------------------------------------------------------------------
def test_adrive_gives_the_same_verdict_and_deadline():
    async def run(transport, deadline):
        return await adrive(_handshake(), transport, time.monotonic() + deadline)

    with pytest.raises(HandshakeFailure) as exc:
        asyncio.run(run(AsyncScripted(*_one_at_a_time(SSH)), 5))
    assert exc.value.kind is FailureKind.NOT_TLS
    assert str(exc.value) == not_tls_message(SSH)     # the whole line, though cut in bytes
    started = time.monotonic()
    with pytest.raises(NetworkError) as net:
        asyncio.run(run(AsyncScripted(b"\x16"), 0.3))
    assert net.value.cause == "deadline" and time.monotonic() - started >= 0.3


@pytest.mark.needs_impl("openssl")
def test_adrive_completes_a_real_handshake_over_tcp(server_cache):
    srv = server_cache("openssl")

    async def run():
        transport = await TcpConnector(5.0)(Target("127.0.0.1", srv.port),
                                            time.monotonic() + 5)
        hs = ClientHandshake(ClientConfig(server_name="localhost"), annotate=False,
                             stop_after_first_flight=False)
        try:
            await adrive(hs, transport, time.monotonic() + 10)
        finally:
            await transport.close()
        return hs, transport.peer

    hs, peer = asyncio.run(run())
    assert hs.handshake_complete and peer == ("127.0.0.1", srv.port)


def test_tcp_connector_names_a_refused_connection():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]     # closed again: nobody listens there

    async def run():
        await TcpConnector(2.0)(Target("127.0.0.1", port), time.monotonic() + 2)

    with pytest.raises(NetworkError) as exc:
        asyncio.run(run())
    assert exc.value.cause == "refused" and exc.value.reason == "connection refused"
    assert str(exc.value) == f"127.0.0.1:{port}: connection refused"


@pytest.mark.needs_impl("openssl")
def test_run_probe_runs_over_the_transport_its_connector_opens(server_cache):
    """The seam a STARTTLS preamble or QUIC uses: the probe over another transport gives
    the same result as over plain TCP, and records what that transport carried."""
    from tlsprobe.probes.probe import ProbeOptions, run_probe
    srv = server_cache("openssl")
    target = Target("127.0.0.1", srv.port)
    opened = []

    def connect(target, deadline):
        opened.append(OneByte(open_channel(target, timeout=5, deadline=deadline)))
        return opened[-1]

    options = ProbeOptions(config=ClientConfig(server_name="localhost"), timeout=5,
                           verify=False)
    plain, split = run_probe(target, options), run_probe(target, options, connect=connect)
    assert len(opened) == 1 and split.result.error is None
    assert split.result.handshake_complete and plain.result.handshake_complete
    assert split.result.version == plain.result.version
    assert split.result.cipher == plain.result.cipher
    assert all(len(s.data) == 1 for s in split.segments if not s.from_client)
