"""A probe and the capture of its own connection state the same facts (#31).

For each kind of handshake the lab serves (TLS 1.3 without and with a HelloRetryRequest,
TLS 1.2 ECDHE, DHE and RSA key exchange, TLS 1.2 resumption by session ID and by ticket)
`tlsprobe HOST --json --pcap-out F --keylog K` runs against an openssl s_server on
loopback, then `tlsprobe pcap F --keylog K --json` reads what it wrote. Both sides build a
`model.facts.HandshakeFacts` (engine.facts.facts_of, offline.handshake.handshake_facts),
recorded here as each command makes them, and every fact both can know must be equal;
`ONE_SIDED` names the others and why. The two JSON documents must say the same of the
handshake too (one model.describe serves both).

The resumed handshakes are driven through `probes.probe.run_probe` (the command's own
function) with a session set up by a first probe, because `tlsprobe HOST` offers no
session to resume; their capture and key log are written with the writer `--pcap-out`
uses.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.model.facts import HandshakeFacts, KeyExchangeFacts

#: HandshakeFacts fields only one side can know
ONE_SIDED = {
    "finished_verified": "a capture reads both Finished messages (handshake_complete) but "
                         "does not verify them",
    "signature_verified": "a capture does not verify the server's signature",
    "signature_detail": "what the live engine verified, or why not",
    "incomplete_reason": "why the live engine itself stopped",
    "ocsp_response_bytes": "a capture does not read the CertificateStatus",
    "timings": "the probe times from the connect, a capture from the ClientHello",
    "unknown": "each side names what it could not know, and why",
}
#: KeyExchangeFacts fields only one side can know
KX_ONE_SIDED = {
    "valid": "only the live engine computes a shared secret from the server's share",
    "problem": "ditto: why the server's share was refused",
    "dh_generator": "a capture keeps the generator's length only",
}
ENCRYPTED_EXTENSIONS = 8   # the capture keeps the ALPN of EncryptedExtensions, not its list
#: ProbeResult / ConnectionReport fields that describe the handshake alike
SHARED_JSON = ("offer", "version", "cipher", "key_exchange", "hello_retry_request",
               "signature_scheme", "alpn", "session_ticket_lifetime", "certificates")

CASES = {
    "tls13": ({"proto": "tls1_3"}, ["--tls1_3"]),
    "tls13-hrr": ({"proto": "tls1_3", "groups": ["P-384"]},
                  ["--tls1_3", "--groups", "x25519,secp384r1", "--key-shares", "x25519"]),
    "tls12-ecdhe": ({"proto": "tls1_2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
                    ["--tls1_2"]),
    "tls12-dhe": ({"proto": "tls1_2", "ciphers": "DHE-RSA-AES128-GCM-SHA256"}, ["--tls1_2"]),
    "tls12-rsa": ({"proto": "tls1_2", "ciphers": "AES128-GCM-SHA256"}, ["--tls1_2"]),
}


class Recorded:
    """The HandshakeFacts each side builds, as the commands build them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import tlsprobe.probes.facts as probe_facts
        from tlsprobe.offline import build
        self.live: list[HandshakeFacts] = []
        self.capture: list[HandshakeFacts] = []
        probe_result, handshake_facts = probe_facts.probe_result, build.handshake_facts

        def live(facts: HandshakeFacts, *args: Any, **kwargs: Any) -> Any:
            self.live.append(facts)
            return probe_result(facts, *args, **kwargs)

        def capture(f: Any) -> HandshakeFacts:
            self.capture.append(handshake_facts(f))
            return self.capture[-1]
        monkeypatch.setattr(probe_facts, "probe_result", live)
        monkeypatch.setattr(build, "handshake_facts", capture)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    from tlsprobe.cli import main
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, f"tlsprobe {' '.join(argv)}: exit {code}: {err}"
    return dict(json.loads(out))


def _connection(report: dict[str, Any]) -> dict[str, Any]:
    connections = [c for c in report["connections"] if c.get("kind") == "connection"] \
        if "connections" in report else [report]
    assert len(connections) == 1, report
    return connections[0]


def _pcap(capsys: pytest.CaptureFixture[str], pcap: Path, keylog: Path) -> dict[str, Any]:
    return _connection(_cli(capsys, "pcap", str(pcap), "--keylog", str(keylog), "--json",
                            "--no-progress"))


def _same_facts(live: HandshakeFacts, capture: HandshakeFacts) -> None:
    differ = {}
    for field in dataclasses.fields(HandshakeFacts):
        name = field.name
        if name in ONE_SIDED:
            continue
        a, b = getattr(live, name), getattr(capture, name)
        if name == "key_exchange" and isinstance(a, KeyExchangeFacts) and \
                isinstance(b, KeyExchangeFacts):
            a, b = (dataclasses.replace(kx, **{k: None for k in KX_ONE_SIDED}) for kx in (a, b))
        if name == "extensions":
            a = tuple(e for e in a if e.msg_type != ENCRYPTED_EXTENSIONS)
        if a != b:
            differ[name] = (a, b)
    assert not differ, differ


def _same_json(probe: dict[str, Any], connection: dict[str, Any]) -> None:
    def shared(report: dict[str, Any], name: str) -> Any:
        value = report[name]
        if name == "key_exchange" and value is not None:   # valid, problem: KX_ONE_SIDED
            return {k: v for k, v in value.items() if k not in KX_ONE_SIDED}
        return value
    differ = {name: (probe[name], connection[name]) for name in SHARED_JSON
              if shared(probe, name) != shared(connection, name)}
    assert not differ, differ
    side = {"sent": "client", "received": "server"}
    alerts = [dict(a, direction=side[a["direction"]]) for a in probe["alerts"]]
    assert alerts == connection["alerts"]
    assert probe["messages"] == [m.removesuffix(" (decrypted)") for m in connection["messages"]]


