"""A live server's bytes in the one escaping style (tlsprobe/escaping.py quoted_bytes): a scripted
TLS 1.2 server choosing an ALPN protocol the client never offered, whose name holds a
terminal escape, BEL, U+202E, U+200B, an invalid UTF-8 byte, a backslash and both quotes.
`probe --msg` shows it quoted in its trace line and names it so in its one error line (was
in double quotes with a quote and a backslash as \\x22, \\x5c in the error and unquoted,
the backslash alone, in the trace)."""
from __future__ import annotations

from .runner import run_tlsprobe
from .scenarios_violations import _alpn, tls12_hello_with
from .server import HostileServer

EVIL = b"a\x1b[31mb\xe2\x80\xaec\xe2\x80\x8bd\xffe\\f'g\"h\x07"
QUOTED = r"""'a\x1b[31mb\xe2\x80\xaec\xe2\x80\x8bd\xffe\\f\'g"h\x07'"""


def test_probe_msg_quotes_a_chosen_alpn_name_in_the_one_style(
        hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(tls12_hello_with([_alpn(EVIL)]))
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--tls1_2", "--alpn", "h2", "--msg",
                       "--timeout", "5", hard_timeout=60.0)
    for raw in ("\x1b", "\x07", "\u202e", "\u200b"):
        assert raw not in out.stdout + out.stderr
    assert out.returncode == 6, out.stderr
    assert f"server chose ALPN protocol {QUOTED}, which the client did not offer" \
        in out.stderr, out.stderr
    assert f"application_layer_protocol_negotiation.protocol_name_list[0] {QUOTED} at " \
        in out.stdout, out.stdout
