"""`ClientsRequest`: `tlsprobe clients HOST[:PORT] ...` or the API's `simulate_clients(...)`,
checked once: the targets, the profiles chosen, the server_name rule, the trust store, the
connection settings and STARTTLS (the scan's own request carries these: its parsing and
connector are reused, with no audit phase)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.names import API, CLI, Names
from tlsprobe.requests.scan import ConnectionSettings, ScanRequest, clients_of

if TYPE_CHECKING:
    from tlsprobe.model.clients import ClientProfile, ClientsReport

__all__ = ["ClientsRequest"]


@dataclass(frozen=True)
class ClientsRequest:
    """The checked request: the scan request it rides on (targets, SNI, trust store,
    settings, STARTTLS) and the profiles to simulate."""

    scan: ScanRequest
    profiles: tuple[ClientProfile, ...]

    @classmethod
    def build(cls, targets: str | Sequence[str], *, profiles: Sequence[str] | str | None = None,
              profiles_dir: str | None = None, server_name: str | None = None,
              send_sni: bool = True, verify: bool = True, cafile: str | None = None,
              settings: ConnectionSettings | None = None, starttls: str | None = None,
              xmpp_host: str | None = None, names: Names = API) -> ClientsRequest:
        """The request, or a UsageError naming the input at fault."""
        scan = ScanRequest.build(targets, checks="versions", server_name=server_name,
                                 send_sni=send_sni, verify=verify, cafile=cafile,
                                 settings=settings, starttls=starttls, xmpp_host=xmpp_host,
                                 policies=(), names=names)
        bad = [t for t in scan.targets if t not in scan.good_targets]
        if bad:
            raise UsageError(str(getattr(bad[0], "error", bad[0])))
        if not scan.targets:
            raise UsageError("no target: give HOST[:PORT] (or --list for the profiles)")
        return cls(scan, clients_of(True, profiles, profiles_dir, names))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClientsRequest:
        settings = ConnectionSettings.build(per_host=args.per_host, concurrency=args.concurrency,
                                            delay=args.delay, retries=args.retries,
                                            timeout=args.timeout, names=CLI)
        return cls.build(args.targets, profiles=args.profiles, profiles_dir=args.profiles_dir,
                         server_name=args.sni, send_sni=not args.no_sni,
                         verify=not args.no_verify, cafile=args.cafile, settings=settings,
                         starttls=args.starttls, xmpp_host=args.xmpp_host, names=CLI)

    def run(self, on_report: Callable[[ClientsReport], None] | None = None
            ) -> list[ClientsReport]:
        """Every target's simulations (blocking); each report also handed to `on_report` as
        soon as it is done."""
        from tlsprobe.probes.clients.run import run_clients
        scan = self.scan
        scheduler = scan.settings.scheduler(connector=scan.connector())
        options = scan.options
        return run_clients(scan.good_targets, scheduler, self.profiles,
                           server_name=options.server_name, send_sni=options.send_sni,
                           cafile=options.cafile, verify=options.verify,
                           concurrency=scan.settings.concurrency, on_report=on_report)
