"""`tlsprobe clients` and the --clients of scan and survey on the command line: the text
table, JSON, CSV, HTML, the survey's list columns, and bad input as one line with its exit
code."""
from __future__ import annotations

import csv
import json
import os
import socket
from pathlib import Path

import pytest

from tests.clients.conftest import DATA
from tests.helpers.plain_peer import Answering

CHOSEN = "chromium,curl,tls13-only"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_clients_text_json_csv_html(tls_server, run_cli, tmp_path: Path) -> None:
    """One row per client in every output; the JSON names what each negotiated."""
    server = tls_server("openssl")
    args = ("clients", f"localhost:{server.port}", "--profiles-dir", str(DATA),
            "--profiles", CHOSEN)
    code, out, err = run_cli(*args, "--csv", tmp_path / "c.csv", "--html", tmp_path / "c.html")
    assert code == 0, err
    assert "Client simulation" in out and "server_name localhost" in out
    for label in ("Chromium 156", "curl 7.88", "openssl s_client -tls1_3"):
        assert label in out
    assert "TLS_AES_128_GCM_SHA256" in out and "x25519" in out
    rows = list(csv.DictReader((tmp_path / "c.csv").open()))
    assert [r["profile"] for r in rows] == ["test-chromium", "test-curl",
                                            "test-openssl-tls13-only"]
    assert {r["status"] for r in rows} <= {"connected", "failed"}
    assert all(r["version"] == "TLS 1.3" and r["group"] == "x25519" for r in rows)
    page = (tmp_path / "c.html").read_text()
    assert page.count("<tr class=") == 3 and "x25519" in page
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["kind"], doc["host"], doc["port"]) == ("clients", "localhost", server.port)
    chromium = next(c for c in doc["clients"] if c["profile"] == "test-chromium")
    assert chromium["version_name"] == "TLS 1.3" and chromium["group_name"] == "x25519"
    assert chromium["ja4_sent"].startswith("t13d") and chromium["alpn"] is None
    assert doc["connections"] == 3


def test_clients_alpn_and_ip_target(tls_server, run_cli) -> None:
    """nginx answers ALPN h2/http1.1: the browsers' ALPN is in the result; an IP-literal
    target gets no server_name (the JA4 says 'i')."""
    server = tls_server("nginx")
    code, out, err = run_cli("clients", f"127.0.0.1:{server.port}", "--profiles-dir",
                             str(DATA), "--profiles", "chromium,firefox", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["server_name"] is None
    for c in doc["clients"]:
        assert c["status"] in ("connected", "failed"), c
        assert c["alpn"] == "http/1.1" or c["alpn"] == "h2", c
        assert c["ja4_sent"].startswith("t13i")


def test_unreachable_target_exit_3(run_cli) -> None:
    code, out, err = run_cli("clients", f"127.0.0.1:{_free_port()}", "--profiles-dir",
                             str(DATA), "--profiles", "curl", "--json")
    assert code == 3, err
    doc = json.loads(out)
    assert doc["error_kind"] == "network" and doc["clients"][0]["status"] == "inconclusive"
    assert len(err.strip().splitlines()) == 1 and "refused" in err
    code, out, err = run_cli("clients", f"127.0.0.1:{_free_port()}", "--profiles-dir",
                             str(DATA), "--profiles", "curl")
    assert code == 3 and "Error:" in out and err.startswith("tlsprobe: 127.0.0.1:")


def test_scan_clients_with_quic_is_a_usage_error(run_cli) -> None:
    code, _out, err = run_cli("scan", "localhost:1", "--quic", "--clients", "--profiles-dir",
                              str(DATA))
    assert code == 2 and "--quic" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("words", "message"), [
    (("--profiles", "no-such-client"), "names no client profile"),
    (("--profiles", ","), "empty list"),
    (("--profiles-dir", "/nonexistent"), "not a folder"),
    (("--timeout", "0"), "--timeout"),
])
def test_bad_arguments_are_one_line_exit_2(run_cli, words: tuple[str, ...],
                                           message: str) -> None:
    code, _out, err = run_cli("clients", "localhost:1", "--profiles-dir", str(DATA), *words)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_scan_clients_json_csv(tls_server, run_cli, tmp_path: Path) -> None:
    """scan --clients: the JSON key `clients`, the CSV's client rows, the text table; a scan
    without it has no `clients` member."""
    server = tls_server("openssl")
    code, out, err = run_cli("scan", f"localhost:{server.port}", "--checks", "versions",
                             "--clients", "--profiles-dir", str(DATA), "--profiles", CHOSEN,
                             "--csv", tmp_path / "s.csv", "--html", tmp_path / "s.html",
                             "--no-progress")
    assert code == 0, err
    assert "Client simulation" in out and "Chromium" in out and "156.0.8078.114" in out
    page = (tmp_path / "s.html").read_text()
    assert "<h3>Client simulation</h3>" in page and page.count('<tr class="') >= 3
    rows = [r for r in csv.DictReader((tmp_path / "s.csv").open()) if r["section"] == "client"]
    assert [r["code"] for r in rows] == ["test-chromium", "test-curl", "test-openssl-tls13-only"]
    code, out, err = run_cli("scan", f"localhost:{server.port}", "--checks", "versions",
                             "--profiles-dir", str(DATA), "--profiles", "chromium", "--json",
                             "--no-progress")
    assert code == 0, err
    assert [c["profile"] for c in json.loads(out)["clients"]] == ["test-chromium"]
    code, out, err = run_cli("scan", f"localhost:{server.port}", "--checks", "versions",
                             "--json", "--no-progress")
    assert "clients" not in json.loads(out)


