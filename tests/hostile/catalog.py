"""The catalogue of hostile-server misbehaviours: each a script plus what the probe must say.

A `Scenario` names one thing the server does wrong, the script that does it, the exit code
the probe must return (tlsprobe/errors.py) and a regular expression that the probe's single
stderr line must match: the verdict has to name the misbehaviour, not just "error".
Scripts answer with real messages (tls.py) up to the point where they break one rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .server import Conn, Script
from .tls import handshake_records

EXIT_OK, EXIT_NETWORK, EXIT_NOT_TLS, EXIT_ALERT, EXIT_PROTOCOL = 0, 3, 4, 5, 6
#: the server sent more than a limit of tlsprobe's allows (--max-*): no rule broken
EXIT_LIMIT = 8
HOLD = 12.0  # seconds a script keeps the connection open after misbehaving
FATAL, WARNING = 2, 1
HANDSHAKE_FAILURE, UNRECOGNIZED_NAME, CLOSE_NOTIFY = 40, 112, 0


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str                      # the misbehaviour, in words
    script: Script
    exit_codes: tuple[int, ...]    # accepted exit codes (usually one)
    verdict: str                   # regex the one stderr line must match ("" for success)
    args: tuple[str, ...] = ()     # extra probe arguments
    slow: bool = False             # ends only by a timeout (per-read or total)
    stdout: str = ""               # regex stdout must match (success scenarios)
    full: bool = False             # needs the full handshake (no --first-flight-only)
    tags: tuple[str, ...] = field(default_factory=tuple)


SCENARIOS: list[Scenario] = []


def scenario(what: str, exit_codes: int | tuple[int, ...], verdict: str, *,
             args: tuple[str, ...] = (), slow: bool = False, stdout: str = "",
             name: str | None = None, full: bool = False):
    def register(script: Script) -> Script:
        codes = exit_codes if isinstance(exit_codes, tuple) else (exit_codes,)
        SCENARIOS.append(Scenario(name or script.__name__, what, script, codes, verdict,
                                  args, slow, stdout, full=full))
        return script
    return register


async def _flight_then_hold(conn: Conn, *messages: bytes) -> None:
    await conn.send(handshake_records(*messages))
    await conn.hold(HOLD)




def all_scenarios() -> list[Scenario]:
    """Every registered scenario (the scenario modules register themselves on import)."""
    from . import (  # noqa: F401
        scenarios_deadline,
        scenarios_framing,
        scenarios_full,
        scenarios_negotiation,
        scenarios_tls13,
        scenarios_transport,
        scenarios_violations,
    )
    names = [s.name for s in SCENARIOS]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate scenario names: {sorted(duplicates)}")
    return list(SCENARIOS)
