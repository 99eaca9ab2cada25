"""QUIC Initial protection against RFC 9001 Appendix A, and the DTLS reader on real bytes."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tlsprobe.capture import Datagram
from tlsprobe.engine.keyschedule import hkdf_expand_label, hkdf_extract
from tlsprobe.offline.dtls import DtlsTracker, dtls_records, tls_form
from tlsprobe.wire.hello_summary import parse_client_hello, parse_server_hello
from tlsprobe.offline.quic import (
    SALT_V1,
    InitialKeys,
    QuicTracker,
    crypto_frames,
    initial_packets,
)

DCID = bytes.fromhex("8394c8f03e515708")
# RFC 9001 A.3: the server's Initial packet and its payload (ACK, CRYPTO with ServerHello)
A3_PACKET = bytes.fromhex(
    "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a"
    "5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3"
    "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84"
    "022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4"
    "2158407dd074ee")
A3_PAYLOAD = bytes.fromhex(
    "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf739"
    "88cfc79825df566dc5430b9a045a1200130100002e00330024001d00209d3c94"
    "0d89690b84d08a60993c144eca684d1081287c834d5311bcf32bb9da1a002b00"
    "020304")


def test_initial_secrets_are_rfc9001_a1() -> None:
    initial = hkdf_extract(SALT_V1, DCID)
    assert initial.hex() == "7db5df06e7a69e432496adedb00851923595221596ae2ae9fb8115c1e9ed0a44"
    client = hkdf_expand_label(initial, b"client in", b"", 32)
    assert client.hex() == "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea"
    assert hkdf_expand_label(client, b"quic key", b"", 16).hex() == \
        "1f369613dd76d5467730efcbe3b1a22d"
    assert hkdf_expand_label(client, b"quic hp", b"", 16).hex() == \
        "9f50449e04a0e810283a1e9933adedd2"


def test_server_initial_of_rfc9001_a3_opens_to_its_server_hello() -> None:
    (version, dcid, scid, packet, pn_offset, end), = initial_packets(A3_PACKET)
    assert version == 1 and dcid == b"" and scid.hex() == "f067a5502a4262b5"
    payload = InitialKeys(DCID, version, "server").open(packet, pn_offset, end)
    assert payload == A3_PAYLOAD
    (offset, data), = crypto_frames(payload)
    assert offset == 0
    sh = parse_server_hello(data)
    assert sh.cipher_suite == 0x1301 and sh.key_share == (0x001D, 32)
    assert sh.selected_version == 0x0304


def test_a_changed_byte_does_not_decrypt() -> None:
    (_, _, _, packet, pn_offset, end), = initial_packets(A3_PACKET)
    broken = packet[:-1] + bytes([packet[-1] ^ 1])
    try:
        InitialKeys(DCID, 1, "server").open(broken, pn_offset, end)
    except ValueError:
        pass
    else:
        raise AssertionError("a tampered Initial packet decrypted")


def test_quic_tracker_ignores_server_packets_without_a_client_initial() -> None:
    tracker = QuicTracker("x")
    ev = Datagram("10.0.0.2", 443, "10.0.0.1", 5555, A3_PACKET, 1.0, 1)
    assert list(tracker.datagram(ev)) == [] and tracker.connections == 0


def test_dtls_client_hello_loses_its_cookie_in_tls_form(captures_dir) -> None:
    from tlsprobe.capture import iter_stream_events
    path = captures_dir / "wireshark" / "test-captures" / "snakeoil-dtls.pcap"
    datagrams = [ev for ev in iter_stream_events(str(path)) if isinstance(ev, Datagram)]
    records = list(dtls_records(datagrams[0].data))
    ct, version, epoch, fragment = records[0]
    assert (ct, version, epoch) == (22, 0x0100, 0)
    body = fragment[12:]
    tls = tls_form(fragment[0], body)
    hello = parse_client_hello(tls)
    assert hello.legacy_version == 0x0100 and len(hello.cipher_suites) == 27
    tracker = DtlsTracker(str(path))
    reports = [done.report for ev in datagrams for done in tracker.datagram(ev)]
    reports += [done.report for done in tracker.finish()]
    (r,) = reports
    assert r.protocol == "dtls" and r.cipher is not None and r.cipher.hex == "0x0035"
    assert r.fingerprints.ja4 is not None and r.fingerprints.ja4.startswith("d00i27")
    assert r.client_hellos == 2  # before and after the HelloVerifyRequest (cookie)


def test_brief_datagram_reports_parse_no_certificate(captures_dir, monkeypatch) -> None:
    """With AnalyzerOptions.brief (the table, --stats) a DTLS handshake's report is a
    `BriefReport` with the values the whole report has in those fields, and the server's
    certificates are not parsed (issue 35: an X.509 parse each, and the import of
    cryptography's X.509 module, for a report that shows none)."""
    from tlsprobe.model import describe
    from tlsprobe.model.capture import BriefReport
    from tlsprobe.offline.analyzer import AnalyzerOptions, analyze

    path = str(captures_dir / "wireshark" / "test-captures" / "snakeoil-dtls.pcap")
    (whole,) = [done.report for done in analyze(path, AnalyzerOptions())]
    assert whole.certificates  # the server's chain is in the capture

    def no_parse(der: bytes) -> object:
        raise AssertionError("a certificate parsed for a brief report")

    monkeypatch.setattr(describe, "certificate_info", no_parse)
    (brief,) = [done.report for done in analyze(path, AnalyzerOptions(brief=True))]
    assert isinstance(brief, BriefReport)
    assert brief == BriefReport(*(getattr(whole, name) for name in BriefReport._fields))
    assert brief.transport == "udp" and brief.protocol == "dtls"


def test_server_initial_answering_a_client_initial_cut_by_the_snaplen(run_cli,
                                                                      tmp_path) -> None:
    """tcpdump's quic_handshake_truncated.pcap (snaplen 256): the client's 1252-byte
    Initial cannot be opened, but its header holds the DCID the server's Initial keys come
    from; tshark reads the server's ServerHello, and so does tlsprobe, saying why the
    ClientHello is missing. A cut datagram that no server Initial answers stays silent."""
    import json
    import subprocess
    from shutil import which

    from tests.helpers.capbuild import pcap_bytes
    from tests.hostile import tls as H
    from tests.offline import quicbuild as Q

    ch, chm = Q.client_hello()
    sh = H.server_hello_13(ch)
    d, c, s = Q.cid(), Q.cid(5), Q.cid()
    client = Q.datagram(Q.initial(Q.V1, d, c, 0, Q.crypto(0, chm), pad_to=1160,
                                  keys=Q.initial_keys(Q.V1, d, "client")))
    server = Q.datagram(Q.initial(Q.V1, c, s, 0, Q.crypto(0, sh),
                                  keys=Q.initial_keys(Q.V1, d, "server")), from_client=False)
    lone = Q.datagram(Q.initial(Q.V1, s, c, 0, Q.crypto(0, chm), pad_to=1160,
                                keys=Q.initial_keys(Q.V1, s, "client")),
                      client=("10.1.0.9", 50001))
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap_bytes([(1.0, client[:256], len(client)), (1.1, server),
                                 (1.2, lone[:256], len(lone))], snaplen=256))
    code, out, err = run_cli("pcap", str(path), "--jsonl")
    assert code == 7, err
    (conn,) = [r for r in map(json.loads, out.splitlines()) if r["kind"] == "connection"]
    assert (conn["protocol"], conn["client"], conn["server"]) == \
        ("quic", "10.1.0.1:50000", "10.1.0.2:443")
    assert conn["version"]["name"] == "TLS 1.3" and conn["cipher"]["hex"] == "0x1301"
    assert conn["key_exchange"]["group"]["name"] == "x25519"
    assert conn["first_frame"] == 1 and conn["sni"] is None
    assert any("cut by the capture's snaplen" in p for p in conn["problems"])
    if which("tshark"):
        seen = subprocess.run(["tshark", "-r", str(path), "-Y", "tls.handshake", "-T",
                               "fields", "-e", "tls.handshake.type", "-e",
                               "tls.handshake.ciphersuite"], capture_output=True, text=True,
                              timeout=60, check=True).stdout.split()
        assert seen == ["2", "0x1301"]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_msg_traces_a_dtls_handshake_as_tshark_reads_it(captures_dir, run_cli) -> None:
    # `pcap --msg` printed nothing for a DTLS (or QUIC) connection: its handshake
    # messages are now traced, in the order tshark reads them
    path = captures_dir / "wireshark" / "test-captures" / "snakeoil-dtls.pcap"
    res = run_cli("pcap", path, "--msg")
    assert res.returncode == 0, res.stderr
    traced = [line.rsplit(", ", 1)[1] for line in res.stdout.splitlines()
              if line[:4] in (">>> ", "<<< ")]
    shark = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e",
                            "dtls.handshake.type"], capture_output=True, text=True, timeout=60)
    types = [int(t) for line in shark.stdout.split() for t in line.split(",")]
    names = {1: "ClientHello", 2: "ServerHello", 3: "HelloVerifyRequest", 11: "Certificate",
             14: "ServerHelloDone", 16: "ClientKeyExchange"}
    assert traced == [names[t] for t in types], (traced, types)
    assert "      msg_type client_hello (1) at +0" in res.stdout.splitlines()
    back = run_cli("pcap", path, "--msg", "--json")
    [conn] = json.loads(back.stdout)["connections"]
    assert [line for line in conn["trace"] if line[:4] in (">>> ", "<<< ")] == \
        [line for line in res.stdout.splitlines() if line[:4] in (">>> ", "<<< ")]


