"""`AsyncTransport.delivered`: has the peer's TCP acknowledged what we sent? (net/tcp_async.py,
read off the socket's SIOCOUTQ on Linux). split_segment sends the second half of its hello
once the first is acknowledged instead of after a fixed 0.2 s (tests/checks/
test_one_connection.py); a peer that has not acknowledged by the limit is told apart, and
the wrappers between the check and TCP (watching, recording) pass the question on."""
from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from tlsprobe.net.pacing import Watch, Watched
from tlsprobe.net.recording import AsyncRecorder, Tape
from tlsprobe.net.target import Target
from tlsprobe.net.tcp_async import AsyncTcpTransport, TcpConnector


@pytest.fixture
def silent_peer() -> Iterator[socket.socket]:
    """A loopback listener with a small receive buffer whose connections are accepted by
    the kernel and never read: its TCP acknowledges what fits in the buffer, no more."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock
    sock.close()


async def _connect(port: int) -> AsyncTcpTransport:
    return await TcpConnector(5.0)(Target("127.0.0.1", port), time.monotonic() + 5.0)


def test_a_small_send_is_acknowledged_through_the_wrappers(silent_peer: socket.socket
                                                           ) -> None:
    async def go() -> tuple[bool | None, bool | None]:
        tcp = await _connect(silent_peer.getsockname()[1])
        try:
            wrapped = AsyncRecorder(Watched(tcp, Watch()), Tape("t", "check"))
            await wrapped.send(b"\x16\x03\x01" + bytes(200))
            return await tcp.delivered(1.0), await wrapped.delivered(1.0)
        finally:
            await tcp.close()
    assert asyncio.run(go()) == (True, True)


def test_bytes_the_peer_cannot_take_are_not_acknowledged(silent_peer: socket.socket) -> None:
    async def go() -> tuple[bool | None, float]:
        tcp = await _connect(silent_peer.getsockname()[1])
        try:
            tcp.writer.write(bytes(8 << 20))   # far more than the peer's buffer holds
            started = time.monotonic()
            got = await tcp.delivered(0.05)
            return got, time.monotonic() - started
        finally:
            tcp.writer.transport.abort()
    got, waited = asyncio.run(go())
    assert got is False
    assert waited < 2.0, waited    # bounded by its limit, not by the peer
