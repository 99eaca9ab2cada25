"""The one verdict on a server whose first bytes are not TLS (probe, scan and timing alike).

Built on `wire.record.looks_like_tls`. Bytes shaped like a TLS record header (a TLS content
type and major version 3) or an SSLv2 record header are *not* "not TLS" even when that test
rejects them (an unknown minor version, a length over the limit, an SSLv2 ServerHello): the
server speaks TLS and broke it, which the engine reports as a protocol error naming the fault.
Everything else (an HTTP response, an SSH or SMTP banner, binary garbage) is not TLS, shown
with an escaped snippet of what the server sent (exit 4).
"""

from __future__ import annotations

import re

from tlsprobe.escaping import quoted_bytes
from tlsprobe.wire.record import CONTENT_TYPES, looks_like_tls

SNIPPET = 40   # bytes of the server's answer shown in the message

_WHAT: tuple[tuple[tuple[bytes, ...], str], ...] = (
    ((b"HTTP/", b"<HTML", b"<!DOC"), "an HTTP response"),
    ((b"SSH-",), "an SSH banner"),
    ((b"220 ", b"220-"), "an SMTP/FTP banner"),
)


def is_not_tls(head: bytes) -> bool | None:
    """The verdict on the first bytes the server sent: True when they are not TLS, False
    when they are TLS (or TLS-shaped but broken, or SSLv2), None when more bytes are needed
    (at most 5 ever are)."""
    verdict = looks_like_tls(head)
    if verdict is None:
        return None
    if verdict:
        return False
    shaped = bool(head[0] & 0x80) or (head[0] in CONTENT_TYPES and head[1:2] in (b"", b"\x03"))
    return not shaped


def not_tls_message(data: bytes) -> str:
    """One line naming what the server sent instead of TLS, with its first line (at most
    SNIPPET bytes) quoted and escaped as every message's network bytes (`quoted_bytes`), so
    no control character reaches the terminal."""
    upper = data[:5].upper()
    what = next((name for prefixes, name in _WHAT if upper.startswith(prefixes)),
                "non-TLS data")
    line = bytes(data[:SNIPPET])
    end = line.find(b"\n")
    shown = quoted_bytes(line[:end + 1] if end >= 0 else line, SNIPPET)
    if end < 0 and len(data) > SNIPPET:
        shown += "..."
    return f"not a TLS server: it sent {what} ({shown})"


#: the greetings (starttls_base.what_is) of the protocols `--starttls` speaks whose server
#: speaks first; an SMTP or FTP banner and XML are told apart below
_STARTTLS_GREETINGS = {"an IMAP greeting": "imap", "a POP3 greeting": "pop3",
                       "an NNTP greeting": "nntp", "a ManageSieve greeting": "sieve",
                       "a ManageSieve reply": "sieve",
                       "a MySQL or MariaDB greeting": "mysql"}


def starttls_hint(data: bytes) -> str:
    """What to do when a server's first bytes are the greeting of a protocol that upgrades
    to TLS on request (" (an IMAP greeting: try --starttls imap)"), else "": the driver's
    not-TLS verdict on the first bytes adds it."""
    # imported only on a failure, so that a scan's imports stay few
    from tlsprobe.net.starttls_base import what_is
    guess = what_is(data)
    proto = _STARTTLS_GREETINGS.get(guess)
    if guess == "an SMTP or FTP banner":
        line = data.split(b"\n", 1)[0].upper()
        proto = "ftp" if b"FTP" in line else "smtp" if re.search(rb"\b(?:E?SMTP|LMTP)\b",
                                                                line) else "smtp (or ftp)"
    elif guess == "XML" and b"stream:stream" in data:
        guess = "an XMPP stream header"
        proto = "xmpp-server" if b"jabber:server" in data else \
            "xmpp" if b"jabber:client" in data else "xmpp (or xmpp-server)"
    named = "" if guess == "an SMTP or FTP banner" else f"{guess}: "   # said before it
    if not proto:
        return ""
    from tlsprobe.net.starttls_base import try_starttls
    return f" ({named}a server that upgrades to TLS on request? " \
           f"{try_starttls(proto)})"


__all__ = ["SNIPPET", "is_not_tls", "not_tls_message", "starttls_hint"]
