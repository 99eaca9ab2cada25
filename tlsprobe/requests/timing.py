"""A handshake timing request (`tlsprobe HOST --timing`, `tlsprobe timing`, the API's
`timing()`), checked once: the runs, the versions, groups and suites to time, the limits
and the confidence, from the command line's options or the API's parameters, into the
`probes.timing.plan.TimingOptions` that `measure_timing` runs."""

from __future__ import annotations

import ipaddress
import math
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.hello import Items, codes, once, split, split_suites
from tlsprobe.requests.names import Names

if TYPE_CHECKING:
    from tlsprobe.net.starttls_connect import StartTlsSpec
    from tlsprobe.probes.timing.plan import TimingOptions

# engine.config's TLS13 and TLS12, written out: building the command line's parser imports
# no engine, registry or `cryptography` module (tests/project/test_startup.py checks both)
TLS13, TLS12 = 0x0304, 0x0303
DEFAULT_RUNS = 20
DEFAULT_WARMUP = 2
DEFAULT_TIMEOUT = 5.0
DEFAULT_CONFIDENCE = 0.95
#: the most measured handshakes per entry and warm-up rounds: every run of every group (and
#: version and suite) is one handshake, so the bound is on the run's time
MAX_RUNS = 10_000
MAX_WARMUP = 1_000
_VERSIONS = {"1.3": TLS13, "13": TLS13, "tls1_3": TLS13, "tlsv1.3": TLS13, "tls1.3": TLS13,
             "1.2": TLS12, "12": TLS12, "tls1_2": TLS12, "tlsv1.2": TLS12, "tls1.2": TLS12}


def timing_versions(given: Items | None, names: Names) -> tuple[int, ...]:
    """The versions to time ("1.3", "tls1_2", 0x0304 ...; None: both), each once."""
    if given is None:
        return (TLS13, TLS12)
    items = split(given.replace(" ", ",")) if isinstance(given, str) else list(given)
    out: list[tuple[str | int, int]] = []
    for item in items:
        code = item if isinstance(item, int) and item in (TLS13, TLS12) else \
            _VERSIONS.get(item.lower().replace(" ", "")) if isinstance(item, str) else None
        if code is None:
            raise UsageError(f"{names('timing_versions')}: unknown version {item!r} "
                             "(use 1.3 or 1.2)")
        out.append((item, code))
    if not out:
        raise UsageError(f"{names('timing_versions')}: no version given")
    once(out, "timing_versions", names)
    return tuple(code for _, code in out)


def _whole(value: int, field: str, low: int, high: int, names: Names) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{names(field)} must be a whole number from {low} to {high}, "
                         f"not {value!r}")
    return value


def _server_name(host: str, server_name: str | None, send_sni: bool) -> str | None:
    """The SNI to send: none when asked, the name given, else the host unless an address."""
    if not send_sni:
        return None
    if server_name:
        return server_name
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host


def timing_options(host: str, *, names: Names, runs: int | None = None,
                   warmup: int | None = None, timeout: float | None = None,
                   versions: Items | None = None, groups: Items | None = None,
                   suites: Items | None = None, server_name: str | None = None,
                   send_sni: bool = True, confidence: float | None = None,
                   starttls: StartTlsSpec | None = None) -> TimingOptions:
    """The checked TimingOptions (None: the default). `suites` "all" times each suite the
    server accepts; names or codepoints pin those; None lets the server choose."""
    from tlsprobe import registry
    from tlsprobe.probes.timing.plan import TimingOptions
    runs = _whole(DEFAULT_RUNS if runs is None else runs, "timing_runs", 1, MAX_RUNS, names)
    warmup = _whole(DEFAULT_WARMUP if warmup is None else warmup, "timing_warmup", 0,
                    MAX_WARMUP, names)
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 < timeout < math.inf:
        raise UsageError(f"{names('timing_timeout')} must be a positive number of seconds")
    confidence = DEFAULT_CONFIDENCE if confidence is None else confidence
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
            or not 0.5 <= confidence < 1:
        raise UsageError(f"{names('timing_confidence')} must be in [0.5, 1), e.g. 0.95")
    all_suites = isinstance(suites, str) and suites.strip().lower() == "all"
    pinned = None if suites is None or all_suites else codes(
        split_suites(suites) if isinstance(suites, str) else suites, registry.parse_suite,
        "timing_suites", names)
    chosen = None if groups is None else codes(groups, registry.parse_group, "timing_groups",
                                               names)
    return TimingOptions(runs=runs, warmup=warmup, timeout=float(timeout),
                         versions=timing_versions(versions, names), groups=chosen,
                         suites=pinned, all_suites=all_suites,
                         server_name=_server_name(host, server_name, send_sni),
                         confidence=float(confidence), starttls=starttls)


def check_explicit_groups(options: TimingOptions) -> None:
    """Explicit groups none of which can be timed are a usage error, told before connecting
    (rather than "the enumeration found none", which would blame the server)."""
    from tlsprobe.probes.timing.plan import explicit_plans, untimeable
    if not options.groups or explicit_plans(options)[0]:
        return
    why = [untimeable(g, options.versions) for g in options.groups]
    raise UsageError("none of the groups given can be timed (" + "; ".join(why[:6])
                     + (" ..." if why[6:] else "") + "); give groups tlsprobe can compute, "
                     "e.g. x25519, secp256r1, ffdhe2048, X25519MLKEM768")


__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_RUNS", "DEFAULT_TIMEOUT", "DEFAULT_WARMUP",
           "MAX_RUNS", "MAX_WARMUP", "check_explicit_groups", "timing_options",
           "timing_versions"]