def test_pcap_msg_traces_tls_inside_openvpn_over_udp(captures_dir, run_cli) -> None:
    # the TLS records of an OpenVPN control channel over UDP were read but not traced
    path = captures_dir / "wireshark" / "wiki" / "SampleCaptures" / \
        "OpenVPN_UDP_tls-auth.pcapng"
    res = run_cli("pcap", path, "--msg", "--json")
    assert res.returncode == 0, res.stderr
    traced = json.loads(res.stdout)["connections"]
    plain = json.loads(run_cli("pcap", path, "--json").stdout)["connections"]
    assert len(traced) == len(plain) == 2
    for conn, same in zip(traced, plain):
        heads = [line for line in conn.pop("trace") if line[:4] in (">>> ", "<<< ")]
        assert conn == same       # the Flow reader reads what the fast one does
        assert heads[:4] == [">>> TLS 1.0, RecordHeader [length 0005]",
                             ">>> TLS 1.0, Handshake [length 00dd], ClientHello",
                             "<<< TLS 1.0, RecordHeader [length 0005]",
                             "<<< TLS 1.0, Handshake [length 003a], ServerHello"], heads


@pytest.mark.parametrize("capture, why", [
    (("wireshark", "test-captures", "snakeoil-dtls.pcap"),
     "DTLS: its protected records are not decrypted, only what it sends in clear is read "
     "(tshark -o tls.keylog_file:FILE decrypts them)"),
    (("wireshark", "wiki", "SampleCaptures", "OpenVPN_UDP_tls-auth.pcapng"),
     "OpenVPN over UDP: its TLS records are not decrypted (tshark -o tls.keylog_file:FILE "
     "decrypts them)")])
