"""Key-log decryption of captures against what tshark reads in the same files: TLS DEFLATE
compression (RFC 3749), 0-RTT early data (RFC 8446 4.2.10), RSA Session-ID key log lines,
keylog warnings, whole-connection traces and handshake messages lost in a gap."""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import TSHARK
from tlsprobe.engine.keylog import load_keylog, parse_keylog
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
from tlsprobe.report.trace import TraceFormatter
from tlsprobe.offline.decrypt import MAX_PLAINTEXT, InflatingDeprotector
from tlsprobe.wire.record import Record

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def read(path: Path, keys: Path | None = None, **options: object) -> tuple[list, list]:
    keylog = load_keylog(keys) if keys is not None else None
    analysis = CaptureAnalysis(str(path), AnalyzerOptions(
        keylog=keylog, **options,
        trace_formatter=TraceFormatter if options.get("trace") else None))
    items = list(analysis)
    assert analysis.summary is not None
    return items, list(analysis.summary.notes)   # what the analysis could not do


# -- 1. TLS compression ------------------------------------------------------------------
def test_deflate_compressed_connections_decrypt(captures_dir: Path) -> None:
    """tshark: 70 of 73 ServerHellos choose DEFLATE; the 39 connections whose suites we can
    decrypt (all but the 5 export ones) read both Finished, with no false framing problem."""
    base = captures_dir / "wireshark/notes/all"
    items, _ = read(base / "dump.pcapng", base / "premaster.txt")
    reports = [r for r, _ in items]
    assert len(reports) == 73
    assert sum(r.compression is not None and r.compression.id == 1 for r in reports) == 70
    assert sum(r.compression is None for r in reports) == 3
    complete = [r for r in reports if r.handshake_complete]
    assert len(complete) == 68
    assert any(r.compression.id == 1 for r in complete)
    assert not any("framing" in p for r in reports for p in r.problems)
    assert '"compression": {"id": 1, "hex": "0x01", "name": "DEFLATE"}' in complete[0].to_json()


class _Plain:
    """A deprotector whose 'decryption' is the identity (to feed chosen bytes)."""

    protection = None

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        return record.content_type, record.fragment


