"""ROBOT (Return Of Bleichenbacher's Oracle Threat, CVE-2017-13099 and its family): does the
server's answer to an RSA ClientKeyExchange depend on the PKCS #1 v1.5 padding it finds?

A server that answers a badly padded pre-master secret differently from a well padded one
lets an attacker decrypt a recorded RSA key exchange (or sign with the server's key) one
oracle query at a time (Bleichenbacher, 1998). The check follows the published five-probe
method (robotattack.org's robot-detect, sslyze's robot plugin, testssl.sh run_robot): on a
TLS 1.0-1.2 connection offering only the RSA key exchange suites the audit found accepted
(GCM first, as sslyze does), after the server's ServerHelloDone it sends a
ClientKeyExchange encrypted with the certificate's key, then ChangeCipherSpec and a
Finished record that cannot decrypt, and notes the server's first answer (an alert and its
description, a close, a reset, silence). The five blocks (sslyze's _robot_tester.py):
  valid                   00 02 padding 00 version pre-master-secret
  wrong first two bytes   41 17 padding 00 version pre-master-secret
  00 in the wrong place   00 02 padding 11 pre-master-secret 00 11
  no 00 separator         00 02 padding 11 11 11 pre-master-secret
  wrong version           00 02 padding 00 02 02 pre-master-secret
A patched server answers all five alike (the Finished fails in every case). Two rounds
(ten connections): the answers must repeat, or the result is inconclusive (noise).
  - all five alike: not vulnerable;
  - different: vulnerable; a weak oracle when the three badly formatted blocks get the same
    answer (only a correctly padded block is told apart), a strong one otherwise (as
    sslyze and robot-detect decide); timing is not used;
  - no RSA key exchange suite accepted: not applicable (inconclusive when the suite
    enumeration of a version stopped early).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig, TLS12
from tlsprobe.errors import NetworkError
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.pubkey import public_key
from tlsprobe.net.driver import adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.probes.checks.renegotiation import no_legacy
from tlsprobe.probes.outcome import Outcome

PMS = bytes.fromhex("aa112233445566778899112233445566778899112233445566778899112233445566"
                    "778899112233445566778899")
PAYLOADS = ("valid", "wrong first two bytes", "00 in the wrong place", "no 00 separator",
            "wrong version")
ROUNDS = 2
FINISHED = bytes(range(0x30, 0x80))      # 80 bytes no key of ours decrypts: a failed Finished


def block(kind: str, size: int, version: int) -> bytes:
    """The PKCS #1 v1.5 block of probe `kind` for a modulus of `size` bytes."""
    pad = (b"\xab\xcd" * size)[:size - 48 - 3]
    ver = version.to_bytes(2, "big")
    return {"valid": b"\x00\x02" + pad + b"\x00" + ver + PMS,
            "wrong first two bytes": b"\x41\x17" + pad + b"\x00" + ver + PMS,
            "00 in the wrong place": b"\x00\x02" + pad + b"\x11" + PMS + b"\x00\x11",
            "no 00 separator": b"\x00\x02" + pad + b"\x11\x11\x11" + PMS,
            "wrong version": b"\x00\x02" + pad + b"\x00\x02\x02" + PMS}[kind]


def _record(ctype: int, version: int, body: bytes) -> bytes:
    return bytes([ctype]) + version.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body


@dataclass(frozen=True)
class Answer:
    """The server's first answer to one probe, or why the probe could not be sent."""

    text: str
    failed: bool = False


async def _probe(kind: str, config: ClientConfig, transport: AsyncTransport,
                 deadline: float) -> Answer:
    hs = ClientHandshake(config, annotate=False, stop_after_first_flight=True)
    try:
        await adrive(hs, transport, deadline)
    except HandshakeFailure as exc:
        return Answer(f"the handshake before the probe failed: {exc}", True)
    sh = hs.server_hello
    if sh is None or not hs.first_flight_done or not hs.certificates:
        return Answer(hs.incomplete_reason or "no ServerHelloDone", True)
    if hs.certificate_requested:
        # without a client certificate the server refuses every probe alike (sslyze stops
        # here too): no answer to compare
        return Answer("the server requests a client certificate", True)
    key = public_key(x509.load_der_x509_certificate(hs.certificates[0]))
    if not isinstance(key, rsa.RSAPublicKey):
        return Answer("the certificate's key is not RSA", True)
    numbers, size = key.public_numbers(), (key.key_size + 7) // 8
    m = int.from_bytes(block(kind, size, config.max_legacy), "big")
    enc = pow(m, numbers.e, numbers.n).to_bytes(size, "big")
    cke = bytes([16]) + (len(enc) + 2).to_bytes(3, "big") + len(enc).to_bytes(2, "big") + enc
    version = sh.selected_version
    await transport.send(_record(22, version, cke) + _record(20, version, b"\x01") +
                         _record(22, version, FINISHED))
    try:
        data = await transport.receive(deadline)
        while 0 < len(data) < 7 and data[0] == 21:
            more = await transport.receive(deadline)
            if not more:
                break
            data += more
    except NetworkError as exc:
        return Answer(exc.cause if exc.cause in ("reset", "timeout") else exc.reason)
    if not data:
        return Answer("connection closed")
    if data[0] == 21 and len(data) >= 7:
        return Answer(f"alert {registry.alert_name(data[6])} ({data[6]})"
                      f"{' (warning)' if data[5] == 1 else ''}")
    return Answer(f"a record of type {data[0]}")


