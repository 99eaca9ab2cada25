"""The ClientHello split over two TLS records: does the server reassemble it?

A handshake message may span records (RFC 8446 section 5.1, RFC 5246 section 6.2.1), and a
hello over 16 kB must; but a server or middlebox that reads the hello from the first record
alone refuses the split one (large post-quantum hellos make this matter). The check sends
the plain hello (tolerance's minimal hello of the highest version spoken) as two handshake
records, the first holding the first half of the message, both in one send (one TCP
segment), so that only the record split is asked. A refusal is confirmed and set against
the same hello in one record (probes/checks/_tolerance.py). One connection when tolerated,
six at most.
"""

from __future__ import annotations

from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult
from tlsprobe.probes.checks._tolerance import judge_split
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.wire.record import HEADER_SIZE


def two_records(data: bytes) -> list[bytes]:
    """`data`'s first record as two records (its fragment cut in the middle), in one send."""
    length = int.from_bytes(data[3:5], "big")
    header, body, rest = data[:3], data[HEADER_SIZE:HEADER_SIZE + length], \
        data[HEADER_SIZE + length:]
    cut = len(body) // 2
    if cut == 0:
        return [data]
    return [header + cut.to_bytes(2, "big") + body[:cut] +
            header + (len(body) - cut).to_bytes(2, "big") + body[cut:] + rest]


async def run(ctx: CheckContext) -> CheckResult:
    return await judge_split(ctx, two_records, "two records", "one record")


CHECK = ActiveCheck("split_record", "a ClientHello split over two TLS records", run,
                    ToleranceDetails)
