"""Client simulation results (model/clients.py) as a rich table: one row per client profile
with the version, suite, group (and "via HRR"), ALPN, signature scheme and trust verdict it
got, or its failure and reason (`tlsprobe clients`, and the clients section of `tlsprobe
scan --clients`); the cells are report/client_cells.py's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO

from rich.text import Text

from tlsprobe.model.clients import ClientSimulation, ClientsReport, SimStatus
from tlsprobe.model.units import host_port
from tlsprobe.report.client_cells import CLIENT_COLUMNS, client_cells, client_names
from tlsprobe.report.escape import shown
from tlsprobe.report.fit import FitTable
from tlsprobe.report.tables import print_renderable

__all__ = ["clients_table", "render_clients"]


def clients_table(sims: Iterable[ClientSimulation]) -> FitTable:
    """The table (report/fit.py: names never split; records on a narrow console), what
    came from the network escaped; a failed row red, an inconclusive one yellow."""
    table = FitTable(*CLIENT_COLUMNS, title="Client simulation", pad_edge=False,
                     padding=(0, 1))
    sims = list(sims)
    names = client_names(sims)
    for s in sims:
        style = "red" if s.status == SimStatus.failed else \
            "yellow" if s.status == SimStatus.inconclusive else ""
        table.add_row(*(Text(shown(c), style=style) for c in client_cells(s, names[s.profile])))
    return table


def render_clients(report: ClientsReport, out: IO[str]) -> None:
    """`tlsprobe clients`: a head line, the table, or the error."""
    target = host_port(report.host, report.port)
    sni = f"server_name {report.server_name}" if report.server_name else "no server_name"
    print(shown(f"{target} ({report.address or 'not reached'}), {sni}: "
                f"{len(report.clients)} client profile(s), {report.connections} "
                f"connection(s), {report.duration_s:.1f} s"), file=out)
    if report.error:
        print(f"Error: {shown(report.error)}", file=out)
        return
    print_renderable(clients_table(report.clients), out)
