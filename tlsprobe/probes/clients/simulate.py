"""Client simulation: each profile's hello, made fresh (probes/clients/fresh.py), sent to one
target through the scan's scheduler (per-host cap, pacing, STARTTLS, connection counts
under the phase "clients"), and what the server answered read as that client would.

One connection per profile (a HelloRetryRequest is answered on it by the same client's
second hello); a bare close before any answer is asked again once with a new hello (a flaky
path drops connections that way too). The engine runs with a ClientConfig derived from the
profile's hello, so its checks of the answer are those of the offer actually sent; it stops
after the server's first flight (TLS 1.3: decrypted, for the CertificateVerify's scheme and
the ALPN of EncryptedExtensions; TLS 1.2: the ServerKeyExchange's scheme).
Verdicts (model/clients.py, docs/CLIENTS.md): `connected` once the server's ServerHello
chose what the client offered; `failed` when it refused (an alert or a close, twice) or chose
a version the client does not offer, the `reason` established by the audit where one ran
(probes/clients/reasons.py), else "refused" with the alert; `inconclusive` for a network
failure or a group whose share could not be made here. A client's key size rules
(probes/clients/keyrules.py) fail it for a DHE prime, or a chain key, under its minimum. A
server whose flight asks for a
client certificate gets a second connection finishing the handshake without one, as the
client (which has none) would: its alert then fails the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from tlsprobe import registry
from tlsprobe.engine.chain import REASONS, verify_with_store
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.common import message_label
from tlsprobe.engine.facts import negotiated_alpn
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.clients import (
    ClientProfile,
    ClientSimulation,
    FailureReason,
    SimStatus,
    TrustStore,
)
from tlsprobe.net.driver import aclose, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import STOP_VERIFY, Outcome, finished, outcome_of
from tlsprobe.probes.audit.scheduler import TargetRunner
from tlsprobe.probes.clients.fresh import (
    FreshHello,
    ProfileError,
    derived_config,
    fresh_hello,
    recorded_hello,
    retry_hello,
)
from tlsprobe.probes.clients.keyrules import dh_refusal, weak_chain_key
from tlsprobe.probes.clients.profiles import fingerprints
from tlsprobe.probes.clients.reasons import established_reason, reset_reason
from tlsprobe.registry import HandshakeType
from tlsprobe.wire.extensions import COMPRESS_CERTIFICATE
from tlsprobe.wire.handshake import frame

__all__ = ["PHASE", "TrustChecker", "simulate_clients", "simulate_one"]

PHASE = "clients"
#: clients without a TLS answer (refused, reset, timed out, not TLS), none with one, after
#: which the other profiles are not sent to that target
UNREACHED_LIMIT = 3
#: the stores whose verdict tlsprobe can state: the chain is checked against the system
#: bundle (or --cafile), as the audit's cert phase does, which is these clients' store
CHECKABLE_STORES = (TrustStore.system,)


#: the conversation of one simulated connection (Scheduler.converse's talk)
Talk = Callable[[AsyncTransport, float], Awaitable["_Talked"]]


@dataclass
class _Talked:
    """One simulated connection: the engine, the fresh hello and how it ended."""

    hs: Handshake
    fresh: FreshHello
    failure: HandshakeFailure | None = None
    late: str = ""   # a network failure after the ServerHello


async def simulate_clients(runner: TargetRunner, profiles: tuple[ClientProfile, ...],
                           report: AuditReport | None = None,
                           checker: TrustChecker | None = None
                           ) -> tuple[ClientSimulation, ...]:
    """Every profile against the runner's target (at most the scheduler's per-host cap at
    once), in the profiles' order; `report`: the audit of the same target, whose phases
    give the failures their reasons; `checker`: the trust check of the chains got (None:
    not checked). Once UNREACHED_LIMIT clients got no TLS answer and none did, the rest are
    not sent (inconclusive, saying so): the target is unreachable, and each of them would
    wait its own timeouts."""
    gate = asyncio.Semaphore(max(1, runner.scheduler.per_host))

    async def one(profile: ClientProfile) -> ClientSimulation:
        async with gate:
            if runner.conclusive or runner.unreached < UNREACHED_LIMIT:
                return await simulate_one(runner, profile, report, checker)
        first = runner.first_unsure
        why = first.reason or first.describe() if first is not None else "no answer"
        return ClientSimulation(profile.id, profile.label, SimStatus.inconclusive,
                                detail=f"not sent: the first {runner.unreached} clients got "
                                f"no TLS answer from the server ({why})")

    return tuple(await asyncio.gather(*(one(p) for p in profiles)))


async def simulate_one(runner: TargetRunner, profile: ClientProfile,
                       report: AuditReport | None = None,
                       checker: TrustChecker | None = None) -> ClientSimulation:
    """One profile's simulation (never raises for what the server or network did)."""
    base = ClientSimulation(profile.id, profile.label, SimStatus.inconclusive)
    sni = runner.server_name
    try:
        config = derived_config(profile.hello, sni)
        fresh_hello(profile.hello, sni)   # a profile that cannot be made fresh: said once
    except ProfileError as exc:
        return replace(base, detail=f"profile not usable: {exc}")

    def talker(complete: bool) -> Talk:
        async def talk(transport: AsyncTransport, deadline: float) -> _Talked:
            fresh = fresh_hello(profile.hello, sni)
            fresh.built.record_version = profile.record_version   # as recorded
            hs = ClientHandshake(config, annotate=False, stop_after_first_flight=not complete,
                                 read_server_flight=True, prebuilt=fresh.built,
                                 retry=lambda group, cookie: retry_hello(fresh, group, cookie))
            got = _Talked(hs, fresh)
            try:
                await adrive(hs, transport, deadline,
                             until=None if complete else lambda h: finished(h, STOP_VERIFY))
                if complete:
                    await _answer_to_finished(hs, transport, deadline)
            except HandshakeFailure as exc:
                got.failure = exc
            except NetworkError as exc:
                if hs.messages.server_hello is None:
                    raise
                got.late = exc.reason
            return got
        return talk

    got = await _connect(runner, talker(False))
    if isinstance(got, _Talked) and _bare_close(got):
        got = await _connect(runner, talker(False))
    if isinstance(got, Outcome):
        runner.seen_unreached(got)
        explained = reset_reason(profile, report) if got.kind == FailureKind.NETWORK else None
        if explained is not None:   # a reset the audit shows to be the hello's size
            return replace(base, status=SimStatus.failed, reason=explained[0],
                           detail=f"{got.reason or got.describe()}; {explained[1]}")
        return replace(base, detail=got.reason or got.describe())
    runner.seen_tls(got.failure)
    ja4 = fingerprints(frame(1, got.hs.messages.hellos[0].serialize()))[1]
    judged = _judged(replace(base, ja4_sent=ja4), got, profile, report, checker)
    if judged.status == SimStatus.connected and got.hs.verification.certificate_requested:
        return _without_certificate(judged, await _connect(runner, talker(True)))
    return judged


