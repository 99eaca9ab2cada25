"""The timing harness: call one operation in a tight loop for a fixed time.

The figure must be the library's speed, not ours. So the loop body is the call and
nothing else: `func(*args)` is unpacked into a per-arity loop (`f(a, b)` with local names,
no attribute lookups, no closures, no per-iteration clock reads), iterating over
`itertools.repeat` as `timeit` does. The clock (`time.perf_counter`) is read once per batch;
batches are sized from the measured cost of the previous one so that about twenty batches
fill the requested time and the last one ends close to it. One untimed call warms caches
and lazily initialised library state first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from time import perf_counter

from tlsprobe.speed.base import Op

# Batch length bounds (seconds): long enough that the per-batch clock read is noise,
# short enough that the total lands close to the requested time.
_MIN_BATCH = 0.001
_MAX_BATCH = 0.1


def _loop0(n: int, f: Callable[[], object]) -> None:
    for _ in repeat(None, n):
        f()


def _loop1(n: int, f: Callable[[object], object], a: object) -> None:
    for _ in repeat(None, n):
        f(a)


def _loop2(n: int, f: Callable[[object, object], object], a: object, b: object) -> None:
    for _ in repeat(None, n):
        f(a, b)


def _loop3(n: int, f: Callable[[object, object, object], object], a: object, b: object,
           c: object) -> None:
    for _ in repeat(None, n):
        f(a, b, c)


def _loop4(n: int, f: Callable[[object, object, object, object], object], a: object, b: object,
           c: object, d: object) -> None:
    for _ in repeat(None, n):
        f(a, b, c, d)


_LOOPS: tuple[Callable[..., None], ...] = (_loop0, _loop1, _loop2, _loop3, _loop4)


@dataclass(frozen=True)
class Timing:
    """`count` calls took `seconds` of wall-clock time (inside the loops only)."""

    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0


def measure(op: Op, seconds: float) -> Timing:
    """Call `op` repeatedly for about `seconds` (at least once) and return the timing."""
    if len(op.args) >= len(_LOOPS):
        raise ValueError(f"operation {op.name!r} takes {len(op.args)} arguments; at most "
                         f"{len(_LOOPS) - 1} are supported")
    loop = _LOOPS[len(op.args)]
    func, args = op.func, op.args
    loop(1, func, *args)  # warm-up, untimed
    batch_target = min(max(seconds / 20.0, _MIN_BATCH), _MAX_BATCH)
    count = 0
    elapsed = 0.0
    n = 1
    clock = perf_counter
    while True:
        start = clock()
        loop(n, func, *args)
        spent = clock() - start
        count += n
        elapsed += spent
        remaining = seconds - elapsed
        if remaining <= 0:
            return Timing(count, elapsed)
        per_call = spent / n if spent > 0 else 1e-9
        wanted = min(batch_target, remaining) / per_call
        # Grow at most 16-fold per step so one fast outlier batch cannot overshoot.
        n = max(1, min(int(wanted), n * 16))
