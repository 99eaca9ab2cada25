"""The probe over QUIC v1 or v2 (issue 15): `tlsprobe HOST --quic` and `probe(..., quic=True)`.

The same probe (probes/probe.py `run_probe`) runs over a QUIC transport (net/quic.py): the
ClientHello is tlsprobe's own in its QUIC form (net/quic_hello.py, the rule `scan --quic`
applies too: TLS 1.3 only, the AEAD suites QUIC allows, ALPN h3 unless the caller names
protocols, our quic_transport_parameters, no session ticket). The result is the probe's
`ProbeRun` with the QUIC side (`ProbeResult.quic`, net/quic_info.py) added, and without the
engine's close_notify and ChangeCipherSpec (over QUIC they never reach the wire: the
transport sends CONNECTION_CLOSE instead). Rendering stays with the caller
(commands/probe_quic.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tlsprobe.engine.client import Limits
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import UsageError
from tlsprobe.net.quic import engine_limits, quic_connector
from tlsprobe.net.quic_hello import quic_hello
from tlsprobe.net.quic_info import QuicInfo
from tlsprobe.net.quic_wire import QUIC_V1
from tlsprobe.net.tcp import Target
from tlsprobe.net.transport import Connector, NotApplicable
from tlsprobe.probes.probe import ProbeOptions, ProbeRun, run_probe
from tlsprobe.session.flow import (
    CLIENT,
    AlertEvent,
    ChangeCipherSpecEvent,
    Event,
    InnerContentEvent,
    RecordEvent,
)


@dataclass
class QuicSetup:
    """A probe's QUIC connection before it is made: the hello in its QUIC form, the
    connector, and the `QuicInfo` the connection fills (packets, addresses, datagrams)."""

    config: ClientConfig
    connect: Connector
    info: QuicInfo


def quic_setup(config: ClientConfig, timeout: float, versions: tuple[int, ...] = (QUIC_V1,),
               *, alpn_given: bool = False, limits: Limits | None = None
               ) -> QuicSetup | NotApplicable:
    """The QUIC form of the probe's hello (`alpn_given`: the caller named the ALPN
    protocols in `config`; else h3) and its connector (`versions`: ours first, as
    net/quic.py `quic_connector`; `limits`: the probe's, as the user gave them: its
    --max-message bounds each epoch's CRYPTO data too, its --max-records the server's QUIC
    packets with CRYPTO data), or why QUIC cannot carry that hello."""
    limits = limits or Limits()
    connect, info = quic_connector(timeout, versions=versions,
                                   limits=limits)
    hello = quic_hello(config, info.scid, info.version, info.offered,
                       alpn=config.alpn if alpn_given else None)
    if isinstance(hello, NotApplicable):
        return hello
    return QuicSetup(hello, connect, info)


def quic_view(run: ProbeRun, info: QuicInfo) -> ProbeRun:
    """`run` as it went over QUIC: the engine's close_notify (with the record that carried
    it) and ChangeCipherSpec left out of the result and the events; `result.quic` set."""
    events: list[Event] = []
    for ev in run.events:
        if not _from_client(ev):
            events.append(ev)
        elif isinstance(ev, ChangeCipherSpecEvent) or (
                isinstance(ev, RecordEvent) and ev.record.content_type == 20):
            continue
        elif isinstance(ev, AlertEvent) and ev.alert.description == 0:
            while events and _from_client(events[-1]) and \
                    isinstance(events[-1], (RecordEvent, InnerContentEvent)):
                events.pop()   # the record that carried it
        else:
            events.append(ev)
    alerts = tuple(a for a in run.result.alerts
                   if not (a.direction == "sent" and a.description == 0))
    return replace(run, result=replace(run.result, alerts=alerts, quic=info.summary()),
                   events=events)


def _from_client(ev: Event) -> bool:
    return ev.direction == CLIENT


def run_quic_probe(target: Target, options: ProbeOptions,
                   versions: tuple[int, ...] = (QUIC_V1,), *,
                   alpn_given: bool = False) -> tuple[ProbeRun, QuicInfo]:
    """Probe one server over QUIC: the run (as `quic_view` shows it) and the QUIC side. A
    hello QUIC cannot carry is a UsageError (before any packet is sent)."""
    setup = quic_setup(options.config, options.timeout, versions, alpn_given=alpn_given,
                       limits=options.limits)
    if isinstance(setup, NotApplicable):
        raise UsageError(setup.reason)
    run = run_probe(target, replace(options, config=setup.config,
                                    limits=engine_limits(options.limits)),
                    connect=setup.connect)
    return quic_view(run, setup.info), setup.info


__all__ = ["QuicSetup", "engine_limits", "quic_setup", "quic_view", "run_quic_probe"]
