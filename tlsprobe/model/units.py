"""Numbers as people write them: durations in days, hours, minutes and seconds, never a
float such as "30.99998843 days" (what a ratio of two timedeltas prints); endpoints as
HOST:PORT with an IPv6 address in brackets (`host_port`).

`duration` is exact to the second: "398 days" and "398 days 1 s" are told apart, which a
verdict on a limit of 398 days needs, and no part is rounded away.
"""

from __future__ import annotations

from datetime import timedelta

_PARTS = ((86400, "day", "days"), (3600, "h", "h"), (60, "min", "min"), (1, "s", "s"))


def duration(value: float | timedelta) -> str:
    """'31 days', '398 days 1 s', '2 h 30 min', '45 s', '0 s' (seconds or a timedelta;
    fractions of a second are dropped, a negative value gets a leading '-')."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign = "-" if seconds < 0 else ""
    left = int(abs(seconds))
    parts = []
    for size, one, many in _PARTS:
        n, left = divmod(left, size)
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    return sign + (" ".join(parts) or "0 s")


def seconds_text(value: float) -> str:
    """A time limit in seconds as an error line says it: one decimal from a second up
    ('2.5', '30.0'), three significant digits below ('0.25', '0.004'), so that a limit that
    is not zero never reads '0.0'."""
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def host_port(host: str, port: int) -> str:
    """An endpoint as people write it: '127.0.0.1:4433', 'example.com:443', an IPv6
    address in brackets ('[::1]:4433'), so that its colons are not read as the port's."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_key(host: str) -> str:
    """What makes two spellings of a host one: an IP address in its canonical form
    ('0:0::1' and '::0001' are '::1'), a name in lower case (names are case-insensitive,
    RFC 4343). A survey audits each host once and keeps its ports in one shard by it."""
    import ipaddress
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host.lower()


__all__ = ["duration", "host_key", "host_port"]