def test_survey_clients_columns(tls_server, run_cli, tmp_path: Path) -> None:
    """survey --clients (in process, without Dask): the clients and client_results list
    columns of every row of the target."""
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow (pip install '.[cluster]')")
    server = tls_server("openssl")
    targets = tmp_path / "targets.txt"
    targets.write_text(f"localhost:{server.port}\n")
    stub = tmp_path / "no-dask"
    stub.mkdir()
    (stub / "distributed.py").write_text("raise ImportError('no dask here (test stub)')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(stub), str(Path(__file__).parents[2])])}
    code, _out, err = run_cli("survey", targets, "--out", tmp_path / "out", "--checks",
                             "groups", "--profiles-dir", str(DATA), "--profiles",
                             "chromium,curl", env=env, isolated=True, timeout=120)
    assert code == 0, err
    got = [row for path in sorted((tmp_path / "out").glob("shard-*.parquet"))
           for row in pq.read_table(path).to_pylist()]
    assert got
    for row in got:
        assert row["clients"] == ["test-chromium=connected", "test-curl=failed"] or \
            row["clients"] == ["test-chromium=connected", "test-curl=connected"], row
        assert row["client_results"][0] == "TLS 1.3 TLS_AES_128_GCM_SHA256 x25519"


def test_python_api(tls_server) -> None:
    """tlsprobe.simulate_clients and scan(clients=True) return what the commands print."""
    import tlsprobe
    server = tls_server("openssl")
    target = f"localhost:{server.port}"
    [report] = tlsprobe.simulate_clients(target, profiles=["chromium"], profiles_dir=str(DATA))
    assert isinstance(report, tlsprobe.ClientsReport)
    [sim] = report.clients
    assert (sim.profile, sim.status, sim.version) == ("test-chromium", "connected", 0x0304)
    [audit] = tlsprobe.scan(target, checks=["versions"], policies=[], clients=True,
                            profiles=["curl"], profiles_dir=str(DATA))
    assert [c.profile for c in audit.clients] == ["test-curl"]
    with pytest.raises(tlsprobe.UsageError, match="names no client profile"):
        tlsprobe.simulate_clients(target, profiles=["nothing"], profiles_dir=str(DATA))


def test_list_profiles(run_cli) -> None:
    """--list: a line per profile chosen; with --json the profile files themselves."""
    code, out, err = run_cli("clients", "--list", "--profiles-dir", str(DATA), "--profiles",
                             "chromium,curl")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["test-chromium", "test-curl"]
    assert "t13d1517h2_8daaf6152771_cb7bf5808d99" in lines[0]
    code, out, err = run_cli("clients", "--list", "--json", "--profiles-dir", str(DATA))
    assert code == 0 and len(out.splitlines()) == 6
    assert json.loads(out.splitlines()[0])["id"] == "test-chromium"
    code, _out, err = run_cli("clients")
    assert code == 2 and "--list" in err


@pytest.mark.parametrize("words, said", [
    (("clients", "--list", "127.0.0.1:{port}"),
     "--list takes no target ('127.0.0.1:{port}'): it lists the profiles and contacts no "
     "server; drop the target, or drop --list to run against it"),
    (("clients", "--list", "--csv", "out.csv"), "--list takes no --csv: "),
    (("clients", "--list", "--json-out", "out.json"), "--list takes no --json-out: "),
    (("clients", "--list", "--starttls", "smtp"), "--list takes no --starttls: "),
    (("clients", "--list", "--no-verify"), "--list takes no --no-verify: "),
    (("scan", "--list-policies", "127.0.0.1:{port}"),
     "--list-policies takes no target ('127.0.0.1:{port}'): it lists the built-in policies "
     "and contacts no server"),
    (("scan", "--list-policies", "--sarif", "out.sarif"), "--list-policies takes no --sarif: "),
], ids=["clients-target", "clients-csv", "clients-json-out", "clients-starttls",
        "clients-no-verify", "scan-target", "scan-sarif"])
def test_a_listing_with_a_target_or_output_is_a_usage_error(run_cli, tmp_path: Path,
                                                            words: tuple[str, ...],
                                                            said: str) -> None:
    """`clients --list HOST` listed the profiles and exit 0, the target not contacted and
    not said (so did `scan --list-policies HOST`); an output file beside a listing was
    never written. Now a one-line usage error naming what does not apply; no connection
    is made (a listening server on loopback sees none) and no file is written."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        code, out, err = run_cli(*(w.format(port=port) for w in words))
        with pytest.raises(TimeoutError):
            listener.accept()[0].close()
    finally:
        listener.close()
    assert (code, out) == (2, ""), err
    assert err.startswith("tlsprobe: error: " + said.format(port=port)), err
    assert len(err.strip().splitlines()) == 1
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("out.")]


@pytest.mark.parametrize("http, code, kind, words", [
    (True, 4, "not_tls", "not a TLS server: it sent an HTTP response"),
    (False, 3, "network", "timed out"),
])
def test_a_target_no_profile_reached_is_its_error(run_cli, http, code, kind, words) -> None:
    """Every profile's connection answered in HTTP, or never answered: each simulation was
    inconclusive and the run exited 0 with no error, as if the clients had been asked;
    like an audit that established nothing it is now the target's error and exit code."""
    peer = Answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" if http
                     else None)
    try:
        got, out, err = run_cli("clients", f"127.0.0.1:{peer.port}", "--profiles-dir",
                                str(DATA), "--profiles", "curl", "--json", "--timeout", "1",
                                "--retries", "0")
    finally:
        peer.close()
    assert got == code, err
    doc = json.loads(out)
    assert doc["error_kind"] == kind and words in doc["error"], doc["error"]
    assert {c["status"] for c in doc["clients"]} == {"inconclusive"}
    line, = err.strip().splitlines()
    assert line.startswith(f"tlsprobe: 127.0.0.1:{peer.port}: ") and words in line


