"""`tlsprobe pcap`'s input files, filters and outputs: unreadable and missing files (exit 2,
one stderr line, the good files still read; a JSON capture record for each), filter messages
and values (--host validation), several files (a File column, rows in order of appearance,
TCP and QUIC told apart, the first frame of each connection), pipes, conflicting outputs,
SSLv2 cipher specs, notes of filtered-out connections and the statistics' wording."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "captures"
SEED = CAPTURES / "tls12_x25519.pcap"


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def connections(out: str) -> list[dict]:
    return [x for x in map(json.loads, out.splitlines()) if x["kind"] == "connection"]


# -- 1. files where nothing can be read ---------------------------------------------------
@pytest.mark.parametrize(("content", "expected"), [
    (b"# tlsprobe\nnot a capture\n", "not a pcap, pcapng or Network Monitor capture "
                                     "(starts with 2320746c)"),
    (b"", "empty file"),
    (b"\x1f\x8b\x08\x00garbage", "corrupt gzip data: "),
    (gzip.compress(b"", mtime=0), "empty file (gzip-compressed"),
])
@pytest.mark.parametrize("fmt", [(), ("--json",), ("--jsonl", "--stats")])
def test_unreadable_file_is_exit_2_with_one_line(run_cli, tmp_path: Path, content: bytes,
                                                 expected: str, fmt: tuple[str, ...]) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(content)
    code, out, err = run_cli("pcap", *fmt, bad)
    assert code == 2
    if fmt:  # JSON: a capture record with the error; the table: nothing on stdout
        captures = (json.loads(out)["captures"] if fmt == ("--json",)
                    else [x for x in map(json.loads, out.splitlines()) if x["kind"] == "capture"])
        assert [(c["file"], c["error"] in err) for c in captures] == [(str(bad), True)]
    else:
        assert out == ""
    line = one_line(err)
    assert str(bad) in line and expected in line and "(empty file)" not in line.replace(
        expected, "")


def test_a_bad_file_among_good_ones_does_not_stop_the_run(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "empty.pcap"
    bad.write_bytes(b"")
    code, out, err = run_cli("pcap", "--jsonl", SEED, bad, CAPTURES / "tls13_hrr.pcap")
    assert code == 2
    assert "empty.pcap: empty file" in one_line(err)
    assert [Path(c["file"]).name for c in connections(out)] == ["tls12_x25519.pcap",
                                                                "tls13_hrr.pcap"]


def test_truncated_gzip_after_the_header_is_still_read(run_cli, tmp_path: Path) -> None:
    data = (CAPTURES / "tls13_x25519.pcap.gz").read_bytes()
    cut = tmp_path / "cut.pcap.gz"
    cut.write_bytes(data[:len(data) * 3 // 4])
    code, _out, err = run_cli("pcap", cut)
    assert code == 7 and "gzip" in one_line(err)


# -- 2. filters ---------------------------------------------------------------------------
def test_filters_that_match_nothing_say_how_many_there_were(run_cli, captures_dir: Path) -> None:
    f = captures_dir / "ja4" / "pcap" / "tls-handshake.pcapng"
    _code, out, _err = run_cli("pcap", "--jsonl", f)
    total = len(connections(out))
    assert total > 50
    for args in (("--host", "10.9.9.9"), ("--tls-version", "ssl3")):
        code, out, err = run_cli("pcap", *args, f)
        assert code == 0 and err == ""
        assert out == f"0 of {total} TLS connections in {f} match the filters\n"


def test_no_tls_at_all_is_said_so(run_cli, captures_dir: Path) -> None:
    f = captures_dir / "ja4" / "pcap" / "dhcp.pcapng"
    code, out, _ = run_cli("pcap", "--host", "10.9.9.9", f)
    assert code == 0 and out == f"no TLS connections found in {f}\n"


def test_group_takes_decimal_ids_as_tshark_prints_them(run_cli) -> None:
    files = [SEED, CAPTURES / "tls13_p256.pcap"]
    by_name = connections(run_cli("pcap", "--jsonl", "--group", "x25519", *files)[1])
    by_decimal = connections(run_cli("pcap", "--jsonl", "--group", "29", *files)[1])
    by_hex = connections(run_cli("pcap", "--jsonl", "--group", "0x001d", *files)[1])
    assert [c["file"] for c in by_name] == [c["file"] for c in by_decimal] == \
        [c["file"] for c in by_hex] == [str(SEED)]
    p256 = connections(run_cli("pcap", "--jsonl", "--group", "23", *files)[1])
    assert [Path(c["file"]).name for c in p256] == ["tls13_p256.pcap"]


def test_host_with_port_matches_that_endpoint(run_cli, captures_dir: Path) -> None:
    f = captures_dir / "ja4" / "pcap" / "tls-handshake.pcapng"
    code, out, _ = run_cli("pcap", "--jsonl", "--host", "192.168.1.168:50116", f)
    conns = connections(out)
    assert code == 0 and [(c["client_port"], c["sni"]) for c in conns] == [(50116,
                                                                           "lastpass.com")]
    # the server side, and an IPv6 endpoint in brackets
    server = connections(run_cli("pcap", "--jsonl", "--host", "104.112.30.74:443", f)[1])
    assert [c["client_port"] for c in server] == [50116]
    entry = json.loads((CAPTURES / "expected.json").read_text())["tls13_ipv6.pcap"]
    v6 = connections(run_cli("pcap", "--jsonl", "--host", f"[::1]:{entry['server_port']}",
                             CAPTURES / "tls13_ipv6.pcap")[1])
    assert [c["server_ip"] for c in v6] == ["::1"]


@pytest.mark.parametrize(("args", "words"), [
    (("--group", "bogus"), "bogus"), (("--group", "70000"), "65535"),
    (("--host", "10.0.0.1:http"), "--port"), (("--host", "10.0.0.1:70000"), "--port"),
    (("--host", "fe80::1:zz"), "[ADDR]:PORT"), (("--port", "x"), "--port"),
    (("--tls-version", "4.7"), "--tls-version"),
])
def test_bad_filter_values_are_one_line_usage_errors(run_cli, args: tuple[str, ...],
                                                     words: str) -> None:
    code, out, err = run_cli("pcap", *args, SEED)
    assert code == 2 and out == "" and words in one_line(err)


# -- 3. several files, transports, order ---------------------------------------------------
def test_several_files_get_a_file_column(run_cli) -> None:
    files = [SEED, CAPTURES / "tls13_hrr.pcap"]
    code, out, _ = run_cli("pcap", *files)
    assert code == 0
    header, first, second = out.splitlines()[:3]
    assert header.split()[:2] == ["File", "#"]
    assert first.split()[:2] == [str(SEED), "0"]
    assert second.split()[:2] == [str(files[1]), "0"]
    _, details, _ = run_cli("pcap", "--details", *files)
    assert re.search(rf"^File +{re.escape(str(files[1]))}$", details, re.MULTILINE)
    jsonl = connections(run_cli("pcap", "--jsonl", *files)[1])
    assert [c["file"] for c in jsonl] == [str(f) for f in files]


def test_one_file_has_no_file_column(run_cli) -> None:
    out = run_cli("pcap", SEED)[1]
    assert out.split()[0] == "#"


def test_tcp_and_quic_rows_are_told_apart_in_order_of_appearance(run_cli,
                                                                 captures_dir: Path) -> None:
    f = captures_dir / "ja4" / "pcap" / "tls-handshake.pcapng"
    code, out, _ = run_cli("pcap", f)
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:] if line[:1].isalnum()
            and not line.startswith("Key S/C")]
    labels = [r[0] for r in rows]
    assert len(labels) == len(set(labels))  # no two `#0`
    quic = [x for x in labels if x.startswith("quic/")]
    tcp = [x for x in labels if x.isdigit()]
    assert quic == [f"quic/{i}" for i in range(len(quic))] and len(quic) == 20
    assert tcp == [str(i) for i in range(len(tcp))]
    # frame order, checked against tshark's first frame of each connection
    frames = {("quic" if c["transport"] == "udp" else "tcp", c["id"]): c["first_frame"]
              for c in connections(run_cli("pcap", "--jsonl", f)[1])}
    order = [frames[("quic", int(x[5:])) if x.startswith("quic/") else ("tcp", int(x))]
             for x in labels]
    assert order == sorted(order)
    tshark = subprocess.run(["tshark", "-r", str(f), "-Y", "tls.handshake.type == 1 && tcp",
                             "-T", "fields", "-e", "tcp.stream"], capture_output=True,
                            text=True, check=False)
    if tshark.returncode == 0:
        assert len(set(tshark.stdout.split())) == len(tcp)


# -- 4. pipes -------------------------------------------------------------------------------
def test_fifo_and_process_substitution_are_read_as_streams(run_cli, tmp_path: Path) -> None:
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    writer = subprocess.Popen(["sh", "-c", f"cat '{CAPTURES / 'tls13_x25519.pcap.gz'}' > "
                               f"'{fifo}'"])
    try:
        proc = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "--jsonl", str(fifo)],
                              capture_output=True, text=True, timeout=60, env=env,
                              check=False)
    finally:
        writer.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert connections(proc.stdout)[0]["version"]["name"] == "TLS 1.3"
    bash = subprocess.run(["bash", "-c", f"{sys.executable} -m tlsprobe pcap --jsonl "
                           f"<(cat '{CAPTURES / 'tls13_x25519.pcap'}')"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert bash.returncode == 0, bash.stderr
    assert connections(bash.stdout)[0]["file"].startswith("/dev/fd/")


def test_a_fifo_inside_a_folder_is_left_out_not_waited_on(tmp_path: Path) -> None:
    """`pcap DIR` and `tlsprobe.read_capture(DIR)` opened every file under DIR to read its
    first bytes: a FIFO there (a dovecot run folder, a shell's pipe) blocked forever with no
    writer. Only regular files are looked at now; the captures are read."""
    import shutil
    folder = tmp_path / "dir"
    folder.mkdir()
    shutil.copy(CAPTURES / "tls13_x25519.pcap", folder / "a.pcap")
    os.mkfifo(folder / "b.fifo")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = ("import sys, tlsprobe\n"
            "try:\n"
            "    tlsprobe.read_capture(sys.argv[1])\n"
            "except tlsprobe.TlsprobeError as exc:\n"
            "    print(exc)\n")
    for argv in ([sys.executable, "-m", "tlsprobe", "pcap", "--jsonl", str(folder)],
                 [sys.executable, "-c", code, str(folder)]):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                                  check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv[1:3]} waited on the FIFO in {folder}")
        assert proc.returncode == 0, proc.stderr
        if "-m" in argv:
            assert len(connections(proc.stdout)) == 1
        else:   # one file only, said truly (it was "a directory with no capture under it")
            assert proc.stdout.strip() == (f"{folder}: a directory: read_capture reads one "
                                           "capture file (call it for each capture under it)")


def test_directory_without_captures_is_a_usage_error(run_cli, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a capture\n")
    code, out, err = run_cli("pcap", tmp_path)
    assert code == 2 and out == ""
    assert one_line(err) == (f"tlsprobe: {tmp_path}: a directory with no capture under it "
                             "(pcap, pcapng or gzip, told by their first bytes): name a "
                             "capture file")


# -- 5. outputs together --------------------------------------------------------------------
def test_details_and_stats_together(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--details", "--stats", SEED)
    assert code == 0
    assert re.search(r"^Connection +#0 127\.0\.0\.1:", out, re.MULTILINE)
    assert out.index("Connection") < out.index("Versions (1 connection)")


def test_msg_with_json_puts_the_trace_in_the_json(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--json", "--msg", SEED)
    assert code == 0
    doc = json.loads(out)
    assert any("ClientKeyExchange" in line for line in doc["connections"][0]["trace"])


@pytest.mark.parametrize("fmt", ["--json", "--jsonl"])
def test_details_with_json_is_a_usage_error(run_cli, fmt: str) -> None:
    code, out, err = run_cli("pcap", "--details", fmt, SEED)
    assert code == 2 and out == "" and "--details" in one_line(err)


# -- 7. statistics ----------------------------------------------------------------------------
def test_stats_wording_and_resumed_sessions(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--stats", CAPTURES / "tls12_resumption.pcap")
    assert code == 0
    assert "Versions (2 connections)" in out
    assert "resumed (session ticket), no key exchange" in out and "(no group)" not in out
    one = run_cli("pcap", "--stats", SEED)[1]
    assert "Versions (1 connection)\n" in one
    doc = json.loads(run_cli("pcap", "--json", "--stats",
                             CAPTURES / "tls12_resumption.pcap")[1])
    assert {g["name"]: g["connections"] for g in doc["stats"]["groups"]} == {
        "x25519 (0x001d)": 1, "resumed (session ticket), no key exchange": 1}


# -- 6. SSLv2 cipher specs ----------------------------------------------------------------------
def _tshark_specs(path: Path) -> list[str]:
    """The cipher specs of the first SSLv2 CLIENT-HELLO as tshark prints them."""
    proc = subprocess.run(["tshark", "-r", str(path), "-d", "tcp.port==4433,tls", "-V"],
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        pytest.skip(f"tshark unusable: {proc.stderr.strip()[:200]}")
    text = proc.stdout
    block = text[text.index("Cipher Specs ("):]
    block = block[:block.index("Challenge")]
    return re.findall(r"Cipher Spec: (\S+) \((0x[0-9a-f]{6})\)", block)


def test_sslv2_cipher_specs_are_shown_as_tshark_names_them(run_cli, captures_dir: Path) -> None:
    f = captures_dir / "wireshark" / "notes" / "ssl3" / "sslv2.pcapng"
    want = _tshark_specs(f)
    assert [h for _n, h in want] == ["0x050080", "0x030080", "0x0700c0"]
    code, out, _ = run_cli("pcap", "--details", f)
    assert code == 0
    assert re.search(r"^SSLv2 cipher specs +3 offered$", out, re.MULTILINE)
    for name, hex_id in want:
        assert re.search(rf"^ +{name} \({hex_id}\)$", out, re.MULTILINE), (name, out)
    conn = connections(run_cli("pcap", "--jsonl", f)[1])[0]
    assert [(c["iana_name"], c["hex"]) for c in conn["sslv2_cipher_specs"]] == want
    assert conn["offer"]["cipher_suites"] == []  # TLS suites only, as tshark's ciphersuite


def test_sslv2_compatible_hello_lists_tls_suites_among_the_specs(run_cli,
                                                                 captures_dir: Path) -> None:
    f = captures_dir / "suricata-verify" / "tests" / "sslv2-tls-upgrade-01" / "ssl-v2-s1.pcap"
    conn = connections(run_cli("pcap", "--jsonl", f)[1])[0]
    specs = conn["sslv2_cipher_specs"]
    tls = [c["id"] for c in conn["offer"]["cipher_suites"]]
    assert [c["id"] for c in specs if c["id"] < 0x10000] == tls and len(tls) == 20
    assert specs[0] == {"id": 0x010080, "hex": "0x010080", "iana_name": "SSL2_RC4_128_WITH_MD5",
                        "openssl_name": "RC4-MD5"}
    # a TLS ClientHello has none
    assert connections(run_cli("pcap", "--jsonl", SEED)[1])[0]["sslv2_cipher_specs"] == []


def records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


# -- 2, 3. missing and unreadable files among good ones ------------------------------------
def test_a_missing_file_does_not_stop_the_run(run_cli, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.pcap"
    code, out, err = run_cli("pcap", CAPTURES / "tls12_dhe.pcap", missing,
                             CAPTURES / "tls12_rsa.pcap")
    assert code == 2
    assert one_line(err) == f"tlsprobe: {missing}: no such file"
    assert "tls12_dhe.pcap" in out and "tls12_rsa.pcap" in out


@pytest.mark.parametrize("fmt", ["--json", "--jsonl"])
def test_json_has_a_capture_record_for_each_unreadable_file(run_cli, tmp_path: Path,
                                                            fmt: str) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a capture\n")
    missing = tmp_path / "gone.pcap"
    code, out, err = run_cli("pcap", fmt, missing, text, CAPTURES / "tls12_rsa.pcap")
    assert code == 2 and len(err.splitlines()) == 2 and "Traceback" not in err
    if fmt == "--json":
        doc = json.loads(out)
        caps, conns = doc["captures"], doc["connections"]
    else:
        lines = records(out)
        caps = [x for x in lines if x["kind"] == "capture"]
        conns = [x for x in lines if x["kind"] == "connection"]
    assert [(Path(c["file"]).name, c["error"]) for c in caps] == [
        ("gone.pcap", "no such file"),
        ("notes.txt", "not a pcap, pcapng or Network Monitor capture (starts with 6e6f7420)"),
        ("tls12_rsa.pcap", None)]
    assert [Path(c["file"]).name for c in conns] == ["tls12_rsa.pcap"]
    assert caps[0]["tls_connections"] == 0 and caps[2]["tls_connections"] == 1


# -- 6. --host validation -------------------------------------------------------------------
@pytest.mark.parametrize("host", ["[::1", "::1]", "a]b", "[::1]x"])
def test_malformed_host_is_a_usage_error(run_cli, host: str) -> None:
    code, out, err = run_cli("pcap", "--host", host, CAPTURES / "tls12_rsa.pcap")
    assert code == 2 and out == ""
    assert "unbalanced brackets" in one_line(err)


@pytest.mark.parametrize(("host", "matches"), [("[::1]", 0), ("127.0.0.1", 1),
                                               ("[127.0.0.1]", 1), ("127.0.0.1:43910", 1)])
def test_well_formed_hosts_still_filter(run_cli, host: str, matches: int) -> None:
    code, out, _err = run_cli("pcap", "--jsonl", "--host", host, CAPTURES / "tls12_rsa.pcap")
    assert code == 0
    assert sum(x["kind"] == "connection" for x in records(out)) == matches


# -- 7. many files, notes of filtered-out connections, "(none)" last ------------------------
def test_nothing_matching_in_many_files_is_one_short_line(run_cli) -> None:
    files = sorted(CAPTURES.glob("*.pcap"))
    assert len(files) > 3
    code, out, _err = run_cli("pcap", "--stats", "--group", "sect163k1", *files)
    assert code == 0
    assert re.fullmatch(rf"0 of \d+ TLS connections in {len(files)} files match the "
                        r"filters\n", out)


def test_gap_note_only_for_a_reported_connection(run_cli) -> None:
    gap = CAPTURES / "tls12_split_gap.pcap"
    _code, _out, err = run_cli("pcap", gap)
    assert "ServerKeyExchange not captured" in one_line(err)
    code, _out, err = run_cli("pcap", "--port", "1", gap)
    assert code == 0 and err == ""


def test_none_rows_sort_last_in_stats(run_cli) -> None:
    code, out, _err = run_cli("pcap", "--json", "--stats", *sorted(CAPTURES.glob("*.pcap")))
    assert code == 0
    groups = [row["name"] for row in json.loads(out)["stats"]["groups"]]
    assert "(none)" in groups and groups[-1] == "(none)"


# -- 5. streamed JSON: every connection says where it starts --------------------------------
def test_every_json_connection_has_its_first_frame(run_cli) -> None:
    files = sorted(CAPTURES.glob("*.pcap"))
    code, out, _err = run_cli("pcap", "--jsonl", *files)
    assert code == 0
    conns = [x for x in records(out) if x["kind"] == "connection"]
    assert len(conns) >= len(files)
    for c in conns:
        assert isinstance(c["first_frame"], int) and 1 <= c["first_frame"] <= c["last_frame"]
    code, out, _err = run_cli("pcap", "--help")
    assert "first_frame" in out
