"""The ClientHello split over two TCP segments: does the server wait for the rest?

A hello over one MSS (about 1460 bytes on Ethernet; an X25519MLKEM768 hello is about
1.8 kB) arrives in two TCP segments. A middlebox that inspects the first segment alone and
drops or resets what it cannot parse broke large post-quantum hellos in the wild. The check
sends the plain hello (tolerance's minimal hello of the highest version spoken, one record)
in two sends with TCP_NODELAY, so that its two halves leave as two segments even on
loopback: the second once the server's TCP acknowledged the first and at least GAP (50 ms)
after it, so that the server reads the first alone; PAUSE (0.2 s) after it where the
socket cannot tell (_tolerance._Shaped). A refusal is confirmed and set against the same
hello in one send (probes/checks/_tolerance.py). One connection when tolerated, six at most.
"""

from __future__ import annotations

from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult
from tlsprobe.probes.checks._tolerance import judge_split
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


def two_segments(data: bytes) -> list[bytes]:
    """`data` cut in the middle: two sends."""
    cut = len(data) // 2
    return [data[:cut], data[cut:]] if cut else [data]


async def run(ctx: CheckContext) -> CheckResult:
    return await judge_split(ctx, two_segments, "two TCP segments", "one segment")


CHECK = ActiveCheck("split_segment", "a ClientHello split over two TCP segments", run,
                    ToleranceDetails)
