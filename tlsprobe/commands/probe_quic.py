"""`tlsprobe HOST[:PORT] --quic`: the probe over QUIC v1 or v2 (issue 15).

Arguments -> call -> render: the options QUIC cannot honour are refused before connecting
(exit 2); the QUIC form of the hello, the connector and the run's QUIC view are
probes/quic.py's (the API's `probe(..., quic=True)` makes the same calls); here only what
is printed and written: the packets (--msg), the QUIC summary and the --pcap-out datagrams.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from tlsprobe.commands.quic_option import quic_versions
from tlsprobe.engine import config as cfg
from tlsprobe.engine.client import Limits
from tlsprobe.errors import UsageError
from tlsprobe.net.quic_info import QuicInfo
from tlsprobe.net.transport import Connector, NotApplicable
from tlsprobe.probes.probe import ProbeRun
from tlsprobe.probes.quic import quic_setup, quic_view

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

    def setup(self, config: cfg.ClientConfig, timeout: float, limits: Limits
              ) -> tuple[cfg.ClientConfig, Connector]:
        """The QUIC ClientHello configuration and the connector (which fills `info`;
        `limits`: the probe's, --max-message bounds CRYPTO data too, --max-records the
        server's packets with CRYPTO data: probes/quic.py `quic_setup`)."""
        setup = quic_setup(config, timeout, quic_versions(self.args),
                           alpn_given=self.args.alpn is not None, limits=limits)
        if isinstance(setup, NotApplicable):   # the versions are checked above
            raise UsageError(f"--ciphersuites: {setup.reason}")
        self.info = setup.info
        return setup.config, setup.connect

    def adjust(self, run: ProbeRun) -> ProbeRun:
        """The run as it went over QUIC (probes/quic.py `quic_view`)."""
        return run if self.info is None else quic_view(run, self.info)

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
