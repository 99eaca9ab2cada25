"""Golden exact-output tests: what tlsprobe prints (rich tables, the --msg trace, the
pcap table) and writes as JSON, compared character for character with the files in
tests/golden/data/ (see tests/golden/README.md).

Regenerate every golden file from the current code with ONE command, from the repo root:

    TLSPROBE_REGEN_GOLDEN=1 python -m pytest tests/golden -p no:cacheprovider

(then review `git diff tests/golden/data` before committing: a golden file changes only
when an output is meant to change).

Fixtures:
- `golden`: `golden.text(name, text)` / `golden.json(name, doc, port=...)` compare with
  data/NAME (or write it when regenerating); a difference fails with a unified diff.
- `terminal`: a file that says it is a terminal, with rich's environment fixed (100
  columns, TERM=dumb: no colour, no escape sequences), so the renderers take their
  terminal path (rich tables wrapped to 100 columns) and write plain text.
"""
from __future__ import annotations

import difflib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data"
REGEN = os.environ.get("TLSPROBE_REGEN_GOLDEN") == "1"
REGEN_COMMAND = "TLSPROBE_REGEN_GOLDEN=1 python -m pytest tests/golden -p no:cacheprovider"
WIDTH = 100

#: JSON members whose value depends on the run, not on the code: replaced by a placeholder
#: naming what was there (normalize). Times and durations, certificate validity dates,
#: serials and fingerprints (the test CA is made anew each session), the machine's trust
#: store path, random bytes a server sent.
RUN_DEPENDENT = {
    "connect_ms": "<ms>", "handshake_ms": "<ms>", "total_ms": "<ms>", "duration_s": "<s>",
    "not_before": "<date>", "not_after": "<date>", "serial": "<serial>",
    "sha256": "<sha256>", "sha1": "<sha1>", "trust_store": "<path>",
    # the first 4 bytes of each ServerHello.random (tls_timestamp's details)
    "first_bytes": "<random>",
    # issue 33: every JSON document says when its work started and which tlsprobe wrote it
    "started_at": "<date>", "tlsprobe_version": "<version>",
}
#: the members a capture's JSON document has of the run (not of the recording): replaced
#: at its top level even when every other value is kept (normalize with port None)
RUN_MEMBERS = ("tlsprobe_version", "started_at", "duration_s")
#: JSON objects whose member order is the order the run's work finished in (a scan's
#: connections per phase, counted as each phase ends, several at a time): compared sorted
ORDERLESS = frozenset({"connections"})
#: JSON members that are new since the goldens were pinned and allowed to appear (issue 31
#: item 4: each check result gains typed `details` beside its prose)
ALLOWED_NEW = frozenset({"details"})

_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")
_LONG_HEX = re.compile(r"\b[0-9a-f]{32,}\b")


def normalize(doc: Any, port: int | None = None) -> Any:
    """`doc` (parsed JSON of a live run against a lab server listening on `port`; None: a
    capture's, whose every value is the recording's and is kept) with what depends on the
    run replaced by placeholders, so that two runs of the same code against the same kind
    of server compare equal:
    - the members named in RUN_DEPENDENT (times, certificate dates, serials, digests)
      become their placeholder (null stays null: "not measured" is not run-dependent);
    - `port`, the lab server's port (chosen free at each start), becomes "<port>" wherever
      it appears: the `port` member and inside any text ("127.0.0.1:40123");
    - inside any text, ISO dates become "<date>" and hex runs of 32+ digits "<hex>" (a
      check quoting a certificate's expiry or fingerprint);
    - the objects named in ORDERLESS have their members sorted by name (their order is
      the order concurrent phases ended in).
    Nothing else is touched: every other member, its order and the list orders count.
    A capture's document (`port` None) keeps every value but the RUN_MEMBERS of its top
    level (the run's version, start and duration)."""
    if port is None:
        if isinstance(doc, dict):
            return {k: RUN_DEPENDENT[k] if k in RUN_MEMBERS else v for k, v in doc.items()}
        return doc
    def text(value: str) -> str:
        value = _ISO_DATE.sub("<date>", value)
        value = _LONG_HEX.sub("<hex>", value)
        if port is not None:
            value = re.sub(rf"(?<!\d){port}(?!\d)", "<port>", value)
        return value

    def walk(value: Any, key: str | None = None) -> Any:
        if key in RUN_DEPENDENT and value is not None:
            return RUN_DEPENDENT[key]
        if isinstance(value, dict):
            items = sorted(value.items()) if key in ORDERLESS else value.items()
            return {k: walk(v, k) for k, v in items}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return text(value)
        if key in ("port", "server_port") and port is not None and value == port:
            return "<port>"
        return value
    return walk(doc)


def without_new_members(actual: Any, expected: Any) -> Any:
    """`actual` without the ALLOWED_NEW members the golden `expected` does not have (at
    the same place), so that exactly those additions are tolerated."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        return {k: without_new_members(v, expected.get(k)) for k, v in actual.items()
                if k in expected or k not in ALLOWED_NEW}
    if isinstance(actual, list) and isinstance(expected, list):
        return [without_new_members(a, e) for a, e in zip(actual, expected)] + \
            actual[len(expected):]
    return actual


class Golden:
    def text(self, name: str, actual: str) -> None:
        path = DATA / name
        if REGEN:
            path.write_text(actual, encoding="utf-8")
            return
        if not path.is_file():
            pytest.fail(f"golden file {path} is missing; generate it with: {REGEN_COMMAND}")
        expected = path.read_text(encoding="utf-8")
        if actual != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                f"golden {name}", "now", n=2))
            pytest.fail(f"output differs from tests/golden/data/{name} (if the change is "
                        f"meant: {REGEN_COMMAND}, then review git diff):\n{diff}",
                        pytrace=False)

    def json(self, name: str, doc: Any, port: int | None = None) -> None:
        """`doc` against data/NAME, normalized (`port`: a live run's, see normalize)."""
        actual = normalize(doc, port)
        path = DATA / name
        if not REGEN and path.is_file():
            actual = without_new_members(actual, json.loads(path.read_text(encoding="utf-8")))
        self.text(name, json.dumps(actual, indent=1, ensure_ascii=False) + "\n")


@pytest.fixture
def golden() -> Golden:
    return Golden()


class TerminalText(io.StringIO):
    """A text file that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[TerminalText]:
    """A `TerminalText` with rich's environment fixed: 100 columns, 50 lines, TERM=dumb (no
    colour, no escape sequences), whatever the environment of the run."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                 "JUPYTER_COLUMNS", "JUPYTER_LINES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("LINES", "50")
    monkeypatch.setenv("TERM", "dumb")
    yield TerminalText()
