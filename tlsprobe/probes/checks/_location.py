"""Where a redirect points, and whether the HTTP checks follow it (_http.py): a Location
resolved against the URL asked (RFC 9110 10.2.2: relative references allowed; RFC 3986
5.2), followed only when it stays on the target: scheme https, the host the request named
(case-insensitive) and the target's port (443 when none is written).

A Location is text from the server: before it is resolved, ASCII tabs and newlines are
removed and C0 controls and spaces trimmed at both ends (as the WHATWG URL parser does); one
that still holds a control character, is longer than MAX_LOCATION, or that urllib cannot
split (a bad port, a broken IPv6 literal) is not followed. The path asked next is
request-target text: every byte outside printable ASCII (a space, latin-1 text) is
percent-encoded, the fragment dropped, so nothing the server wrote can add a header or a
second request to ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

__all__ = ["MAX_LOCATION", "REDIRECTS", "Follow", "authority", "cut", "follow"]

#: the redirect status codes (RFC 9110 15.4: 301, 302, 303, 307, 308); 300 and 304 are not
#: redirects to follow
REDIRECTS = (301, 302, 303, 307, 308)
MAX_LOCATION = 2048
#: what the checks quote of a server's value at most (the report escapes it)
SHOWN = 200


def cut(text: str, limit: int = SHOWN) -> str:
    """`text` cut to `limit` characters, saying how long it was (server values may be
    16 KiB long)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def authority(host: str, port: int) -> str:
    """The Host header's value for host:port (IPv6 in brackets, :443 left out)."""
    text = f"[{host}]" if ":" in host else host
    return text if port == 443 else f"{text}:{port}"


@dataclass(frozen=True)
class Follow:
    """The path to ask next (request-target form), or why the redirect is not followed."""

    path: str
    why: str | None = None


def _request_target(path: str, query: str) -> str:
    """path?query with every byte outside printable ASCII percent-encoded (the text came
    as latin-1, one character per byte)."""
    text = (path or "/") + (f"?{query}" if query else "")
    return "".join(c if "!" <= c <= "~" else f"%{ord(c) & 0xFF:02X}" for c in text)


def follow(asked: str, location: str, host: str, port: int) -> Follow:
    """Whether a redirect from `GET asked` to `location` stays on https://host:port, and
    the path to ask then."""
    loc = location.replace("\t", "").replace("\n", "").replace("\r", "")
    loc = loc.strip("".join(map(chr, range(0x21))))
    if not loc:
        return Follow("", "an empty Location")
    if len(loc) > MAX_LOCATION:
        return Follow("", f"a Location of {len(loc)} characters (over {MAX_LOCATION})")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in loc):
        return Follow("", "a Location holding control characters")
    try:
        parts = urlsplit(urljoin(f"https://{authority(host, port)}{asked}", loc))
        there = (parts.scheme.lower(), parts.hostname or "", parts.port or
                 (443 if parts.scheme.lower() == "https" else 80 if
                  parts.scheme.lower() == "http" else None))
    except ValueError as exc:
        return Follow("", f"a Location that is not a URL ({exc})")
    if there[0] == "http":
        return Follow("", "it leaves HTTPS for plain http (off the target)")
    if there[0] != "https" or there[1] != host.lower().strip("[]") or there[2] != port:
        return Follow("", "it points off the target (another scheme, host or port)")
    if parts.username is not None or parts.password is not None:
        return Follow("", "a Location with user information")
    return Follow(_request_target(parts.path, parts.query))
