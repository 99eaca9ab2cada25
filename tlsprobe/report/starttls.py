"""The `--msg` lines of a STARTTLS preamble: what both sides said in plain text before the
first TLS record, in the trace's arrow style (">>>" ours, "<<<" the server's) and marked as
plain text, each line's network bytes escaped (binary packets by their summary note)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tlsprobe.net.starttls import PreambleRecord


def preamble_lines(record: PreambleRecord) -> list[str]:
    """One line per line (tag, packet) exchanged, in order."""
    return [f"{'>>>' if line.sender == 'client' else '<<<'} plain text ({record.protocol}, "
            f"before TLS): {line.text}" for line in record.lines]


__all__ = ["preamble_lines"]
