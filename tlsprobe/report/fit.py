"""Tables that never split an identifier: `FitTable`.

A terminal table of suite names, `ip:port` pairs, JA4 fingerprints or certificate names is
useless when a cell breaks such a token in the middle to fit the width (rich's
``overflow="fold"`` does that). A `FitTable` gives each column at least the width of its
longest token (cells wrap only between words) and, when the console is too narrow for the
columns side by side, lists each row as "Column: value" lines instead, where every value
has the whole width. Only a single token wider than the whole console is still folded.

The choice is made at render time from the console's width, so the same renderable prints
side by side on a wide terminal and as records on a narrow one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def longest_token(texts: Iterable[str]) -> int:
    """The width of the longest whitespace-separated token of `texts` (0 when none)."""
    return max((cell_len(word) for text in texts for word in text.split()), default=0)


class FitTable:
    """A table with `columns` whose cells are plain text (`Text` keeps its style); see the
    module docstring. `justify` maps a column name to its justification; `style` of the
    header row and `title` as rich.Table's."""

    def __init__(self, *columns: str, title: str | None = None,
                 justify: dict[str, Any] | None = None, **table_options: Any) -> None:
        self.columns = list(columns)
        self.title = title
        self.justify = justify or {}
        self.rows: list[list[Text]] = []
        self.options = {"box": box.SIMPLE_HEAD, "show_edge": False, **table_options}

    def add_row(self, *cells: str | Text) -> None:
        self.rows.append([c if isinstance(c, Text) else Text(c) for c in cells])

    def _bounds(self) -> list[tuple[int, int]]:
        """(longest token, longest line) of each column, header included."""
        out = []
        for i, name in enumerate(self.columns):
            cells = [name, *(row[i].plain for row in self.rows if i < len(row))]
            lines = [line for cell in cells for line in cell.splitlines()]
            out.append((max(1, longest_token(cells)), max([1, *map(cell_len, lines)])))
        return out

    def table(self, widths: list[int] | None = None) -> Table:
        """The columns side by side, each of the given width (default: its longest token,
        so that a cell wraps between words only)."""
        widths = widths or [low for low, _ in self._bounds()]
        table = Table(title=self.title, **self.options)
        for name, width in zip(self.columns, widths):
            table.add_column(name, overflow="fold", width=width,
                             justify=self.justify.get(name, "left"))
        for row in self.rows:
            table.add_row(*row)
        return table

    def widths(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Column widths that fit `options.max_width` without splitting a token: each
        column its longest token, the room left shared among the columns that would wrap
        (the smallest need first, so short columns stay on one line, the others getting
        equal shares); None when even the longest tokens side by side are too wide."""
        bounds = self._bounds()
        widths = [low for low, _ in bounds]
        overhead = self.table(widths).__rich_measure__(console, options.update_width(
            1 << 16)).maximum - sum(widths)
        room = options.max_width - overhead - sum(widths)
        if room < 0:
            return None
        order = sorted(range(len(bounds)), key=lambda i: bounds[i][1] - bounds[i][0])
        for n, i in enumerate(order):   # an equal share each, what one leaves to the next
            grow = min(room // (len(order) - n), bounds[i][1] - widths[i])
            widths[i] += grow
            room -= grow
        return widths

    def records(self) -> Table:
        """Each row as "Column: value" lines, a blank line between rows."""
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="bold")
        grid.add_column(overflow="fold")
        for n, row in enumerate(self.rows):
            if n:
                grid.add_row("", "")
            for name, cell in zip(self.columns, row):
                grid.add_row(Text(f"{name or '#'}:"), cell)
        return grid

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.widths(console, options)
        if widths is not None or not self.rows:
            yield self.table(widths)
            return
        if self.title:
            yield Text(self.title, style="bold")
        yield self.records()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        wide = self.table([high for _, high in self._bounds()]).__rich_measure__(
            console, options.update_width(1 << 16))
        narrow = Measurement.get(console, options, self.records())
        return Measurement(narrow.minimum, max(wide.maximum, narrow.maximum))


__all__ = ["FitTable", "longest_token"]
