"""The group audit against a server whose key share for one group is invalid: it picks
secp256r1 (before x25519) whenever the hello carries a share for it, but sends a secp256r1
point that is not on the curve; x25519 gets a correct handshake. It refuses share-less
hellos (no HelloRetryRequest), so the TLS 1.3 audit enumerates with real key shares: the
one route where tlsprobe computes the shared secret and so knows the share is unusable.
No client completes a handshake in secp256r1 with it: the group is not "supported" (a fact
the report would state), it is not established, with the reason."""
from __future__ import annotations

import json

from . import scenarios_negotiation as sn
from .catalog import FATAL, HANDSHAKE_FAILURE, HOLD
from .runner import run_tlsprobe
from .server import Conn, HostileServer
from .tls import (
    SECP256R1,
    TLS13,
    TLS13_SUITE,
    X25519,
    Tls13Server,
    alert,
    client_share,
    handshake_records,
    server_hello_13,
)

#: (1, 1): an uncompressed secp256r1 point that is not on the curve
OFF_CURVE_P256 = b"\x04" + (1).to_bytes(32, "big") + (1).to_bytes(32, "big")
SERVER_ORDER = (SECP256R1, X25519)


async def off_curve_secp256r1(conn: Conn) -> None:
    ch = await conn.client_hello()
    versions = ch.supported_versions or [ch.legacy_version]
    shared = [g for g in SERVER_ORDER
              if g in ch.supported_groups and client_share(ch, g) is not None]
    if TLS13 not in versions or TLS13_SUITE not in ch.cipher_suites or not shared:
        await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
        return
    if shared[0] == SECP256R1:
        await conn.send(handshake_records(server_hello_13(ch, group=SECP256R1,
                                                          share=OFF_CURVE_P256)))
    else:
        tls = Tls13Server(ch, conn.hello_raw[-1], group=X25519)
        await conn.send(tls.hello_and_flight(tls.flight()))
    await conn.hold(HOLD)


def test_a_group_whose_share_is_invalid_is_not_supported(
        hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(off_curve_secp256r1)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--checks", "groups", "--json",
                       "--no-progress", "--timeout", "2", "--retries", "0", hard_timeout=120.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr[-1500:]}"
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, context
    report = json.loads(out.stdout)
    (audit,) = [g for g in report["groups"] if g["version"]["name"] == "TLS 1.3"]
    assert audit["method"] == "key_share", audit
    names = {key: [g["name"] for g in audit[key]] for key in ("supported", "inconclusive")}
    assert names["supported"] == ["x25519"], names
    assert "secp256r1" in names["inconclusive"], names
    assert any("secp256r1" in note and "not on the curve" in note
               for note in audit["notes"]), audit["notes"]


def test_post_quantum_verdicts_do_not_rest_on_an_invalid_share(
        hostile_server: HostileServer) -> None:
    """X25519MLKEM768 chosen with a 1000-byte share (1120 expected): the capability check
    said "yes: the server completed the key exchange with a real share (its share was
    valid)", and the browser-like check "yes"; neither is so, no client can finish."""
    listener = hostile_server.serve(sn.hybrid_share_wrong_size)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--checks", "pq", "--json",
                       "--no-progress", "--timeout", "2", "--retries", "0", hard_timeout=120.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr[-1500:]}"
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, context
    verdicts = {v["check"]: v for v in json.loads(out.stdout)["post_quantum"]}
    for check in ("capability", "browser_like"):
        assert verdicts[check]["verdict"] != "yes", verdicts[check]
        assert "key share is invalid" in verdicts[check]["detail"], verdicts[check]
        assert "1000 bytes" in verdicts[check]["detail"], verdicts[check]


def test_a_tls12_group_never_sent_is_not_named(hostile_server: HostileServer) -> None:
    """A TLS 1.2 ServerHello, then no ServerKeyExchange (silence, a close): no group was read, so
    none is named; the note said "the server chose 0x0000, not offered"."""
    from .test_suite_kx_hostile import hello_then_silence
    listener = hostile_server.serve(hello_then_silence)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--checks", "groups", "--json",
                       "--no-progress", "--timeout", "1", "--retries", "0", hard_timeout=120.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr[-1500:]}"
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, context
    (audit,) = [g for g in json.loads(out.stdout)["groups"]
                if g["version"]["name"] == "TLS 1.2"]
    assert audit["supported"] == [] and audit["inconclusive"], audit
    notes = " ".join(audit["notes"])
    assert "0x0000" not in notes and "no group read" in notes, audit["notes"]
