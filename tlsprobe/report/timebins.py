"""The connections `pcap --plot` draws, in bounded memory: `TimeBins` keeps each
connection's (start time, version, group) as it comes while there are at most
`MAX_POINTS`, so that the chart of such a capture is drawn from every point; past them it
counts connections per (time bin, version) and per (time bin, group) instead, the bins'
width doubling whenever they would span more than `MAX_BINS`, and at most
`MAX_CATEGORIES` names per panel (later new ones count as `MORE`). A live capture of days
(`pcap -i`, `--follow`, stdin) keeps a few thousand counts, not a point per connection.

The chart's bins (at most 40, `plots.bin_width`) are then filled from these finer bins, each
counted in the chart's bin its middle falls in: a connection is off its bin by at most one
fine bin's width, under a 50th of the chart's."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: the connections kept one by one (the chart then draws every one exactly as it came)
MAX_POINTS = 50_000
#: fine bins at most between the first and the last (the width doubles past them)
MAX_BINS = 2048
#: names of versions or of groups counted apart, per panel; more are counted as MORE
MAX_CATEGORIES = 256
MORE = "(more kinds)"
#: the first width tried for the fine bins, in seconds
FIRST_WIDTH = 1e-3

Point = tuple[float, str, str]
Weighted = tuple[float, str, int]


class TimeBins:
    """Connections by start time, version and group: points, then counts (see above)."""

    def __init__(self) -> None:
        self.points: list[Point] | None = []
        self.count = 0
        self.low = math.inf       # the first and the last start time seen
        self.high = -math.inf
        self.origin = 0.0         # fine bin i is [origin + i * width, origin + (i+1) * width)
        self.width = FIRST_WIDTH
        self.versions: dict[tuple[int, str], int] = {}
        self.groups: dict[tuple[int, str], int] = {}
        self._names: tuple[set[str], set[str]] = (set(), set())

    @property
    def size(self) -> int:
        """Entries held (points, or counts): bounded whatever the connections."""
        return len(self.points) if self.points is not None else \
            len(self.versions) + len(self.groups)

    def add(self, start: float, version: str, group: str) -> None:
        self.count += 1
        self.low, self.high = min(self.low, start), max(self.high, start)
        if self.points is not None:
            self.points.append((start, version, group))
            if len(self.points) > MAX_POINTS:
                self._to_counts(self.points)
            return
        self._count(start, version, group)

    def _to_counts(self, points: Sequence[Point]) -> None:
        self.points = None
        self.origin = self.low
        for start, version, group in points:
            self._count(start, version, group)

    def _count(self, start: float, version: str, group: str) -> None:
        while (self.high - self.origin) / self.width >= MAX_BINS or \
                (self.origin - self.low) / self.width >= MAX_BINS:
            self._double()
        index = math.floor((start - self.origin) / self.width)
        for table, names, name in ((self.versions, self._names[0], version),
                                   (self.groups, self._names[1], group)):
            if name not in names:
                if len(names) >= MAX_CATEGORIES:
                    name = MORE
                names.add(name)
            table[index, name] = table.get((index, name), 0) + 1

    def _double(self) -> None:
        """Twice as wide bins: fine bin i goes into bin i // 2 (floor, negatives too)."""
        self.width *= 2
        for name in ("versions", "groups"):
            merged: dict[tuple[int, str], int] = {}
            for (index, key), n in getattr(self, name).items():
                merged[index // 2, key] = merged.get((index // 2, key), 0) + n
            setattr(self, name, merged)

    def panels(self) -> tuple[list[Weighted], list[Weighted]]:
        """What each panel of the chart draws, (time, name, connections) by version and
        by group: every point with 1, or each fine bin's count of a name at the bin's
        middle (kept within the first and the last start time)."""
        if self.points is not None:
            return [(t, v, 1) for t, v, _g in self.points], \
                [(t, g, 1) for t, _v, g in self.points]
        return self._binned(self.versions), self._binned(self.groups)

    def _binned(self, table: dict[tuple[int, str], int]) -> list[Weighted]:
        return [(min(self.high, max(self.low, self.origin + (index + 0.5) * self.width)),
                 name, n) for (index, name), n in sorted(table.items())]
