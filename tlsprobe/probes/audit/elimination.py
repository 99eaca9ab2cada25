"""Elimination: offer all remaining values, note the server's pick, remove it, repeat.

The picks come out in the server's order of preference if it enforces one. To tell that
apart from a server that follows the client's order, successive offers alternate between
ascending and descending order: a server that follows the client's order must pick the
first supported value of each list as sent, so a single pick that is not the first one
proves the server uses its own order, at no extra cost. Only when every pick is also what
client order predicts does one more connection decide: the top two picks offered in
reverse (server order keeps the first pick, client order takes the other).

`kind` (optional) splits the values into classes the server cannot choose between by
preference alone: TLS 1.2 signature schemes by key type, since the suite picks the
certificate (a server with an RSA and an ECDSA one signs with ECDSA while an ECDSA scheme is
offered, whatever RSA schemes come first). Picks are then compared with the client's order
within their class only, and the deciding pair is two picks of one class.
"""

from __future__ import annotations

from collections.abc import Callable
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
    kind: Callable[[int], object] = field(default=lambda v: None)

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
            first = next((v for v in offered if v in supported
                          and self.kind(v) == self.kind(picked)), None)
            if first is not None and first != picked:
                return ORDER_SERVER
        return None if self._pair() is not None else ORDER_UNKNOWN

    def _pair(self) -> tuple[int, int] | None:
        """The first two picks of one kind (the first pick's when it has a second)."""
        for a in self.found:
            b = next((v for v in self.found if v != a and self.kind(v) == self.kind(a)), None)
            if b is not None:
                return (a, b) if self.found.index(a) < self.found.index(b) else (b, a)
        return None

    def reverse_pair(self) -> list[int]:
        """The offer of the deciding connection: second pick first, then the first pick."""
        first, second = self._pair() or (self.found[0], self.found[1])
        return [second, first]

    def decide(self, choice: int | None) -> Order:
        first, second = self._pair() or (self.found[0], self.found[1])
        if choice == first:
            return ORDER_SERVER
        if choice == second:
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
