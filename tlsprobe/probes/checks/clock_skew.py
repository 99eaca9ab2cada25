"""The server's clock against ours: its `Date` header (RFC 9110 6.6.1: the time the answer
was made) against our clock when that answer's headers had come.

Read off the shared answer (_http.py: one connection, redirects within the target followed,
the final answer read; our time is taken when its headers were read). A cached answer's
Date is the origin's: its `Age` (RFC 9111 5.1, seconds) is added, as testssl.sh's
run_http_date does. The skew is (Date + Age) - our time, both at Date's resolution of one
second (our time is cut to its second as a server cuts its Date: a Date of the second the
answer came in is no skew, not "1 s behind" beside two equal times; negative: the server is
behind). Date has a resolution of one second and the answer takes a round trip,
so the TOLERANCE is 60 seconds: a skew larger than that is a clock that is not kept right
(certificates, OCSP answers and tickets it judges, logs it writes).

Verdicts:
  - |skew| over TOLERANCE: vulnerable, an info finding `check.clock_skew` (testssl.sh
    reports the skew as information); both times and the skew are stated;
  - within TOLERANCE: not vulnerable, both times stated;
  - no Date header: not applicable (the server states no time; RFC 9110 lets a server
    without a clock leave it out);
  - a Date that is not an HTTP date (IMF-fixdate, RFC 850 or asctime, read by
    email.utils; at most 64 characters): inconclusive, the value quoted (the report
    escapes it).
It compares with OUR clock: a skew found means the two clocks differ by that much.
"""

from __future__ import annotations

import datetime as dt
from email.utils import parsedate_to_datetime

from tlsprobe.model.check_details import ClockSkewDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.units import duration
from tlsprobe.probes.checks._http import cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

TOLERANCE = 60
MAX_DATE = 64


def parse_date(value: str) -> dt.datetime | None:
    """An HTTP date (always GMT: RFC 9110 5.6.7) as an aware UTC datetime, or None."""
    if len(value) > MAX_DATE:
        return None
    try:
        when = parsedate_to_datetime(value)
        return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else \
            when.astimezone(dt.UTC)
    except (ValueError, TypeError, OverflowError, IndexError):
        return None


def parse_age(values: list[str]) -> int | None:
    """The first Age's seconds (a non-negative integer, RFC 9111 5.1), or None."""
    text = values[0].strip() if values else ""
    return int(text) if text.isdigit() and text.isascii() and len(text) <= 10 else None


def _aged(when: dt.datetime | None, age: int | None) -> dt.datetime | None:
    """The server's time: Date + Age (None past the calendar's end)."""
    try:
        return None if when is None else when + dt.timedelta(seconds=age or 0)
    except OverflowError:
        return None


def _iso(when: dt.datetime) -> str:
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    where = f" ({got.read()})"
    dates = got.get("date")
    age = parse_age(got.get("age"))
    received = got.received
    if not dates or received is None:
        return ctx.result(Verdict.not_applicable, f"no Date header: the server states no "
                          f"time{where}", got.trail(), details=ClockSkewDetails(
                              got.status, None, age, None, None, None, TOLERANCE,
                              got.redirects()))
    server = _aged(parse_date(dates[0]), age)
    ours = dt.datetime.fromtimestamp(int(received), dt.UTC)   # to the second, as Date
    evidence = (*got.trail(), f"Date: {cut(dates[0])}")
    if server is None:
        return ctx.result(Verdict.inconclusive, f"Date: {cut(dates[0], 80)} is not an HTTP "
                          f"date{where}", evidence, details=ClockSkewDetails(
                              got.status, dates[0], age, None, _iso(ours), None, TOLERANCE,
                              got.redirects()))
    skew = int((server - ours).total_seconds())
    details = ClockSkewDetails(got.status, dates[0], age, _iso(server), _iso(ours), skew,
                               TOLERANCE, got.redirects())
    aged = f" + Age {age} s" if age else ""
    how = "ahead of" if skew > 0 else "behind"
    said = f"the server's Date{aged} is {_iso(server)}, our clock {_iso(ours)} when the " \
        f"answer came: {abs(skew)} s"
    said += f" ({duration(abs(skew))})" if abs(skew) >= 60 else ""
    said += f" {how} ours" if skew else " apart"
    if abs(skew) > TOLERANCE:
        return ctx.result(Verdict.vulnerable, f"{said}, over the {TOLERANCE} s tolerance"
                          f"{where}", evidence, severity=Severity.info, details=details)
    return ctx.result(Verdict.not_vulnerable, f"{said}, within {TOLERANCE} s{where}",
                      evidence, details=details)


CHECK = ActiveCheck("clock_skew", "the server's clock (HTTP Date) against ours", run,
                    ClockSkewDetails)
