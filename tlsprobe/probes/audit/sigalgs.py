"""Signature schemes the server signs its key exchange with, per version, by elimination.

TLS 1.2: only (EC)DHE suites are offered, so the ServerKeyExchange carries the scheme the
server picked from signature_algorithms. TLS 1.3: the scheme is in the CertificateVerify,
which is encrypted; it is established only when the engine completes the handshake far
enough to decrypt it, and otherwise reported as not established, with the reason.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.model.audit import ORDER_UNKNOWN, SigalgAudit
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.vocab import SigalgStatus
from tlsprobe.probes.audit.elimination import Elimination
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_VERIFY,
    Outcome,
    TargetRunner,
    broad_sigalgs,
)

COMMON_SHARES = (0x001D, 0x0017)
NOT_DECRYPTED = ("the TLS 1.3 CertificateVerify is encrypted and the engine did not decrypt "
                 "the server's flight, so the signature scheme could not be read")


def _pfs_suites() -> tuple[int, ...]:
    return tuple(c for c in registry.suites_for_version(TLS12)
                 if (s := registry.cipher_suite(c)) is not None and s.kx in ("ECDHE", "DHE")
                 and s.auth in ("RSA", "ECDSA", "DSS"))


def _config(run: TargetRunner, version: int, sigalgs: list[int]) -> ClientConfig:
    if version == TLS13:
        return run.config((TLS13,), groups=tuple(candidate_groups(TLS13)),
                          key_share_groups=COMMON_SHARES, signature_algorithms=tuple(sigalgs),
                          cipher_suites_13=tuple(registry.suites_for_version(TLS13)))
    return run.config((TLS12,), groups=tuple(candidate_groups(TLS12)),
                      signature_algorithms=tuple(sigalgs), cipher_suites_12=_pfs_suites())


def key_type(code: int) -> object:
    """The key a TLS 1.2 signature scheme needs: RSA (PKCS #1 v1.5 and PSS-RSAE), DSA,
    ECDSA; every other scheme is a key type of its own (RSA-PSS keys, EdDSA, ...)."""
    if 0x0804 <= code <= 0x0806:
        return "rsa"
    if code >> 8 != 0x08 and code & 0xFF in (1, 2, 3):
        return {1: "rsa", 2: "dsa", 3: "ecdsa"}[code & 0xFF]
    return code


def _pick(out: Outcome, version: int) -> int | None:
    if out.status != "server_hello" or out.version != version:
        return None
    return out.signature_scheme


async def enumerate_sigalgs(run: TargetRunner, version: int) -> tuple[SigalgAudit, Outcome | None]:
    """Returns the audit and the first answered outcome (it may carry the certificates)."""
    phase = f"sigalgs {registry.version_name(version)}"
    stop = STOP_VERIFY if version == TLS13 else STOP_FLIGHT
    candidates = list(broad_sigalgs())
    # TLS 1.2: the suite picks the certificate, then the scheme is chosen for its key
    el = Elimination(list(candidates), kind=key_type) if version == TLS12 else \
        Elimination(list(candidates))
    first: Outcome | None = None
    status, reason = SigalgStatus.ESTABLISHED, ""
    while el.remaining:
        offered = el.offer()
        out = await run.run(_config(run, version, offered), phase, stop)
        if first is None and out.answered:
            first = out
        if version == TLS13 and out.answered and not out.decrypted:
            status, reason = SigalgStatus.NOT_ESTABLISHED, NOT_DECRYPTED
            break
        choice = _pick(out, version)
        if choice in el.remaining:
            el.pick(choice, offered)
            continue
        if choice is not None:
            reason = (f"the server signed with {registry.sigscheme_label(choice)}, which was "
                      "not offered: the rest is not established")
        elif out.answered:
            reason = f"no signature scheme in the answer ({out.describe()})"
        elif out.refused and not el.found:
            status, reason = SigalgStatus.NOT_ESTABLISHED, ("the server accepted no (EC)DHE offer with "
                                                 f"any signature scheme ({out.describe()})")
        elif not out.refused:
            # Stopped by a reset or timeout: the schemes found so far are a partial list.
            status = SigalgStatus.INCONCLUSIVE
            reason = (f"stopped after {len(el.found)} answer(s), not established: "
                      f"{out.describe()}")
        if reason and status == SigalgStatus.ESTABLISHED and not el.found:
            status = SigalgStatus.INCONCLUSIVE
        break
    order = ORDER_UNKNOWN
    if status == SigalgStatus.ESTABLISHED:
        known = el.order_from_steps() if not reason else ORDER_UNKNOWN
        order = known if known is not None else ORDER_UNKNOWN
        if known is None:
            out = await run.run(_config(run, version, el.reverse_pair()), phase, stop)
            order = el.decide(_pick(out, version))
    audit = SigalgAudit(version=Codepoint.version(version), status=status,
                        supported=tuple(Codepoint.sigscheme(c) for c in
                                        el.listed(order, candidates)),
                        order=order, reason=reason, connections=run.connections(phase))
    return audit, first
