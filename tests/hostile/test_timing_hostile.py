"""Handshake timing against scripted servers: what the real lab servers do not do.

A server that never answers a hello with one group (a silent time-out, no alert, no close)
has not refused that group: whether it accepts it is not established.

A server that answers every first ClientHello with a HelloRetryRequest carrying only a cookie
(what a server under load or a stateless front end does) costs each handshake a second round
trip: the timing must say so, in the JSON and in the table.
"""
from __future__ import annotations

import importlib.util
import io
import json

import pytest

from tlsprobe.net.tcp import Target
from tlsprobe.probes.timing.run import TimingOptions, measure_timing
from tlsprobe.report.timing_tables import render_timing

from .server import Conn, HostileServer
from .tls import (
    SECP256R1,
    X25519,
    Tls13Server,
    client_share,
    handshake_records,
    hello_retry_request,
)

# the timing probe runs in this process: the collections it runs between its rounds walk
# only what the test made (conftest.py own_heap)
pytestmark = pytest.mark.usefixtures("own_heap")

async def cookie_hrr_then_handshake(conn: Conn) -> None:
    """HRR with a cookie and no key_share (the client's x25519 share is fine), then the
    whole TLS 1.3 handshake from the second ClientHello."""
    await conn.client_hello()
    first = conn.hello_raw[-1]
    hrr = hello_retry_request(conn.hellos[-1], group=None, cookie=b"tlsprobe timing cookie")
    await conn.send(handshake_records(hrr))
    ch2 = await conn.client_hello()
    tls = Tls13Server(ch2, conn.hello_raw[-1], retry=(first, hrr))
    await conn.send(tls.hello_and_flight(tls.flight()))
    await conn.wait_closed_by_client(5.0)


def test_a_cookie_hello_retry_request_is_reported(hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(cookie_hrr_then_handshake)
    options = TimingOptions(runs=3, warmup=0, versions=(0x0304,), groups=(X25519,))
    report = measure_timing(Target("127.0.0.1", listener.port), options)
    assert report.error is None and report.stopped is None, listener.log
    # every handshake (the preflight, the confirming one, the 3 runs) went through a retry
    retried = listener.log.count("ClientHello #2")
    assert retried >= 4 and retried == listener.log.count("ClientHello #1"), listener.log
    (entry,) = report.entries
    assert entry.status == "measured" and entry.runs == 3
    assert entry.hello_retry is True
    assert json.loads(report.to_json())["entries"][0]["hello_retry"] is True
    table = io.StringIO()
    render_timing(report, table)
    text = " ".join(table.getvalue().split())
    assert ("note: x25519 (0x001d) (TLS 1.3): the server answered with a HelloRetryRequest: "
            "its times include that second round trip") in text


async def silent_unless_x25519(conn: Conn) -> None:
    """A TLS 1.3 handshake when the hello carries an x25519 share; silence otherwise."""
    ch = await conn.client_hello()
    if client_share(ch, X25519) is None:
        await conn.hold(10.0)
        return
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(tls.hello_and_flight(tls.flight()))
    await conn.wait_closed_by_client(5.0)


def test_a_group_that_only_times_out_is_inconclusive_not_refused(
        hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(silent_unless_x25519)
    # 2 s: a loaded machine completes the x25519 handshakes well within it
    options = TimingOptions(runs=2, warmup=0, timeout=2.0, versions=(0x0304,),
                            groups=(X25519, SECP256R1))
    report = measure_timing(Target("127.0.0.1", listener.port), options)
    entries = {e.group.id: e for e in report.entries if e.group is not None}
    assert entries[X25519].status == "measured", listener.log
    silent = entries[SECP256R1]
    assert silent.status == "inconclusive", silent
    assert silent.detail is not None and "timed out waiting for the server" in silent.detail
    assert silent.rank is None and report.error is None
    table = io.StringIO()
    render_timing(report, table)
    text = " ".join(table.getvalue().split())
    assert ("note: secp256r1 (0x0017) (TLS 1.3): inconclusive: timed out waiting for the "
            "server (2 s)") in text
    assert "refused" not in text


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib, the plot extra, is not installed")
def test_the_plot_marks_an_entry_reached_through_a_hello_retry_request(
        hostile_server: HostileServer) -> None:
    from tlsprobe.report.plots import timing_figure
    listener = hostile_server.serve(cookie_hrr_then_handshake)
    report = measure_timing(Target("127.0.0.1", listener.port), TimingOptions(
        runs=2, warmup=0, versions=(0x0304,), groups=(X25519,)))
    fig = timing_figure(report)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["TLS 1.3 x25519 (0x001d) (after a HelloRetryRequest)"], listener.log
