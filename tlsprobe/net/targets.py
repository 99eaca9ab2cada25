"""Target lists: a file (or stdin) of HOST[:PORT] lines, read as `scan -f` and `survey` do.

A bad line (no valid target, or not UTF-8: the file is decoded line by line) is a `BadLine`
named `FILE:LINE`, and the other lines are still read: one typo in a list of thousands does
not stop the others. '#' starts a comment; blank lines and a UTF-8 byte-order mark are
skipped."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.escaping import quoted_bytes
from tlsprobe.files import UnreadableFile, read_bounded
from tlsprobe.net.tcp import Target, parse_target

__all__ = ["MAX_TARGET_FILE_BYTES", "BadLine", "read_target_file"]

#: the largest target list read (some 3 million lines of HOST:PORT); more is refused, not
#: read whole into memory (`scan -f /dev/zero`, a capture named by mistake). Read, not
#: stat'ed: stdin, a pipe or a device has no size to ask
MAX_TARGET_FILE_BYTES = 64 << 20
_EXPECTED = "a list of HOST[:PORT] lines (split a larger one)"


@dataclass(frozen=True)
class BadLine:
    """A line that is no target: its text and the error naming where it is."""

    text: str
    error: str      # "FILE:LINE: bad port '99999' in '127.0.0.1:99999': expected 1-65535"


def read_target_file(spec: str) -> list[Target | BadLine]:
    """The lines of `spec` ('-': stdin) in order: a Target each, or a BadLine. An unreadable
    file is an UnreadableFile (a UsageError)."""
    if spec != "-":
        data = read_bounded(spec, MAX_TARGET_FILE_BYTES, _EXPECTED)
    elif sys.stdin is None:   # started with stdin closed (`<&-`)
        raise UsageError("cannot read - (stdin): it is closed")
    else:
        try:
            data = sys.stdin.buffer.read(MAX_TARGET_FILE_BYTES + 1)
        except OSError as exc:
            raise UnreadableFile("<stdin>", f"cannot read it ({os_error_text(exc)})") from None
        if len(data) > MAX_TARGET_FILE_BYTES:
            raise UnreadableFile.too_large("<stdin>", MAX_TARGET_FILE_BYTES, _EXPECTED)
    name = "<stdin>" if spec == "-" else spec
    items: list[Target | BadLine] = []
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), 1):
        raw = raw.split(b"#", 1)[0]     # a comment may be in any encoding
        try:    # line by line: one line that is no UTF-8 costs that line alone
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            items.append(BadLine(raw.decode("utf-8", "replace").strip(),
                                 f"{name}:{number}: not UTF-8 text (byte "
                                 f"0x{raw[exc.start]:02x} at column {exc.start + 1}): "
                                 f"{quoted_bytes(raw.strip())}"))
            continue
        if not line:
            continue
        try:
            items.append(parse_target(line))
        except UsageError as exc:
            items.append(BadLine(line, f"{name}:{number}: {exc}"))
    return items
