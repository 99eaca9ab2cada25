"""Make damaged copies of capture files, to prove that readers end cleanly on broken input.

    python tools/damage_captures.py IN.pcap [IN2.pcapng ...] -o OUTDIR [--max-per-kind N]

For each input (classic pcap in either byte order, or pcapng) the block structure is read
independently of tlsprobe's own reader, and variants are written as
``OUTDIR/<name>.<kind>-<detail>.<ext>``:

  cut-block-N      cut exactly at the N-th block boundary (a valid, shorter capture)
  cut-mid-N        cut in the middle of the N-th block (its header or its data)
  flip-K           K bytes flipped at seeded random positions
  flip-header-N    one byte flipped in the N-th block's header
  len-N-V          the N-th block's length field set to V (0, 1, max, one more, one less,
                   2^31); for pcap the record's captured length, for pcapng the block
                   total length
  orig-N           pcap only: original length smaller than the captured length
  magic-V          the file magic replaced (zero, garbage, byte-swapped, other format)
  junk-tail        random bytes appended after the last block
  zeros-tail       4 KiB of zeros appended after the last block (a preallocated file)
  zeros-mid        the packets from the middle on overwritten with zeros
  dup-header       the file header repeated in the middle of the packets

Every variant carries `expect`: "error" (nothing readable: the reader must refuse with one
line), "warning" (the damage is visible in the structure: the reader must warn), or "any"
(the file may still be well-formed, e.g. flipped payload bytes or a cut at a boundary).
"""
from __future__ import annotations

import argparse
import random
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PCAP_MAGICS = {0xA1B2C3D4: "<", 0xD4C3B2A1: ">", 0xA1B23C4D: "<", 0x4D3CB2A1: ">",
               0xA1B2CD34: "<", 0x34CDB2A1: ">"}
MODIFIED = (0xA1B2CD34, 0x34CDB2A1)
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BOM = 0x1A2B3C4D


@dataclass(frozen=True)
class Block:
    """One structural unit: the file header, a pcap record or a pcapng block."""

    offset: int
    length: int          # whole block, header included
    header: int          # bytes of its header (where lengths live)
    length_at: int       # absolute offset of the length field a reader trusts
    length_size: int
    order: str


@dataclass(frozen=True)
class Damage:
    name: str
    data: bytes
    expect: str          # "error" | "warning" | "any"


def blocks(data: bytes) -> tuple[str, list[Block]]:
    """("pcap" | "pcapng", blocks) of a well-formed capture; raises ValueError otherwise.
    Parsing stops at the first block that does not fit (a truncated input is fine)."""
    if len(data) < 24:
        raise ValueError("too short for a capture")
    magic = int.from_bytes(data[:4], "little")
    if magic in PCAP_MAGICS:
        order = PCAP_MAGICS[magic]
        rec = 24 if magic in MODIFIED else 16
        out = [Block(0, 24, 24, 16, 4, order)]
        pos = 24
        while pos + rec <= len(data):
            caplen = struct.unpack_from(order + "I", data, pos + 8)[0]
            if pos + rec + caplen > len(data):
                break
            out.append(Block(pos, rec + caplen, rec, pos + 8, 4, order))
            pos += rec + caplen
        return "pcap", out
    if magic == PCAPNG_SHB:
        out, pos, order = [], 0, "<"
        while pos + 12 <= len(data):
            btype = int.from_bytes(data[pos:pos + 4], "little" if order == "<" else "big")
            if btype == PCAPNG_SHB and pos + 12 <= len(data):
                order = "<" if struct.unpack_from("<I", data, pos + 8)[0] == PCAPNG_BOM else ">"
            blen = struct.unpack_from(order + "I", data, pos + 4)[0]
            if blen < 12 or pos + blen > len(data):
                break
            out.append(Block(pos, blen, 8, pos + 4, 4, order))
            pos += blen
        return "pcapng", out
    raise ValueError(f"not a pcap or pcapng file (magic {data[:4].hex()})")


