"""Terminal tables never split an identifier (issue 30, item 3): JA4 values, `ip:port`
pairs, cipher suite and OpenSSL names, certificate names and check evidence stay whole at
80, 100, 120 and 160 columns. The data are real: the project's loopback recordings for the
pcap table, and one scan of a real openssl s_server with every suite its build has (the
longest IANA and OpenSSL names) for the audit and check tables. Rendered on a rich Console
of fixed width writing to a StringIO, as a terminal of that width would show them."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.helpers.servers import missing_reason, peer_unavailable, start_server

from rich.console import Console

REPO = Path(__file__).resolve().parents[2]
WIDTHS = (80, 100, 120, 160)
CAPTURES = ("tls12_x25519.pcap", "tls13_ipv6.pcap", "tls13_hrr.pcap",
            "tls13_secp256r1mlkem768.pcap", "tls12_unknown_ca.pcap", "tls12_dhe.pcap")


def _printed(renderable: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False,
                      soft_wrap=False)
    console.print(renderable)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(map(len, text.splitlines())) <= width
    return text


def _whole(tokens: set[str], text: str) -> list[str]:
    """The tokens that do not appear whole in `text` (between spaces or line ends)."""
    words = set(re.split(r"[\s│]+", text))
    return sorted(t for t in tokens if t not in words)


@pytest.fixture(scope="module")
def connection_rows() -> list[tuple[str, ...]]:
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    from tlsprobe.report.offline_tables import connection_row
    rows = [connection_row(r) for name in CAPTURES
            for r, _ in CaptureAnalysis(str(REPO / "captures" / name), AnalyzerOptions())]
    assert any(row[1].startswith("[::1]:") for row in rows) and all(row[-1] != "-" for row in rows)
    return rows


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("width", WIDTHS)
def test_pcap_table_keeps_addresses_suites_and_ja4_whole(connection_rows, width: int,
                                                         monkeypatch) -> None:
    """The table `tlsprobe pcap` prints on a terminal of `width` columns."""
    from tlsprobe.report.offline_tables import render_rows
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    out = _Terminal()
    render_rows(connection_rows, out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())   # bold labels
    assert max(map(len, text.splitlines())) <= width
    tokens = {word for row in connection_rows for cell in row for word in cell.split()}
    assert _whole(tokens, text) == [], text
    for row in connection_rows:   # the JA4 and both addresses of every row, whole
        assert row[1] in text and row[2] in text and row[-1] in text


@pytest.fixture(scope="module")
def weak_audit(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    from tlsprobe.api import scan
    tmp = tmp_path_factory.mktemp("widths")
    server = start_server("openssl", ciphers="ALL:COMPLEMENTOFALL:@SECLEVEL=0", proto="all",
                          cert="ecdsa", workdir=tmp / "srv")
    try:
        (report,) = scan(f"127.0.0.1:{server.port}", checks=["versions", "suites", "cert",
                                                              "vulns"], verify=False,
                         timeout=4)
    finally:
        server.stop()
    assert report.error is None, report.error
    return report


@pytest.mark.parametrize("width", WIDTHS)
def test_audit_and_check_tables_keep_identifiers_whole(weak_audit, width: int) -> None:
    from tlsprobe.report.audit_tables import audit_renderables
    text = "".join(_printed(part, width) for part in audit_renderables(weak_audit, full=True))
    suites = [c for s in weak_audit.suites for c in s.supported]
    assert max(len(c.iana_name) for c in suites) >= 45    # the long names are there
    tokens = {c.iana_name for c in suites} | {c.openssl_name for c in suites if c.openssl_name}
    tokens |= {word for c in weak_audit.check_results
               if c.verdict.value == "vulnerable" for e in c.evidence for word in e.split()
               if "_" in word}
    tokens |= {word for c in weak_audit.certificates for word in c.subject.split()}
    tokens |= {f.code for f in weak_audit.findings}
    assert _whole(tokens, text) == [], text



def test_the_streamed_table_keeps_its_columns_for_every_ecdhe_aead_suite() -> None:
    """`pcap -i`/stdin print a row before the others' widths are known: every ECDHE AEAD
    suite's IANA name (up to TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, what ECDSA
    servers negotiate every day) fits its column, so the Group column stays under its
    header."""
    from tlsprobe.registry._generated import CIPHER_SUITES
    from tlsprobe.report.offline_tables import StreamedTable
    names = [s[1] for s in CIPHER_SUITES if s[1].startswith("TLS_ECDHE_") and
             ("GCM" in s[1] or "CHACHA20" in s[1]) and not s[1].endswith("_OLD")]
    assert "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" in names
    out = io.StringIO()
    table = StreamedTable(out)
    table.header()
    for name in names:
        table.row(("0", "192.0.2.1:50000", "192.0.2.2:443", "example.test", "1.2", name,
                   "x25519", "32/32", "-", "t12d280700_d943125447b4_e7e480e5a997"))
    header, *rows = out.getvalue().splitlines()
    column = header.index("Group")
    assert all(row[column:].startswith("x25519 ") for row in rows), \
        [row for row in rows if not row[column:].startswith("x25519 ")]


def _cells(lines: list[str], header: str) -> list[list[str]]:
    """The rows of a plain table, each cell under its header's column (a row's lines after
    its first, the ones with no `#`, continue its cells: the words joined by a blank)."""
    names = re.findall(r"\S+(?: \S+)?", header)     # "Cipher suite", "Key S/C"
    starts = [header.index(name) for name in names] + [None]
    rows: list[list[str]] = []
    for line in lines:
        for start in starts[1:-1]:      # the two blanks before each column are blanks
            assert line[start - 2:start].strip() == "", (line, header)
        cells = [line[a:b].strip() for a, b in zip(starts, starts[1:])]
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells)]
    return rows


@pytest.mark.parametrize("name", CAPTURES)
def test_the_streamed_table_keeps_every_value_under_its_header(name: str) -> None:
    """`pcap -` (stdin, a streamed table of fixed widths) shows the same cells as the table
    of the file read whole, each under its header: a value longer than its column
    ("secp256r1 (after HRR)" of tls13_hrr.pcap, an alert in the Version column) wraps
    inside its column instead of pushing the row's next columns right."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120", NO_COLOR="1")
    path = REPO / "captures" / name
    with open(path, "rb") as stdin:
        streamed = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "-"], stdin=stdin,
                                  capture_output=True, text=True, env=env, timeout=60)
    whole = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", str(path)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert streamed.returncode == whole.returncode == 0, streamed.stderr + whole.stderr
    assert streamed.stderr == whole.stderr == ""
    got, want = ([line for line in p.stdout.splitlines() if not line.startswith("Key S/C:")]
                 for p in (streamed, whole))
    assert _cells(got[1:], got[0]) == _cells(want[1:], want[0]), streamed.stdout


