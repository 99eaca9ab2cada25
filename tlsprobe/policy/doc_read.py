"""Reading a scan document's JSON (policy/changes.py, policy/cert_changes.py): a member of
the expected JSON type or an empty stand-in (a baseline written by another tlsprobe, or
edited by hand, may hold anything), and the scan's time."""

from __future__ import annotations

from datetime import UTC, datetime

from tlsprobe.model.encode import JsonObject, JsonValue

__all__ = ["doc_time", "items", "obj", "parse_time", "text"]


def obj(value: JsonValue | object) -> JsonObject:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: JsonValue | object) -> list[JsonValue]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def text(value: JsonValue | object) -> str | None:
    """`value` if it is a JSON string, else None."""
    return value if isinstance(value, str) else None


def doc_time(doc: JsonObject) -> datetime | None:
    """When the scan started (`started_at`), None when the document does not say."""
    return parse_time(text(doc.get("started_at")))


def parse_time(value: str | None) -> datetime | None:
    """An ISO 8601 or "YYYY-MM-DD HH:MM:SS" time, UTC when it names no zone; None when it
    is none of these."""
    if not value:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z",
                "%Y-%m-%d %H:%M:%S"):
        try:
            t = datetime.strptime(value.strip(), fmt)
        except ValueError:
            continue
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)