def test_a_key_log_with_secrets_of_udp_handshakes_is_not_said_to_match_nothing(
        captures_dir, run_cli, tmp_path, capture, why) -> None:
    # tlsprobe does not decrypt DTLS records nor TLS over OpenVPN's UDP control channel;
    # with the key log holding the connections' master secrets, `pcap --keylog` said "no
    # key matched any connection", which was false
    path = captures_dir.joinpath(*capture)
    conns = json.loads(run_cli("pcap", path, "--json").stdout)["connections"]
    keylog = tmp_path / "keys.log"
    keylog.write_text("".join(f"CLIENT_RANDOM {c['client_random']} {'ab' * 48}\n"
                              for c in conns))
    res = run_cli("pcap", path, "--keylog", keylog)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == (f"tlsprobe: note: {path}: keylog {keylog}: {len(conns)} "
                                  f"connection(s) not decrypted: {why}")
    keylog.write_text(f"CLIENT_RANDOM {'00' * 32} {'ab' * 48}\n")
    res = run_cli("pcap", path, "--keylog", keylog)
    assert res.stderr.strip().endswith(f"keylog {keylog}: no key matched any connection")


def test_conversations_past_the_bound_are_reported_not_dropped(monkeypatch) -> None:
    # past MAX_CONVERSATIONS open QUIC handshakes the oldest was dropped without a report
    # (a handshake waiting for its client Finished in a key log's Handshake packets waits
    # longer now): it is reported when it stops being followed
    from tests.offline import quicbuild as Q
    from tlsprobe.offline import quic as quic_module
    from tlsprobe.offline.quic import QuicTracker
    monkeypatch.setattr(quic_module, "MAX_CONVERSATIONS", 2)
    tracker = QuicTracker("x")
    _hello, message = Q.client_hello()
    reports = []
    for port in (1001, 1002, 1003):
        dcid = bytes([port % 256]) * 8
        packet = Q.initial(Q.V1, dcid, b"", 0, Q.crypto(0, message), pad_to=1200,
                           keys=Q.initial_keys(Q.V1, dcid, "client"))
        reports += tracker.datagram(Datagram("10.0.0.1", port, "10.0.0.2", 443, packet,
                                             1.0, port))
    reports += tracker.finish()
    assert sorted(r.report.client_port for r in reports) == [1001, 1002, 1003]
