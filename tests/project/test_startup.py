"""Start-up cost: `tlsprobe --help`, `--version` and `SUBCOMMAND --help` import nothing heavy.

Building the parser must not import the engine, the key exchange, the registry, the codec,
`cryptography` or rich (issue 12 item 6: they made `--version` take 0.49 s against 0.06 s for
a bare interpreter); each command imports them when it runs. Judged by the list of modules
the child imported, never by its time, so that a busy machine cannot fail (or pass) it. Two
views of that list: `python -X importtime -m tlsprobe ...` (the real entry point; importtime
does not report a module loaded by importlib.import_module itself, only what it imports) and
`sys.modules` after `cli.main(...)` in a child (complete).

The values the parsers write out instead of importing (version codes, limit defaults,
severities) are checked against their source here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("tlsprobe.kex", "tlsprobe.engine", "tlsprobe.registry", "tlsprobe.wire",
         "cryptography", "rich",
         # the static catalog of the checks imports every check module: scan's parser
         # reads their names from model/check_catalog.py instead
         "tlsprobe.probes.checks.active", "tlsprobe.probes.checks.derived")
COMMANDS = ("scan", "pcap", "speed", "demo", "timing")
# `speed --help` counts the algorithms of its catalog for the epilog ("N algorithms, M
# figures ..."), and the catalog is made of `cryptography` objects (and the FFDHE primes of
# tlsprobe.kex): that help alone imports them, when it is shown (ArgumentParser's
# epilog_factory), never to build the parser.
ALLOWED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("speed", "--help"): ("cryptography", "tlsprobe.kex")}

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$", re.MULTILINE)
_MODULES = """\
import sys
from tlsprobe.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
print("\\0MODULES", *sorted(sys.modules), file=sys.stderr)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}


def importtime_modules(*argv: str) -> set[str]:
    """The modules `python -X importtime -m tlsprobe ARGV` reports importing."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tlsprobe", *argv],
                          capture_output=True, text=True, cwd=REPO, env=_env(), timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return {m.group(2) for m in _IMPORTED.finditer(done.stderr)}


def loaded_modules(*argv: str) -> set[str]:
    """sys.modules after `cli.main(ARGV)` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _MODULES, *argv], capture_output=True,
                          text=True, cwd=REPO, env=_env(), timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stderr.rsplit("\0MODULES", 1)[1]
    return set(line.split())


def heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted(m for m in modules
                  if any(m == h or m.startswith(h + ".") for h in HEAVY)
                  and not any(m == a or m.startswith(a + ".") for a in allowed))


CASES = [("--version",), ("--help",)] + [(c, "--help") for c in COMMANDS] + \
    [(c, "--version") for c in COMMANDS]


@pytest.mark.parametrize("argv", CASES, ids=" ".join)
def test_parser_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    allowed = ALLOWED.get(argv, ())
    seen = importtime_modules(*argv)
    assert "tlsprobe.cli" in seen and "tlsprobe.errors" in seen, sorted(seen)  # parsed
    assert heavy(seen, allowed) == [], f"tlsprobe {' '.join(argv)} imported them"
    loaded = loaded_modules(*argv)
    command = argv[0] if argv[0] in COMMANDS else "probe"
    assert f"tlsprobe.commands.{command}" in loaded
    assert heavy(loaded, allowed) == [], f"tlsprobe {' '.join(argv)} imported them"


def test_the_check_sees_a_heavy_import() -> None:
    """The two views do report the heavy modules a command imports when it runs (here a
    usage error after the registry parsed --groups), so the test above can fail."""
    argv = ("127.0.0.1:1", "--groups", "x25519", "--sni", "")
    assert "tlsprobe.registry" in heavy(loaded_modules(*argv))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tlsprobe", *argv],
                          capture_output=True, text=True, cwd=REPO, env=_env(), timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "tlsprobe.registry" in {m.group(2) for m in _IMPORTED.finditer(done.stderr)}


def test_written_out_values_match_their_source() -> None:
    from tlsprobe.commands import common, probe, scan
    from tlsprobe.engine import config as cfg
    from tlsprobe.engine.client import Limits
    from tlsprobe.model.audit import SEVERITIES
    from tlsprobe.model.severity import Severity

    assert [code for _, code, _ in probe.VERSION_FLAGS] == \
        [cfg.TLS13, cfg.TLS12, cfg.TLS11, cfg.TLS10, cfg.SSL30]
    assert common.LIMIT_DEFAULTS == {name: getattr(Limits(), name) for name in
                                     probe.LIMIT_OPTIONS}
    from tlsprobe.probes.timing.plan import TimingOptions
    from tlsprobe.requests import timing
    assert (timing.TLS13, timing.TLS12) == (cfg.TLS13, cfg.TLS12)
    defaults = TimingOptions()
    assert (timing.DEFAULT_RUNS, timing.DEFAULT_WARMUP, timing.DEFAULT_TIMEOUT,
            timing.DEFAULT_CONFIDENCE) == (defaults.runs, defaults.warmup, defaults.timeout,
                                           defaults.confidence)
    assert scan.SEVERITIES == SEVERITIES
    assert tuple(Severity) == SEVERITIES


def test_speed_help_epilog_is_the_catalogs() -> None:
    """The lazily made epilog is the one the catalog gives, in the help that is shown."""
    from tlsprobe.cli import build_parser
    from tlsprobe.commands.speed import _time_note
    from tlsprobe.speed import catalog

    text = " ".join(build_parser("speed").format_help().split())
    assert " ".join(_time_note().split()) in text
    assert f"{len(catalog.ALGORITHMS)} algorithms" in text
