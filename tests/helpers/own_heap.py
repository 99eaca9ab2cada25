"""A command run inside the test process, seeing only its own objects on the garbage
collector's heap, as it would in a `tlsprobe` process of its own.

An xdist worker holds every object its earlier tests left (modules, fixtures, reports,
caches): hundreds of thousands to millions. A full collection walks all of them, and the
timing probe runs one between its rounds (probes/timing/run.py: the collector is off
inside a timed handshake); with two million objects on the heap each costs about 0.3 s of
CPU, which made the timing tests 10 to 20 times slower in a loaded CI run than alone
(tests/report/test_report_plots.py's timing plots: 5.5 s alone, 53-115 s in CI). Frozen
(gc.freeze: left out of every collection, not freed, not copied), the earlier objects cost
nothing; they are unfrozen when the command is done, so that the worker's collector goes
on freeing what the tests leave (nothing stays frozen across tests)."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def earlier_objects_frozen() -> Iterator[None]:
    """Freeze what the process holds now for the duration of the block. Whatever the block
    froze itself (the pcap and scan commands freeze their imports) is unfrozen with it at
    the end, as it is at the end of a `tlsprobe` process."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
