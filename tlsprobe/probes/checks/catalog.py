"""The checks `scan --checks` knows beyond the audit phases, by name (the data itself is in
model/check_catalog.py, which imports nothing, so that building scan's parser and its --help
stays cheap and every layer may read it; re-exported here).

Two kinds: derived checks (derived.py, no connection) and active checks (connections of
their own, active.py names their modules), see model/check_catalog.py. Aliases stand for
several checks: `audit` (the key-exchange audit's phases), `vulns`, `hygiene`, `tolerance`,
`http`, `certs`, `all` (every check). `scan`'s default is the audit
and every check (DEFAULT), as testssl.sh and sslyze run everything unless told otherwise.
`resolve` turns the names a user gave into the audit's list (shared by scan, survey and the
Python API).
"""

from __future__ import annotations

from collections.abc import Sequence

from tlsprobe.model.check_catalog import (
    ACTIVE,
    ALIASES,
    DEFAULT,
    DERIVED,
    PHASES,
    Category,
    Entry,
    expand_aliases,
)

__all__ = ["ACTIVE", "ALIASES", "DEFAULT", "DERIVED", "PHASES", "Entry", "expand_aliases",
           "read_only", "resolve"]


def _expand(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` with the phases the derived checks among them read (derived.py `expand`,
    imported only when one is named: `scan --groups-only` starts without the checks)."""
    if not any(n in DERIVED for n in names):
        return names
    from tlsprobe.probes.checks.derived import expand
    return expand(names)


def resolve(names: Sequence[str], option: str = "--checks") -> tuple[str, ...]:
    """Check names as a user gives them (aliases allowed) -> the audit's checks, in their
    order, with the phases the derived and active checks read. `-NAME` leaves a check (or
    an alias's checks) out: `all,-sct`; exclusions alone start from DEFAULT (`-robot`: the
    default run without robot). A name that is not known is a UsageError naming `option`
    and the closest known names; so is excluding a phase another asked check reads, or
    leaving nothing."""
    return _resolved(names, option)[0]


def read_only(names: Sequence[str], option: str = "--checks") -> tuple[str, ...]:
    """The audit phases `resolve` adds only because the checks named read them (`--checks
    heartbleed` runs the versions phase, `--checks poodle` the suites phase): they run, but
    their own findings are not what was asked for (policy/findings.py `judge`). The `cert`
    phase is the certificate checks' own (their chain table and trust verdict): asked with
    them; ocsp_stapling (a hygiene check) reads it only for the chains of other key types,
    as `--checks heartbleed` reads the versions phase."""
    checks, named = _resolved(names, option)
    asked = set(named)
    if any(n in ACTIVE and "cert" in ACTIVE[n].needs and
           ACTIVE[n].category == Category.certificate for n in named):
        asked.add("cert")
    return tuple(p for p in PHASES if p in checks and p not in asked)


def _resolved(names: Sequence[str], option: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`resolve`'s checks, and the names the user gave with their aliases expanded."""
    from tlsprobe.errors import UsageError, did_you_mean
    items = [n.strip().lower() for n in names if n.strip()]
    known = PHASES + DERIVED + tuple(ACTIVE) + tuple(ALIASES)
    plus = [n for n in items if not n.startswith("-")]
    minus = [n[1:].strip() for n in items if n.startswith("-")]
    if not items:
        raise UsageError(f"{option}: empty list; give at least one check, e.g. groups "
                         f"(known: {', '.join(known)})")
    bad = next((n for n in plus + minus if n not in known), None)
    if bad is not None:
        raise UsageError(f"{option}: unknown check {bad!r}"
                         f"{did_you_mean(bad, known) or ' (known: ' + ', '.join(known) + ')'}")
    left_out = set(expand_aliases(tuple(minus)))
    named = tuple(n for n in expand_aliases(tuple(plus or DEFAULT)) if n not in left_out)
    if not named:
        raise UsageError(f"{option}: {','.join(items)} leaves no check to run")
    wanted = set(_expand(named))
    for name in named:
        if name in ACTIVE:
            wanted.update(ACTIVE[name].needs)
    needed = [n for n in PHASES if n in left_out and n in wanted]
    if needed:
        users = [n for n in named if n != needed[0] and needed[0] in
                 (set(_expand((n,))) | set(ACTIVE[n].needs if n in ACTIVE else ()))]
        raise UsageError(f"{option}: -{needed[0]} cannot be left out: "
                         f"{', '.join(users[:6])}{' and more' if len(users) > 6 else ''} "
                         "read it (leave them out too)")
    return tuple(c for c in PHASES + DERIVED + tuple(ACTIVE) if c in wanted), named
