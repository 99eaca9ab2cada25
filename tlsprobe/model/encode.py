"""The one JSON encoding of every result type (probe, audit, capture, timing, speed).

The rules, defined once by `to_jsonable`:

- a dataclass becomes an object with its fields in declaration order, unless its class
  defines `json_shape()` (see `JsonShaped`): then that mapping is encoded instead (the speed
  results use it for computed figures and the nested "library" object of their schema);
- tuples and lists become arrays, dicts objects (keys as str), enums their value, bytes
  their lowercase hex, None/bool/int/float/str themselves (floats as `json.dumps` writes
  them, NaN and the infinities spelled out).

`dumps(value)` is `json.dumps(to_jsonable(value))`. `JsonEncoder` writes the same text
without building the dicts, for the capture path where thousands of connection reports
share offers, suites and certificates: an encoder object remembers the text of such
repeated values for as long as it lives (one per run; nothing here is process-global).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol, TypeAlias, runtime_checkable

from tlsprobe.model.json_scalars import number

__all__ = ["JsonEncoder", "JsonObject", "JsonShaped", "JsonValue", "document", "dumps", "number",
           "plain_string", "run_head", "started_at", "string", "to_json_object", "to_jsonable",
           "utc_stamp"]

#: what `json.loads` returns and `json.dumps` takes
JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"


@runtime_checkable
class JsonShaped(Protocol):
    """A result whose JSON form is not simply its fields (renamed, nested or computed
    members): `json_shape` returns the mapping to encode, values still model values."""

    def json_shape(self) -> dict[str, object]: ...


def to_jsonable(value: object) -> JsonValue:
    """JSON-ready view of a model value: dicts, lists and scalars only (see the module
    docstring for the rules)."""
    if value is None or isinstance(value, (str, int, float)) and not isinstance(value, Enum):
        return value
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    if isinstance(value, (tuple, list)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    shape = getattr(value, "json_shape", None)
    if shape is not None:
        return {str(k): to_jsonable(v) for k, v in shape().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    raise TypeError(f"not a model value: {type(value).__name__}")


def to_json_object(value: object) -> JsonObject:
    """`to_jsonable` of a value whose JSON form is an object (a dataclass or a mapping)."""
    out = to_jsonable(value)
    if not isinstance(out, dict):
        raise TypeError(f"not a JSON object: {type(value).__name__}")
    return out


def document(head: JsonObject, value: object) -> JsonObject:
    """`head` (schema, tool, kind ...) followed by the members of `value`'s JSON object."""
    out = dict(head)
    out.update(to_json_object(value))
    return out


def utc_stamp(epoch: float) -> str:
    """`epoch` (seconds since 1970) as every document's `started_at` writes it: ISO 8601 in
    UTC to the second, "2026-12-06T10:20:31Z" (what JSON Schema's date-time, pandas and
    DuckDB read as a UTC timestamp)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def started_at(elapsed_s: float) -> str:
    """The `started_at` of work that has run for `elapsed_s` seconds until now (measured on
    the monotonic clock): the wall clock at its start, in UTC."""
    return utc_stamp(time.time() - max(elapsed_s, 0.0))


def run_head() -> JsonObject:
    """The member every JSON document tlsprobe writes carries beside `started_at` and
    `duration_s`: the version of tlsprobe that wrote it."""
    from tlsprobe._version import __version__
    return {"tlsprobe_version": __version__}


def dumps(value: object, indent: int | None = None) -> str:
    """The JSON text of a model value (one line unless `indent` is given)."""
    return json.dumps(to_jsonable(value), indent=indent)


_encode_str: Callable[[str], str] = getattr(json.encoder, "c_encode_basestring_ascii",
                                            None) or json.encoder.encode_basestring_ascii


#: a str (never None) as json.dumps writes it: the C encoder itself, no call in between
plain_string: Callable[[str], str] = _encode_str


def string(value: str | None) -> str:
    """A string (or null) as json.dumps writes it."""
    return "null" if value is None else _encode_str(value)


class JsonEncoder:
    """`dumps(value)` byte for byte, without building dicts, remembering the text of values
    of the `remember` types (and of arrays starting with one) by identity while it lives.

    Meant for one run over many results that share values (a capture's connection reports
    share offers, suites, groups and certificates): create one per run and drop it after.
    At most `limit` texts are kept; the store is emptied when full."""

    def __init__(self, remember: tuple[type, ...] = (), limit: int = 1 << 16) -> None:
        self.encode: Callable[[object], str] = _make_encoder(remember, limit)


def _make_encoder(remember: tuple[type, ...], limit: int) -> Callable[[object], str]:
    """The encoding function of one JsonEncoder: a closure, so that its recursion reads
    locals only (this is on the `pcap --jsonl` hot path)."""
    text_of: dict[int, tuple[object, str]] = {}
    keys_of: dict[type, tuple[tuple[str, str], ...]] = {}
    enc_str, num = _encode_str, number

    def keep(value: object, text: str) -> None:
        if len(text_of) >= limit:
            text_of.clear()
        text_of[id(value)] = (value, text)

    def encode(value: Any) -> str:
        t = type(value)
        if t is str:
            return enc_str(value)
        if value is None:
            return "null"
        if t is bool:
            return "true" if value else "false"
        if t is int:
            return int.__repr__(value)
        if t is float:
            return num(value)
        if t is tuple or t is list:
            if not value:
                return "[]"
            if isinstance(value[0], remember):
                hit = text_of.get(id(value))
                if hit is not None and hit[0] is value:
                    return hit[1]
                text = "[" + ", ".join([encode(v) for v in value]) + "]"
                keep(value, text)
                return text
            return "[" + ", ".join([encode(v) for v in value]) + "]"
        if t is dict:
            return "{" + ", ".join([f"{enc_str(str(k))}: {encode(v)}"
                                    for k, v in value.items()]) + "}"
        keys = keys_of.get(t)
        if keys is None:
            if not dataclasses.is_dataclass(value) or hasattr(value, "json_shape"):
                return json.dumps(to_jsonable(value))   # enums, bytes, shaped, subclasses
            keys = keys_of[t] = tuple((enc_str(f.name) + ": ", f.name)
                                      for f in dataclasses.fields(value))
        remembered = isinstance(value, remember)
        if remembered:
            hit = text_of.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1]
        text = "{" + ", ".join([k + encode(getattr(value, n)) for k, n in keys]) + "}"
        if remembered:
            keep(value, text)
        return text

    return encode
