"""Parity with tshark on the third-party corpus (../shared/captures/truth).

Every handshake stream of truth/ is compared field by field (see tests/offline/parity.py);
each disagreement must be listed, with its reason, in docs/PCAP_PARITY.md (by file, stream
and field: no wildcard), and each listed one must still be real. Where tshark's default
settings saw no ServerHello but reordered TCP segments (or tlsprobe's own reading) suggest
one, the server side is compared with tshark run with out-of-order reassembly
(tests/offline/tshark_ooo.py, cached in the pytest cache). The agreement per field is
printed (pytest -s, or on failure).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.shared_data import shared_missing
from tests.offline import tshark_ooo
from tests.offline.parity import PARITY_DOC, agreement, compare_corpus, documented, is_documented


@pytest.fixture(scope="module")
def parity(captures_dir: Path, monkeypatch_module: pytest.MonkeyPatch,
           pytestconfig: pytest.Config,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list]:
    if not (captures_dir / "truth").is_dir():
        shared_missing("tshark's truth", captures_dir / "truth", "TLSPROBE_CAPTURES")
    monkeypatch_module.setenv("TLSPROBE_CAPTURES", str(captures_dir))
    store = getattr(pytestconfig, "cache", None)  # None under -p no:cacheprovider
    cache = store.mkdir("tshark-ooo") if store is not None \
        else tmp_path_factory.mktemp("tshark-ooo")  # tshark's output, cached
    use = str(cache) if tshark_ooo.available() else None
    return compare_corpus(workers=2, ooo_cache=use)


@pytest.fixture(scope="module")
def parity_rows(parity: tuple[list, list]) -> list:
    return parity[0]


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
    stale = [" ".join(key) for key in documented() if key not in differing]
    assert not stale, "rows of docs/PCAP_PARITY.md that no longer differ:\n" + "\n".join(stale)


# TCP streams with no ServerHello in the truth (tshark's default settings) where out-of-order
# reassembly may show one: TCP trouble in the stream or a server side read by tlsprobe.
# tshark -o tcp.reassemble_out_of_order:TRUE sees the ServerHello of all but smtperr's #3.
OOO_STREAMS = {
    ("suricata-verify/tests/smtp-errors/smtperr.pcap", 3),
    ("suricata-verify/tests/tls/tls-fingerprint-alert/input.pcap", 0),
    ("suricata-verify/tests/tls/tls-subjectaltname/input.pcap", 3),
    ("wireshark/wiki/SampleCaptures/echi12.pcap", 31),
}


@pytest.mark.skipif(not tshark_ooo.available(), reason="tshark (and capinfos) not installed")
def test_server_side_compared_where_tshark_default_saw_no_server_hello(
        parity: tuple[list, list]) -> None:
    rows, ooo_compared = parity
    assert set(ooo_compared) == OOO_STREAMS
    server = {(f, s, name): (want, got) for f, s, name, want, got in rows
              if (f, s) in OOO_STREAMS and name in ("version", "cipher_suite", "ja3s")}
    seen = {(f, s) for (f, s, name), (want, _) in server.items()
            if name == "version" and want is not None}
    assert seen == OOO_STREAMS - {("suricata-verify/tests/smtp-errors/smtperr.pcap", 3)}
    assert all(want == got for want, got in server.values()), server


def test_agreement_is_near_total_on_the_core_fields(parity_rows: list) -> None:
    table = agreement(parity_rows)
    for name in ("version", "cipher_suite", "cipher_suites", "ja3", "ja4"):
        ok, n = table[name]
        assert ok / n > 0.98, (name, ok, n)


def test_the_documented_agreement_table_is_the_measured_one(parity_rows: list) -> None:
    """docs/PCAP_PARITY.md's per-field table gives today's figures (it had gone stale)."""
    import re
    text = PARITY_DOC.read_text()
    doc = {m.group(1): (int(m.group(2)), int(m.group(3)))
           for m in re.finditer(r"^\| (\w+) \| (\d+) \| (\d+) \|$", text, re.M)}
    assert doc == agreement(parity_rows)
