"""`tlsprobe HOST[:PORT] --quic`: the probe over QUIC v1 or v2 (issue 15).

The same probe (probes.probe.run_probe) runs over a QUIC transport (net.quic): the
ClientHello is tlsprobe's own, restricted to what QUIC allows (TLS 1.3 only, the three
AEAD suites QUIC defines), with ALPN h3 by default, an empty legacy_session_id and our
quic_transport_parameters. The report adds the QUIC side (net.quic_info) to the TCP probe's.
Options this slice cannot honour over QUIC are refused before connecting (exit 2).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TextIO

from tlsprobe.commands.quic_option import quic_versions
from tlsprobe.engine import config as cfg
from tlsprobe.errors import UsageError
from tlsprobe.net.quic import quic_connector
from tlsprobe.net.quic_info import QuicInfo
from tlsprobe.net.quic_params import client_parameters
from tlsprobe.net.transport import Connector
from tlsprobe.probes.probe import ProbeRun
from tlsprobe.session.flow import (
    CLIENT,
    AlertEvent,
    ChangeCipherSpecEvent,
    Event,
    InnerContentEvent,
    RecordEvent,
)

QUIC_SUITES = (0x1301, 0x1302, 0x1303)   # RFC 9001 5.3: no TLS_AES_128_CCM_8_SHA256
NOT_OVER_QUIC = (("timing", "--timing"),
                 ("http_get", "--http-get"), ("tls1_2", "--tls1_2"), ("tls1_1", "--tls1_1"),
                 ("tls1", "--tls1"), ("ssl3", "--ssl3"), ("ciphers", "--ciphers"),
                 ("starttls", "--starttls"))


class QuicProbe:
    """The --quic parts of one probe run: checks, configuration, connector, report lines."""

    def __init__(self, args: argparse.Namespace) -> None:
        for name, option in NOT_OVER_QUIC:   # refused before connecting
            if getattr(args, name, None):
                raise UsageError(f"{option} cannot be used with --quic (QUIC carries TLS "
                                 "1.3 only, over UDP with no plain-text preamble; --timing "
                                 "and --http-get are not done over QUIC yet)")
        self.args = args
        self.info: QuicInfo | None = None

    def setup(self, config: cfg.ClientConfig, timeout: float
              ) -> tuple[cfg.ClientConfig, Connector]:
        """The QUIC ClientHello configuration and the connector (which fills `info`)."""
        suites = tuple(s for s in config.cipher_suites_13 if s in QUIC_SUITES)
        if not suites:
            raise UsageError("--ciphersuites: QUIC allows only TLS_AES_128_GCM_SHA256, "
                             "TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256")
        connect, self.info = quic_connector(timeout, versions=quic_versions(self.args))
        info = self.info
        config = replace(config, versions=(cfg.TLS13,), cipher_suites_13=suites,
                         alpn=config.alpn if self.args.alpn is not None else ("h3",),
                         quic_transport_parameters=client_parameters(
                             info.scid, info.version, info.offered),
                         session_ticket=False)
        return config, connect

    def adjust(self, run: ProbeRun) -> ProbeRun:
        """Over QUIC the engine's close_notify (and ChangeCipherSpec) never reach the wire:
        the transport sends CONNECTION_CLOSE instead (shown in the QUIC summary), so they
        are left out of the result and the trace; the result gets the `quic` object."""
        events: list[Event] = []
        for ev in run.events:
            if getattr(ev, "direction", None) != CLIENT:
                events.append(ev)
            elif isinstance(ev, ChangeCipherSpecEvent) or (
                    isinstance(ev, RecordEvent) and ev.record.content_type == 20):
                continue
            elif isinstance(ev, AlertEvent) and ev.alert.description == 0:
                while events and getattr(events[-1], "direction", None) == CLIENT and \
                        isinstance(events[-1], (RecordEvent, InnerContentEvent)):
                    events.pop()   # the record that carried it
            else:
                events.append(ev)
        alerts = tuple(a for a in run.result.alerts
                       if not (a.direction == "sent" and a.description == 0))
        quic = self.info.summary() if self.info is not None else None
        return replace(run, result=replace(run.result, alerts=alerts, quic=quic),
                       events=events)

    def print_packets(self, out: TextIO) -> None:
        """--msg: the QUIC packets both ways, before the TLS handshake trace."""
        if self.info is None:
            return
        for line in self.info.log:
            print(line, file=out)
        for line in self.info.ignored[:20]:
            print(f"  ignored: {line}", file=out)

    def write_pcap(self, path: str) -> None:
        """--pcap-out: the UDP datagrams both ways, as sent and received (OSError raised)."""
        info = self.info
        if info is None or info.client_address is None or info.server_address is None:
            return
        from tlsprobe.capture.writer import write_datagram_pcap
        write_datagram_pcap(path, info.client_address, info.server_address, info.datagrams)

    def print_summary(self, out: TextIO) -> None:
        """The QUIC side of the report, after the TLS table."""
        if self.info is not None:
            for line in self.info.lines():
                print(line, file=out)
