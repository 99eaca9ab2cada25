"""Alert (RFC 8446 6, RFC 5246 7.2) and ChangeCipherSpec (RFC 5246 7.1) record payloads.

Both are parsed from a whole plaintext record fragment. A fragment may in principle carry
several alerts; `parse_alerts` returns them all, `Alert.parse` wants exactly one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._util import alert_label, enum_label
from .buffer import Annotation, Buffer, Writer

WARNING: Final = 1
FATAL: Final = 2
ALERT_LEVELS: Final = {WARNING: "warning", FATAL: "fatal"}


@dataclass(frozen=True)
class Alert:
    """Raw level and description; names come from the registry at display time."""

    level: int
    description: int

    @classmethod
    def pull(cls, buf: Buffer) -> Alert:
        at = buf.tell()
        with buf.field("Alert"):
            level, description = buf.pull_uint8(), buf.pull_uint8()
        buf.note("level", at, 1, enum_label(ALERT_LEVELS, level))
        if buf.annotations is not None:
            buf.note("description", at + 1, 1, alert_label(description))
        return cls(level, description)

    @classmethod
    def parse(cls, fragment: bytes) -> Alert:
        buf = Buffer(fragment, path="Alert")
        alert = cls.pull(buf)
        if not buf.eof():
            raise buf.error(f"{buf.remaining} trailing bytes")
        return alert

    def serialize(self) -> bytes:
        w = Writer()
        w.push_uint8(self.level)
        w.push_uint8(self.description)
        return w.data()

    @property
    def is_fatal(self) -> bool:
        return self.level == FATAL


#: the smallest protected alert record: 2 bytes and a 16-byte MAC or AEAD tag
MIN_PROTECTED_ALERT: Final = 18


def ciphertext_alert(fragment: bytes) -> bool:
    """An alert record that is a protected one, not plaintext: at least the size of the
    smallest protected alert, with an odd size or a level that is neither warning nor
    fatal (a 26-byte AES-GCM close_notify, say). Its change of keys was not seen, e.g. a
    ChangeCipherSpec lost in a capture gap: its bytes are ciphertext, not alerts to
    report. A shorter record is a plaintext one (malformed or not)."""
    n = len(fragment)
    if n < MIN_PROTECTED_ALERT:
        return False
    return bool(n % 2) or any(level not in ALERT_LEVELS for level in fragment[0:n:2])


def parse_alerts(fragment: bytes, annotate: bool = False) -> tuple[list[Alert], list[Annotation]]:
    """Every alert in a plaintext alert fragment (an empty or odd-sized one is an error)."""
    buf = Buffer(fragment, path="alerts", annotate=annotate)
    if buf.eof():
        raise buf.error("empty alert fragment")
    alerts: list[Alert] = []
    while not buf.eof():
        alerts.append(Alert.pull(buf))
    return alerts, list(buf.annotations or [])


@dataclass(frozen=True)
class ChangeCipherSpec:
    """The single byte 0x01 (also the TLS 1.3 middlebox-compatibility record)."""

    type: int = 1

    @classmethod
    def parse(cls, fragment: bytes) -> ChangeCipherSpec:
        buf = Buffer(fragment, path="ChangeCipherSpec")
        value = buf.pull_uint8()
        if value != 1:
            raise buf.error(f"ChangeCipherSpec value {value} is not 1", 0)
        if not buf.eof():
            raise buf.error(f"{buf.remaining} trailing bytes")
        return cls(value)

    def serialize(self) -> bytes:
        return bytes([self.type])
