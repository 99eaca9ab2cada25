"""JSON scalars written as `json.dumps` writes them, defined once for the one JSON encoding
(`model.encode`, interpreted) and for a TCP connection's JSON text (`model.capture_json`,
which the optional compiled fast path compiles): a module of its own so that both read the
same function, and compiled callers call it natively (a call into an interpreted function
costs more than the repr it makes)."""

from __future__ import annotations

import json
import math

__all__ = ["number"]


def number(value: float | None) -> str:
    """A number as json.dumps writes it (floats by repr; NaN and infinities spelled out)."""
    if value is None:
        return "null"
    if type(value) is float and not math.isfinite(value):
        return json.dumps(value)
    return repr(value)
