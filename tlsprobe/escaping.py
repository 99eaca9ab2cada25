"""The one style in which text from the network or a file is shown (README "Text that a
server or a file sends"): bytes as `escaped_bytes` / `quoted_bytes`, a file's text as
`quoted_text`, a value's text as `wire_text`. A module of the package root, shared by all
layers (importing nothing): the wire's messages, the model's values, policy and baseline
file errors and the net layer's errors all show such text alike.
"""

from __future__ import annotations

from typing import Final

__all__ = ["escaped_bytes", "quoted_bytes", "quoted_text", "quoted_value", "wire_text"]

#: bytes from the network in a message, Python style (as README.md's `\x1b`, `\n`): the
#: table of each byte's text, printable ASCII as itself, \t \n \r by name, a backslash
#: doubled, every other byte \xNN; "'" escaped in quotes (`quoted_bytes`)
_BYTE_TEXT: Final[tuple[str, ...]] = tuple(
    {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x5C: "\\\\"}.get(
        b, chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}") for b in range(256))
_QUOTED_TEXT: Final[tuple[str, ...]] = tuple("\\'" if b == 0x27 else t
                                             for b, t in enumerate(_BYTE_TEXT))


def escaped_bytes(data: bytes | bytearray, limit: int = 1000) -> str:
    """Bytes from the network for display (the one style of every message): printable ASCII
    as is, \\t \\n \\r by name, a backslash doubled, any other byte as \\xNN, so no control
    sequence reaches a terminal; cut after `limit` bytes with '...'."""
    text = "".join([_BYTE_TEXT[b] for b in data[:limit]])
    return text + ("..." if len(data) > limit else "")


def quoted_bytes(data: bytes | bytearray, limit: int = 100) -> str:
    """`escaped_bytes` in single quotes for a one-line message (a quote in it as \\'), as
    Python shows bytes: '421 Busy\\r\\n'."""
    text = "".join([_QUOTED_TEXT[b] for b in data[:limit]])
    return f"'{text}'" + ("..." if len(data) > limit else "")


def quoted_text(text: str, limit: int = 100) -> str:
    """Text a file gave (a targets file's line) for a one-line message: `quoted_bytes`'
    style for its ASCII characters; another character as is when printable (é), else
    \\xNN, \\uNNNN or \\UNNNNNNNN (U+202E as \\u202e, as report/escape.py shows text)."""
    def char(c: str) -> str:
        code = ord(c)
        if code < 0x80:
            return _QUOTED_TEXT[code]
        if c.isprintable():
            return c
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
            else f"\\U{code:08x}"
    return "'" + "".join(map(char, text[:limit])) + "'" + ("..." if len(text) > limit else "")


def wire_text(data: bytes | bytearray) -> str:
    """Bytes from the network as a value's text (a name, ALPN): ASCII as is, a backslash
    doubled, any other byte as \\xNN; control characters kept (JSON escapes them, a text
    report shows them escaped: report/escape.py `shown` of this text is `escaped_bytes` of
    the bytes, so both read alike and a \\xNN is never a name's own characters).
    model/facts.py re-exports it for the model's values."""
    return bytes(data).replace(b"\\", b"\\\\").decode("ascii", "backslashreplace")


def quoted_value(value: object) -> str:
    """A value a file gave (a policy's or a baseline's JSON/TOML) for a one-line message:
    a string as `quoted_text`, a number or true/false/null as JSON writes it, a list or a
    table by its kind only (its contents may be long, or hold any text)."""
    if isinstance(value, str):
        return quoted_text(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return str(value)
    return "a list" if isinstance(value, (list, tuple)) else \
        "a table" if isinstance(value, dict) else f"a {type(value).__name__}"