@pytest.mark.parametrize("case", CASES)
def test_probe_and_its_capture_state_the_same_facts(case, server_cache, tmp_path, capsys,
                                                    monkeypatch):
    options, flags = CASES[case]
    srv = server_cache("openssl", **options)
    pcap, keylog = tmp_path / "probe.pcap", tmp_path / "probe.keys"
    recorded = Recorded(monkeypatch)
    probe = _cli(capsys, f"{srv.host}:{srv.port}", "--json", "--no-verify", "--timeout", "10",
                 "--pcap-out", str(pcap), "--keylog", str(keylog), *flags)
    assert probe["handshake_complete"], probe
    connection = _pcap(capsys, pcap, keylog)
    _same_json(probe, connection)
    assert len(recorded.live) == 1 and len(recorded.capture) == 1
    live, captured = recorded.live[0], recorded.capture[0]
    _same_facts(live, captured)
    # what the case is about, stated by both
    assert live.hrr is (case == "tls13-hrr")
    assert live.key_exchange is not None and live.key_exchange.client_share_bytes
    if case == "tls12-rsa":   # the ClientKeyExchange's encrypted premaster secret (RSA-2048)
        assert live.key_exchange.client_share_bytes == 256
        assert probe["key_exchange"]["client_share_bytes"] == 256


@pytest.mark.parametrize("mechanism", ["session_id", "session_ticket"])
def test_resumed_handshake_and_its_capture_state_the_same_facts(mechanism, server_cache,
                                                               tmp_path, capsys, monkeypatch):
    from tlsprobe.capture.writer import write_connection_pcap
    from tlsprobe.engine.config import TLS12, ClientConfig, Resumption
    from tlsprobe.engine.keylog import KeyLogWriter
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.probe import ProbeOptions, run_probe
    from tlsprobe.session.flow import MessageEvent
    from tlsprobe.wire.hello import ServerHello
    from tlsprobe.wire.messages import NewSessionTicket
    srv = server_cache("openssl", proto="tls1_2", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    target = Target(srv.host, srv.port)
    ticket = mechanism == "session_ticket"
    config = ClientConfig(versions=(TLS12,), session_ticket=ticket)
    full = run_probe(target, ProbeOptions(config=config, verify=False))
    assert full.result.handshake_complete, full.result
    decoded = [ev.decoded.message for ev in full.events
               if isinstance(ev, MessageEvent) and ev.decoded is not None]
    session_id = next(m.legacy_session_id_echo for m in decoded if isinstance(m, ServerHello))
    tickets = [m.ticket for m in decoded if isinstance(m, NewSessionTicket)]
    master = bytes.fromhex(full.keylog_lines[0].split()[2])
    # a ticket is offered with a fresh session ID, which the server echoes when it resumes
    resume = Resumption(ticket=tickets[-1] if ticket else None,
                        session_id=os.urandom(32) if ticket else session_id,
                        master_secret=master)

    recorded = Recorded(monkeypatch)
    again = run_probe(target, ProbeOptions(config=dataclasses.replace(config, resume=resume),
                                           verify=False))
    assert again.result.handshake_complete, again.result
    pcap, keylog = tmp_path / "resumed.pcap", tmp_path / "resumed.keys"
    assert again.client_address is not None and again.server_address is not None
    write_connection_pcap(pcap, again.client_address, again.server_address, again.segments,
                          start=again.started, end=again.ended)
    with KeyLogWriter(str(keylog)) as writer:
        writer.write_lines(full.keylog_lines + again.keylog_lines)
    connection = _pcap(capsys, pcap, keylog)
    _same_json(json.loads(again.result.to_json()), connection)
    assert len(recorded.live) == 1 and len(recorded.capture) == 1
    live, captured = recorded.live[0], recorded.capture[0]
    _same_facts(live, captured)
    assert live.resumption == mechanism
    assert connection["resumption"] == mechanism


def test_a_capture_without_its_key_log_says_what_it_could_not_know(server_cache, tmp_path,
                                                                  capsys, monkeypatch):
    srv = server_cache("openssl", proto="tls1_3")
    pcap = tmp_path / "probe.pcap"
    recorded = Recorded(monkeypatch)
    probe = _cli(capsys, f"{srv.host}:{srv.port}", "--json", "--no-verify", "--timeout", "10",
                 "--pcap-out", str(pcap), "--tls1_3")
    connection = _connection(_cli(capsys, "pcap", str(pcap), "--json", "--no-progress"))
    live, captured = recorded.live[0], recorded.capture[0]
    assert live.certificates and live.why_unknown("certificates") is None
    # the chain was sent encrypted: not there, and why, rather than an empty chain stated
    assert captured.certificates == () and connection["certificates"] == []
    assert "no key log" in (captured.why_unknown("certificates") or "")
    assert captured.signature_scheme is None and captured.why_unknown("signature_scheme")
    # what the hellos said is known without keys, and equal
    assert captured.client_hellos == live.client_hellos
    assert captured.key_exchange == dataclasses.replace(live.key_exchange, valid=None)
    assert connection["key_exchange"]["client_share_bytes"] == \
        probe["key_exchange"]["client_share_bytes"]
