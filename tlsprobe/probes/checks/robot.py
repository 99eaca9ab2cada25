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
  - all five alike: not vulnerable (inconclusive when that is silence: none answered
    before the time limit);
  - different: vulnerable; a weak oracle when the three badly formatted blocks get the same
    answer (only a correctly padded block is told apart), a strong one otherwise (as
    sslyze and robot-detect decide); timing is not used;
  - no RSA key exchange suite accepted: not applicable (inconclusive when the suite
    enumeration of a version stopped early);
  - a probe answered with bytes that are not TLS records (an HTTP reply, a record over the
    length limit): inconclusive, naming them.
A server that asks for a client certificate (a CertificateRequest in its flight; gnutls-serv
does by default) gets an empty Certificate before the ClientKeyExchange, as a client without
one sends. Its answers are about the padding only when the certificate is optional: one
complete handshake (the engine's, with the same empty Certificate) tells; when it fails the
server requires a certificate and the result is inconclusive.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from cryptography.hazmat.primitives.asymmetric import rsa

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import TLS12, ClientConfig
from tlsprobe.engine.verify import SignatureError, leaf_key
from tlsprobe.errors import NetworkError
from tlsprobe.model.check_details import RobotAnswer, RobotDetails, RobotOracle
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.driver import adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks import _early
from tlsprobe.probes.checks._handshake import handshake
from tlsprobe.probes.checks._legacy import no_legacy
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

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
    """The server's first answer to one probe, or why the probe could not be sent.
    `silent`: no answer before the time limit (no evidence either way); `odd`: bytes that
    are not TLS records (no answer to the padding either); `certificate`: the server sent a
    CertificateRequest, answered with an empty Certificate."""

    text: str
    failed: bool = False
    silent: bool = False
    odd: bool = False
    certificate: bool = False


#: the TLS 1.0-1.2 Certificate message without a certificate (RFC 5246 7.4.6): what a client
#: without one answers a CertificateRequest with
EMPTY_CERTIFICATE = bytes([11]) + (3).to_bytes(3, "big") + (0).to_bytes(3, "big")


def first_answer(reply: _early.Reply) -> Answer:
    """The server's first answer in `reply` (read until its first record)."""
    if reply.records:
        r = reply.records[0]
        if r.content_type == _early.ALERT and len(r.fragment) >= 2:
            level, desc = r.fragment[0], r.fragment[1]
            return Answer(f"alert {registry.alert_name(desc)} ({desc})"
                          f"{' (warning)' if level == 1 else ''}")
        return Answer(f"a record of type {r.content_type}")
    if reply.error:
        return Answer(reply.error, odd=True)
    if reply.reset:
        return Answer("reset")
    if reply.closed:
        return Answer("connection closed")
    return Answer("timeout", silent=True)


async def _probe(kind: str, config: ClientConfig, transport: AsyncTransport,
                 deadline: float) -> Answer:
    hs = ClientHandshake(config, annotate=False, stop_after_first_flight=True,
                         limits=check_limits())
    try:
        await adrive(hs, transport, deadline)
    except HandshakeFailure as exc:
        return Answer(f"the handshake before the probe failed: {exc}", True)
    sh = hs.messages.server_hello
    if sh is None or not hs.first_flight_done or not hs.verification.certificates:
        return Answer(hs.incomplete_reason or "no ServerHelloDone", True)
    try:
        key = leaf_key(hs.verification.certificates[0])[0]
    except SignatureError as exc:
        return Answer(str(exc), True)
    if not isinstance(key, rsa.RSAPublicKey):
        return Answer("the certificate's key is not RSA", True)
    numbers, size = key.public_numbers(), (key.key_size + 7) // 8
    m = int.from_bytes(block(kind, size, config.max_legacy), "big")
    enc = pow(m, numbers.e, numbers.n).to_bytes(size, "big")
    cke = bytes([16]) + (len(enc) + 2).to_bytes(3, "big") + len(enc).to_bytes(2, "big") + enc
    version = sh.selected_version
    # a CertificateRequest (optional client authentication) is answered as a client without
    # a certificate does: an empty Certificate before the key exchange (RFC 5246 7.4.6)
    asked = hs.verification.certificate_requested
    flight = _record(22, version, (EMPTY_CERTIFICATE if asked else b"") + cke) + \
        _record(20, version, b"\x01") + _record(22, version, FINISHED)
    await transport.send(flight)     # a failure: no probe sent (inconclusive)
    try:
        reply = await _early.read_reply(transport, deadline, lambda r: bool(r.records))
    except NetworkError as exc:
        return Answer(exc.reason, certificate=asked)
    return replace(first_answer(reply), certificate=asked)


async def _without_certificate(ctx: CheckContext, config: ClientConfig) -> str | None:
    """None when the server completes a handshake (with `config`) whose CertificateRequest
    is answered with an empty Certificate, else what it did instead."""
    got = await handshake(ctx, config, complete=True, label="empty client certificate")
    if isinstance(got, Outcome):
        return got.describe()
    if got.failure is not None or not got.engine.handshake_complete:
        return got.describe() if got.failure is not None else \
            (got.engine.incomplete_reason or "the handshake did not complete")
    return None


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


def _target(ctx: CheckContext) -> tuple[int, tuple[int, ...]] | CheckResult:
    """(version, RSA key exchange suites) to probe, or the result when there is none."""
    legacy = [v for v in ctx.spoken if 0x0301 <= v <= TLS12]
    if not legacy:
        return no_legacy(ctx, "TLS 1.3 has no RSA key exchange")
    audits = {v: ctx.report.suite_audit(v) for v in legacy}
    if any(a is None for a in audits.values()):
        return ctx.inconclusive("the audit did not enumerate the suites (ROBOT needs to "
                                "know whether RSA key exchange is accepted)")
    found = _rsa_suites(ctx)
    incomplete = [registry.version_name(v) for v, a in audits.items()
                  if a is not None and not a.complete]
    if found is None and incomplete:
        return ctx.inconclusive("no RSA key exchange suite found, but the suite enumeration "
                                f"of {', '.join(incomplete)} is incomplete")
    if found is None:
        return ctx.result(Verdict.not_applicable, "no RSA key exchange suite is accepted")
    return found


#: one round's answers, probe -> answer text (PAYLOADS order)
Round = dict[str, str]


async def _round(ctx: CheckContext, config: ClientConfig, n: int
                 ) -> tuple[Round, bool] | CheckResult:
    """Round `n` (the five probes at once): the answers and whether a client certificate
    was asked for, or the inconclusive result when a probe could not be sent or answered."""
    async def one(kind: str) -> Answer | Outcome:
        async def talk(transport: AsyncTransport, deadline: float) -> Answer:
            return await _probe(kind, config, transport, deadline)
        return await ctx.converse(talk, label=f"round {n + 1}")
    got = await asyncio.gather(*(one(kind) for kind in PAYLOADS))
    answers: Round = {}
    asked = False
    for kind, answer in zip(PAYLOADS, got):
        if isinstance(answer, Outcome) or answer.failed:
            why = answer.describe() if isinstance(answer, Outcome) else answer.text
            return ctx.inconclusive(f"the {kind} probe could not be sent: {why}")
        if answer.odd:
            return ctx.inconclusive(f"the {kind} probe got no TLS answer: {answer.text}",
                                    (f"received ({kind}): {answer.text}",))
        asked = asked or answer.certificate
        answers[kind] = answer.text
    return answers, asked


def _evidence(name: str, suites: tuple[int, ...], asked: bool, answers: Round
              ) -> tuple[str, ...]:
    offered = ", ".join(registry.suite_name(s) for s in suites[:2]) + \
        (" ..." if len(suites) > 2 else "")
    certificate = "an empty Certificate (the server sent a CertificateRequest), " \
        if asked else ""
    return ((f"sent: {name} hellos offering {offered}; after the ServerHelloDone "
             f"{certificate}a ClientKeyExchange with each of the five PKCS #1 blocks, "
             f"ChangeCipherSpec and an undecryptable Finished; {ROUNDS} rounds, "
             f"{ROUNDS * len(PAYLOADS)} connections"),
            "received: " + "; ".join(f"{k}: {v}" for k, v in answers.items()))


def oracle_of(answers: Round) -> tuple[RobotOracle | None, tuple[str, ...]]:
    """The oracle the answers show (None: all five alike) and the probes answered
    otherwise than the valid block. Weak when the three badly formatted blocks get the same
    answer (only a correctly padded block is told apart), strong otherwise."""
    if len(set(answers.values())) == 1:
        return None, ()
    bad = {answers[k] for k in ("wrong first two bytes", "00 in the wrong place",
                                "no 00 separator")}
    apart = tuple(k for k in PAYLOADS if answers[k] != answers["valid"])
    return (RobotOracle.weak if len(bad) == 1 else RobotOracle.strong), apart


async def run(ctx: CheckContext) -> CheckResult:
    target = _target(ctx)
    if isinstance(target, CheckResult):
        return target
    version, suites = target
    config = ctx.config((version,), cipher_suites_12=suites)
    rounds: list[Round] = []
    asked_certificate = False
    for n in range(ROUNDS):
        got = await _round(ctx, config, n)
        if isinstance(got, CheckResult):
            return got
        rounds.append(got[0])
        asked_certificate = asked_certificate or got[1]
    answers = rounds[0]
    name = registry.version_name(version)
    evidence = _evidence(name, suites, asked_certificate, answers)
    if any(r != answers for r in rounds[1:]):
        changed = [k for k in PAYLOADS if any(r[k] != answers[k] for r in rounds)]
        return ctx.inconclusive(f"the answers changed between rounds for {', '.join(changed)} "
                                "(noise: no verdict)", evidence)
    if asked_certificate:
        # the answers are about the padding only if the server goes on without a client
        # certificate: a server that requires one refuses every probe alike at the
        # Certificate, before it decrypts anything
        refused = await _without_certificate(ctx, config)
        if refused is not None:
            return ctx.inconclusive("the server requests a client certificate and requires "
                                    "one: a complete handshake answering its "
                                    f"CertificateRequest with an empty Certificate failed "
                                    f"({refused}), so the probes' answers need not depend "
                                    "on the padding", evidence)
        optional = "the client certificate is optional: a complete handshake with an " \
            "empty Certificate succeeded"
        evidence += (optional,)
    return _verdict(ctx, answers, evidence, name, asked_certificate)


def _verdict(ctx: CheckContext, answers: Round, evidence: tuple[str, ...], name: str,
             asked_certificate: bool) -> CheckResult:
    """The verdict on answers that repeated in every round (see the module docstring)."""
    oracle, apart = oracle_of(answers)
    details = RobotDetails(oracle, apart, tuple(RobotAnswer(k, v) for k, v in answers.items()),
                           name, ROUNDS, asked_certificate)
    if oracle is None:
        if answers["valid"] == "timeout":
            return ctx.inconclusive("none of the five ClientKeyExchange probes was answered "
                                    "before the time limit, in either round: no answer to "
                                    "compare", evidence)
        return ctx.result(Verdict.not_vulnerable, "the server answered the five "
                          f"ClientKeyExchange probes alike ({answers['valid']}) in both "
                          "rounds: no padding oracle", evidence, details=details)
    first = {v: k for k, v in reversed(answers.items())}     # one probe per distinct answer
    return ctx.result(Verdict.vulnerable, f"{oracle} oracle: the server's answer depends on "
                      "the PKCS #1 padding of the RSA pre-master secret, the same in both "
                      "rounds (" + "; ".join(f"{k}: {v}" for v, k in first.items()) + ")",
                      evidence, severity=Severity.high if oracle is RobotOracle.strong
                      else Severity.medium, details=details)


CHECK = ActiveCheck("robot", "ROBOT (Bleichenbacher oracle on RSA key exchange)", run,
                    RobotDetails)
