"""Elimination: offer all remaining values, note the server's pick, remove it, repeat.

The picks come out in the server's order of preference if it enforces one. To tell that
apart from a server that follows the client's order, successive offers alternate between
ascending and descending order: a server that follows the client's order must pick the
first supported value of each list as sent, so a single pick that is not the first one
proves the server uses its own order, at no extra cost. Only when every pick is also what
client order predicts does one more connection decide: the top two picks offered in
reverse (server order keeps the first pick, client order takes the other).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tlsprobe.model.audit import ORDER_CLIENT, ORDER_SERVER, ORDER_SINGLE, ORDER_UNKNOWN
from tlsprobe.model.vocab import Order


@dataclass
class Elimination:
    """State of one elimination over codepoints (groups, suites or signature schemes)."""

    remaining: list[int]
    found: list[int] = field(default_factory=list)
    not_supported: list[int] = field(default_factory=list)
    inconclusive: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[tuple[tuple[int, ...], int]] = field(default_factory=list)
    offers: int = 0

    def offer(self) -> list[int]:
        """The remaining values in the order of the next hello (alternating)."""
        ordered = list(self.remaining)
        self.offers += 1
        return ordered if self.offers % 2 else list(reversed(ordered))

    def pick(self, value: int, offered: list[int] | None = None) -> None:
        if offered is not None:
            self.steps.append((tuple(offered), value))
        self.found.append(value)
        self.remaining.remove(value)

    def refuse_rest(self) -> None:
        self.not_supported += self.remaining
        self.remaining = []

    def give_up(self, why: str) -> None:
        if self.remaining:
            self.notes.append(f"not established for {len(self.remaining)} value(s): {why}")
        self.inconclusive += self.remaining
        self.remaining = []

    def order_from_steps(self) -> Order | None:
        """ORDER_SINGLE / ORDER_UNKNOWN / ORDER_SERVER when the picks already tell, else None
        (every pick is also what client order predicts: one more connection must decide)."""
        if len(self.found) < 2:
            return ORDER_SINGLE if self.found else ORDER_UNKNOWN
        if self.inconclusive:
            return None
        supported = set(self.found)
        for offered, picked in self.steps:
            first = next((v for v in offered if v in supported), None)
            if first is not None and first != picked:
                return ORDER_SERVER
        return None

    def reverse_pair(self) -> list[int]:
        """The offer of the deciding connection: second pick first, then the first pick."""
        return [self.found[1], self.found[0]]

    def decide(self, choice: int | None) -> Order:
        if choice == self.found[0]:
            return ORDER_SERVER
        if choice == self.found[1]:
            return ORDER_CLIENT
        return ORDER_UNKNOWN

    def listed(self, order: str, candidates: list[int]) -> list[int]:
        """The supported values for the report: in the server's order when it has one; when
        it follows the client's, the picks only echo the alternating offers, so they are
        listed in candidate order instead."""
        if order != ORDER_CLIENT:
            return list(self.found)
        rank = {v: i for i, v in enumerate(candidates)}
        return sorted(self.found, key=lambda v: rank.get(v, len(rank)))
