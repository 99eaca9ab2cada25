"""Handshake timing against one server: the result model (JSON), its statistics and the
ranking of the measured entries (the rich table is report/timing_tables.py).

The model is plain frozen dataclasses with a stable JSON form (schema "tlsprobe.timing/1",
field names are part of it: add fields, never rename them). Times are milliseconds.

    {"schema": "tlsprobe.timing/1", "tool": "tlsprobe", "host": ..., "port": ...,
     "address": "127.0.0.1", "runs": 20, "warmup": 2, "timeout_s": 5.0, "confidence": 0.95,
     "discovery": "audit" | "explicit", "stopped": null | "why the run ended early",
     "entries": [{"version": Codepoint, "group": Codepoint | null, "label": "x25519 (0x001d)",
                  "offered_suite": Cipher | null, "cipher_suite": Cipher | null,
                  "status": "measured" | "refused" | "inconclusive" | "mismatch" | "failing"
                            | "not_run",
                  "detail": str | null, "runs": 20, "failures": 0, "hello_retry": false,
                  "connect_ms": Stats, "handshake_ms": Stats, "total_ms": Stats,
                  "client_cpu_ms": Stats, "wait_ms": Stats, "client_kex_ms": 0.09,
                  "handshakes_per_s": 512.3, "rank": 1, "ci_overlaps_previous": false,
                  "samples_ms": [...], "connect_samples_ms": [...],
                  "cpu_samples_ms": [...]}],
     "rankings": [{"version": Codepoint, "order": [labels, cheapest first], "cheapest": label,
                   "slowest": label, "ratio": 1.8, "distinct": true, "verdict": "..."}], ...}

Stats: {"n", "median", "p90", "min", "max", "mean", "ci_low", "ci_high", "ci_level"}; the
confidence interval is the distribution-free order-statistics interval for the median
(exact binomial coverage `ci_level` >= the requested confidence; null when too few runs).

`hello_retry`: the server answered a measured handshake's first ClientHello with a
HelloRetryRequest (asking for a group or only for a cookie); its times include that second
round trip (the table says so in a note).
`handshake_ms` runs from sending the ClientHello to sending our Finished, `connect_ms` is
the TCP connect, `total_ms` both. `client_cpu_ms` is this process's CPU time during the
handshake (key generation, shared secret, key schedule, record protection, parsing,
signature check); `wait_ms` = handshake - client CPU: the server's work plus the network.
`client_kex_ms` is our key generation plus shared secret alone, timed in-process with the
same kex calls. `handshakes_per_s` = 1000 / median total (one connection at a time). Rank 1
is the lowest median handshake within its protocol version; a ranking's `cheapest` names it
only when its confidence interval lies below the runner-up's (`distinct`), and its verdict
says "cheapest on this server" and "N.Nx faster than" only where the intervals establish
it. The raw data, one value per measured run in the same order: `samples_ms` (handshake),
`connect_samples_ms`, `cpu_samples_ms`; every Stats above is computed from them (total =
connect + handshake, wait = max(0, handshake - CPU), per run).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, overload

from tlsprobe.errors import FailureKind
from tlsprobe.model.encode import JsonObject, document, dumps, run_head
from tlsprobe.model.probe import Cipher, Codepoint

TIMING_SCHEMA = "tlsprobe.timing/1"



class EntryStatus(StrEnum):
    """What became of one timing entry (`EntryTiming.status`)."""

    MEASURED = "measured"       # every figure below is from `runs` handshakes
    REFUSED = "refused"         # the server answered with an alert or a close, never a handshake
    INCONCLUSIVE = "inconclusive"   # no answer to decide by: every try timed out or failed
                                    # on the network (the detail says how); not a refusal
    MISMATCH = "mismatch"       # the server negotiated something else than what was offered
    FAILING = "failing"         # measured for a while, then failed repeatedly (figures partial)
    NOT_RUN = "not_run"         # skipped (the whole run stopped, or we cannot compute the group)


MEASURED, REFUSED, MISMATCH = EntryStatus.MEASURED, EntryStatus.REFUSED, EntryStatus.MISMATCH
FAILING, NOT_RUN = EntryStatus.FAILING, EntryStatus.NOT_RUN
INCONCLUSIVE = EntryStatus.INCONCLUSIVE


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 1]."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def median_ci_ranks(n: int, confidence: float) -> tuple[int, int, float] | None:
    """0-based ranks (lo, hi) of the order-statistics confidence interval for the median of
    `n` samples, and its exact coverage; None when even (min, max) covers less.

    The median lies below the k-th smallest of n samples with probability P(B >= k) for
    B ~ Binomial(n, 1/2), so [x_(k), x_(n+1-k)] covers it with 1 - 2 P(B <= k - 1).
    """
    if n < 1:
        return None
    alpha = 1.0 - confidence
    cdf, best = 0.0, None
    for k in range(1, n // 2 + 1):                 # k: 1-based rank of the lower bound
        cdf += math.comb(n, k - 1) / 2.0 ** n       # P(B <= k - 1)
        if 2 * cdf > alpha:
            break
        best = (k - 1, n - k, 1.0 - 2 * cdf)
    return best


@dataclass(frozen=True)
class Stats:
    """Summary of one series of timings (milliseconds)."""

    n: int
    median: float
    p90: float
    min: float
    max: float
    mean: float
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None

    @classmethod
    def of(cls, samples_ms: Sequence[float], confidence: float = 0.95) -> Stats | None:
        if not samples_ms:
            return None
        xs = sorted(samples_ms)
        ranks = median_ci_ranks(len(xs), confidence)
        lo, hi, level = (xs[ranks[0]], xs[ranks[1]], ranks[2]) if ranks else (None, None, None)
        return cls(n=len(xs), median=_r(percentile(xs, 0.5)), p90=_r(percentile(xs, 0.9)),
                   min=_r(xs[0]), max=_r(xs[-1]), mean=_r(sum(xs) / len(xs)),
                   ci_low=_r(lo), ci_high=_r(hi),
                   ci_level=None if level is None else round(level, 4))


@overload
def _r(value: float) -> float: ...
@overload
def _r(value: None) -> None: ...
def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass(frozen=True)
class EntryTiming:
    """N handshakes with one group (and optionally one suite) in one protocol version."""

    version: Codepoint
    group: Codepoint | None
    label: str
    status: EntryStatus
    detail: str | None = None
    offered_suite: Cipher | None = None
    cipher_suite: Cipher | None = None
    runs: int = 0
    failures: int = 0
    hello_retry: bool = False
    connect_ms: Stats | None = None
    handshake_ms: Stats | None = None
    total_ms: Stats | None = None
    client_cpu_ms: Stats | None = None
    wait_ms: Stats | None = None
    client_kex_ms: float | None = None
    handshakes_per_s: float | None = None
    rank: int | None = None
    ci_overlaps_previous: bool | None = None
    samples_ms: tuple[float, ...] = ()           # handshake time of each run, in order
    connect_samples_ms: tuple[float, ...] = ()   # its TCP connect
    cpu_samples_ms: tuple[float, ...] = ()       # our CPU time in its handshake

    @property
    def name(self) -> str:
        """The label, with the pinned suite when there is one (as rankings name entries)."""
        suite = self.offered_suite
        return self.label if suite is None else f"{self.label} with {suite.iana_name}"

    @property
    def ranked(self) -> bool:
        return self.status in (MEASURED, FAILING) and self.handshake_ms is not None


def figures(runs: Sequence[tuple[float, float, float]], confidence: float) -> dict[str, Any]:
    """The measured fields of an EntryTiming from (connect, handshake, client CPU) seconds
    per run."""
    def ms(values: Sequence[float]) -> Stats | None:
        return Stats.of([v * 1000.0 for v in values], confidence)
    total = ms([c + h for c, h, _ in runs])
    return {"runs": len(runs), "connect_ms": ms([c for c, _, _ in runs]),
            "handshake_ms": ms([h for _, h, _ in runs]), "total_ms": total,
            "client_cpu_ms": ms([u for _, _, u in runs]),
            "wait_ms": ms([max(0.0, h - u) for _, h, u in runs]),
            "handshakes_per_s": round(1000.0 / total.median, 1) if total and total.median
            else None, "samples_ms": tuple(round(h * 1000.0, 4) for _, h, _ in runs),
            "connect_samples_ms": tuple(round(c * 1000.0, 4) for c, _, _ in runs),
            "cpu_samples_ms": tuple(round(u * 1000.0, 4) for _, _, u in runs)}


@dataclass(frozen=True)
class Ranking:
    """Which entry is cheapest on this server, per protocol version."""

    version: Codepoint
    order: tuple[str, ...]
    cheapest: str | None         # the lowest median when `distinct`, else None (not established)
    slowest: str | None
    ratio: float | None          # slowest median / cheapest median
    distinct: bool | None        # the cheapest's CI does not overlap the runner-up's
    verdict: str


@dataclass(frozen=True)
class TimingReport:
    host: str
    port: int
    address: str | None = None
    runs: int = 0
    warmup: int = 0
    timeout_s: float = 0.0
    confidence: float = 0.95
    discovery: str = "explicit"
    entries: tuple[EntryTiming, ...] = ()
    rankings: tuple[Ranking, ...] = ()
    stopped: str | None = None
    notes: tuple[str, ...] = ()
    duration_s: float = 0.0
    error: str | None = None
    error_kind: FailureKind | None = None
    started_at: str | None = None   # when the timing run started (ISO 8601 UTC)

    def to_dict(self) -> JsonObject:
        """The JSON object: schema and tool, then the fields."""
        return document({"schema": TIMING_SCHEMA, "tool": "tlsprobe", **run_head()}, self)

    def to_json(self, indent: int | None = 2) -> str:
        return dumps(self.to_dict(), indent=indent)


# -- ranking ---------------------------------------------------------------------------------
def _has_interval(s: Stats | None) -> bool:
    """Whether `s` has a confidence interval of its median (too few runs give none)."""
    return s is not None and s.ci_low is not None and s.ci_high is not None


def _overlap(a: Stats, b: Stats | None) -> bool:
    if b is None or a.ci_low is None or a.ci_high is None or b.ci_low is None \
            or b.ci_high is None:
        return True   # no interval: the order is not established
    return not (a.ci_high < b.ci_low or b.ci_high < a.ci_low)


def _median(entry: EntryTiming) -> float:
    """The median handshake time of a measured entry (one with figures)."""
    if entry.handshake_ms is None:
        raise ValueError(f"{entry.label}: no figures to rank")
    return entry.handshake_ms.median


def _short(name: str) -> str:
    """'ffdhe2048 (0x0100)' -> 'ffdhe2048', keeping a ' with SUITE' tail."""
    head, sep, tail = name.partition(" with ")
    return head.split(" (0x")[0] + sep + tail


def rank(entries: Sequence[EntryTiming]) -> tuple[tuple[EntryTiming, ...], tuple[Ranking, ...]]:
    """Rank measured entries by median handshake time within each version. Returns the
    entries grouped by version (in order of first appearance), cheapest first, the ones
    without figures last, with `rank` and `ci_overlaps_previous` filled in."""
    out: list[EntryTiming] = []
    rankings: list[Ranking] = []
    for version in dict.fromkeys(e.version.id for e in entries):
        mine = [e for e in entries if e.version.id == version]
        measured = sorted((e for e in mine if e.ranked and e.handshake_ms is not None),
                          key=_median)
        ranked: list[EntryTiming] = []
        prev: Stats | None = None
        for pos, e in enumerate(measured, start=1):
            ranked.append(dataclasses.replace(e, rank=pos, ci_overlaps_previous=None if prev
                                              is None else _overlap(prev, e.handshake_ms)))
            prev = e.handshake_ms
        if ranked:
            rankings.append(_ranking(ranked[0].version, ranked))
        out += ranked + [e for e in mine if not (e.ranked and e.handshake_ms is not None)]
    return tuple(out), tuple(rankings)


def _why_overlap(a: Stats | None, b: Stats | None) -> str:
    """Why two entries' order is not established: overlapping intervals, or none."""
    return ("their intervals overlap" if _has_interval(a) and _has_interval(b) else
            "too few runs for a confidence interval")


