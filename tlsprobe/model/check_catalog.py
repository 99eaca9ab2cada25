"""The names of `scan`'s checks: pure data (it imports nothing of tlsprobe), so that building scan's
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

from enum import StrEnum
from typing import NamedTuple

__all__ = ["ACTIVE", "ALIASES", "DEFAULT", "DERIVED", "PHASES", "Category", "Entry",
           "expand_aliases"]


class Category(StrEnum):
    """A check's report section, in report order; the JSON spelling is the value."""

    vulnerability = "vulnerability"
    hygiene = "hygiene"
    tolerance = "tolerance"
    http = "http"
    certificate = "certificate"


class Entry(NamedTuple):
    """One active check: report section, audit phases it reads, whether it can hurt a
    server."""

    category: Category
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
DERIVED = ("poodle", "freak", "logjam", "dh", "rc4", "sweet32", "beast", "null", "anon",
           "lucky13")

#: active checks, in report order within their section
ACTIVE: dict[str, Entry] = {
    "fallback": Entry(Category.vulnerability),
    "heartbleed": Entry(Category.vulnerability, harmful=True),
    "ccs": Entry(Category.vulnerability),
    "ticketbleed": Entry(Category.vulnerability),
    "resumption": Entry(Category.hygiene),
    "early_data": Entry(Category.hygiene),
    "ocsp_stapling": Entry(Category.hygiene, needs=CHAIN),
    "ems": Entry(Category.hygiene),
    "etm": Entry(Category.hygiene),
    "large_hello": Entry(Category.tolerance),
    "split_record": Entry(Category.tolerance),
    "split_segment": Entry(Category.tolerance),
    "grease": Entry(Category.tolerance),
    "unknown_version": Entry(Category.tolerance),
    "tls13_intolerance": Entry(Category.tolerance),
    "hsts": Entry(Category.http),
    "breach": Entry(Category.http),
    "server_banner": Entry(Category.http),
    "banners": Entry(Category.http),
    "security_headers": Entry(Category.http),
    "cookies": Entry(Category.http),
    "clock_skew": Entry(Category.http),
    "cert_lifetime": Entry(Category.certificate, needs=CHAIN),
    "sct": Entry(Category.certificate, needs=CHAIN),
    "key_usage": Entry(Category.certificate, needs=CHAIN),
    "must_staple": Entry(Category.certificate, needs=CHAIN),
    "chain": Entry(Category.certificate, needs=CHAIN),
    "sni_chain": Entry(Category.certificate, needs=CHAIN),
    "ocsp_response": Entry(Category.certificate, needs=CHAIN),
    "client_auth": Entry(Category.certificate),
    "compression": Entry(Category.vulnerability),
    "client_renegotiation": Entry(Category.vulnerability, harmful=True),
    "robot": Entry(Category.vulnerability, needs=("versions", "suites"), harmful=True),
    "sslv2": Entry(Category.vulnerability),
    "renegotiation": Entry(Category.hygiene),
    "downgrade_sentinel": Entry(Category.hygiene),
    "many_suites": Entry(Category.tolerance),
    "tls_timestamp": Entry(Category.hygiene),
    "alpn": Entry(Category.hygiene),
    "npn": Entry(Category.hygiene),
}

_BY_CATEGORY = {"vulns": Category.vulnerability, "hygiene": Category.hygiene,
                "tolerance": Category.tolerance, "http": Category.http,
                "certs": Category.certificate}


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