def test_table_names_tell_every_profile_apart(tls_server, run_cli, tmp_path: Path) -> None:
    """The table shows a client without its platform, its whole parenthesis removed even
    when nested ("curl 7.68.0 (Linux (not stated))" was "curl 7.68.0 (Linux"), but two
    profiles that would then read the same (Internet Explorer 8.0 on Windows XP and on
    Windows 7) keep their platforms, in the text table and the HTML page."""
    server = tls_server("openssl")
    code, out, err = run_cli("clients", f"localhost:{server.port}", "--profiles",
                             "cap-curl-7.68,cap-ie8-winxp,cap-ie8-win7", "--html",
                             tmp_path / "c.html")
    assert code == 0, err
    names = [line.split("  ")[0] for line in out.splitlines()
             if line.startswith(("curl", "Internet Explorer"))]
    assert sorted(names) == ["Internet Explorer 8.0 (Windows 7)",
                             "Internet Explorer 8.0 (Windows XP)", "curl 7.68.0"], out
    page = (tmp_path / "c.html").read_text()
    for name in ("<td>curl 7.68.0</td>", "<td>Internet Explorer 8.0 (Windows 7)</td>",
                 "<td>Internet Explorer 8.0 (Windows XP)</td>"):
        assert name in page


DRAFT_CLIENTS = ("cap-chrome-55-canary", "cap-chrome-63-canary", "cap-chrome-67-canary",
                 "cap-firefox-52a1")


def test_draft_tls13_clients_take_a_marked_tls12_answer(tls_server, run_cli) -> None:
    """Chrome Canary 55/63/67 and Firefox Nightly 52 offer pre-RFC TLS 1.3 (draft 16, the
    0x7e01/0x7e02 experiment, draft 23) beside TLS 1.2. A TLS 1.3 server (OpenSSL 3) answers
    them with TLS 1.2 and the downgrade sentinel in its random (RFC 8446 4.1.3), which the
    drafts tell draft implementations not to check ("a pre-RFC client connecting to RFC
    servers ... will appear to downgrade to TLS 1.2"): these clients connect. tlsprobe
    refused the answer as a downgrade ("carries the downgrade sentinel for TLS 1.2 although
    a higher version was offered"), each client inconclusive."""
    server = tls_server("openssl")
    code, out, err = run_cli("clients", f"127.0.0.1:{server.port}", "--profiles",
                             ",".join(DRAFT_CLIENTS + ("chromium-156-debian12",)), "--json")
    assert code == 0, err
    got = {c["profile"]: c for c in json.loads(out)["clients"]}
    for profile in DRAFT_CLIENTS:
        assert (got[profile]["status"], got[profile]["version_name"]) == \
            ("connected", "TLS 1.2"), got[profile]
        assert "sentinel" not in (got[profile]["detail"] or ""), got[profile]
    assert got["chromium-156-debian12"]["version_name"] == "TLS 1.3"