def test_the_streamed_table_wraps_long_network_values_inside_their_columns() -> None:
    """An SNI, ALPN or version text longer than its column (names from the network have no
    bound) wraps inside its column; a word longer than the column is cut to its width; the
    text is all there, escaped."""
    from tlsprobe.report.offline_tables import STREAM_WIDTHS, StreamedTable
    sni = "a-very-long-server-name-from-the-network.example.test"
    row = ("12", "[2001:db8::1]:50000", "[2001:db8::2]:443", sni,
           "TLS 1.2, failed: client alert unknown_ca", "TLS_AES_128_GCM_SHA256",
           "X25519MLKEM768 (after HRR)", "1216/1184", "h2,http/1.1\x1b[31m",
           "t13d1516h2_8daaf6152771_02713d6af862")
    out = io.StringIO()
    table = StreamedTable(out)
    table.header()
    table.row(row)
    header, *lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue()
    assert all(len(line) <= sum(STREAM_WIDTHS) + 2 * 9 for line in lines)
    (cells,) = _cells(lines, header)
    assert cells[3].replace(" ", "") == sni
    assert cells[4] == row[4] and cells[6] == row[6]
    assert cells[8].replace(" ", "") == "h2,http/1.1\\x1b[31m"


def test_ipv6_endpoints_are_bracketed_in_every_text_view(run_cli) -> None:
    """An IPv6 endpoint reads as people write it, '[::1]:443', in the table, --details and
    the --msg header (its colons are not the port's); JSON keeps tshark's form beside the
    separate address and port."""
    path = str(REPO / "captures" / "tls13_ipv6.pcap")
    views = {args: run_cli("pcap", path, "--no-progress", *args) for args in
             ((), ("--details",), ("--msg",), ("--json",))}
    for args, (code, out, err) in views.items():
        assert code == 0, err
    (conn,) = json.loads(views[("--json",)][1])["connections"]
    client = f"[{conn['client_ip']}]:{conn['client_port']}"
    assert conn["client"] == f"{conn['client_ip']}:{conn['client_port']}"
    assert client in views[()][1].splitlines()[1]
    assert f"#0 {client} -> [" in views[("--details",)][1]
    assert views[("--msg",)][1].startswith(f"=== connection 0: {client} -> [")