async def _connect(runner: TargetRunner, talk: Talk) -> _Talked | Outcome:
    """One simulated connection through the scheduler; a network failure (reset, timeout)
    on a target reached before is asked again, up to --retries times with the scan's
    backoff (a target never reached, or refusing connections, is not; nor one whose
    connections got no TLS answer UNREACHED_LIMIT times and never one: a silent server
    would hold every profile for all its retries)."""
    scheduler = runner.scheduler
    got: _Talked | Outcome = await scheduler.converse(runner.target, PHASE, talk)
    attempt = 0
    while isinstance(got, Outcome):   # no TLS answer
        runner.unreached += 1
        attempt += 1
        if attempt > scheduler.retries or not (
                got.kind == FailureKind.NETWORK and runner.target.display in scheduler.addresses
                and (runner.conclusive or runner.unreached < UNREACHED_LIMIT)):
            break
        scheduler.retried[runner.target.display] += 1
        await scheduler.pacing.back_off(scheduler.backoff, attempt)
        got = await scheduler.converse(runner.target, PHASE, talk)
    return got


#: how long the server's answer to the client's Finished (or to its close_notify after
#: it) is awaited: a server that accepted may well say nothing until it gets a request
ANSWER_WAIT = 2.0


async def _answer_to_finished(hs: ClientHandshake, transport: AsyncTransport,
                              deadline: float) -> None:
    """After the client's last flight: close_notify, then read until the server closes, goes
    quiet (ANSWER_WAIT) or sends an alert (which raises HandshakeFailure: TLS 1.3's
    certificate_required comes after the client's Finished)."""
    if hs.handshake_complete:
        await aclose(hs, transport, min(deadline, asyncio.get_running_loop().time()
                                        + ANSWER_WAIT))


def _without_certificate(judged: ClientSimulation, got: _Talked | Outcome) -> ClientSimulation:
    """A server whose flight held a CertificateRequest: the first flight does not show
    whether it goes on without a certificate (a server for which it is optional sends the
    same); `got` is a second connection completing the handshake as the client, which has
    none to send, would (an empty Certificate, then its Finished)."""
    asked = "the server asked for a client certificate"
    if isinstance(got, Outcome):
        return replace(judged, status=SimStatus.inconclusive, detail=(
            f"{asked}; the connection finishing the handshake without one failed "
            f"({got.reason or got.describe()}): whether it goes on is not established"))
    failure = got.failure
    if failure is not None and failure.kind == FailureKind.ALERT:
        # the engine's message names the CertificateRequest left unanswered
        return replace(judged, status=SimStatus.failed, reason=FailureReason.refused,
                       detail=f"{failure}")
    if failure is None and got.hs.handshake_complete:
        return replace(judged, detail="; ".join(
            n for n in (judged.detail, f"{asked} and went on without one") if n))
    why = failure or got.late or got.hs.incomplete_reason or "no answer"
    return replace(judged, status=SimStatus.inconclusive, detail=(
        f"{asked}; tlsprobe could not finish the handshake without one ({why}): whether "
        "the server goes on without one is not established"))