def _ranking(version: Codepoint, order: list[EntryTiming]) -> Ranking:
    """The version's verdict. "cheapest on this server" and "N.Nx faster than" are said
    only where the confidence intervals establish them; otherwise the lowest median is
    named as that, with the reason the order is not established (`cheapest` is then
    None: a run too short for intervals states no winner)."""
    first, last = order[0], order[-1]
    fm, lm = _median(first), _median(last)
    if len(order) == 1:
        return Ranking(version, (first.name,), first.name, first.name, None, None,
                       f"{version.name}: only {first.name} measured "
                       f"({fm:.2f} ms median handshake)")
    ratio = round(lm / fm, 2) if fm > 0 else None
    distinct = not order[1].ci_overlaps_previous
    beats_last = first.handshake_ms is not None and not _overlap(first.handshake_ms,
                                                                  last.handshake_ms)
    verdict = f"{version.name}: " + ("cheapest on this server: " if distinct else
                                     "lowest median: ") + first.name
    if ratio is not None:
        verdict += (f", {ratio:.1f}x faster than {_short(last.name)}" if beats_last else
                    f", median {ratio:.1f}x lower than {_short(last.name)}'s")
    if not distinct:
        verdict += (f" (not established as cheapest: not distinguishable from"
                    f" {_short(order[1].name)} at this confidence:"
                    f" {_why_overlap(first.handshake_ms, order[1].handshake_ms)})")
    elif not beats_last:
        verdict += (f" (the ratio is not established at this confidence:"
                    f" {_why_overlap(first.handshake_ms, last.handshake_ms)})")
    return Ranking(version, tuple(e.name for e in order), first.name if distinct else None,
                   last.name, ratio, distinct, verdict)


__all__ = ["FAILING", "INCONCLUSIVE", "MEASURED", "MISMATCH", "NOT_RUN", "REFUSED", "TIMING_SCHEMA",
           "EntryTiming", "Ranking", "Stats", "TimingReport", "figures", "median_ci_ranks",
           "percentile", "rank"]
