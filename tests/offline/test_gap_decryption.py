"""TLS 1.3 read with its key log across a capture gap: the records the gap took moved the
sequence number by a count not known, found by trying the next few (the AEAD tag tells),
so a side's records after a gap are decrypted where that is certain. The project's loopback
recordings sent again one record per TCP segment with records lost
(tests/helpers/own_captures.replayed). tshark 4.0 decrypts nothing of that side after such
a gap; it decrypts the other side's records, as tlsprobe does."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import TSHARK
from tests.helpers.own_captures import CAPTURES
from tests.offline.test_gap_unknowns import _built, _connection

KEYS = ("--keylog", str(CAPTURES / "tls13_x25519.keys"))


def _tshark_alerts(path: Path) -> list[str]:
    """The sides whose alerts tshark decrypts with the key log."""
    assert TSHARK is not None
    out = subprocess.run([TSHARK, "-r", str(path), "-o", f"tls.keylog_file:{KEYS[1]}", "-Y",
                          "tls.alert_message", "-T", "fields", "-e", "tcp.srcport"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return ["server" if port == "4433" else "client" for port in out.split()]


def _server_lines(run_cli: Any, path: Path) -> list[str]:
    code, out, err = run_cli("pcap", str(path), "--msg", "--no-progress", *KEYS)
    assert code == 0, err
    return [line for line in out.splitlines()
            if line.startswith("<<< TLS 1.3,") and "InnerContent" not in line]


def test_a_server_record_lost_leaves_its_later_records_decrypted(run_cli: Any,
                                                                 tmp_path: Path) -> None:
    """The server's first NewSessionTicket lost: its second one, its application data and
    its close_notify are decrypted as in the whole recording (they were 'encrypted, not
    decrypted', the server's alert missing)."""
    whole, lost = _built(tmp_path, "tls13_x25519"), _built(tmp_path, "tls13_x25519",
                                                          ("s:ct23#5",))
    assert _tshark_alerts(whole) == ["server", "client"]
    assert _tshark_alerts(lost) == ["client"]  # tshark: the server's not decrypted
    full, after = _server_lines(run_cli, whole), _server_lines(run_cli, lost)
    gone = full.index("<<< TLS 1.3, Handshake [length 00e9], NewSessionTicket (decrypted)")
    assert after == full[:gone] + full[gone + 1:], after
    conn = _connection(run_cli, lost, *KEYS)
    assert [a["direction"] for a in conn["alerts"]] == ["server", "client"]
    assert conn["session_ticket_lifetime"] == 7200 and conn["problems"] == []
    assert conn["handshake_complete"] is True


def test_a_lost_finished_resumes_with_the_application_key(run_cli: Any,
                                                          tmp_path: Path) -> None:
    """The server's Finished lost: its next records are under its application key from
    sequence number 0 (tried too): decrypted; whether its handshake finished stays not
    known (null)."""
    lost = _built(tmp_path, "tls13_x25519", ("s:ct23#4",))
    lines = _server_lines(run_cli, lost)
    assert "Finished" not in " ".join(lines)
    assert sum("NewSessionTicket (decrypted)" in line for line in lines) == 2, lines
    conn = _connection(run_cli, lost, *KEYS)
    assert conn["handshake_complete"] is None and conn["session_ticket_lifetime"] == 7200
    assert [a["direction"] for a in conn["alerts"]] == ["server", "client"]


def test_the_sequence_numbers_tried_after_a_gap_are_bounded() -> None:
    """A record further than the bounds allow is not decrypted (and not failed: nothing is
    wrong with it) and costs no more tries; one within them is."""
    from tlsprobe.engine.common import RecordDeprotector
    from tlsprobe.engine.epochs import tls13_protection
    from tlsprobe.offline.decrypt import MAX_RESYNC_TRIES, Decryptor, GapResync
    from tlsprobe.session.flow import UnknownRecordKey
    from tlsprobe.wire.record import Record

    secret = bytes(range(32))
    sender = tls13_protection("AES-128-GCM", 16, "sha256", secret)
    records = [Record(23, 0x0303, sender.encrypt(23, b"x" * 100)[5:]) for _ in range(40)]

    def resync(lost: int) -> GapResync:
        reader = tls13_protection("AES-128-GCM", 16, "sha256", secret)
        reader.seq = 2  # records 0 and 1 read before the gap
        dec = Decryptor.__new__(Decryptor)
        dec.current, dec._epochs, dec._finished = [None, None], None, [True, True]
        return GapResync(dec, 1, RecordDeprotector(reader), lost)

    found = resync(3 * 122)  # three records of 122 bytes lost: the next is number 5
    assert found.decrypt(records[5]) == (23, b"x" * 100)
    assert found.decrypt(records[6]) == (23, b"x" * 100)
    far = resync(3 * 122)
    with pytest.raises(UnknownRecordKey):
        far.decrypt(records[2 + MAX_RESYNC_TRIES + 5])
    assert far.failed
    with pytest.raises(UnknownRecordKey):
        far.decrypt(records[5])  # given up: no more tries


def test_a_lost_middlebox_change_cipher_spec_moves_no_sequence_number(
        run_cli: Any, tmp_path: Path) -> None:
    """The server's middlebox ChangeCipherSpec lost (6 bytes, no protected record): its
    encrypted handshake is decrypted from the same sequence number, as tshark does (it was
    not decrypted at all, with 'Certificate not captured (gap of 6 bytes)')."""
    lost = _built(tmp_path, "tls13_x25519", ("s:ct20",))
    out = subprocess.run([str(TSHARK), "-r", str(lost), "-o", f"tls.keylog_file:{KEYS[1]}",
                          "-Y", "tls.handshake.type == 11", "-T", "fields", "-e",
                          "frame.number"], capture_output=True, text=True, timeout=60,
                         check=True).stdout.split()
    assert out, "tshark decrypts the server's Certificate"
    conn = _connection(run_cli, lost, *KEYS)
    assert conn["problems"] == [] and len(conn["certificates"]) == 2
    assert conn["handshake_complete"] is True and conn["gap_bytes"] == 6