def _rsa_suites(ctx: CheckContext) -> tuple[int, tuple[int, ...]] | None:
    """(version, accepted RSA key exchange suites, GCM first) for the highest TLS 1.0-1.2
    version that has any."""
    for version in sorted((v for v in ctx.spoken if 0x0301 <= v <= TLS12), reverse=True):
        audit = ctx.report.suite_audit(version)
        suites = [c.id for c in (audit.supported if audit else ())
                  if (s := registry.cipher_suite(c.id)) is not None and s.kx == "RSA"]
        if suites:
            suites.sort(key=lambda c: "GCM" not in registry.suite_name(c))
            return version, tuple(suites)
    return None


async def run(ctx: CheckContext) -> CheckResult:
    legacy = [v for v in ctx.spoken if 0x0301 <= v <= TLS12]
    if not legacy:
        return no_legacy(ctx, "TLS 1.3 has no RSA key exchange")
    if any(ctx.report.suite_audit(v) is None for v in legacy):
        return ctx.inconclusive("the audit did not enumerate the suites (ROBOT needs to "
                                "know whether RSA key exchange is accepted)")
    found = _rsa_suites(ctx)
    incomplete = [registry.version_name(v) for v in legacy
                  if not getattr(ctx.report.suite_audit(v), "complete", True)]
    if found is None and incomplete:
        return ctx.inconclusive("no RSA key exchange suite found, but the suite enumeration "
                                f"of {', '.join(incomplete)} is incomplete")
    if found is None:
        return ctx.result(Verdict.not_applicable, "no RSA key exchange suite is accepted")
    version, suites = found
    config = ctx.config((version,), cipher_suites_12=suites)
    name = registry.version_name(version)
    rounds: list[dict[str, str]] = []
    for n in range(ROUNDS):
        async def one(kind: str) -> Answer | Outcome:
            async def talk(transport: AsyncTransport, deadline: float) -> Answer:
                return await _probe(kind, config, transport, deadline)
            return await ctx.converse(talk, label=f"round {n + 1}")
        got = await asyncio.gather(*(one(kind) for kind in PAYLOADS))
        for kind, answer in zip(PAYLOADS, got):
            if isinstance(answer, Outcome) or answer.failed:
                why = answer.describe() if isinstance(answer, Outcome) else answer.text
                return ctx.inconclusive(f"the {kind} probe could not be sent: {why}")
        rounds.append({k: a.text for k, a in zip(PAYLOADS, got)
                       if isinstance(a, Answer)})
    offered = ", ".join(registry.suite_name(s) for s in suites[:2]) + \
        (" ..." if len(suites) > 2 else "")
    evidence = (f"sent: {name} hellos offering {offered}; after the ServerHelloDone a "
                "ClientKeyExchange with each of the five PKCS #1 blocks, ChangeCipherSpec and "
                f"an undecryptable Finished; {ROUNDS} rounds, {ROUNDS * len(PAYLOADS)} "
                "connections",
                "received: " + "; ".join(f"{k}: {v}" for k, v in rounds[0].items()))
    if any(r != rounds[0] for r in rounds[1:]):
        changed = [k for k in PAYLOADS if any(r[k] != rounds[0][k] for r in rounds)]
        return ctx.inconclusive(f"the answers changed between rounds for {', '.join(changed)} "
                                "(noise: no verdict)", evidence)
    answers = rounds[0]
    if len(set(answers.values())) == 1:
        return ctx.result(Verdict.not_vulnerable, "the server answered the five "
                          f"ClientKeyExchange probes alike ({answers['valid']}) in both "
                          "rounds: no padding oracle", evidence)
    bad = {answers[k] for k in ("wrong first two bytes", "00 in the wrong place",
                                "no 00 separator")}
    strength = "weak" if len(bad) == 1 else "strong"
    first = {v: k for k, v in reversed(answers.items())}     # one probe per distinct answer
    return ctx.result(Verdict.vulnerable, f"{strength} oracle: the server's answer depends on "
                      "the PKCS #1 padding of the RSA pre-master secret, the same in both "
                      "rounds (" + "; ".join(f"{k}: {v}" for v, k in first.items()) + ")",
                      evidence, code="check.robot",
                      severity="high" if strength == "strong" else "medium")


CHECK = ActiveCheck("robot", "ROBOT (Bleichenbacher oracle on RSA key exchange)", run)
