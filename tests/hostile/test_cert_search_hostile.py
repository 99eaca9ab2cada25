"""The cert phase's search for other certificates (`scan --checks cert`) against a scripted
server that no packaged one imitates: it answers every TLS 1.2 hello offering an ECDHE_ECDSA
suite with its one ECDSA certificate, signing with ecdsa_secp256r1_sha256 whatever the
hello's signature_algorithms (a server that does not choose its certificate by them). The
search's hello asking for an Ed25519 or Ed448 certificate (the ECDSA suites with the EdDSA
schemes only) is answered with the ECDSA one again: whether the server has one is not
established, said, never "no other certificate"; the other suites' question is answered."""
from __future__ import annotations

import json

from .catalog import FATAL, HANDSHAKE_FAILURE, HOLD
from .runner import run_tlsprobe
from .server import Conn, HostileServer
from .tls import TLS12_SUITE, alert, handshake_records, tls12_flight


async def ecdsa_whatever_the_schemes(conn: Conn) -> None:
    ch = await conn.client_hello()
    versions = ch.supported_versions or [ch.legacy_version]
    if 0x0303 not in versions or TLS12_SUITE not in ch.cipher_suites:
        await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
        return
    await conn.send(handshake_records(*tls12_flight(ch)))
    await conn.hold(HOLD)




def test_a_server_not_choosing_by_signature_schemes_leaves_eddsa_not_established(
        hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(ecdsa_whatever_the_schemes)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--checks", "cert", "--json",
                       "--no-progress", "--timeout", "2", "--retries", "0", "--no-verify",
                       hard_timeout=120.0)
    assert out.returncode in (0, 1) and out.stderr == "", out.stderr
    r = json.loads(out.stdout)
    assert r["certificates"] and r["other_certificates"] == []
    note = r["other_certificates_note"]
    assert note == (
        "TLS 1.2 hello with ECDHE_ECDSA suites, signature schemes of Ed25519 and Ed448 keys "
        "only was answered with the ECDSA certificate again: whether the server has Ed25519 "
        "or Ed448 certificates is not established"), note
    assert [f["message"] for f in r["findings"] if f["code"] == "audit.inconclusive"] == [
        "certificates of other key types not established: " + note]
    # two hellos: the RSA and DSS suites (refused), the ECDSA suites with EdDSA schemes
    assert r["connections"]["certificate key types"] == 2