def _bare_close(got: _Talked) -> bool:
    f = got.failure
    return f is not None and f.kind == FailureKind.CLOSED and \
        got.hs.messages.server_hello is None and got.hs.messages.hrr is None


def _judged(base: ClientSimulation, got: _Talked, profile: ClientProfile,
            report: AuditReport | None, checker: TrustChecker | None) -> ClientSimulation:
    hs, failure = got.hs, got.failure
    sh = hs.messages.server_hello
    hrr = hs.messages.hrr is not None
    if sh is None:
        if failure is None:
            return replace(base, hello_retry=hrr, detail="no ServerHello")
        if failure.kind not in (FailureKind.ALERT, FailureKind.CLOSED) or hrr:
            return replace(base, hello_retry=hrr, detail=f"{failure}")
        reason, evidence = established_reason(profile, report)
        return replace(base, status=SimStatus.failed, reason=reason,
                       detail=f"{failure}" + (f"; {evidence}" if evidence else ""))
    config = hs.config
    if sh.selected_version not in config.versions:
        return replace(base, status=SimStatus.failed, reason=FailureReason.no_shared_version,
                       version=sh.selected_version,
                       detail=f"the server chose {registry.version_name(sh.selected_version)}, "
                       "which the client does not offer")
    out = outcome_of(hs)
    refused = _refused_answer(hs, failure, profile)
    if refused is not None:
        return replace(base, status=SimStatus.failed, reason=refused[0], detail=refused[1],
                       version=out.version, cipher_suite=out.cipher_suite, group=out.group,
                       dh_bits=out.dh_bits, hello_retry=hrr,
                       signature_scheme=out.signature_scheme,
                       post_quantum=_post_quantum(out.group))
    if failure is not None and _compressed_certificate(failure, profile):
        # the client offered certificate compression and the server used it: the answer is
        # the client's own offer; tlsprobe cannot decompress (brotli, zstd), so the
        # certificate, its signature and trust stay unknown
        return replace(base, status=SimStatus.connected, version=out.version,
                       cipher_suite=out.cipher_suite, group=out.group, dh_bits=out.dh_bits,
                       hello_retry=hrr, alpn=negotiated_alpn(hs),
                       post_quantum=_post_quantum(out.group),
                       detail="the server sent its certificate compressed (RFC 8879), as "
                       "this client offered; tlsprobe cannot read it: the signature scheme "
                       "and trust are not established")
    if failure is not None and failure.kind != FailureKind.CLOSED:
        # the engine refused the flight: a rule of the offer sent, or something tlsprobe
        # cannot read: whether the client accepts it is open
        return replace(base, version=out.version, cipher_suite=out.cipher_suite,
                       group=out.group, dh_bits=out.dh_bits, hello_retry=hrr,
                       post_quantum=_post_quantum(out.group),
                       detail=f"tlsprobe could not follow the server's flight ({failure}): "
                       "whether this client accepts it is not established")
    cut = str(failure) if failure is not None else got.late
    if cut:
        # the server closed or reset the connection inside its first flight: what its
        # ServerHello chose is known, a first flight the client accepts is not
        return replace(base, version=out.version, cipher_suite=out.cipher_suite,
                       group=out.group, dh_bits=out.dh_bits, hello_retry=hrr,
                       post_quantum=_post_quantum(out.group),
                       detail=f"after its ServerHello: {cut}: whether this client connects "
                       "is not established")
    chosen = sh.key_share[0] if sh.key_share is not None else None
    if hs.incomplete_reason and chosen is not None and chosen not in hs.verification.share_groups:
        # a group whose share was random bytes (first hello or after an HRR): the client
        # could go on, tlsprobe cannot; what it chose is known, the rest is not
        return replace(base, version=out.version, cipher_suite=out.cipher_suite,
                       group=out.group, hello_retry=hrr, post_quantum=_post_quantum(chosen),
                       detail=f"the server chose {registry.group_label(chosen)}, whose "
                       f"share tlsprobe cannot make ({hs.incomplete_reason})")
    notes = [hs.incomplete_reason] if hs.incomplete_reason else []
    trusted, trust_note = _trust(profile, out.certificates, checker)
    # the chain is verified before the ServerKeyExchange is read (OpenSSL's order)
    fails = FailureReason.certificate_not_trusted if trusted is False else None
    dh_rule = dh_refusal(profile, out.dh_bits) if fails is None else None
    if dh_rule is not None:
        fails, notes = dh_rule[0], notes + [dh_rule[1]]
    return replace(base, status=SimStatus.connected if fails is None else SimStatus.failed,
                   reason=fails,
                   version=out.version,
                   cipher_suite=out.cipher_suite, group=out.group, dh_bits=out.dh_bits,
                   hello_retry=hrr, alpn=negotiated_alpn(hs),
                   signature_scheme=out.signature_scheme, trusted=trusted,
                   post_quantum=_post_quantum(out.group),
                   detail="; ".join(notes + ([trust_note] if trust_note else [])))


