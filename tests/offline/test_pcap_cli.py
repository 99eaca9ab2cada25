"""`tlsprobe pcap` end to end: the seed case's output, every output format, filters,
statistics, stdin and gzip, and broken input (exit 7, one line on stderr, no traceback)."""

from __future__ import annotations

import csv
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
SEED_SUITE = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"


def run_stdin(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120", NO_COLOR="1")
    with open(path, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "-", *args],
                              stdin=stdin, capture_output=True, env=env, timeout=60,
                              check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(),
                                       proc.stderr.decode())


def test_seed_case_table_shows_group_suite_and_key_lengths(run_cli) -> None:
    code, out, err = run_cli("pcap", SEED)
    assert code == 0, err
    header, row = out.splitlines()[:2]
    cells = row.split()
    assert header.split()[:3] == ["#", "Client", "Server"] and "Key S/C" in header
    assert "x25519" in cells and SEED_SUITE in cells and "TLS" in cells
    # Key S/C: the server's 32-byte X25519 share, the client's 32-byte ClientKeyExchange key
    assert cells[cells.index("x25519") + 1] == "32/32"
    assert "localhost" in cells and err == ""


def test_seed_case_details_name_the_client_key_exchange(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--details", SEED)
    assert code == 0
    assert "Group              x25519 (0x001d), from TLS 1.2 ServerKeyExchange" in out
    assert f"Cipher             {SEED_SUITE} (0xc02f)" in out
    assert "ClientKeyExchange  32 bytes (ECDH public key)" in out
    assert "Server Temp Key    X25519, 253 bits" in out
    assert "Certificate chain  0 s: CN=localhost" in out


def test_seed_case_msg_trace(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--msg", SEED)
    assert code == 0
    trace = out.split("\n---\n")[0]
    assert trace.startswith("=== connection 0: 127.0.0.1:")
    assert "named_curve x25519 (0x001d) at +6 (bytes +5..+6)" in trace
    cke = trace[trace.index("ClientKeyExchange"):]
    assert cke.split("\n")[1].split()[:5] == ["10", "00", "00", "21", "20"]
    assert "at +4" in cke.split(">>>")[0]  # the key length byte
    assert "<<< TLS 1.2, ApplicationData [length" in trace or "encrypted" in trace


def test_json_document(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--json", "--stats", SEED, CAPTURES / "tls13_hrr.pcap")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["command"] == "pcap"
    assert [c["reported"] for c in doc["captures"]] == [1, 1]
    seed, hrr = doc["connections"]
    assert seed["key_exchange"]["group"] == {"id": 29, "hex": "0x001d", "name": "x25519"}
    assert seed["key_exchange"]["client_share_bytes"] == 32
    assert seed["cipher"]["openssl_name"] == "ECDHE-RSA-AES128-GCM-SHA256"
    assert seed["fingerprints"]["ja4"].startswith("t12d")
    assert hrr["hello_retry_request"]["name"] == "secp256r1"
    assert hrr["key_exchange"]["source"] == "hello_retry_request"
    assert doc["stats"]["connections"] == 2 and doc["stats"]["hello_retry_requests"] == 1


def test_json_lines_stream_one_object_per_line(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--jsonl", "--stats", CAPTURES / "tls13_resumption.pcap")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connection", "connection", "capture", "stats"]
    assert [x["resumption"] for x in lines[:2]] == [None, "psk"]
    assert lines[3]["resumed"] == 1


def test_msg_goes_into_json(run_cli) -> None:
    _code, out, _ = run_cli("pcap", "--jsonl", "--msg", SEED)
    first = json.loads(out.splitlines()[0])
    assert any("ServerKeyExchange" in line for line in first["trace"])


@pytest.mark.parametrize(("args", "expected"), [
    (("--group", "x25519"), {"tls12_x25519", "tls13_x25519"}),
    (("--group", "0x0017"), {"tls13_p256", "tls13_hrr"}),
    (("--tls-version", "1.2"), {"tls12_x25519"}),
    (("--tls-version", "TLSv1.3", "--group", "X25519"), {"tls13_x25519"}),
    (("--sni", "local*"), {"tls12_x25519", "tls13_x25519", "tls13_p256", "tls13_hrr"}),
    (("--sni", "*.example.com"), set()),
    (("--host", "::1"), set()),
])
def test_filters(run_cli, args: tuple[str, ...], expected: set[str]) -> None:
    files = [CAPTURES / f"{n}.pcap" for n in ("tls12_x25519", "tls13_x25519", "tls13_p256",
                                              "tls13_hrr")]
    code, out, _ = run_cli("pcap", "--jsonl", *args, *files)
    assert code == 0
    got = {Path(x["file"]).stem for x in map(json.loads, out.splitlines())
           if x["kind"] == "connection"}
    assert got == expected


def test_port_and_host_filters(run_cli) -> None:
    entry = json.loads((CAPTURES / "expected.json").read_text())["tls13_ipv6.pcap"]
    _code, out, _ = run_cli("pcap", "--jsonl", "--host", "::1", "--port",
                           str(entry["server_port"]), CAPTURES / "tls13_ipv6.pcap", SEED)
    conns = [x for x in map(json.loads, out.splitlines()) if x["kind"] == "connection"]
    assert [c["server_ip"] for c in conns] == ["::1"]


def test_bad_filter_value_is_a_usage_error(run_cli) -> None:
    code, _out, err = run_cli("pcap", "--group", "nosuchgroup", SEED)
    assert code == 2 and "nosuchgroup" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli("pcap", "--tls-version", "4.7", SEED)
    assert code == 2 and "4.7" in err


@pytest.mark.parametrize("argv, fragment", [
    (("-c", "0", SEED), "-c/--count must be a positive number of connections (got 0)"),
    (("-c", "-5", SEED), "-c/--count must be a positive number of connections (got -5)"),
    (("--duration", "-1", "-"), "--duration must be a number of seconds above 0 and at most "
     "2592000 (30 days; without it the capture runs until Ctrl-C) (got -1)"),
    (("--duration", "nan", "-"), "--duration must be a number of seconds above 0 and at most "
     "2592000 (30 days; without it the capture runs until Ctrl-C) (got nan)"),
    # 1e20 s overflowed the clock's timestamps: an internal error (exit 70) after reading
    (("--duration", "1e20", "-"), "--duration must be a number of seconds above 0 and at most "
     "2592000 (30 days; without it the capture runs until Ctrl-C) (got 1e+20)"),
])
def test_count_and_duration_are_checked_for_files_and_stdin(run_cli, argv, fragment) -> None:
    """-c and --duration are checked as a live capture checks them, before any read (a
    negative count read the whole first file; a negative duration waited on stdin)."""
    code, out, err = run_cli("pcap", *[str(a) for a in argv])
    assert code == 2 and out == "" and err.strip().splitlines() == [f"tlsprobe: error: {fragment}"]


def test_stats_tables(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--stats", *sorted(CAPTURES.glob("tls13_*.pcap")))
    assert code == 0
    assert "Versions (" in out and "Cipher suites (" in out and "Groups (" in out
    assert "X25519MLKEM768 (0x11ec)" in out


def test_stdin_and_gzip() -> None:
    plain = run_stdin(CAPTURES / "tls13_x25519.pcap", "--jsonl")
    gz = run_stdin(CAPTURES / "tls13_x25519.pcap.gz", "--jsonl")
    assert plain.returncode == gz.returncode == 0, gz.stderr
    a, b = json.loads(plain.stdout.splitlines()[0]), json.loads(gz.stdout.splitlines()[0])
    assert a["file"] == b["file"] == "<stdin>"
    assert a["fingerprints"] == b["fingerprints"] and a["version"]["name"] == "TLS 1.3"


def test_keylog_option_decrypts(run_cli) -> None:
    code, out, _ = run_cli("pcap", "--details", "--keylog", CAPTURES / "tls13_x25519.keys",
                           CAPTURES / "tls13_x25519.pcap")
    assert code == 0
    assert re.search(r"^Handshake +complete \(both Finished decrypted\)$", out, re.MULTILINE)
    assert re.search(r"^Certificate chain +0 s: CN=localhost$", out, re.MULTILINE)
    assert re.search(r"^Signature scheme +\S+ \(0x0[48]0[0-9a-f]\)$", out, re.MULTILINE)
    code, _, err = run_cli("pcap", "--keylog", "/nonexistent/keys", SEED)
    assert code == 2 and "--keylog" in err


# -- broken input ------------------------------------------------------------------------
def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_truncated_file_reports_what_was_read(run_cli, tmp_path: Path) -> None:
    data = SEED.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:len(data) - 40])
    code, out, err = run_cli("pcap", cut)
    assert code == 7
    assert "x25519" in out and SEED_SUITE in out  # the handshake was before the damage
    assert "cut.pcap" in one_line_error(err)


def test_bad_magic(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("this is not a capture\n")
    code, out, err = run_cli("pcap", bad)
    assert code == 2 and out == ""  # nothing could be read: an unreadable file
    assert "not a pcap" in one_line_error(err)


def test_garbage_block_in_pcapng(run_cli, tmp_path: Path) -> None:
    data = (CAPTURES / "tls13_x25519_dsb.pcapng").read_bytes()
    broken = tmp_path / "garbage.pcapng"
    middle = len(data) // 2
    broken.write_bytes(data[:middle] + os.urandom(64) + data[middle:])
    code, _out, err = run_cli("pcap", broken)
    assert code == 7
    one_line_error(err)


def test_snaplen_cut_packets(run_cli, tmp_path: Path) -> None:
    """A capture taken with a 64-byte snaplen: headers only, no TLS to read."""
    data = SEED.read_bytes()
    out_parts, p = [data[:16] + (64).to_bytes(4, "little") + data[20:24]], 24
    while p + 16 <= len(data):
        incl = int.from_bytes(data[p + 8:p + 12], "little")
        keep = min(incl, 64)
        out_parts.append(data[p:p + 8] + keep.to_bytes(4, "little") + data[p + 12:p + 16] +
                         data[p + 16:p + 16 + keep])
        p += 16 + incl
    short = tmp_path / "short.pcap"
    short.write_bytes(b"".join(out_parts))
    code, _out, err = run_cli("pcap", short)
    assert code == 7
    assert "snaplen" in one_line_error(err)


def test_missing_file_is_a_usage_error(run_cli) -> None:
    code, _, err = run_cli("pcap", "/nonexistent/file.pcap")
    assert code == 2 and "no such file" in one_line_error(err)


@pytest.mark.parametrize("name", ["tls12_unknown_ca.pcap", "tls13_unknown_ca.pcap"])
def test_handshake_ended_by_an_alert_is_shown_failed(run_cli, tmp_path: Path,
                                                     name: str) -> None:
    """Recorded: the client trusts no CA and sends a fatal unknown_ca after the server's
    flight (no Finished). The table, the CSV and the details say failed with the alert,
    not a complete row; a good handshake in the same run says nothing of the kind."""
    code, out, err = run_cli("pcap", CAPTURES / name, SEED, "--csv", tmp_path / "c.csv")
    assert code == 0, err
    rows = [line for line in out.splitlines() if "127.0.0.1" in line]
    assert len(rows) == 2
    assert "TLS 1.2, failed: client alert unknown_ca" in rows[0] or \
        "TLS 1.3, failed: client alert unknown_ca" in rows[0], rows[0]
    assert "failed" not in rows[1]
    with open(tmp_path / "c.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert table[0]["Version"].endswith(", failed: client alert unknown_ca"), table[0]
    assert table[1]["Version"] == "TLS 1.2", table[1]
    code, out, _ = run_cli("pcap", "--details", CAPTURES / name)
    assert re.search(r"^Handshake\s+failed: client sent fatal alert unknown_ca$", out, re.M), out


ENCRYPTED_ALERT = CAPTURES / "tls13_encrypted_alert.pcap"
ENCRYPTED_FAILED = "TLS 1.3, failed: client sent an encrypted alert (its description is encrypted)"


def test_tls13_alert_encrypted_by_the_client_is_shown_failed(run_cli, tmp_path: Path) -> None:
    """Recorded: gnutls-cli refuses the server's certificate and sends its alert under the
    handshake keys. Without keys, its first protected record is the AEAD tag + 3 bytes,
    which only an alert fits: the table, the CSV, the details and the JSON say failed by an
    encrypted alert (not a complete row, no description invented); with the key log the
    alert is decrypted and named."""
    code, out, err = run_cli("pcap", ENCRYPTED_ALERT, SEED, "--csv", tmp_path / "c.csv")
    assert code == 0, err
    rows = [line for line in out.splitlines() if "127.0.0.1" in line]
    assert ENCRYPTED_FAILED in rows[0], rows[0]
    assert "failed" not in rows[1]
    with open(tmp_path / "c.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert table[0]["Version"] == ENCRYPTED_FAILED, table[0]
    code, out, _ = run_cli("pcap", "--details", ENCRYPTED_ALERT)
    assert re.search(r"^Handshake\s+failed: client sent an encrypted alert \(its description "
                     r"is encrypted\)$", out, re.M), out
    assert "handshake " not in out.split("Timing", 1)[1].splitlines()[0]  # it never ended
    code, out, _ = run_cli("pcap", "--jsonl", ENCRYPTED_ALERT)
    conn = next(json.loads(line) for line in out.splitlines() if '"connection"' in line)
    assert conn["alerts"] == [{"direction": "client", "level": None, "description": None,
                               "name": "(encrypted)"}], conn["alerts"]
    assert conn["handshake_complete"] is None and conn["timings"]["handshake_ms"] is None
    keys = ENCRYPTED_ALERT.with_suffix(".keys")
    code, out, err = run_cli("pcap", ENCRYPTED_ALERT, "--keylog", keys, "--csv",
                             tmp_path / "k.csv")
    assert code == 0, err
    assert "TLS 1.3, failed: client alert bad_certificate" in out, out
    with open(tmp_path / "k.csv", encoding="utf-8", newline="") as fh:
        assert next(csv.DictReader(fh))["Version"] == \
            "TLS 1.3, failed: client alert bad_certificate"
    code, out, _ = run_cli("pcap", "--jsonl", ENCRYPTED_ALERT, "--keylog", keys)
    conn = next(json.loads(line) for line in out.splitlines() if '"connection"' in line)
    assert conn["alerts"] == [{"direction": "client", "level": 2, "description": 42,
                               "name": "bad_certificate"}], conn["alerts"]
    assert conn["decrypted"] is True and conn["handshake_complete"] is False


def _without_client_record(data: bytes, size: int) -> bytes:
    """A little-endian pcap of Ethernet/IPv4/TCP with the packets whose TCP payload is
    `size` bytes removed (what a client that closes without sending them leaves)."""
    import struct
    out, p = [data[:24]], 24
    while p + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, p + 8)[0]
        frame = data[p + 16:p + 16 + caplen]
        ihl = (frame[14] & 15) * 4
        total = struct.unpack_from(">H", frame, 16)[0]
        tcp = frame[14 + ihl:]
        if total - ihl - (tcp[12] >> 4) * 4 != size:
            out.append(data[p:p + 16 + caplen])
        p += 16 + caplen
    return b"".join(out)


def test_tls13_client_that_closes_without_finished_is_not_shown_complete(
        run_cli, tmp_path: Path) -> None:
    """The same recording without the client's encrypted alert: after its compatibility
    change_cipher_spec the client closes without any protected record. Nothing says the
    handshake completed (nor why it failed): 'not finished in the capture', no alert."""
    edited = tmp_path / "silent.pcap"
    edited.write_bytes(_without_client_record(ENCRYPTED_ALERT.read_bytes(), 24))
    code, out, err = run_cli("pcap", edited, "--csv", tmp_path / "c.csv")
    assert code == 0, err
    row = next(line for line in out.splitlines() if "127.0.0.1" in line)
    assert "TLS 1.3, not finished in the capture" in row and "alert" not in row, row
    with open(tmp_path / "c.csv", encoding="utf-8", newline="") as fh:
        assert next(csv.DictReader(fh))["Version"] == "TLS 1.3, not finished in the capture"
    code, out, _ = run_cli("pcap", "--details", edited)
    assert re.search(r"^Handshake\s+ServerHello seen, not finished in the capture$", out,
                     re.M), out


def _five_connections(path: Path) -> Path:
    """A capture of five connections, each a real TLS 1.2 handshake (the project's own
    recording's chunks) from its own client port, closed by FINs."""
    from tests.helpers.capbuild import Conv, ether, pcap_bytes, real_chunks
    chunks = real_chunks()
    frames: list[bytes] = []
    for i in range(5):
        conv = Conv(client=("10.0.0.1", 40000 + i))
        frames += [ether(p) for p in conv.handshake()]
        for direction, data in chunks:
            frames.append(ether(conv.c(data) if direction == 0 else conv.s(data)))
        frames += [ether(conv.c(b"", "FA")), ether(conv.s(b"", "FA")), ether(conv.ack())]
    path.write_bytes(pcap_bytes(frames))
    return path


@pytest.mark.parametrize("jobs", [[], ["--jobs", "1"], ["--jobs", "2"]])
def test_a_count_stop_says_the_file_was_not_read_whole(run_cli, tmp_path: Path,
                                                       jobs: list[str]) -> None:
    """-c N stops the reading: the capture's record says so (`complete` false) with the
    counts of what was read. With two processes (--jobs 2) the reader's counters came at
    the capture's end, which never came: 0 packets, 0 TCP connections, and `complete` was
    true in every case."""
    cap = _five_connections(tmp_path / "five.pcap")
    code, out, err = run_cli("pcap", "--json", "-c", "2", *jobs, cap)
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["connections"]) == 2
    record, = doc["captures"]
    assert record["complete"] is False and record["reported"] == 2
    assert 0 < record["packets"] < json.loads(run_cli("pcap", "--json", "--jobs", "1", cap)[1]
                                              )["captures"][0]["packets"]
    assert 2 <= record["capture"]["tcp"]["connections"] < 5
    # the same counts whatever --jobs says: one process reads a -c N capture
    code, out1, _ = run_cli("pcap", "--json", "-c", "2", "--jobs", "1", cap)
    assert json.loads(out1)["captures"][0]["packets"] == record["packets"]
    # read to its end (N above the connections held): complete, every packet counted
    code, out, err = run_cli("pcap", "--json", "-c", "9", *jobs, cap)
    record, = json.loads(out)["captures"]
    assert record["complete"] is True and record["reported"] == 5
    code, whole, _ = run_cli("pcap", "--json", "--jobs", "1", cap)
    assert record["packets"] == json.loads(whole)["captures"][0]["packets"]
