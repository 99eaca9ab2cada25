"""The pieces every section of the scan's text report is made of: a line whose text from
the network is shown escaped, a bold title, and a table that never splits an identifier
(audit_tables.py and cert_tables.py build their sections from them)."""

from __future__ import annotations

from rich.text import Text

from tlsprobe.report.escape import shown
from tlsprobe.report.fit import FitTable


def text(value: str, style: str = "") -> Text:
    """A line of the report; what the server wrote in it (names, details) shown escaped."""
    return Text(shown(value), style=style)


def row(grid: FitTable, *cells: str | Text) -> None:
    """A table row of plain text (no rich markup), escaped as `text` does."""
    grid.add_row(*(c if isinstance(c, Text) else text(c) for c in cells))


def title(value: str) -> Text:
    return text(value, style="bold")


def table(*columns: str) -> FitTable:
    """A table whose identifiers (suite names, certificate names) are never split."""
    return FitTable(*columns, pad_edge=False, padding=(0, 1))
