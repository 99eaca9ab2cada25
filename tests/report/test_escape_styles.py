"""One escaping style for bytes a peer or a file supplies, in every output path.

The style (tlsprobe/escaping.py `escaped_bytes` / `quoted_bytes`, README "Text that a server or a
capture supplies"): printable ASCII as is, \\r \\n \\t by name, a backslash doubled, any other
byte \\xNN (UTF-8 bytes too), single quotes with \\' inside a quoted one. Fed through each
path: a capture (a real pcap file) whose ClientHello's SNI and ALPN and whose plain text
before TLS hold a terminal escape (ESC [ 3 1 m), BEL, the bidi override U+202E, the zero
width space U+200B, an invalid UTF-8 byte, a backslash and both quotes; and a targets file
(`scan -f`) with such lines, quoted as its text in the same style (a non-printable
character as \\u202e, tlsprobe/escaping.py `quoted_text`; a line that is not UTF-8 by its bytes).
Text, --csv and HTML show the one style; JSON keeps control characters exact (JSON-escaped)
and holds other bytes as that text, a backslash doubled.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from tests.helpers.capbuild import Conv, _handshake_record, _vec16, ether, pcap_bytes

#: ESC [31m, U+202E, U+200B, an invalid UTF-8 byte, a backslash, ' and ", BEL
EVIL = b"a\x1b[31mb\xe2\x80\xaec\xe2\x80\x8bd\xffe\\f'g\"h\x07"
#: EVIL as text, --csv and HTML show it (written out, not computed by tlsprobe's helper)
SHOWN = r"""a\x1b[31mb\xe2\x80\xaec\xe2\x80\x8bd\xffe\\f'g"h\x07"""
#: EVIL quoted, as the --msg trace shows a name
QUOTED = r"""'a\x1b[31mb\xe2\x80\xaec\xe2\x80\x8bd\xffe\\f\'g"h\x07'"""
#: EVIL as a JSON value holds it: controls kept, other bytes as text, a backslash doubled
JSON_TEXT = "a\x1b[31mb\\xe2\\x80\\xaec\\xe2\\x80\\x8bd\\xffe\\\\f'g\"h\x07"
RAW = ("\x1b", "\x07", "\u202e", "\u200b")


def _hello(sni: bytes, alpn: bytes) -> bytes:
    sni_ext = b"\x00\x00" + _vec16(_vec16(b"\x00" + _vec16(sni)))
    alpn_ext = b"\x00\x10" + _vec16(_vec16(bytes([len(alpn)]) + alpn))
    body = b"\x03\x03" + b"\x11" * 32 + b"\x00" + _vec16(b"\xc0\x2b") + b"\x01\x00" + \
        _vec16(sni_ext + alpn_ext + b"\x00\x0a\x00\x04\x00\x02\x00\x17")
    return _handshake_record(1, body, b"\x03\x01")


def _capture(path: Path) -> Path:
    """Two TCP connections: a ClientHello offering EVIL as SNI and ALPN; a ClientHello after
    a plain-text line holding EVIL (a preamble, 'Before TLS')."""
    first, second = Conv(), Conv(client=("10.0.0.3", 40001))
    frames = first.handshake() + [first.c(_hello(EVIL, EVIL))] + second.handshake() + [
        second.c(b"HELLO " + EVIL + b"\r\n" + _hello(b"x.example", b"h2"))]
    path.write_bytes(pcap_bytes(ether(f) for f in frames))
    return path


def _no_raw(text: str) -> None:
    for c in RAW:
        assert c not in text, f"raw {c!r} in the output"


def test_pcap_text_details_and_csv_show_the_one_style(run_cli, tmp_path):
    pcap = _capture(tmp_path / "evil.pcap")
    code, out, err = run_cli("pcap", pcap, "--no-progress", "--details")
    assert code == 0 and err == "", err
    _no_raw(out)
    assert f"SNI               {SHOWN}\n" in out
    assert f"Offered ALPN      {SHOWN}\n" in out
    assert f"Before TLS        HELLO {SHOWN}\\r\\n\n" in out
    sheet = tmp_path / "conns.csv"
    code, out, err = run_cli("pcap", pcap, "--no-progress", "--csv", sheet)
    assert code == 0 and err == "", err
    text = sheet.read_text(encoding="utf-8")
    _no_raw(text)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["SNI"] for r in rows] == [SHOWN, "x.example"], rows


def test_pcap_msg_trace_quotes_names_in_the_one_style(run_cli, tmp_path):
    pcap = _capture(tmp_path / "evil.pcap")
    code, out, err = run_cli("pcap", pcap, "--no-progress", "--msg")
    assert code == 0 and err == "", err
    _no_raw(out)
    assert f"server_name.server_name_list[0].host_name {QUOTED} (24 bytes) at +56..+79" in out
    assert f"application_layer_protocol_negotiation.protocol_name_list[0] {QUOTED} at " in out
    assert "host_name 'x.example' (9 bytes)" in out
    assert "protocol_name_list[0] 'h2' at " in out


def test_pcap_json_keeps_controls_and_holds_bytes_as_text(run_cli, tmp_path):
    pcap = _capture(tmp_path / "evil.pcap")
    code, out, err = run_cli("pcap", pcap, "--no-progress", "--jsonl")
    assert code == 0 and err == "", err
    conns = [json.loads(line) for line in out.splitlines()
             if json.loads(line)["kind"] == "connection"]
    assert [c["sni"] for c in conns] == [JSON_TEXT, "x.example"]
    assert conns[0]["offer"]["alpn"] == [JSON_TEXT]
    assert [c["preamble"] for c in conns] == [None, f"HELLO {SHOWN}\\r\\n"]


LINES = (b"a\x1b[31mb\n"                  # a terminal escape
         b"\xe2\x80\xaeevil.example:443\n"   # U+202E
         b"x\xffy\n"                         # not UTF-8
         b"c\\d\xe2\x80\x8b\n")              # a backslash, U+200B


def test_targets_file_lines_are_quoted_in_the_one_style(run_cli, tmp_path):
    targets = tmp_path / "targets.txt"
    targets.write_bytes(LINES)
    quoted = (r"'a\x1b[31mb'", r"'\u202eevil.example:443'", None, r"'c\\d\u200b'")
    code, out, err = run_cli("scan", "-f", targets, "--no-progress", "--json")
    assert code == 2
    errors = [json.loads(line)["error"] for line in out.splitlines()]
    for number, (shown, error) in enumerate(zip(quoted, errors), 1):
        if shown is not None:
            assert error.startswith(f"{targets}:{number}: bad target {shown}: "), error
    assert errors[2] == f"{targets}:3: not UTF-8 text (byte 0xff at column 2): " + r"'x\xffy'"
    code, out, err = run_cli("scan", "-f", targets, "--no-progress",
                             "--html", tmp_path / "t.html")
    _no_raw(out + err)
    flat = " ".join((out + err).split())
    for shown in filter(None, quoted):
        assert f"Skipped {shown}" in flat and f"bad target {shown}:" in flat
    page = (tmp_path / "t.html").read_text(encoding="utf-8")
    _no_raw(page)
    assert r"<h2>Skipped &#x27;c\\d\u200b&#x27;</h2>" in page
    assert r"bad target &#x27;\u202eevil.example:443&#x27;" in page
    assert "<h2>Skipped &#x27;x\ufffdy&#x27;</h2>" in page    # its error quotes the byte
