"""What a capture lost is not known, never absent: the project's loopback recordings sent
again one record per TCP segment (tests/helpers/own_captures.replayed) with one record lost
in a capture gap, or the capture ending before it, against the same recording whole (the
control). tshark shows the built captures without the lost record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.capbuild import tshark_fields
from tests.helpers.own_captures import CAPTURES, replayed


def _connection(run_cli: Any, path: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress", *args)
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    (conn,) = [r for r in records if r["kind"] == "connection"]
    return conn


def _details(run_cli: Any, path: Path, *args: str) -> str:
    code, out, err = run_cli("pcap", str(path), "--details", "--no-progress", *args)
    assert code == 0, err
    return str(out)


def _built(tmp_path: Path, name: str, drop: tuple[str, ...] = (),
           end_after: str | None = None, conn: int = 0) -> Path:
    path = tmp_path / f"{name}-{conn}-{'-'.join(drop) or 'whole'}-{end_after}.pcap".replace(
        ":", "_")
    path.write_bytes(replayed(f"{name}.pcap", drop, end_after, conn))
    return path


@pytest.mark.parametrize("keys", [False, True])
def test_a_certificate_request_lost_in_a_gap_is_not_known(run_cli: Any, tmp_path: Path,
                                                            keys: bool) -> None:
    """TLS 1.2: the CertificateRequest lost, the client's Certificate read: whether the
    server asked (and what) is not known (client_auth.requested null, was false)."""
    args = ("--keylog", str(CAPTURES / "tls12_client_auth.keys")) if keys else ()
    whole = _built(tmp_path, "tls12_client_auth")
    conn = _connection(run_cli, whole, *args)
    assert conn["client_auth"]["requested"] is True and conn["problems"] == []
    lost = _built(tmp_path, "tls12_client_auth", ("s:hs13",))
    assert "13" not in tshark_fields(lost, "tls.handshake", "tls.handshake.type")
    conn = _connection(run_cli, lost, *args)
    assert conn["client_auth"]["requested"] is None, conn["client_auth"]
    assert conn["client_auth"]["sent"] is True and conn["gap_bytes"] > 0
    assert conn["problems"] == [
        (f"CertificateRequest not known (gap of {conn['gap_bytes']} bytes in the server's "
         "handshake)")]
    assert "Client certificate  CertificateRequest not known (not captured: see the " \
        "problems); sent, 2 certificates" in _details(run_cli, lost, *args)


def test_a_tls13_certificate_request_lost_in_a_gap_is_not_known(run_cli: Any,
                                                                 tmp_path: Path) -> None:
    """TLS 1.3 read with its key log: the server's record after its EncryptedExtensions
    (its CertificateRequest) lost: requested null, not false."""
    keys = ("--keylog", str(CAPTURES / "tls13_client_auth.keys"))
    conn = _connection(run_cli, _built(tmp_path, "tls13_client_auth"), *keys)
    assert conn["client_auth"]["requested"] is True and conn["handshake_complete"] is True
    conn = _connection(run_cli, _built(tmp_path, "tls13_client_auth", ("s:ct23#2",)), *keys)
    assert conn["client_auth"]["requested"] is None and conn["client_auth"]["sent"] is True
    # the server's later records are decrypted after the gap (its sequence number found):
    # its Finished was read (test_gap_decryption.py)
    assert conn["handshake_complete"] is True


def test_a_certificate_lost_in_a_gap_is_said(run_cli: Any, tmp_path: Path) -> None:
    """The server's Certificate lost: its chain is said not captured (certificates [] is
    no absence); the ServerHelloDone lost instead: nothing said of the chain read."""
    conn = _connection(run_cli, _built(tmp_path, "tls12_x25519", ("s:hs11",)))
    assert conn["certificates"] == []
    assert conn["problems"] == [f"Certificate not captured (gap of {conn['gap_bytes']} bytes)"]
    conn = _connection(run_cli, _built(tmp_path, "tls12_x25519", ("s:hs14",)))
    assert len(conn["certificates"]) == 2 and conn["problems"] == [], conn["problems"]


def test_a_hello_retry_request_lost_in_a_gap_is_not_no(run_cli: Any, tmp_path: Path) -> None:
    """TLS 1.3: the HelloRetryRequest lost, the client's second ClientHello read: one came
    (key exchange source hello_retry_request, --details 'yes, not captured'), its group is
    not known; it was 'HelloRetryRequest  no', the group 'from TLS 1.3 key_share'."""
    whole = _built(tmp_path, "tls13_hrr")
    assert _connection(run_cli, whole)["hello_retry_request"]["name"] == "secp256r1"
    lost = _built(tmp_path, "tls13_hrr", ("s:hs2#1",))
    assert tshark_fields(lost, "tls.handshake.type == 1", "frame.number") != []
    conn = _connection(run_cli, lost)
    assert conn["hello_retry_request"] is None and conn["client_hellos"] == 2
    assert conn["key_exchange"]["source"] == "hello_retry_request"
    assert any(p.startswith("HelloRetryRequest not captured") for p in conn["problems"])
    details = _details(run_cli, lost)
    assert "HelloRetryRequest   yes, not captured (the client sent a second ClientHello): " \
        "its group is not known" in details, details
    assert "from TLS 1.3 key_share after HelloRetryRequest" in details


def test_a_finished_not_captured_leaves_the_handshake_not_known(run_cli: Any,
                                                                tmp_path: Path) -> None:
    """Decrypted TLS 1.2: the server's Finished lost in a gap, or the capture ending (the
    connection still open) before it: handshake_complete null, not false (nothing says it
    did not complete); the whole connection: true."""
    keys = ("--keylog", str(CAPTURES / "tls12_client_auth.keys"))
    conn = _connection(run_cli, _built(tmp_path, "tls12_client_auth"), *keys)
    assert conn["handshake_complete"] is True
    for drop, end in ((("s:hs148",), None), ((), "s:hs14"), ((), "s:ct20")):
        conn = _connection(run_cli, _built(tmp_path, "tls12_client_auth", drop, end), *keys)
        assert conn["decrypted"] is True and conn["handshake_complete"] is None, (drop, end)
        assert conn["close"] == ("fin" if drop else "end"), conn["close"]


@pytest.mark.parametrize("side", ["s", "c"])
def test_a_change_cipher_spec_lost_in_a_gap_is_no_huge_message(run_cli: Any, tmp_path: Path,
                                                              side: str) -> None:
    """TLS 1.2 read with its key log (the Flow reader), one side's ChangeCipherSpec lost:
    its encrypted Finished is a record protected after it, as the fast reader (no keys)
    takes it, not 'handshake message of 9988437 bytes from the server: over the limit'
    with the handshake 'not finished in the capture' (encrypted false)."""
    lost = _built(tmp_path, "tls12_client_auth", (f"{side}:ct20",))
    keys = ("--keylog", str(CAPTURES / "tls12_client_auth.keys"))
    plain, read = _connection(run_cli, lost), _connection(run_cli, lost, *keys)
    assert read["decrypted"] is True and plain["decrypted"] is False
    for conn in (plain, read):
        assert conn["problems"] == [] and conn["encrypted"] is True, conn
        assert conn["handshake_complete"] is None


@pytest.mark.parametrize("name", ["suricata-verify/tests/tls-duplicate-hello/input.pcap",
                                  "suricata-verify/tests/quic-retry/input.pcap"])
def test_a_second_client_hello_without_a_gap_is_no_hello_retry(run_cli: Any,
                                                              name: str) -> None:
    """Controls from the third-party corpus: a ClientHello sent twice the same, and QUIC's
    after a Retry, with no server bytes lost, are no HelloRetryRequest (tshark shows none)."""
    from tests.helpers.shared_data import captures_dir
    path = captures_dir() / name
    assert path.exists(), f"the shared corpus is needed: {path}"
    assert tshark_fields(path, "tls.handshake.type == 2",
                         "tls.handshake.extensions_key_share_group") != []
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    assert code in (0, 7), err
    conns = [json.loads(line) for line in out.splitlines() if '"connection"' in line]
    assert conns and all(c["hello_retry_request"] is None and (
        c["key_exchange"] or {}).get("source") != "hello_retry_request" and not any(
        p.startswith("HelloRetryRequest") for p in c["problems"]) for c in conns), conns


def test_a_resumption_whose_client_hello_was_lost_names_no_mechanism(run_cli: Any,
                                                                     tmp_path: Path) -> None:
    """TLS 1.2 session-ticket resumption (the recording's second connection) with its
    ClientHello lost: the server went from its ServerHello to its ChangeCipherSpec, but
    whether a ticket or a session ID resumed is not known (it echoes the client's session
    ID either way): resumption null, why in problems; it was 'session_id'."""
    whole = _connection(run_cli, _built(tmp_path, "tls12_resumption", conn=1))
    assert whole["resumption"] == "session_ticket" and whole["problems"] == []
    conn = _connection(run_cli, _built(tmp_path, "tls12_resumption", ("c:hs1",), conn=1))
    assert conn["resumption"] is None and conn["encrypted"] is True
    assert conn["problems"] == [
        "resumption mechanism not known: the ClientHello was not captured"]


def test_a_lost_segment_the_peer_acknowledged_holds_nothing_back(tmp_path: Path) -> None:
    """TLS 1.3, the client's middlebox ChangeCipherSpec (a segment of its own) lost, the
    server's next segments acknowledging past it: the bytes behind the hole are read from
    there (tshark reads the client's Finished in the next frame), so the connection is
    reported when its handshake is decided (stdin, a live capture), before its FIN, as the
    whole recording is; it was held until the close (reported at the last frame)."""
    from tlsprobe.model.encode import to_json_object
    from tlsprobe.offline.analyzer import AnalyzerOptions, analyze
    lost = _built(tmp_path, "tls13_x25519", ("c:ct20",))
    assert tshark_fields(lost, "tls.record.opaque_type == 23 && tcp.srcport == 40000",
                         "frame.number")[0] == "11"
    for path in (_built(tmp_path, "tls13_x25519"), lost):
        with analyze(str(path), AnalyzerOptions(report_when_decided=True)) as analysis:
            (report,) = [to_json_object(r) for r, _trace in analysis]
        assert report["close"] is None and report["encrypted"] is True, path
        assert report["last_frame"] <= 14, (path, report["last_frame"])


@pytest.mark.parametrize("keys", [False, True])
def test_a_gap_too_small_for_a_message_hid_none(run_cli: Any, tmp_path: Path,
                                                keys: bool) -> None:
    """TLS 1.2 session-ticket resumption (the recording's second connection) with the
    server's ChangeCipherSpec lost: a gap of 6 bytes between whole records cannot have held
    a Certificate or a ServerKeyExchange (a record holding one takes at least 10 bytes), so
    neither is said not captured (both were); the full handshake's lost Certificate (1635
    bytes) still is. Whether it resumed is not known: the gap took the ChangeCipherSpec."""
    args = ("--keylog", str(CAPTURES / "tls12_resumption.keys")) if keys else ()
    lost = _built(tmp_path, "tls12_resumption", ("s:ct20",), conn=1)
    assert tshark_fields(lost, "tls.record.content_type == 20 && tcp.srcport == 4433",
                         "frame.number") == []
    conn = _connection(run_cli, lost, *args)
    # what the gap did hide: the ChangeCipherSpec that shows the handshake abbreviated, so
    # how (and whether) the server resumed is not known; resumption null said "a full
    # handshake" with no reason
    assert conn["gap_bytes"] == 6 and conn["resumption"] is None
    assert conn["problems"] == ["resumption not known (gap of 6 bytes in the server's "
                                "handshake)"], conn["problems"]
    assert conn["key_exchange"]["source"] != "not_captured"
    conn = _connection(run_cli, _built(tmp_path, "tls12_x25519", ("s:hs11",)))
    assert conn["problems"] == ["Certificate not captured (gap of 1635 bytes)"]
