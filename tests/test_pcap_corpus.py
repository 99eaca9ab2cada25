"""Parity with tshark on the third-party corpus (../shared/captures/truth).

Every handshake stream of truth/ is compared field by field (see tests/offline/parity.py);
each disagreement must be listed, with its reason, in docs/PCAP_PARITY.md, and each listed
one must still be real. The agreement per field is printed (pytest -s, or on failure).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from offline.parity import agreement, compare_corpus, documented, is_documented


@pytest.fixture(scope="module")
def parity_rows(captures_dir: Path, monkeypatch_module: pytest.MonkeyPatch) -> list:
    if not (captures_dir / "truth").is_dir():
        pytest.skip(f"no truth/ in {captures_dir}")
    monkeypatch_module.setenv("TLSPROBE_CAPTURES", str(captures_dir))
    return compare_corpus(workers=2)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_every_disagreement_with_tshark_is_documented(parity_rows: list) -> None:
    table = agreement(parity_rows)
    print("\nfield                 agree / compared")
    for name, (ok, n) in table.items():
        print(f"{name:<21} {ok:>5} / {n}")
    assert table["version"][1] >= 700 and table["ja4"][1] >= 800  # the whole corpus was read
    doc = documented()
    undocumented = [f"{f} #{s} {name}: tshark {want!r}, tlsprobe {got!r}"
                    for f, s, name, want, got in parity_rows
                    if want != got and not is_documented(doc, f, s, name)]
    assert not undocumented, "\n".join(undocumented[:40])


def test_documented_differences_are_still_real(parity_rows: list) -> None:
    differing = {(f, str(s), name) for f, s, name, want, got in parity_rows if want != got}
    stale = []
    for file, stream, name in documented():
        if not any(f == file and (stream == "*" or s == stream) and (name == "*" or n == name)
                   for f, s, n in differing):
            stale.append(f"{file} {stream} {name}")
    assert not stale, "rows of docs/PCAP_PARITY.md that no longer differ:\n" + "\n".join(stale)


def test_agreement_is_near_total_on_the_core_fields(parity_rows: list) -> None:
    table = agreement(parity_rows)
    for name in ("version", "cipher_suite", "cipher_suites", "ja3", "ja4"):
        ok, n = table[name]
        assert ok / n > 0.98, (name, ok, n)
