"""The `--msg` lines of a STARTTLS preamble: what both sides said in plain text before the
first TLS record, in the trace's arrow style (">>>" ours, "<<<" the server's) and marked as
plain text, each line's network bytes escaped (binary packets by their summary note)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tlsprobe.model.starttls import StartTlsInfo


class _Line(Protocol):
    """One line of a preamble (net/starttls.py PreambleLine): who sent it, its text."""

    @property
    def sender(self) -> str: ...

    @property
    def text(self) -> str: ...


class _Record(Protocol):
    """What a preamble exchanged (net/starttls.py PreambleRecord; report/ reads, never
    imports, net/)."""

    @property
    def protocol(self) -> str: ...

    @property
    def lines(self) -> Sequence[_Line]: ...


def preamble_lines(record: _Record) -> list[str]:
    """One line per line (tag, packet) exchanged, in order."""
    return [f"{'>>>' if line.sender == 'client' else '<<<'} plain text ({record.protocol}, "
            f"before TLS): {line.text}" for line in record.lines]


def starttls_summary(info: StartTlsInfo) -> str:
    """The one-line STARTTLS summary of the probe's and the audit's text: the protocol (and
    that --starttls auto chose it by the port), the server's banner (already escaped)."""
    how = " (--starttls auto, by the port)" if info.chosen_by == "port" else ""
    banner = f"; banner: {info.banner}" if info.banner is not None else ""
    return f"{info.protocol}{how}{banner}"


__all__ = ["preamble_lines", "starttls_summary"]
