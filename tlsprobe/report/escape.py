"""The one escape of untrusted text for the terminal: every text renderer and the trace use it.

Names and strings a server or a capture supplies (SNI, certificate subjects, issuers and
subjectAltNames, ALPN, an HTTP status line, error texts quoting them) may hold escape
sequences, newlines or bidi overrides that would clear the screen, move the cursor or forge
a line such as "Verification OK". Text output shows each such character escaped, Python
style: C0 controls and DEL as \\x1b (\\n, \\r and \\t by name), C1 controls as \\x9b, and any
other character Python does not count as printable (format characters such as U+202E
RIGHT-TO-LEFT OVERRIDE or U+200B, separators, unassigned or private code points) as \\u202e
or \\U000e0001. JSON output keeps the exact values; only text goes through here.
"""

from __future__ import annotations

NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(c: str) -> str:
    if c in NAMED:
        return NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: str) -> str:
    """`text` with every control or otherwise non-printable character escaped (a space
    stays a space); printable text comes back unchanged and without copying."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape_char(c) for c in text)
