"""The hygiene checks (resumption, early_data, ocsp_stapling, ems, etm), both sides each, on
real loopback servers:
  - openssl s_server (TLS 1.2-1.3, stapling an OCSP response): sessions resumed by session
    ID, RFC 5077 ticket and TLS 1.3 PSK; stapling in the TLS 1.3 Certificate entry; EMS and
    ETM echoed; no ticket allows 0-RTT (early_data not applicable);
  - openssl s_server TLS 1.2 only, -no_ticket, AEAD suites only, stapling: the session ID
    resumed, no ticket issued; stapling in the CertificateStatus message; ETM not applicable;
  - gnutls-serv with %NO_ETM:%NO_SESSION_HASH and no resumption database nor tickets: EMS and
    ETM not supported (findings), no stapling, nothing resumed;
  - openssl s_server -early_data (tests/checks/early_data_server.py), with its anti-replay
    (0-RTT accepted, the replayed ClientHello and early data refused) and without it
    (-no_anti_replay: accepted twice, the medium finding); nginx with ssl_early_data on
    (accepted twice, as nginx leaves replays to the application);
  - openssl s_server -www -max_early_data (P-384 only: a HelloRetryRequest first): tickets
    that allow 0-RTT, which it rejects (not supported);
  - a TLS 1.3-only server: EMS and ETM not applicable.
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tlsprobe.probes.checks import catalog
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import ocsp
from cryptography.x509.oid import NameOID

from tests.lab_servers.builders import binary_path
from tests.helpers.servers import CertSet, Server, listening_inodes
from tlsprobe.commands.scan import parse_checks
from tlsprobe.engine.client import ClientHandshake
from tlsprobe.engine.config import TLS13, ClientConfig, Resumption
from tlsprobe.engine.keyschedule import resumption_psk
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.driver import drive
from tlsprobe.net.tcp import Target, open_channel
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.registry import HandshakeType

ServerFactory = Callable[..., Server]
HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def hygiene(port: int, checks: str = "hygiene") -> dict[str, CheckResult]:
    """The hygiene checks' results on 127.0.0.1:port, by name (each counted right)."""
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(checks)),
                  Scheduler(retries=1, timeout=10.0))[0]
    assert r.error is None, r.error
    for c in r.check_results:
        assert c.category == "hygiene" and c.method == "active", c
        counted = sum(n for phase, n in r.connections.items()
                      if phase == f"check {c.name}" or phase.startswith(f"check {c.name} "))
        assert counted == c.connections, (c, r.connections)
    return {c.name: c for c in r.check_results}