#: the SHA-1 signature schemes (RFC 8446 B.3.1.3 legacy): what TLS 1.0 and 1.1 sign with
SHA1_SCHEMES = frozenset({0x0201, 0x0202, 0x0203})


def _refused_answer(hs: Handshake, failure: HandshakeFailure | None,
                    profile: ClientProfile) -> tuple[FailureReason, str] | None:
    """Why the handshake fails after the ServerHello, where that is established: the
    server aborted (its alert: refused), or it signed a TLS 1.0/1.1 key exchange (MD5+SHA-1
    or SHA-1) for a client whose signature_algorithms lists no SHA-1 scheme (OpenSSL 3 at
    security level 1 and above refuses it so, "legacy sigalg disallowed"). None: the answer
    stands, or what went wrong is the engine's (`_judged` makes that inconclusive)."""
    if failure is not None and failure.kind == FailureKind.ALERT:
        return FailureReason.refused, f"after its ServerHello: {failure}"
    sh = hs.messages.server_hello
    ske = hs.messages.flight.server_key_exchange
    if sh is None or ske is None or ske.signature is None or sh.selected_version >= 0x0303:
        return None
    offered = recorded_hello(profile.hello).signature_algorithms
    if not offered or SHA1_SCHEMES & set(offered):
        return None
    return FailureReason.no_shared_signature, (
        f"the server signs its {registry.version_name(sh.selected_version)} key exchange "
        "with MD5+SHA-1 or SHA-1, and the client's signature_algorithms lists no SHA-1 "
        "scheme (it refuses such signatures)")


def _compressed_certificate(failure: HandshakeFailure, profile: ClientProfile) -> bool:
    """The engine stopped at a CompressedCertificate the client offered (compress_certificate,
    RFC 8879), which it cannot read."""
    label = message_label(HandshakeType.compressed_certificate)
    return label in str(failure) and \
        recorded_hello(profile.hello).extension(COMPRESS_CERTIFICATE) is not None


def _post_quantum(group: int | None) -> bool:
    info = registry.group(group) if group is not None else None
    return info is not None and info.kind in ("hybrid", "mlkem")


@dataclass
class TrustChecker:
    """The chain a simulated connection got, checked against the system bundle (or
    `cafile`, --cafile) and `hostname` with engine.chain as the audit's cert phase does;
    each distinct chain once. `verify` False (--no-verify): nothing is checked."""

    hostname: str
    cafile: str | None = None
    verify: bool = True
    seen: dict[tuple[bytes, ...], tuple[bool | None, str]] = field(default_factory=dict)

    def __call__(self, chain: tuple[bytes, ...]) -> tuple[bool | None, str]:
        """(trusted, why not): None when not checked (no chain, --no-verify, no store)."""
        if not self.verify or not chain:
            return None, ""
        if chain not in self.seen:
            # key sizes are each client's own rule (keyrules.py), not OpenSSL's level 2
            path, result = verify_with_store(list(chain), self.hostname, self.cafile,
                                             key_sizes=False)
            if isinstance(result, str) or not result.established:
                self.seen[chain] = None, ""
            elif result.ok:
                self.seen[chain] = True, ""
            else:
                why = REASONS.get(result.code, result.reason)
                self.seen[chain] = False, f"certificate not trusted by {path or 'the system store'}: {why}"
        return self.seen[chain]


def _trust(profile: ClientProfile, chain: tuple[bytes, ...],
           checker: TrustChecker | None) -> tuple[bool | None, str]:
    """Whether the client's store trusts the chain: checked for a client of the system
    store (the store tlsprobe checks against); None (not checked) for any other store. A
    chain the store trusts (or one no store was found for) with a key under the client's
    minimum (keyrules.py) is not trusted: the client's verification refuses it."""
    if profile.trust_store not in CHECKABLE_STORES or checker is None:
        return None, ""
    trusted, why = checker(chain)
    weak = weak_chain_key(profile, chain) if checker.verify and trusted is not False else None
    return (False, weak) if weak is not None else (trusted, why)
