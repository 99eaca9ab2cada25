"""JA4's hex codes: each 16-bit code's text made once (issue 35, seventh round)."""

from __future__ import annotations

import random

from tlsprobe.wire import fingerprints as fp


def test_hex4_remembers_16_bit_codes_only() -> None:
    """A 16-bit code's text is remembered; any other value is formatted as before and not
    kept (the table stays bounded whatever a capture holds)."""
    assert fp._hex4(0x1301) == "1301" and fp._HEX4[0x1301] == "1301"
    assert fp._hex4(0x000A) == "000a" and fp._hex4(0x000A) == "000a"
    assert fp._hex4(0x050080) == "50080" and 0x050080 not in fp._HEX4
    assert fp._hex4(-1) == "-001" and -1 not in fp._HEX4
    assert all(0 <= code <= 0xFFFF for code in fp._HEX4)


def test_ja4_lists_are_the_4_digit_hex_of_the_codes() -> None:
    """JA4's b and c parts (unhashed) are the sorted 4-digit hex of the non-GREASE codes,
    as the format spec gives them, with remembered texts reused."""
    rng = random.Random(35)
    grease = sorted(fp.GREASE)
    for _ in range(300):
        def codes() -> tuple[int, ...]:
            return tuple(rng.choice(grease) if rng.random() < 0.1 else rng.randrange(0x10000)
                         for _ in range(rng.randrange(0, 25)))
        suites, exts, sigs = codes(), codes(), codes()
        _, raw = fp._ja4("tcp", 0x0303, suites, exts, (), None, sigs)
        b = ",".join(sorted(f"{c:04x}" for c in suites if c not in fp.GREASE))
        ext = ",".join(sorted(f"{e:04x}" for e in exts if e not in fp.GREASE and
                              e not in (0, 16)))
        sig = ",".join(f"{s:04x}" for s in sigs if s not in fp.GREASE)
        assert raw.split("_", 1)[1] == f"{b}_{ext}" + (f"_{sig}" if sig else "")
