"""The one JSON encoding of the result types (tlsprobe/model/encode.py): what each kind of
value becomes, and that the fast text encoder of the capture path writes exactly what
`json.dumps(to_jsonable(value))` writes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum, IntEnum, StrEnum

import pytest

from tlsprobe.model.encode import JsonEncoder, document, dumps, to_jsonable
from tlsprobe.model.probe import Cipher, Codepoint, Offer
from tlsprobe.model.speed import Comparison, ComparisonRow, Figure


class Kind(StrEnum):
    NETWORK = "network"


class Level(IntEnum):
    FATAL = 2


class Colour(Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    code: Codepoint
    raw: bytes = b""


@dataclass(frozen=True)
class Outer:
    kind: Kind
    level: Level
    colour: Colour
    inner: Inner
    items: tuple[Inner, ...] = ()
    counts: dict[int, float] | None = None
    note: str | None = None


V = Codepoint.version(0x0304)
VALUE = Outer(Kind.NETWORK, Level.FATAL, Colour.RED, Inner(V, b"\x00\xff"),
              (Inner(V), Inner(Codepoint.group(0x1D))), {1: 0.5, 2: float("nan")}, "caf\u00e9")


def test_rules_enums_tuples_nested_dataclasses_bytes_dicts() -> None:
    version = {"id": 772, "hex": "0x0304", "name": "TLS 1.3"}
    assert to_jsonable(VALUE) == {
        "kind": "network", "level": 2, "colour": "red",
        "inner": {"code": version, "raw": "00ff"},
        "items": [{"code": version, "raw": ""},
                  {"code": {"id": 29, "hex": "0x001d", "name": "x25519"}, "raw": ""}],
        "counts": {"1": 0.5, "2": pytest.approx(float("nan"), nan_ok=True)},
        "note": "caf\u00e9"}
    assert type(to_jsonable(VALUE)["level"]) is int
    assert type(to_jsonable(VALUE)["kind"]) is str
    # floats as json.dumps writes them (NaN spelled out), non-ASCII escaped
    assert dumps(VALUE).endswith('"counts": {"1": 0.5, "2": NaN}, "note": "caf\\u00e9"}')
    assert dumps(VALUE, indent=2) == json.dumps(to_jsonable(VALUE), indent=2)


def test_document_puts_the_head_first() -> None:
    doc = document({"schema": 1, "tool": "tlsprobe"}, Inner(V))
    assert list(doc) == ["schema", "tool", "code", "raw"]


def test_json_shape_gives_renamed_and_computed_members() -> None:
    fig = Figure("encrypt", 10, 1.0, 4.0, block_size=16, per_process=(2.0, 2.0))
    assert to_jsonable(fig) == {"operation": "encrypt", "block_size": 16, "count": 10,
                                "seconds": 1.0, "per_second": 4.0, "bytes_per_second": 64.0,
                                "per_process": [2.0, 2.0]}
    comparison = Comparison("openssl", "3", 1, (ComparisonRow("x", "derive", None, "op/s",
                                                               3.0, 2.0),))
    assert list(to_jsonable(comparison)) == ["binary", "version", "seconds", "error",
                                             "commands", "rows"]
    assert to_jsonable(comparison)["rows"][0]["ratio"] == 1.5


def test_not_a_model_value_is_refused() -> None:
    with pytest.raises(TypeError, match="not a model value: object"):
        to_jsonable(object())


def test_fast_encoder_writes_what_dumps_writes() -> None:
    offer = Offer((V,), (Cipher.of(0x1301),), (Codepoint.group(0x1D),), (), (), ("h2",),
                  'a "quoted" name', 300)
    encoder = JsonEncoder(remember=(Codepoint, Cipher, Offer))
    for value in (VALUE, offer, [offer, offer], (), {"a": [1, None, True]}, 1.5,
                  float("inf"), Figure("keygen", 1, 1.0, 1.0)):
        assert encoder.encode(value) == dumps(value)
    # a remembered value's text is kept by this encoder (one per run), not by another
    assert encoder.encode(offer) is encoder.encode(offer)
    other = JsonEncoder(remember=(Offer,))
    assert other.encode(offer) == encoder.encode(offer)
    assert other.encode(offer) is not encoder.encode(offer)


def test_fast_encoder_text_stays_right_when_its_full_store_is_emptied() -> None:
    encoder = JsonEncoder(remember=(Codepoint,), limit=2)
    values = [Codepoint.group(g) for g in (0x17, 0x18, 0x19, 0x1D)]
    for value in values * 2:
        assert encoder.encode(value) == dumps(value)
