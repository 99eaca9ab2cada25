"""Result model of `tlsprobe speed` and its JSON form (encoded by model/encode.py; the
classes whose JSON members differ from their fields say so in `json_shape`).

JSON (`tlsprobe speed --json`), schema "tlsprobe.speed/1":

    {
      "schema": "tlsprobe.speed/1",
      "tlsprobe": "0.1.0",
      "library": {"cryptography": "50.0.2", "openssl": "OpenSSL 4.0.3 ..."},
      "seconds": 3.0,             # requested measuring time per figure (per process)
      "processes": 1,             # --multi: figures are the sum over processes
      "block_sizes": [16, 64, 256, 1024, 8192, 16384],
      "interrupted": false,       # true: Ctrl-C; only the figures completed before it
      "results": [
        {"algorithm": "x25519", "kind": "kex",      # kind: kex | kem | sig | aead
         "description": "253 bits ecdh (X25519)",
         "figures": [
           {"operation": "keygen",                  # keygen derive encaps decaps sign verify
            "block_size": null,                     # AEAD: bytes per call ("encrypt")
            "count": 95321, "seconds": 3.0001,      # calls made, time spent in the loop
            "per_second": 31772.6,                  # calls per second (summed over processes)
            "bytes_per_second": null,               # AEAD: block_size * per_second
            "per_process": null}]}                  # --multi N: the N workers' per_second
      ],
      "openssl_comparison": null | {                # with --compare-openssl
        "binary": "/usr/bin/openssl", "version": "OpenSSL 3.0.19 ...",
        "seconds": 3, "error": null,                # error: why nothing could be compared
        "commands": ["openssl speed -elapsed -seconds 3 ecdhx25519"],
        "rows": [{"algorithm": "x25519", "operation": "derive", "block_size": null,
                  "unit": "op/s",                   # or "bytes/s" for AEADs
                  "tlsprobe": 31772.6, "openssl": 31694.0,
                  "ratio": 1.002,                   # tlsprobe / openssl; null if not measured
                  "note": null}]}                   # why openssl has no figure
    }
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA = "tlsprobe.speed/1"


@dataclass(frozen=True)
class Figure:
    """One measured operation of one algorithm."""

    operation: str
    count: int
    seconds: float
    per_second: float
    block_size: int | None = None
    per_process: tuple[float, ...] | None = None  # --multi: each worker's calls per second

    @property
    def bytes_per_second(self) -> float | None:
        return None if self.block_size is None else self.per_second * self.block_size

    @property
    def label(self) -> str:
        return self.operation if self.block_size is None else f"{self.block_size} bytes"

    def json_shape(self) -> dict[str, object]:
        """The JSON members: the block size first, and the computed bytes per second."""
        return {"operation": self.operation, "block_size": self.block_size, "count": self.count,
                "seconds": self.seconds, "per_second": self.per_second,
                "bytes_per_second": self.bytes_per_second, "per_process": self.per_process}


@dataclass(frozen=True)
class AlgorithmResult:
    """All figures of one algorithm, in the order they were measured."""

    algorithm: str
    kind: str
    description: str
    figures: tuple[Figure, ...]

    def figure(self, operation: str, block_size: int | None = None) -> Figure | None:
        for fig in self.figures:
            if fig.operation == operation and fig.block_size == block_size:
                return fig
        return None


@dataclass(frozen=True)
class ComparisonRow:
    """tlsprobe's figure beside `openssl speed`'s for the same primitive and operation."""

    algorithm: str
    operation: str
    block_size: int | None
    unit: str
    tlsprobe: float
    openssl: float | None
    note: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.openssl is None or self.openssl <= 0:
            return None
        return self.tlsprobe / self.openssl

    def json_shape(self) -> dict[str, object]:
        """The JSON members: the fields with the computed ratio before the note."""
        return {"algorithm": self.algorithm, "operation": self.operation,
                "block_size": self.block_size, "unit": self.unit, "tlsprobe": self.tlsprobe,
                "openssl": self.openssl, "ratio": self.ratio, "note": self.note}


@dataclass(frozen=True)
class Comparison:
    """What `openssl speed` measured in the same run; `error` set when it could not run."""

    binary: str | None
    version: str | None
    seconds: int
    rows: tuple[ComparisonRow, ...] = ()
    commands: tuple[str, ...] = ()
    error: str | None = None

    def json_shape(self) -> dict[str, object]:
        """The JSON members: the error before the commands and rows."""
        return {"binary": self.binary, "version": self.version, "seconds": self.seconds,
                "error": self.error, "commands": self.commands, "rows": self.rows}


@dataclass(frozen=True)
class SpeedReport:
    """A whole `tlsprobe speed` run."""

    tlsprobe_version: str
    cryptography_version: str
    openssl_version: str
    seconds: float
    processes: int
    block_sizes: tuple[int, ...]
    results: tuple[AlgorithmResult, ...]
    comparison: Comparison | None = field(default=None)
    interrupted: bool = False  # Ctrl-C: `results` holds only the figures completed before
    started_at: str | None = None    # when the run started (ISO 8601 UTC)
    duration_s: float | None = None  # the whole run, the openssl comparison included

    def json_shape(self) -> dict[str, object]:
        """The JSON document: schema, versions (the library ones nested), then the run."""
        return {
            "schema": SCHEMA,
            "tlsprobe": self.tlsprobe_version,
            "library": {"cryptography": self.cryptography_version,
                        "openssl": self.openssl_version},
            "seconds": self.seconds,
            "processes": self.processes,
            "block_sizes": self.block_sizes,
            "interrupted": self.interrupted,
            "results": self.results,
            "openssl_comparison": self.comparison,
            # the members every JSON document of tlsprobe has (issue 33)
            "tlsprobe_version": self.tlsprobe_version,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
        }
