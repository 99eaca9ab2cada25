"""`openssl speed`-like benchmarks of key exchange groups, signatures and AEADs.

Everything is measured on `cryptography` directly (see harness.py for how the loop keeps
its own cost out of the figures). Entry points:

- `catalog.resolve(names) -> list[Algorithm]` (raises `UnknownAlgorithm`), `catalog.groups()`;
- `run_speed(algorithms, seconds, processes=1, block_sizes=..., progress=None,
  compare_openssl=False, openssl_binary=None) -> SpeedReport`;
- `model.encode.dumps(report)` (schema in model/speed.py) and `text.format_report(report)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import cryptography
from cryptography.hazmat.backends.openssl import backend

from tlsprobe._version import __version__
from tlsprobe.model.encode import started_at
from tlsprobe.model.speed import (
    AlgorithmResult,
    Comparison,
    ComparisonRow,
    Figure,
    SpeedReport,
)
from tlsprobe.speed import openssl as openssl_compare
from tlsprobe.speed.base import DEFAULT_BLOCK_SIZES, Algorithm, Op
from tlsprobe.speed.catalog import (
    ALGORITHMS,
    UnavailableAlgorithm,
    UnknownAlgorithm,
    groups,
    resolve,
)
from tlsprobe.speed.harness import Timing, measure
from tlsprobe.speed.runner import Interrupted, Progress, SpeedError, figure_total, run

__all__ = ["ALGORITHMS", "DEFAULT_BLOCK_SIZES", "Algorithm", "AlgorithmResult", "Comparison",
           "ComparisonRow", "Figure", "Op", "Progress", "SpeedError", "SpeedInterrupted", "SpeedReport",
           "Timing", "UnavailableAlgorithm", "UnknownAlgorithm", "figure_total", "groups", "library_versions", "measure",
           "resolve", "run", "run_speed"]


def library_versions() -> tuple[str, str]:
    """(cryptography version, the OpenSSL it is built with)."""
    return cryptography.__version__, backend.openssl_version_text()


class SpeedInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_speed`: `report` has what was measured before (interrupted=True)."""

    def __init__(self, report: SpeedReport) -> None:
        super().__init__()
        self.report = report


def run_speed(algorithms: Sequence[Algorithm], seconds: float, *, processes: int = 1,
              block_sizes: Sequence[int] = DEFAULT_BLOCK_SIZES,
              progress: Progress | None = None, compare_openssl: bool = False,
              openssl_binary: str | None = None,
              openssl_progress: Callable[[str], None] | None = None) -> SpeedReport:
    """Measure `algorithms` and, if asked, run `openssl speed` on the same primitives after."""
    crypto_version, openssl_version = library_versions()
    t0 = time.monotonic()

    def make(results: Sequence[AlgorithmResult], comparison: Comparison | None = None,
             interrupted: bool = False) -> SpeedReport:
        elapsed = time.monotonic() - t0
        return SpeedReport(__version__, crypto_version, openssl_version, seconds, processes,
                           tuple(block_sizes), tuple(results), comparison, interrupted,
                           started_at=started_at(elapsed), duration_s=round(elapsed, 3))

    try:
        results = run(algorithms, seconds, processes=processes, block_sizes=block_sizes,
                      progress=progress)
    except Interrupted as exc:
        raise SpeedInterrupted(make(exc.results, interrupted=True)) from None
    comparison = None
    if compare_openssl:
        try:
            comparison = openssl_compare.compare(algorithms, results, seconds=seconds,
                                                 processes=processes, binary=openssl_binary,
                                                 progress=openssl_progress)
        except KeyboardInterrupt:  # during openssl speed: our own figures are all there
            raise SpeedInterrupted(make(results, interrupted=True)) from None
    return make(results, comparison)
