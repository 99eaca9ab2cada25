"""How many worker processes a request may ask for (`--jobs`, `--workers`): a small module
of its own, so that reading a capture does not load the scan's request."""

from __future__ import annotations

import os

from tlsprobe.errors import UsageError

#: worker processes per CPU that `pcap --jobs` and `survey --workers` may ask for: their
#: work is CPU-bound, so more would only cost memory (and a huge count would fork until the
#: machine gives out instead of failing with a message)
PROCESSES_PER_CPU = 4


def check_process_count(value: int, flag: str) -> None:
    """A usage error (exit 2) unless 1 <= value <= PROCESSES_PER_CPU per CPU."""
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, not {value}")
    limit = PROCESSES_PER_CPU * (os.cpu_count() or 1)
    if value > limit:
        raise UsageError(f"{flag} {value}: at most {limit} on this machine "
                         f"({PROCESSES_PER_CPU} per CPU; the work is CPU-bound)")


__all__ = ["PROCESSES_PER_CPU", "check_process_count"]