@pytest.fixture(scope="module")
def ocsp_response(certs: CertSet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DER OCSP response ("good") for the RSA leaf, signed by a responder of its own (the
    check shows what a response says; it does not verify it)."""
    leaf = x509.load_pem_x509_certificate(certs["rsa"].cert.read_bytes())
    issuer = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test OCSP responder")])
    now = datetime.datetime.now(datetime.timezone.utc)
    responder = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                 .public_key(key.public_key()).serial_number(1).not_valid_before(now)
                 .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
    response = (ocsp.OCSPResponseBuilder()
                .add_response(leaf, issuer, hashes.SHA1(), ocsp.OCSPCertStatus.GOOD, now,
                              now + datetime.timedelta(days=1), None, None)
                .responder_id(ocsp.OCSPResponderEncoding.HASH, responder)
                .sign(key, hashes.SHA256()))
    path = tmp_path_factory.mktemp("ocsp") / "response.der"
    path.write_bytes(response.public_bytes(Encoding.DER))
    return path


@pytest.mark.needs_impl("openssl")
def test_openssl_resumes_staples_and_has_ems_etm(server_cache: ServerFactory,
                                                 ocsp_response: Path,
                                                 run_cli: Callable[..., object]) -> None:
    srv = server_cache("openssl", proto="tls1_2-tls1_3",
                       extra=("-status_file", str(ocsp_response)))
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "hygiene", "--json",
                  "--no-progress", "--timeout", "10")
    d = json.loads(res.stdout)   # type: ignore[attr-defined]
    got = {c["name"]: c for c in d["check_results"]}
    assert list(got) == list(catalog.ALIASES["hygiene"])
    assert {"resumption", "early_data", "ocsp_stapling", "ems", "etm"} <= set(got)
    assert {c["category"] for c in got.values()} == {"hygiene"}
    r = got["resumption"]
    assert r["verdict"] == "supported" and r["connections"] == 6, r
    assert r["reason"] == "resumed: TLS 1.2 session ID, TLS 1.2 session ticket, TLS 1.3 ticket"
    sid, ticket, tls13 = r["evidence"]
    assert sid.endswith("issued, resumed (abbreviated handshake, server Finished verified)")
    assert "lifetime hint 7200 s, resumed (abbreviated" in ticket
    assert "lifetime 7200 s, max_early_data_size 0, resumed with PSK (psk_dhe_ke" in tls13
    e = got["early_data"]
    assert e["verdict"] == "not applicable" and "none with max_early_data_size > 0" in \
        e["reason"] and e["connections"] == 1, e
    o = got["ocsp_stapling"]
    assert o["verdict"] == "supported" and "TLS 1.3 hello" in o["reason"], o
    assert "certificate status good" in o["reason"], o
    assert got["ems"]["verdict"] == got["etm"]["verdict"] == "supported"
    assert "CBC" in got["etm"]["reason"] and got["ems"]["connections"] == 1
    assert not [f for f in d["findings"] if f["code"].startswith("check.")], d["findings"]


@pytest.mark.needs_impl("openssl")
def test_tls12_session_ids_only_and_certificate_status(server_cache: ServerFactory,
                                                       ocsp_response: Path) -> None:
    srv = server_cache("openssl", proto="tls1_2", ciphers="ECDHE+AESGCM",
                       extra=("-status_file", str(ocsp_response), "-no_ticket"))
    got = hygiene(srv.port)
    r = got["resumption"]
    assert r.verdict is Verdict.supported and r.reason == "resumed: TLS 1.2 session ID", r
    assert r.evidence[1] == "TLS 1.2 session ticket: none issued (no NewSessionTicket)"
    assert len(r.evidence) == 2 and r.connections == 3   # no TLS 1.3: not asked
    assert got["early_data"].verdict is Verdict.not_applicable
    assert got["early_data"].connections == 0
    o = got["ocsp_stapling"]
    assert o.verdict is Verdict.supported and "TLS 1.2 hello" in o.reason, o
    assert "certificate status good" in o.reason
    etm = got["etm"]
    assert etm.verdict is Verdict.not_applicable and "refused" in etm.reason, etm
    assert got["ems"].verdict is Verdict.supported


@pytest.mark.needs_impl("gnutls")
def test_gnutls_without_ems_etm_stapling_or_resumption(server_cache: ServerFactory) -> None:
    srv = server_cache("gnutls", ciphers="NORMAL:%NO_ETM:%NO_SESSION_HASH", extra=("--nodb",))
    got = hygiene(srv.port)
    ems, etm = got["ems"], got["etm"]
    assert ems.verdict is Verdict.not_supported, ems
    assert ems.code == "check.ems" and ems.severity == "low"
    assert etm.verdict is Verdict.not_supported and "CBC" in etm.reason, etm
    assert etm.code == "check.etm" and etm.severity == "low"
    o = got["ocsp_stapling"]
    assert o.verdict is Verdict.not_supported and o.code == "check.ocsp_stapling", o
    assert o.severity == "info"
    r = got["resumption"]
    assert r.verdict is Verdict.not_supported and r.code is None, r
    assert "TLS 1.3 ticket: none issued" in r.reason and "session ticket: none issued" in \
        r.reason
    assert got["early_data"].verdict is Verdict.not_applicable


def _owns(pid: int, port: int) -> bool:
    """Process `pid` holds the socket listening on `port` (not another test's server that
    took the port between free_port() and our bind)."""
    inodes = listening_inodes(port)
    try:
        fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(f"socket:[{inode}]" in fds for inode in inodes)


@pytest.fixture(scope="module")
def early_data_servers(certs: CertSet, tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[dict[bool, int]]:
    """Ports of tests/checks/early_data_server.py with (False) and without (True) its
    anti-replay protection, for the module; each started again on another port when its
    port was taken by another process before it could bind."""
    procs: list[subprocess.Popen[bytes]] = []
    ports: dict[bool, int] = {}
    log_dir = tmp_path_factory.mktemp("early-data")
    for replay in (False, True):
        for _ in range(3):
            port = free_port()
            log = log_dir / f"{port}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, str(HERE / "early_data_server.py"), "--port", str(port),
                     "--chain-file", str(certs["rsa"].chain), "--key-file",
                     str(certs["rsa"].key), "--openssl", str(binary_path("openssl"))]
                    + (["--no-anti-replay"] if replay else []),
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(proc)
            deadline = time.monotonic() + 30
            while not _owns(proc.pid, port) and proc.poll() is None and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            if _owns(proc.pid, port):
                ports[replay] = port
                break
        else:
            pytest.fail(f"early_data_server.py did not listen: {log.read_text()[-800:]!r}")
    yield ports
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("replay", [False, True], ids=["anti-replay", "no-anti-replay"])
def test_early_data_accepted_and_replay(early_data_servers: dict[bool, int],
                                        replay: bool) -> None:
    e = hygiene(early_data_servers[replay], "early_data")["early_data"]
    assert e.connections == 3, e
    assert e.evidence[1] == "received: PSK selected, early_data accepted (server Finished " \
        "verified)", e
    assert e.evidence[2].startswith("replayed: the same ") and "NOT" not in e.evidence[2]
    if replay:
        assert e.verdict is Verdict.vulnerable, e
        assert e.code == "check.early_data" and e.severity == "medium"
        assert e.evidence[3] == e.evidence[1]
    else:
        assert e.verdict is Verdict.supported and e.code is None, e
        assert "replay refused" in e.reason and "early_data not accepted" in e.evidence[3]


@pytest.mark.needs_impl("nginx")
def test_nginx_early_data_is_replayable(server_cache: ServerFactory) -> None:
    """nginx with ssl_early_data on leaves replays to the application ($ssl_early_data): the
    same ClientHello and 0-RTT data are accepted twice. Its session cache resumes TLS 1.2
    session IDs and TLS 1.3 PSKs; the lab's nginx has ssl_session_tickets off."""
    srv = server_cache("nginx", extra=("ssl_session_cache shared:SSL:1m;",
                                       "ssl_early_data on;"))
    got = hygiene(srv.port, "resumption,early_data")
    e = got["early_data"]
    assert e.verdict is Verdict.vulnerable and e.code == "check.early_data", e
    assert e.evidence[1] == e.evidence[3] == "received: PSK selected, early_data accepted " \
        "(server Finished verified)", e
    r = got["resumption"]
    assert r.reason == "resumed: TLS 1.2 session ID, TLS 1.3 ticket", r
    assert r.evidence[1] == "TLS 1.2 session ticket: none issued (no NewSessionTicket)"
    assert "max_early_data_size 16384" in r.evidence[2]


@pytest.mark.needs_impl("openssl")
def test_ems_etm_not_applicable_to_tls13_only(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_3")
    got = hygiene(srv.port, "ems,etm")
    assert got["ems"].verdict is got["etm"].verdict is Verdict.not_applicable
    assert got["ems"].connections == got["etm"].connections == 0


@pytest.mark.needs_impl("openssl")
def test_psk_and_hello_retry_request(server_cache: ServerFactory) -> None:
    """A server that takes P-384 only answers our first hello with a HelloRetryRequest: the
    resumption offers its PSK with a P-384 share (no HRR, resumed; its tickets allow early
    data, which s_server -www never reads: 0-RTT not supported); an offer with another
    share gets an HRR, where the engine stops (incomplete) rather than send a second hello
    whose binder it does not compute."""
    srv = server_cache("openssl", proto="tls1_3", groups=("P-384",),
                       extra=("-max_early_data", "16384"))
    got = hygiene(srv.port, "resumption,early_data")
    r = got["resumption"]
    assert r.verdict is Verdict.supported and r.reason == "resumed: TLS 1.3 ticket", r
    # -www never reads early data: the tickets allow it, the server rejects it
    e = got["early_data"]
    assert e.verdict is Verdict.not_supported and e.connections == 2, e
    assert e.reason.endswith("max_early_data_size 16384 but did not accept 0-RTT data: PSK "
                             "selected, early_data not accepted"), e
    config = ClientConfig(versions=(TLS13,), alpn=())
    full = ClientHandshake(config, stop_after_first_flight=False)
    with open_channel(Target("127.0.0.1", srv.port), timeout=5) as channel:
        deadline = time.monotonic() + 10
        drive(full, channel, deadline)
        channel.send(full.close())
        while not full.peer_closed and (data := channel.receive(deadline)):
            full.receive(data)
    keys = full.session_keys()
    ticket = full.messages.flight.new_session_ticket
    assert keys is not None and keys.tls13 and ticket is not None
    psk = resumption_psk(keys.resumption_master_secret or b"", ticket.ticket_nonce)
    offer = replace(config, key_share_groups=(0x001D,), resume=Resumption(
        ticket=ticket.ticket, psk=psk, obfuscated_age=ticket.ticket_age_add or 0))
    again = ClientHandshake(offer, stop_after_first_flight=False)
    with open_channel(Target("127.0.0.1", srv.port), timeout=5) as channel:
        drive(again, channel, time.monotonic() + 10)
    assert again.messages.hrr is not None and not again.verification.resumed
    assert not again.handshake_complete
    assert again.incomplete_reason is not None and "PSK" in again.incomplete_reason


@pytest.mark.needs_impl("openssl")
def test_engine_abbreviated_handshake_read_only(server_cache: ServerFactory) -> None:
    """The engine's TLS 1.2 resumption in its first mode: it stops once the server's
    Finished (under the old master secret) is verified, having sent only its hello; a
    session ID the server does not know gets a full handshake (not resumed)."""
    srv = server_cache("openssl", proto="tls1_2")
    config = ClientConfig(versions=(0x0303,), alpn=(), session_ticket=False)

    def run(cfg: ClientConfig, complete: bool) -> ClientHandshake:
        engine = ClientHandshake(cfg, stop_after_first_flight=not complete)
        with open_channel(Target("127.0.0.1", srv.port), timeout=5) as channel:
            deadline = time.monotonic() + 10
            drive(engine, channel, deadline)
            if complete:
                channel.send(engine.close())
                while not engine.peer_closed and (data := channel.receive(deadline)):
                    engine.receive(data)
        return engine

    full = run(config, True)
    keys, sh = full.session_keys(), full.messages.server_hello
    assert keys is not None and not keys.tls13 and sh is not None and keys.master_secret
    session = Resumption(session_id=sh.legacy_session_id_echo,
                         master_secret=keys.master_secret)
    again = run(replace(config, resume=session), False)
    assert again.verification.resumed and again.verification.finished_verified and again.done
    assert not again.handshake_complete and again._sent_types == {HandshakeType.client_hello}
    assert not again.messages.flight.has(HandshakeType.certificate)
    unknown = run(replace(config, resume=replace(session, session_id=bytes(32))), False)
    assert not unknown.verification.resumed
    assert unknown.messages.flight.has(HandshakeType.certificate)
