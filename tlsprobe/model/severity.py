"""How bad a finding is: `Severity`, the one vocabulary of finding severities (a check's
finding, the built-in and policy findings). A StrEnum: each member is its JSON string and
compares equal to it ("high" == Severity.high), so policies and JSON read and write the same
words as before. Members are in rising order (`Severity.rank`)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Severity"]


class Severity(StrEnum):
    """A finding's severity, lowest first; the JSON spelling is the value."""

    info = "info"
    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"

    @property
    def rank(self) -> int:
        """0 (info) .. 4 (critical)."""
        return list(Severity).index(self)