def test_deflate_stream_spans_records_and_is_bounded() -> None:
    comp = zlib.compressobj()
    first = comp.compress(b"A" * 3000) + comp.flush(zlib.Z_SYNC_FLUSH)
    second = comp.compress(b"A" * 3000) + comp.flush(zlib.Z_SYNC_FLUSH)
    inflate = InflatingDeprotector(_Plain())  # type: ignore[arg-type]
    assert inflate.decrypt(Record(22, 0x0303, first)) == (22, b"A" * 3000)
    assert inflate.decrypt(Record(23, 0x0303, second)) == (23, b"A" * 3000)  # history kept
    bomb = zlib.compressobj()
    data = bomb.compress(bytes(1 << 20)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    with pytest.raises(ValueError, match="over 16384"):
        InflatingDeprotector(_Plain()).decrypt(Record(23, 0x0303, data))  # type: ignore[arg-type]
    assert MAX_PLAINTEXT == 16384
    with pytest.raises(ValueError, match="DEFLATE"):
        InflatingDeprotector(_Plain()).decrypt(Record(23, 0x0303, b"\xff" * 40))  # type: ignore[arg-type]


# -- 2. 0-RTT --------------------------------------------------------------------------------
@pytest.mark.parametrize("keys", ["tls13-rfc8446.keys", "tls13-rfc8446-noearly.keys"])
def test_early_data(captures_dir: Path, keys: str) -> None:
    """tshark (with the full keys): frame 8 is 0-RTT 'GET /early', frame 11 EndOfEarlyData
    and Finished. Without the early secret the early records are skipped, not a MAC error."""
    base = captures_dir / "wireshark/test-captures"
    items, _ = read(base / "tls13-rfc8446.pcap", base / "keys" / keys, trace=True)
    report, trace = items[1]
    assert report.resumption == "psk"
    assert report.handshake_complete is True
    assert report.problems == ()
    early = [line for line in trace if line.startswith(">>>") and "ApplicationData" in line]
    if keys == "tls13-rfc8446.keys":
        assert ">>> EndOfEarlyData (decrypted)" in report.messages
        assert "(decrypted)" in early[0]  # the 0-RTT request, before the ServerHello
    else:
        assert "not decrypted" in early[0] and "not decrypted" in early[1]
        assert "(decrypted)" in early[2]
    assert report.messages[-1] == ">>> Finished (decrypted)" or \
        ">>> Finished (decrypted)" in report.messages


# -- 3. --msg without keys ---------------------------------------------------------------
def test_trace_without_keys_shows_every_record() -> None:
    """tshark: 15 TLS records in tls12_x25519.pcap, the last two the encrypted close_notify
    alerts (frames 12, 14). The keyless trace has the same records as the decrypted one."""
    (plain, trace), = read(CAPTURES / "tls12_x25519.pcap", trace=True)[0]
    (_, keyed), = read(CAPTURES / "tls12_x25519.pcap", CAPTURES / "tls12_x25519.keys",
                       trace=True)[0]
    headers = [line for line in trace if "RecordHeader" in line]
    assert len(headers) == 15
    assert len(headers) == len([line for line in keyed if "RecordHeader" in line])
    assert [line for line in trace if "length 001a" in line and "RecordHeader" not in line] \
        == ["<<< TLS 1.2, Alert [length 001a], encrypted (not decrypted)",
            ">>> TLS 1.2, Alert [length 001a], encrypted (not decrypted)"]
    assert plain.decrypted is False


# -- 4. key logs -----------------------------------------------------------------------------
def test_rsa_session_id_keylog(captures_dir: Path) -> None:
    """tshark decrypts 4 Finished (2 connections) with these `RSA Session-ID:` lines."""
    wiki = captures_dir / "wireshark/wiki"
    keys = wiki / ("bdb819da1d262ac9226a9d9079eedb8d/"
                   "grpc_person_search_protobuf_and_json_tls.keylog.txt")
    log = load_keylog(keys)
    assert len(log.session_ids) == 2 and log.bad_lines == 0
    items, warnings = read(wiki / ("bf889abf927b7d041b34a136dce7e176/"
                                   "grpc_person_search_protobuf_and_json_tls.pcapng"), keys)
    assert [r.handshake_complete for r, _ in items] == [True, True]
    assert warnings == []


def test_session_id_line_parsing() -> None:
    sid, master = "ab" * 32, "cd" * 48
    log = parse_keylog(f"RSA Session-ID:{sid} Master-Key:{master}\n"
                       f"RSA Session-ID:{sid} Master-Key:{'cd' * 47}\n"
                       "RSA Session-ID:zz Master-Key:00\n")
    assert log.master_secret_by_session_id(bytes.fromhex(sid)) == bytes.fromhex(master)
    assert log.bad_lines == 2 and log.usable == 1
    assert log.master_secret_by_session_id(b"") is None


def test_keylog_warnings(tmp_path: Path) -> None:
    empty = tmp_path / "empty.keys"
    empty.write_text("# nothing\nnot a key line\n")
    _, warnings = read(CAPTURES / "tls12_x25519.pcap", empty)
    assert warnings == [f"keylog {empty}: 0 usable lines (1 malformed)"]
    other = CAPTURES / "tls13_x25519.keys"
    items, warnings = read(CAPTURES / "tls12_x25519.pcap", other)
    assert warnings == [f"keylog {other}: no key matched any connection"]
    assert items[0][0].decrypted is False
    _, warnings = read(CAPTURES / "tls12_x25519.pcap", CAPTURES / "tls12_x25519.keys")
    assert warnings == []


def _wrong_secrets(keys: Path, out: Path) -> Path:
    """`keys` with every secret changed (same length, same client randoms): lines that match
    their connections but whose keys open nothing."""
    lines = []
    for line in keys.read_text().splitlines():
        label, *rest = line.split()
        if len(rest) == 2:
            line = f"{label} {rest[0]} {bytes(b ^ 0x5A for b in bytes.fromhex(rest[1])).hex()}"
        lines.append(line)
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("name", ["tls13_x25519", "tls12_x25519"])
def test_keys_that_open_nothing_are_wrong_keys_not_a_finished_handshake(run_cli, tmp_path,
                                                                         name) -> None:  # type: ignore[no-untyped-def]
    """A key log whose lines match a connection but whose secrets open none of its records
    (a key log of other sessions with the same client random, edited or corrupted secrets)
    must not make an intact handshake "not complete" or "decrypted", nor call its records
    malformed: the connection reads as without keys (handshake_complete unknown), says why
    in `problems`, and the key log's note line counts it."""
    wrong = _wrong_secrets(CAPTURES / f"{name}.keys", tmp_path / "wrong.keys")
    capture = CAPTURES / f"{name}.pcap"
    res = run_cli("pcap", str(capture), "--keylog", str(wrong), "--jsonl", "--no-progress")
    conn = [json.loads(line) for line in res.stdout.splitlines()][0]
    assert res.returncode == 0
    assert conn["decrypted"] is False and conn["handshake_complete"] is None
    assert not any(p.startswith("malformed") for p in conn["problems"]), conn["problems"]
    assert any("logged keys do not decrypt" in p for p in conn["problems"]), conn["problems"]
    assert res.stderr.splitlines() == [
        f"tlsprobe: note: {capture}: keylog {wrong}: 1 connection(s) not decrypted: the "
        "logged keys do not decrypt its records (wrong keys for this connection)"]
    plain = run_cli("pcap", str(capture), "--no-progress")
    keyed = run_cli("pcap", str(capture), "--keylog", str(wrong), "--no-progress")
    assert keyed.stdout == plain.stdout


@pytest.mark.parametrize(("side", "other"), [("CLIENT", "SERVER"), ("SERVER", "CLIENT")])
def test_a_side_without_its_handshake_secret_leaves_the_handshake_end_unknown(
        run_cli, tmp_path, side: str, other: str) -> None:  # type: ignore[no-untyped-def]
    """A TLS 1.3 key log with one side's traffic secrets only (a cut or partly copied
    log): the other side's records are decrypted, this side's stay encrypted, so whether
    the handshake finished is not known (null, not false) and `problems` names the missing
    secret; tshark reads the same side's Finished from the same log."""
    keys = tmp_path / "one-side.keys"
    keys.write_text("".join(
        line for line in (CAPTURES / "tls13_x25519.keys").read_text().splitlines(True)
        if not line.startswith(f"{side}_")))
    capture = CAPTURES / "tls13_x25519.pcap"
    res = run_cli("pcap", str(capture), "--keylog", str(keys), "--jsonl", "--no-progress")
    assert res.returncode == 0, res.stderr
    conn = json.loads(res.stdout.splitlines()[0])
    assert conn["decrypted"] is True and conn["handshake_complete"] is None, conn
    assert conn["problems"] == [(
        f"key log has no {side}_HANDSHAKE_TRAFFIC_SECRET for this connection: the "
        f"{side.lower()}'s protected records are not decrypted (whether its handshake "
        "finished is not known)")]
    arrow = {"CLIENT": ">>>", "SERVER": "<<<"}
    assert f"{arrow[other]} Finished (decrypted)" in conn["messages"], conn["messages"]
    assert not any(m.startswith(arrow[side]) and m.endswith("(decrypted)")
                   for m in conn["messages"]), conn["messages"]
    assert bool(conn["certificates"]) == (other == "SERVER")
    assert TSHARK is not None
    finished = subprocess.run([TSHARK, "-n", "-r", str(capture), "-o", f"tls.keylog_file:{keys}",
                               "-Y", "tls.handshake.type == 20", "-T", "fields", "-e",
                               "tcp.srcport"], capture_output=True, text=True, check=True,
                              timeout=60).stdout.split()
    assert finished == [str(conn[f"{other.lower()}_port"])], finished
    assert res.stderr == ""


def test_a_resumed_tls12_session_takes_the_keys_of_the_connection_that_made_it(
        run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A key log with the first connection's master secret only: the second connection
    resumes that session by its ticket (captures/tls12_resumption.pcap, openssl s_client
    -sess_in), so it uses the same master secret, as tshark's session cache does; with a
    key log for neither, neither is decrypted."""
    capture = CAPTURES / "tls12_resumption.pcap"
    lines = (CAPTURES / "tls12_resumption.keys").read_text().splitlines(True)
    randoms = [line.split()[1] for line in lines if line.startswith("CLIENT_RANDOM ")]
    assert len(randoms) == 2
    first = tmp_path / "first-only.keys"
    first.write_text("".join(line for line in lines if randoms[1] not in line))
    res = run_cli("pcap", str(capture), "--keylog", str(first), "--jsonl", "--no-progress")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    conns = sorted((json.loads(line) for line in res.stdout.splitlines()
                    if '"kind": "connection"' in line), key=lambda c: c["first_frame"])
    assert [c["resumption"] for c in conns] == [None, "session_ticket"]
    assert conns[1]["client_random"] == randoms[1]
    for conn in conns:
        assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
        assert conn["problems"] == [], conn["problems"]
    assert conns[1]["messages"][-2:] == ["<<< Finished (decrypted)", ">>> Finished (decrypted)"]
    assert TSHARK is not None
    finished = subprocess.run([TSHARK, "-n", "-r", str(capture), "-o", f"tls.keylog_file:{first}",
                               "-Y", "tls.handshake.type == 20", "-T", "fields", "-e",
                               "tcp.stream"], capture_output=True, text=True, check=True,
                              timeout=60).stdout.split()
    assert sorted(finished) == ["0", "0", "1", "1"], finished


def test_keylog_and_gap_notes_do_not_make_the_file_damaged(run_cli) -> None:  # type: ignore[no-untyped-def]
    """An intact file read with the wrong key log, or one whose capture missed handshake
    bytes, is reported with a note line and exit 0 (7 is for damaged files)."""
    other = CAPTURES / "tls13_x25519.keys"
    res = run_cli("pcap", str(CAPTURES / "tls12_x25519.pcap"), "--keylog", str(other))
    assert res.returncode == 0 and res.stderr.splitlines() == [
        f"tlsprobe: note: {CAPTURES / 'tls12_x25519.pcap'}: keylog {other}: no key matched "
        "any connection"]
    res = run_cli("pcap", str(CAPTURES / "tls12_split_gap.pcap"))
    assert res.returncode == 0 and "ServerKeyExchange not captured" in res.stderr


# -- 5. handshake messages lost in a gap ---------------------------------------------------
def test_server_key_exchange_lost_in_gap() -> None:
    """tshark: 880 server bytes after the ServerHello (Certificate, ServerKeyExchange) are
    missing from tls12_split_gap.pcap; the complete tls12_split.pcap has the SKE."""
    items, warnings = read(CAPTURES / "tls12_split_gap.pcap")
    report = items[0][0]
    assert report.gap_bytes == 880
    assert "ServerKeyExchange not captured (gap of 880 bytes)" in report.problems
    assert report.key_exchange.source == "not_captured"   # not "none", as when resumed
    assert warnings == ["connection #0: ServerKeyExchange not captured (gap of 880 bytes)"]
    items, warnings = read(CAPTURES / "tls12_split.pcap")
    assert items[0][0].key_exchange.source == "server_key_exchange"
    assert items[0][0].problems == () and warnings == []


def _pcapng_with_secrets(path: Path, body: bytes) -> Path:
    """captures/tls13_x25519.pcap's packets in a pcapng whose first block after the
    interface is a Decryption Secrets Block of body `body` (secrets type, length, data)."""
    from tests.helpers.capbuild import Pcapng
    from tlsprobe.capture import read_packets
    ng = Pcapng().shb().idb(1).raw_block(0x0A, body)
    for _, ts, _, data, _ in read_packets(str(CAPTURES / "tls13_x25519.pcap")):
        ng.epb(0, round(ts * 1e6), data)
    path.write_bytes(ng.bytes())
    return path


def test_damaged_or_unusable_embedded_keys_are_said(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Decryption Secrets Block whose secrets length runs past its block is damage
    (tshark: "secrets block is too large", "cut short"): said with exit 7, the packets
    after it still read; TLS key log secrets none of whose lines can be used are said in a
    note, as a --keylog file's are; good embedded keys still decrypt, silently."""
    tlsk = 0x544C534B
    keys = (CAPTURES / "tls13_x25519.keys").read_bytes()
    good = _pcapng_with_secrets(tmp_path / "good.pcapng", struct.pack("<II", tlsk, len(keys))
                                + keys)
    res = run_cli("pcap", str(good), "--jsonl", "--no-progress")
    conn = json.loads(res.stdout.splitlines()[0])
    assert res.returncode == 0 and res.stderr == "" and conn["handshake_complete"] is True
    for claimed in (len(keys) + 100, 0xFFFFFFF0):
        bad = _pcapng_with_secrets(tmp_path / "long.pcapng", struct.pack("<II", tlsk, claimed)
                                   + keys)
        res = run_cli("pcap", str(bad), "--jsonl", "--no-progress")
        lines = [json.loads(line) for line in res.stdout.splitlines()]
        assert res.returncode == 7, res.stderr
        assert len(res.stderr.splitlines()) == 1 and \
            f"secrets length {claimed} exceeds the block" in res.stderr, res.stderr
        assert lines[0]["kind"] == "connection" and lines[-1]["packets"] == 19
    junk = _pcapng_with_secrets(tmp_path / "junk.pcapng", struct.pack("<II", tlsk, 24)
                                + b"\x1b[2J not a key log line\n")
    res = run_cli("pcap", str(junk), "--no-progress")
    assert res.returncode == 0 and res.stderr.splitlines() == [
        f"tlsprobe: note: {junk}: keys embedded in the capture (Decryption Secrets Block at "
        "file offset 60): 0 usable lines (1 malformed)"], res.stderr


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_key_log_starting_with_a_byte_order_mark_decrypts_alike(
        run_cli: Any, tmp_path: Path, bom: bytes) -> None:
    """A key log saved as UTF-8 with a byte-order mark (Notepad, PowerShell's Out-File)
    decrypts as the same log without it: the mark before the first line was read as part of
    its label, and that secret (here SERVER_HANDSHAKE_TRAFFIC_SECRET) was skipped as a label
    of no use, leaving the server's handshake unread."""
    lines = (CAPTURES / "tls13_hrr.keys").read_bytes().split(b"\n")
    secrets = [line for line in lines if line and not line.startswith(b"#")]
    assert secrets[0].startswith(b"SERVER_HANDSHAKE_TRAFFIC_SECRET "), secrets[0]
    keys = tmp_path / "keys.txt"
    keys.write_bytes(bom + b"\r\n".join(secrets) + b"\r\n")
    res = run_cli("pcap", str(CAPTURES / "tls13_hrr.pcap"), "--keylog", str(keys), "--jsonl")
    assert res.returncode == 0, res.stderr
    conn = next(c for c in map(json.loads, res.stdout.splitlines())
                if c.get("kind") == "connection")
    assert conn["decrypted"] is True and conn["handshake_complete"] is True, conn
    assert conn["problems"] == [], conn["problems"]
