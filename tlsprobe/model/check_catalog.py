"""The names of `scan`'s checks: pure data (it imports nothing), so that building scan's
parser and its --help stays cheap, and so that every layer may read it (policy/codes.py
derives the finding codes `check.NAME` from it). probes/checks/catalog.py, which re-exports
these names, says what they mean and resolves what a user asks for.

Two kinds. Derived checks (probes/checks/derived.py) are read off what the audit enumerated
and make no connection; their names are written out here and a test checks them against
derived.py's checks. Active checks make connections of their own: each entry names its
report section, the audit phases it reads (the versions the server speaks, its suites), and
whether it can hurt a server (bounded, and listed as such in --help so that a user can leave
it out); the check itself is the `CHECK` of probes/checks/active.py's catalog under the same
name (a test keeps the two equal, in order).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ACTIVE", "ALIASES", "DEFAULT", "DERIVED", "PHASES", "Entry", "expand_aliases"]


class Entry(NamedTuple):
    """One active check: report section (model/checks.py CATEGORIES), audit phases it
    reads, whether it can hurt a server."""

    category: str
    needs: tuple[str, ...] = ("versions",)
    harmful: bool = False


#: the key-exchange audit's phases, in their order (the `audit` alias)
PHASES = ("versions", "groups", "pq", "suites", "sigalgs", "cert")
#: what the certificate checks read besides the versions: the `cert` phase (the chain shown
#: and its trust verdict, whichever version the server speaks)
CHAIN = ("versions", "cert")
#: what `scan` runs when --checks is not given
DEFAULT = ("audit", "all")

#: vulnerability checks read from the audit (probes/checks/derived.py), in report order
DERIVED = ("poodle", "freak", "logjam", "dh", "rc4", "sweet32", "beast", "null", "anon")

#: active checks, in report order within their section
ACTIVE: dict[str, Entry] = {
    "fallback": Entry("vulnerability"),
    "heartbleed": Entry("vulnerability", harmful=True),
    "ccs": Entry("vulnerability"),
    "ticketbleed": Entry("vulnerability"),
    "resumption": Entry("hygiene"),
    "early_data": Entry("hygiene"),
    "ocsp_stapling": Entry("hygiene"),
    "ems": Entry("hygiene"),
    "etm": Entry("hygiene"),
    "large_hello": Entry("tolerance"),
    "split_record": Entry("tolerance"),
    "split_segment": Entry("tolerance"),
    "grease": Entry("tolerance"),
    "unknown_version": Entry("tolerance"),
    "tls13_intolerance": Entry("tolerance"),
    "hsts": Entry("http"),
    "breach": Entry("http"),
    "server_banner": Entry("http"),
    "cert_lifetime": Entry("certificate", needs=CHAIN),
    "sct": Entry("certificate", needs=CHAIN),
    "key_usage": Entry("certificate", needs=CHAIN),
    "must_staple": Entry("certificate", needs=CHAIN),
    "compression": Entry("vulnerability"),
    "client_renegotiation": Entry("vulnerability", harmful=True),
    "robot": Entry("vulnerability", needs=("versions", "suites"), harmful=True),
    "sslv2": Entry("vulnerability"),
    "renegotiation": Entry("hygiene"),
    "downgrade_sentinel": Entry("hygiene"),
}

_BY_CATEGORY = {"vulns": "vulnerability", "hygiene": "hygiene", "tolerance": "tolerance",
                "http": "http", "certs": "certificate"}


def _aliases() -> dict[str, tuple[str, ...]]:
    out = {alias: tuple(n for n, e in ACTIVE.items() if e.category == category)
           for alias, category in _BY_CATEGORY.items()}
    out["vulns"] = DERIVED + out["vulns"]
    out["all"] = DERIVED + tuple(ACTIVE)
    out["audit"] = PHASES
    return out


#: alias -> the checks it stands for
ALIASES: dict[str, tuple[str, ...]] = _aliases()


def expand_aliases(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` with each alias replaced by its checks (in order, each once)."""
    out: list[str] = []
    for name in names:
        out += ALIASES.get(name, (name,))
    return tuple(dict.fromkeys(out))
