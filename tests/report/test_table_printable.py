"""The connection table's fast printability test (report.offline_tables.printable) says
what str.isprintable says, and a row with a control character is still shown escaped."""

import io

from tlsprobe.report.offline_tables import COLUMNS, printable, render_rows


def test_printable_agrees_with_isprintable() -> None:
    # every ASCII character alone and inside text, and non-ASCII ones (their own path)
    for code in [*range(0x100), 0x2028, 0x200B, 0xFEFF, 0x4E2D, 0x1F600]:
        ch = chr(code)
        for text in (ch, f"ab{ch}cd", f"example.com{ch}"):
            assert printable(text) == text.isprintable(), hex(code)
    assert printable("") and printable("TLS_AES_128_GCM_SHA256 x25519 517/1234")


def test_row_with_control_character_escaped() -> None:
    out = io.StringIO()
    row = ("0", "10.0.0.1:5000", "10.0.0.2:443", "evil\x1b[2J.test", "TLS 1.3",
           "TLS_AES_128_GCM_SHA256", "x25519", "32/32", "-", "-")
    render_rows([row], out, columns=COLUMNS)
    text = out.getvalue()
    assert "\x1b" not in text
    assert "evil" in text and "2J.test" in text