@pytest.mark.parametrize(("text", "message"), [
    (b'{"source": 5}', "p.json: not a client profile ('source' is not an object)"),
    (b"[1, 2]", "p.json: not a client profile (a JSON object, not list)"),
    (b'{"id": "x"}', "p.json: not a client profile: no 'source' field"),
    (b"{bad", "p.json: not a client profile (Expecting property name"),
    (b"\xff\xfe", "p.json: not UTF-8 text (byte 0xff at offset 0): not a client profile "
                 "(docs/CLIENTS.md)"),
], ids=["source-not-object", "a-list", "field-missing", "not-json", "not-utf8"])
@pytest.mark.parametrize("command", ["clients", "scan"])
def test_a_profiles_dir_file_that_is_no_profile_is_named(run_cli, tmp_path: Path, text: bytes,
                                                         message: str, command: str) -> None:
    """A --profiles-dir file that is no profile is a usage error naming the file and what
    is wrong, before any connection: a 'source' that is no object was an internal error
    (exit 70, "AttributeError: 'int' object has no attribute 'get'"), a missing field said
    only "'source'", and no message named the file."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "p.json").write_bytes(text)
    words = ("--clients",) if command == "scan" else ()
    code, out, err = run_cli(command, "127.0.0.1:1", *words, "--profiles-dir", folder)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"tlsprobe: error: cannot read the client profiles in {folder}: "
                          f"{message}"), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [("clients", "--list"), ("clients", "127.0.0.1:1"),
                                     ("scan", "127.0.0.1:1", "--clients")],
                         ids=["list", "clients", "scan"])
def test_two_files_of_one_profile_id_are_a_usage_error(run_cli, tmp_path: Path,
                                                       command: tuple[str, ...]) -> None:
    """Two --profiles-dir files of one id gave two rows of that id (and --profiles ID chose
    both): a usage error naming both files, before any connection."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    text = (DATA / "test-curl.json").read_bytes()
    (folder / "curl.json").write_bytes(text)
    (folder / "curl-copy.json").write_bytes(text)
    (folder / "other.json").write_bytes((DATA / "test-chromium.json").read_bytes())
    code, out, err = run_cli(*command, "--profiles-dir", folder)
    assert (code, out) == (2, ""), err
    assert err.strip() == (f"tlsprobe: error: cannot read the client profiles in {folder}: "
                           "curl-copy.json and curl.json are both profile 'test-curl': keep "
                           "one (an id names one profile)"), err


def test_a_profile_file_over_a_mebibyte_is_refused_unread(run_cli, tmp_path: Path) -> None:
    """Profile files had no size bound: a 1 MiB + 1 byte one (a real profile padded with
    spaces) was read whole and used; now a one-line usage error naming the file."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    text = (DATA / "test-curl.json").read_bytes()
    (folder / "big.json").write_bytes(text + b" " * ((1 << 20) + 1 - len(text)))
    code, out, err = run_cli("clients", "--list", "--profiles-dir", folder)
    assert (code, out) == (2, ""), err
    assert err.strip() == (f"tlsprobe: error: cannot read the client profiles in {folder}: "
                           "big.json: larger than 1 MiB: not a client profile "
                           "(docs/CLIENTS.md)"), err
    (folder / "big.json").write_bytes(text + b" " * ((1 << 20) - len(text)))   # 1 MiB: read
    code, out, err = run_cli("clients", "--list", "--profiles-dir", folder)
    assert code == 0 and out.split()[0] == "test-curl", err


def test_html_escapes_a_profile_s_control_characters(tls_server, run_cli, tmp_path: Path) -> None:
    """A profile's client name (a --profiles-dir file's text) with a terminal escape, a BEL
    and a line break: the HTML table (clients --html, scan --clients --html) wrote them as
    they were (html.escape leaves control characters); now escaped as in every other
    output."""
    server = tls_server("openssl")
    folder = tmp_path / "profiles"
    folder.mkdir()
    data = json.loads((DATA / "test-curl.json").read_text())
    data.update(id="test-evil", client="Evil\x1b]0;title\x07Client", version="1\r\n2")
    (folder / "test-evil.json").write_text(json.dumps(data))
    target = f"127.0.0.1:{server.port}"
    for words in (("clients", target), ("scan", target, "--clients", "--checks", "versions",
                                         "--no-progress", "--no-policy")):
        page = tmp_path / f"{words[0]}.html"
        code, _out, err = run_cli(*words, "--profiles-dir", folder, "--html", page)
        assert code == 0, err
        text = page.read_text()
        assert r"Evil\x1b]0;title\x07Client 1\r\n2" in text
        assert not any(ch in text for ch in "\x1b\x07\r"), words
