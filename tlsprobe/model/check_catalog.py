"""The names of `scan`'s checks: pure data (it imports nothing), so that building scan's
parser and its --help stays cheap, and so that every layer may read it (policy/codes.py
derives the finding codes `check.NAME` from it). probes/checks/catalog.py, which re-exports
these names, says what they mean and resolves what a user asks for.

Two kinds. Derived checks (policy/checks.py) are read off what the audit enumerated and make
no connection; their names are written out here and a test checks them against
policy/checks.py's DERIVED. Active checks make connections of their own: each entry names
its report section, the module under tlsprobe/probes/checks/ whose `CHECK` runs it, the
audit phases it reads (the versions the server speaks, its suites), and whether it can hurt
a server (bounded, and listed as such in --help so that a user can leave it out).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ACTIVE", "ALIASES", "DEFAULT", "DERIVED", "Entry", "PHASES", "expand_aliases"]


class Entry(NamedTuple):
    """One active check: report section (model/checks.py CATEGORIES), module name under
    tlsprobe.probes.checks, audit phases it reads, whether it can hurt a server."""

    category: str
    module: str
    needs: tuple[str, ...] = ("versions",)
    harmful: bool = False


#: the key-exchange audit's phases, in their order (the `audit` alias)
PHASES = ("versions", "groups", "pq", "suites", "sigalgs", "cert")
#: what the certificate checks read besides the versions: the `cert` phase (the chain shown
#: and its trust verdict, whichever version the server speaks)
CHAIN = ("versions", "cert")
#: what `scan` runs when --checks is not given
DEFAULT = ("audit", "all")

#: vulnerability checks read from the audit (policy/checks.py DERIVED), in report order
DERIVED = ("poodle", "freak", "logjam", "dh", "rc4", "sweet32", "beast", "null", "anon")

#: active checks, in report order within their section
ACTIVE: dict[str, Entry] = {
    "fallback": Entry("vulnerability", "fallback"),
    "heartbleed": Entry("vulnerability", "heartbleed", harmful=True),
    "ccs": Entry("vulnerability", "ccs"),
    "ticketbleed": Entry("vulnerability", "ticketbleed"),
    "resumption": Entry("hygiene", "resumption"),
    "early_data": Entry("hygiene", "early_data"),
    "ocsp_stapling": Entry("hygiene", "ocsp_stapling"),
    "ems": Entry("hygiene", "ems"),
    "etm": Entry("hygiene", "etm"),
    "large_hello": Entry("tolerance", "large_hello"),
    "split_record": Entry("tolerance", "split_record"),
    "split_segment": Entry("tolerance", "split_segment"),
    "grease": Entry("tolerance", "grease"),
    "unknown_version": Entry("tolerance", "unknown_version"),
    "tls13_intolerance": Entry("tolerance", "tls13_intolerance"),
    "hsts": Entry("http", "hsts"),
    "breach": Entry("http", "http_compression"),
    "server_banner": Entry("http", "server_banner"),
    "cert_lifetime": Entry("certificate", "cert_lifetime", needs=CHAIN),
    "sct": Entry("certificate", "sct", needs=CHAIN),
    "key_usage": Entry("certificate", "key_usage", needs=CHAIN),
    "must_staple": Entry("certificate", "must_staple", needs=CHAIN),
    "compression": Entry("vulnerability", "compression"),
    "client_renegotiation": Entry("vulnerability", "client_renegotiation", harmful=True),
    "robot": Entry("vulnerability", "robot", needs=("versions", "suites"), harmful=True),
    "sslv2": Entry("vulnerability", "sslv2"),
    "renegotiation": Entry("hygiene", "renegotiation"),
    "downgrade_sentinel": Entry("hygiene", "downgrade_sentinel"),
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
