"""Checks shared by the codec tests."""

from __future__ import annotations

import re

from tlsprobe.wire import Annotation

_HEX = re.compile(r"\(0x([0-9a-f]+)\)$")
_DEC = re.compile(r"\((\d+)\)$")


def check_annotations(raw: bytes, annotations: list[Annotation]) -> int:
    """Every annotation must describe the bytes at its offset in `raw`: lengths equal the
    length prefix, coded values equal the integer there, byte counts equal the span.
    Returns how many annotations were verified against the bytes."""
    checked = 0
    for a in annotations:
        assert 0 <= a.offset and a.offset + a.length <= len(raw), a
        value = int.from_bytes(raw[a.offset:a.offset + a.length], "big")
        if a.kind == "len":
            assert a.value == f"{value} (0x{value:x})", a
        elif a.kind == "bytes" and a.value.endswith(" bytes"):
            assert int(a.value.split()[0]) == a.length, a
        elif a.kind == "extension":
            assert a.value.endswith(f"0x{raw[a.offset] << 8 | raw[a.offset + 1]:04x}"
                                    + (")" if "(" in a.value else "")), a
            assert a.length == 4 + int.from_bytes(raw[a.offset + 2:a.offset + 4], "big"), a
        elif a.kind == "int" and (m := _HEX.search(a.value) or _DEC.search(a.value)):
            base = 16 if a.value.endswith(")") and "(0x" in a.value else 10
            assert int(m.group(1), base) == value, a
        elif a.kind == "int" and re.fullmatch(r"0x[0-9a-f]+|\d+", a.value):
            assert int(a.value, 0) == value, a
        else:
            continue
        checked += 1
    return checked


def find(annotations: list[Annotation], name: str) -> Annotation:
    hits = [a for a in annotations if a.name == name]
    assert len(hits) == 1, f"{name}: {len(hits)} annotations"
    return hits[0]