def _spread(items: list, limit: int) -> list:
    """At most `limit` items, evenly spread, first and last kept."""
    if len(items) <= limit:
        return items
    if limit <= 1:
        return items[:max(limit, 0)]
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def _set(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def damaged_variants(data: bytes, *, seed: int = 0, max_per_kind: int = 40) -> Iterator[Damage]:
    """Every damaged variant of one capture (see the module docstring)."""
    fmt, blks = blocks(data)
    rng = random.Random(seed)
    end = blks[-1].offset + blks[-1].length
    packets = blks[1:] if fmt == "pcap" else [b for b in blks if b.offset > 0]
    for i, b in enumerate(_spread(blks, max_per_kind)):
        if b.offset > 0:
            yield Damage(f"cut-block-{i}", data[:b.offset], "any")
    yield Damage("cut-block-end", data[:end], "any")
    for i, b in enumerate(_spread(blks, max_per_kind)):
        for where, at in (("h", b.offset + max(1, b.header // 2)),
                          ("d", b.offset + b.header + max(1, (b.length - b.header) // 2))):
            if b.offset < at < b.offset + b.length:
                yield Damage(f"cut-mid-{i}{where}", data[:at], "warning")
    for k in (1, 4, 16, 64):
        buf = bytearray(data)
        for _ in range(k):
            at = rng.randrange(24 if fmt == "pcap" else 0, len(buf))
            buf[at] ^= 1 << rng.randrange(8)
        yield Damage(f"flip-{k}", bytes(buf), "any")
    for i, b in enumerate(_spread(packets, max_per_kind // 2)):
        at = b.offset + rng.randrange(b.header)
        yield Damage(f"flip-header-{i}", _set(data, at, bytes([data[at] ^ 0xFF])), "any")
    for i, b in enumerate(_spread(packets, max_per_kind // 4)):
        declared = struct.unpack_from(b.order + "I", data, b.length_at)[0]
        rest = len(data) - b.offset
        for label, value, expect in (("0", 0, "warning" if fmt == "pcapng" else "any"),
                                     ("1", 1, "warning" if fmt == "pcapng" else "any"),
                                     ("max", 0xFFFFFFFF, "warning"),
                                     ("2g", 1 << 31, "warning"),
                                     ("plus1", declared + 1, "any"),
                                     ("minus1", max(declared - 1, 0), "any"),
                                     ("past-end", rest + 64, "warning")):
            yield Damage(f"len-{i}-{label}", _set(data, b.length_at, struct.pack(
                b.order + "I", value)), expect)
        if fmt == "pcap":
            yield Damage(f"orig-{i}", _set(data, b.length_at + 4, struct.pack(b.order + "I", 0)),
                         "any")
    for label, magic in (("zero", b"\x00\x00\x00\x00"), ("garbage", b"\x13\x37\xbe\xef"),
                         ("swapped", data[3::-1]), ("zip", b"PK\x03\x04"),
                         ("other", struct.pack("<I", PCAPNG_SHB) if fmt == "pcap"
                          else struct.pack("<I", 0xA1B2C3D4))):
        expect = "any" if label in ("other", "swapped") else "error"
        yield Damage(f"magic-{label}", magic + data[4:], expect)
    yield Damage("junk-tail", data + rng.randbytes(37), "warning")
    yield Damage("zeros-tail", data + bytes(4096), "warning")
    if packets:
        mid = packets[len(packets) // 2].offset
        header = data[:blks[0].length]
        yield Damage("dup-header", data[:mid] + header + data[mid:], "any")
        yield Damage("zeros-mid", data[:mid] + bytes(len(data) - mid), "warning")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", type=Path, help="pcap or pcapng files")
    p.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    p.add_argument("--max-per-kind", type=int, default=40,
                   help="at most this many block positions per kind of damage")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for path in args.inputs:
        try:
            variants = list(damaged_variants(path.read_bytes(), seed=args.seed,
                                             max_per_kind=args.max_per_kind))
        except (OSError, ValueError) as exc:
            print(f"damage_captures: {path}: {exc}", file=sys.stderr)
            return 2
        for v in variants:
            (args.out / f"{path.stem}.{v.name}{path.suffix}").write_bytes(v.data)
        total += len(variants)
        print(f"{path}: {len(variants)} damaged copies")
    print(f"{total} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
