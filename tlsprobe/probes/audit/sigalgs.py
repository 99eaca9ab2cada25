"""Signature schemes the server signs its key exchange with, per version, by elimination.

TLS 1.2: only (EC)DHE suites are offered, so the ServerKeyExchange carries the scheme the
server picked from signature_algorithms. The suites select the certificate, so the schemes
are established per certificate: a first elimination offers every authentication (RSA,
ECDSA, DSS) and keeps to the one the server chose; then the suites of the authentications
not yet seen are offered alone, each answer starting one more elimination (a server with an
RSA and an ECDSA certificate), until the server refuses (one connection more than a single
elimination on a server with one certificate). One suite serves several key types (RSA and
RSA-PSS; ECDSA, Ed25519 and Ed448) and the server then chooses the certificate by the schemes
offered: each scheme is listed under the certificate of the answer that signed with it.
TLS 1.3: the scheme is in the
CertificateVerify, which is encrypted; it is established only when the engine completes the
handshake far enough to decrypt it, and otherwise reported as not established, with the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.model.audit import ORDER_SINGLE, ORDER_UNKNOWN, SigalgAudit
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.server_certs import KeyTypeSigalgs, scheme_key_type
from tlsprobe.model.vocab import Order, SigalgStatus
from tlsprobe.probes.audit.confirm import refusal_stands
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
#: the authentications of the TLS 1.2 (EC)DHE suites that sign: each selects a certificate
AUTH_CLASSES = ("RSA", "ECDSA", "DSS")


def pfs_suites(auths: tuple[str, ...] = AUTH_CLASSES, version: int = TLS12) -> tuple[int, ...]:
    """The (EC)DHE suites of `version` whose authentication is one of `auths`, ECDHE first
    (as ordinary clients list them): a server that follows the client's order and cannot
    serve DHE (Dovecot without DH parameters closes on the DHE suite it picked) still signs
    an ECDHE key exchange."""
    found = [(c, s.kx) for c in registry.suites_for_version(version)
             if (s := registry.cipher_suite(c)) is not None and s.kx in ("ECDHE", "DHE")
             and s.auth in auths]
    return tuple(c for c, kx in sorted(found, key=lambda f: f[1] != "ECDHE"))


def suite_auth(code: int | None) -> str | None:
    """The authentication of a cipher suite ("RSA", "ECDSA", ...); None: unknown."""
    suite = registry.cipher_suite(code) if code is not None else None
    return suite.auth if suite is not None else None


def suites_text(auths: tuple[str, ...]) -> str:
    """'ECDHE_ECDSA suites', 'ECDHE_RSA, DHE_RSA and DHE_DSS suites' (what an offer holds)."""
    names = [n for a in auths for n in ((f"ECDHE_{a}",) if a == "ECDSA" else (f"DHE_{a}",)
                                        if a == "DSS" else (f"ECDHE_{a}", f"DHE_{a}"))]
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    return listed + " suites"


def _config(run: TargetRunner, version: int, sigalgs: list[int],
            auths: tuple[str, ...]) -> ClientConfig:
    if version == TLS13:
        return run.config((TLS13,), groups=tuple(candidate_groups(TLS13)),
                          key_share_groups=COMMON_SHARES, signature_algorithms=tuple(sigalgs),
                          cipher_suites_13=tuple(registry.suites_for_version(TLS13)))
    return run.config((TLS12,), groups=tuple(candidate_groups(TLS12)),
                      signature_algorithms=tuple(sigalgs), cipher_suites_12=pfs_suites(auths))


def key_type(code: int) -> object:
    """The key a TLS 1.2 signature scheme needs (model/server_certs.py scheme_key_type:
    RSA, RSA-PSS, ECDSA, Ed25519, Ed448, DSA); any other scheme is a key type of its own."""
    return scheme_key_type(code) or code


def _pick(out: Outcome, version: int) -> int | None:
    if out.status != "server_hello" or out.version != version:
        return None
    return out.signature_scheme


@dataclass
class _Pass:
    """One elimination: its state, how it ended, and (TLS 1.2) the authentication of the
    suites the server chose, to which its offers then keep."""

    el: Elimination
    auths: tuple[str, ...]
    status: SigalgStatus = SigalgStatus.ESTABLISHED
    reason: str = ""
    order: Order = ORDER_UNKNOWN
    answered: list[Outcome] = field(default_factory=list)
    last: Outcome | None = None
    connections: int = 0

    @property
    def auth(self) -> str | None:
        """The authentication the picks were made with (None: no pick)."""
        return self.auths[0] if self.el.found and len(self.auths) == 1 else None


async def _eliminate(run: TargetRunner, version: int, auths: tuple[str, ...],
                     phase: str) -> _Pass:
    stop = STOP_VERIFY if version == TLS13 else STOP_FLIGHT
    # TLS 1.2: the suite picks the certificate, then the scheme is chosen for its key
    el = Elimination(list(broad_sigalgs()), kind=key_type) if version == TLS12 else \
        Elimination(list(broad_sigalgs()))
    p = _Pass(el, auths)
    plain: ClientConfig | None = None   # the last offer answered
    while el.remaining:
        offered = el.offer()
        config = _config(run, version, offered, p.auths)
        out = await run.run(config, phase, stop)
        p.connections += 1
        if out.refused and el.found and plain is not None:
            # the refusal that ends the list (stated complete) holds by confirm_refusal's
            # rule, the last offer answered the plain hello (confirm.refusal_stands)
            before = run.connections(phase)
            out = await refusal_stands(run, out, config, plain, phase, stop, names_only=False)
            p.connections += run.connections(phase) - before
        p.last = out
        if out.answered:
            plain = config
            p.answered.append(out)
        if version == TLS13 and out.answered and not out.decrypted:
            p.status, p.reason = SigalgStatus.NOT_ESTABLISHED, NOT_DECRYPTED
            break
        choice = _pick(out, version)
        if choice in el.remaining:
            el.pick(choice, offered)
            auth = suite_auth(out.cipher_suite)
            if version == TLS12 and auth in p.auths:
                p.auths = (auth,)
            continue
        _stopped(p, out, choice)
        break
    if p.status == SigalgStatus.ESTABLISHED:
        known = el.order_from_steps() if not p.reason else ORDER_UNKNOWN
        p.order = known if known is not None else ORDER_UNKNOWN
        if known is None:
            out = await run.run(_config(run, version, el.reverse_pair(), p.auths), phase, stop)
            p.order, p.connections = el.decide(_pick(out, version)), p.connections + 1
    return p


def _stopped(p: _Pass, out: Outcome, choice: int | None) -> None:
    """How an elimination ended on `out`, which picked no remaining scheme."""
    el = p.el
    if choice is not None:
        p.reason = (f"the server signed with {registry.sigscheme_label(choice)}, which was "
                    "not offered: the rest is not established")
    elif out.answered:
        p.reason = f"no signature scheme in the answer ({out.describe()})"
    elif out.refused and not el.found:
        p.status, p.reason = SigalgStatus.NOT_ESTABLISHED, (
            "the server accepted no (EC)DHE offer with any signature scheme "
            f"({out.describe()})")
    elif not out.refused:
        # Stopped by a reset or timeout: the schemes found so far are a partial list.
        p.status = SigalgStatus.INCONCLUSIVE
        p.reason = f"stopped after {len(el.found)} answer(s), not established: {out.describe()}"
    if p.reason and p.status == SigalgStatus.ESTABLISHED and not el.found:
        p.status = SigalgStatus.INCONCLUSIVE


def _supported(p: _Pass) -> tuple[Codepoint, ...]:
    return tuple(Codepoint.sigscheme(c) for c in p.el.listed(p.order, list(broad_sigalgs())))


def _leaf_type(out: Outcome) -> str:
    """The key type of the certificate an answer carried; for a leaf whose key cannot be
    read, the one its signature scheme needs ("unknown": neither)."""
    from tlsprobe.model.describe import certificate_info
    from tlsprobe.model.server_certs import key_family
    kind = key_family(certificate_info(out.certificates[0])) if out.certificates else "unknown"
    code = out.signature_scheme
    return kind if kind != "unknown" or code is None else scheme_key_type(code) or kind


def _by_leaf(p: _Pass) -> list[tuple[str, list[Outcome]]]:
    """A TLS 1.2 elimination's answers by their certificate's key type, in the order met:
    one suite serves several (RSA and RSA-PSS; ECDSA, Ed25519 and Ed448), the server
    choosing among them by the schemes offered."""
    groups: dict[str, list[Outcome]] = {}
    for out in p.answered:
        groups.setdefault(_leaf_type(out), []).append(out)
    return list(groups.items()) or [("unknown", [])]


def _per_leaf(p: _Pass) -> tuple[KeyTypeSigalgs, ...]:
    """The schemes of each certificate an elimination met (`_by_leaf`), each from the
    answers that carried it; its connections are its answers (the first one's also the
    refusals and the deciding connection)."""
    groups = _by_leaf(p)
    if len(groups) == 1:
        return (KeyTypeSigalgs(groups[0][0], suites_text(p.auths), p.status, _supported(p),
                               p.order, p.reason, p.connections),)
    out: list[KeyTypeSigalgs] = []
    rest = p.connections - sum(len(g) for _, g in groups[1:])
    for i, (kind, answers) in enumerate(groups):
        picked = {o.signature_scheme for o in answers}
        mine = tuple(c for c in _supported(p) if c.id in picked)
        order = p.order if len(mine) > 1 else ORDER_SINGLE if mine else ORDER_UNKNOWN
        out.append(KeyTypeSigalgs(kind, suites_text(p.auths), p.status, mine, order,
                                  p.reason, rest if i == 0 else len(answers)))
    return tuple(out)


async def enumerate_sigalgs(run: TargetRunner, version: int
                            ) -> tuple[SigalgAudit, list[Outcome]]:
    """The audit, and the answered outcomes whose certificates the cert phase reads (one
    per certificate: TLS 1.2, the first of each elimination; TLS 1.3, each new leaf)."""
    phase = f"sigalgs {registry.version_name(version)}"
    if version == TLS12:
        return await _tls12(run, phase)
    p = await _eliminate(run, version, AUTH_CLASSES, phase)
    leaves: dict[bytes, Outcome] = {}
    for out in p.answered:
        if out.certificates:
            leaves.setdefault(out.certificates[0], out)
    audit = SigalgAudit(version=Codepoint.version(version), status=p.status,
                        supported=_supported(p), order=p.order, reason=p.reason,
                        connections=run.connections(phase))
    return audit, list(leaves.values())


async def _tls12(run: TargetRunner, phase: str) -> tuple[SigalgAudit, list[Outcome]]:
    """One elimination per authentication the server accepts (see the module's text)."""
    passes: list[_Pass] = []
    pending: tuple[str, ...] = AUTH_CLASSES
    untold = ""
    while pending:
        p = await _eliminate(run, TLS12, pending, phase)
        if p.auth is None and passes:   # none of the pending suites picked a scheme
            last = p.last
            if last is None or not last.refused or p.el.found:
                why = "it chose a suite outside the offer" if p.el.found else \
                    p.reason or "no answer"
                untold = (f"whether the server has a certificate for {suites_text(pending)} "
                          f"is not established: {why}")
            break
        passes.append(p)
        if p.auth is None:   # the first elimination found nothing: as it ended
            break
        pending = tuple(a for a in pending if a != p.auth)
    chains = [answers[0] for p in passes for _, answers in _by_leaf(p) if answers]
    return _tls12_audit(run, phase, passes, untold), chains


def _tls12_audit(run: TargetRunner, phase: str, passes: list[_Pass], untold: str) -> SigalgAudit:
    by_type = tuple(k for p in passes if p.auth is not None for k in _per_leaf(p))
    first = passes[0]
    supported = tuple(dict.fromkeys(c for k in by_type for c in k.supported)) \
        if by_type else _supported(first)
    orders = {k.order for k in by_type}
    order = first.order if len(orders) <= 1 else ORDER_UNKNOWN
    statuses = [p.status for p in passes]
    status = SigalgStatus.INCONCLUSIVE if untold or SigalgStatus.INCONCLUSIVE in statuses \
        else first.status
    reasons = [f"{k.key_type} certificate: {k.reason}" if len(by_type) > 1 else k.reason
               for k in by_type if k.reason] if by_type else [first.reason]
    if len(orders) > 1:
        reasons.append("the order differs between the certificates: see each one's")
    reason = "; ".join(r for r in (*reasons, untold) if r)
    return SigalgAudit(version=Codepoint.version(TLS12), status=status, supported=supported,
                       order=order, reason=reason, connections=run.connections(phase),
                       by_key_type=by_type)
