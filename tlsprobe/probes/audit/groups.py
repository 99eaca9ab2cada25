"""Group enumeration, separately for TLS 1.3 and TLS 1.2 (or, on a server without TLS 1.2,
the highest of TLS 1.1 and 1.0), in the server's order.

Elimination (probes/audit/elimination.py): offer every remaining candidate, note the group the
server picks, remove it, repeat until the server refuses; the picks come out in the
server's order when it enforces one, and the alternating offer order (or, when that cannot
tell, the top two offered in reverse) says whether it does. At most (supported + 5)
connections per version (the refusal is confirmed: confirm.refusal_stands); in TLS 1.2 one more for fixed DH
parameters, two more for RFC 7919 groups (their order, `_no_ffdhe_client`) and one more
when an ECDSA certificate's curve is listed again (`_behind_certificate_curve`): README.md.

- TLS 1.3: groups without key shares; the HelloRetryRequest names the server's choice. A
  server that refuses share-less offers (or answers them with anything but a
  HelloRetryRequest or an alert) is enumerated with real key shares instead.
- TLS 1.2 (and TLS 1.1 / 1.0, which use supported_groups the same way, RFC 4492 and
  RFC 7919): ECDHE suites with the remaining curves (the ServerKeyExchange names the curve)
  and DHE suites with the remaining ffdhe groups, in the same hellos. RFC 7919 servers
  negotiate an ffdhe group; others send fixed parameters whatever the client lists (the
  prime is recognised by value: ffdhe2048, modp_2048 (RFC 3526), ...).

Both read only what the server names (TargetRunner.run names_only: no second hello after a
HelloRetryRequest, no certificate parsed, no ServerKeyExchange signature or point checked;
an ECDSA certificate's curve is read from its DER, wire/spki.py): the audit computes no key
and imports no `cryptography` (start-up, issue 35). The server's identity is not the
question here; the chain and signature checks are other phases'. Only the real-key-share
fallback computes shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tlsprobe import kex, registry
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.model.audit import (
    ORDER_CLIENT,
    ORDER_SINGLE,
    ORDER_UNKNOWN,
    DheAudit,
    DhParameters,
    GroupAudit,
)
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.vocab import DheStatus, GroupMethod, Order
from tlsprobe.probes.audit.confirm import refusal_stands, still_answered
from tlsprobe.probes.audit.elimination import Elimination
from tlsprobe.probes.audit.outcome import Stop
from tlsprobe.probes.audit.scheduler import (
    ALERT,
    HELLO_RETRY,
    SERVER_HELLO,
    STOP_FLIGHT,
    STOP_HELLO,
    Outcome,
    TargetRunner,
)
from tlsprobe.wire.spki import ec_named_curve

PROTOCOL_VERSION_ALERT = 70
_RANGES = ((0x0001, 0x0021), (0x0100, 0x0104), (0x0200, 0x0202), (0x11EB, 0x11EE),
           (0x6399, 0x6399))
_SMALL_SHARES = (0x001D, 0x0017)   # x25519, secp256r1: what an ordinary client sends
_CHUNK_BYTES = 3000                # key-share bytes per hello when big hellos are refused


def candidate_groups(version: int, extra: tuple[int, ...] = ()) -> list[int]:
    """The registry's groups valid for `version` in the audited ranges, then `extra` ids."""
    out = []
    for low, high in _RANGES:
        for code in range(low, high + 1):
            info = registry.group(code)
            if info is not None and info.applies_to(version):
                out.append(code)
    return out + [g for g in extra if g not in out]


def _cp(codes: list[int] | tuple[int, ...]) -> tuple[Codepoint, ...]:
    return tuple(Codepoint.group(c) for c in codes)


Picker = Callable[[Outcome], "int | None"]
Builder = Callable[[list[int]], ClientConfig]


async def _order(run: TargetRunner, el: Elimination, phase: str, build: Builder, stop: Stop,
                 picked: Picker) -> tuple[Order, str | None]:
    """Server or client order: from the picks when they tell, else one more connection."""
    known = el.order_from_steps()
    if known is not None:
        return known, None
    out = await run.run(build(el.reverse_pair()), phase, stop, names_only=True)
    order = el.decide(picked(out))
    return order, None if order != ORDER_UNKNOWN else f"order check inconclusive: {out.describe()}"


def _hrr_pick(out: Outcome) -> int | None:
    return out.hrr_group if out.status == HELLO_RETRY else None


def _sh_pick(out: Outcome) -> int | None:
    return out.group if out.status == SERVER_HELLO else None


def _builder(run: TargetRunner, version: int, **kw: object) -> Callable[..., ClientConfig]:
    """Hello for one elimination step: the remaining groups (and, in TLS 1.3, the shares)."""
    def build(groups: list[int], shares: tuple[int, ...] = ()) -> ClientConfig:
        extra = dict(kw)
        if version == TLS13:
            extra["key_share_groups"] = tuple(shares)
        return run.config((version,), groups=tuple(groups), **extra)
    return build


async def _refusal_holds(run: TargetRunner, els: list[Elimination], answered: ClientConfig,
                         phase: str, refusal: Outcome, stop: Stop = STOP_HELLO,
                         named: str = "the elimination's first offer") -> bool:
    """Whether the refusal that ended `els` is a fact (confirm.still_answered with the
    hello `answered` before, `named`); not, what the refusal made "not supported" (or
    left) is inconclusive, said so."""
    why = await still_answered(run, answered, stop, phase, named)
    if why is None:
        return True
    for el in els:
        left = el.not_supported + el.remaining
        if left:
            el.notes.append(f"not established for {len(left)} value(s): the hello that ended "
                            f"the elimination was refused ({refusal.describe()}), {why}")
        el.inconclusive += left
        el.not_supported, el.remaining = [], []
    return False


# -- TLS 1.3 -----------------------------------------------------------------------------------
async def tls13_groups(run: TargetRunner, candidates: list[int], *,
                       control: bool = False) -> GroupAudit:
    """The TLS 1.3 group audit. `control`: no later repeat of a reference hello will check
    that the server still answers (the group audit alone, without the versions check,
    probes/audit/consistency.py): the refusal that ends the elimination holds only if the
    first offer, answered before, is answered once more right after (`_refusal_holds`)."""
    phase = "groups TLS 1.3"
    suites = tuple(registry.suites_for_version(TLS13))
    build = _builder(run, TLS13, cipher_suites_13=suites)
    el = Elimination(list(candidates))
    spoken: bool | None = None
    method = GroupMethod.HELLO_RETRY_REQUEST
    while el.remaining:
        offered = el.offer()
        # the refusal that ends the elimination makes "not supported" (a finding that can
        # fail CI): it holds by confirm_refusal's rule, the last offer answered the plain
        # hello (confirm.refusal_stands); the first offer's is asked twice (TargetRunner.run)
        out = await run.run(build(offered), phase, confirm=not el.found, names_only=True)
        if out.refused and el.found:
            out = await refusal_stands(run, out, build(offered), build(list(el.steps[-1][0])),
                                       phase, STOP_HELLO)
        if out.status == HELLO_RETRY and out.hrr_group in el.remaining:
            spoken = True
            el.pick(out.hrr_group, offered)
            continue
        if out.refused and el.found:
            if control and not await _refusal_holds(run, [el], build(list(el.steps[0][0])),
                                                    phase, out):
                break
            el.refuse_rest()
        elif out.refused and out.alert == PROTOCOL_VERSION_ALERT:
            spoken = False
            el.refuse_rest()
            el.notes.append("the server refused TLS 1.3 (protocol_version alert)")
        elif out.refused or out.status == SERVER_HELLO:
            # Share-less offers refused (or answered oddly) before any HRR: use real shares.
            el.notes.append(f"HelloRetryRequest route inconclusive ({out.describe()}); "
                            "enumerated with real key shares")
            method = GroupMethod.KEY_SHARE
            spoken = await _tls13_with_shares(run, el, phase, control)
        else:
            el.give_up(out.describe())
    order, note = ORDER_UNKNOWN, None
    if method == GroupMethod.HELLO_RETRY_REQUEST:
        order, note = await _order(run, el, phase, build, STOP_HELLO, _hrr_pick)
    elif len(el.found) == 1:
        order = ORDER_SINGLE
    elif el.found:
        el.notes.append("order not established: with real key shares the server may take "
                        "the first share it supports rather than its preferred group")
    if note:
        el.notes.append(note)
    return GroupAudit(version=Codepoint.version(TLS13), spoken=spoken, method=method,
                      supported=_cp(el.listed(order, candidates)), not_supported=_cp(el.not_supported),
                      inconclusive=_cp(el.inconclusive), order=order,
                      connections=run.connections(phase), notes=tuple(el.notes))


def _chunks(groups: list[int]) -> list[list[int]]:
    out: list[list[int]] = [[]]
    size = 0
    for g in groups:
        n = kex.share_size(g) or 100
        if out[-1] and size + n > _CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append(g)
        size += n
    return [c for c in out if c]


async def _tls13_with_shares(run: TargetRunner, el: Elimination, phase: str,
                             control: bool = False) -> bool | None:
    """Eliminate with a real key share for every remaining computable group; if the server
    refuses the one big hello, retry once in hellos of a few shares each. A refusal that
    makes groups "not supported" is asked twice (as the HelloRetryRequest route's end); with
    `control` (see tls13_groups) the refusals hold only if the last offer answered is
    answered once more after them (`_refusal_holds`)."""
    build = _builder(run, TLS13, cipher_suites_13=tuple(registry.suites_for_version(TLS13)))
    blind = [g for g in el.remaining if not kex.is_computable(g)]
    el.remaining = [g for g in el.remaining if g not in blind]
    spoken: bool | None = None
    queue, split = [list(el.remaining)], False
    answered: ClientConfig | None = None
    refusal: Outcome | None = None
    while queue:
        chunk = [g for g in queue.pop(0) if g in el.remaining]
        while chunk:
            config = build(chunk, tuple(chunk))
            # refused, a hello of a few shares (or one after the split) is a negative: it
            # holds by confirm_refusal's rule, the last offer answered the plain hello
            out = await _share_offer(run, config, phase, answered,
                                     negative=len(chunk) <= 2 or split)
            if out.status == SERVER_HELLO and out.group in chunk:
                spoken, answered = True, config
                if out.share_problem is not None:   # chosen, but no client can finish
                    el.inconclusive.append(out.group)
                    el.remaining.remove(out.group)
                    el.notes.append(f"{registry.group_name(out.group)}: chosen, but the "
                                    f"server's key share is invalid ({out.share_problem})")
                else:
                    el.pick(out.group)
                chunk.remove(out.group)
                continue
            if out.refused and len(chunk) > 2 and not split:
                split = True
                el.notes.append(f"a hello with {len(chunk)} key shares was refused "
                                f"({out.describe()}); retried in smaller hellos")
                queue = _chunks(chunk) + queue
                break
            if out.refused and out.alert == PROTOCOL_VERSION_ALERT and spoken is None:
                spoken = False
            if not out.refused:
                el.notes.append(f"key-share offer of {len(chunk)} group(s) not established: "
                                f"{out.describe()}")
            (el.not_supported if out.refused else el.inconclusive).extend(chunk)
            refusal = out if out.refused else refusal
            el.remaining = [g for g in el.remaining if g not in chunk]
            break
    if control and answered is not None and refusal is not None:
        await _refusal_holds(run, [el], answered, phase, refusal,
                             named="the last key-share offer the server answered")
    if blind:
        el.inconclusive += blind
        el.notes.append("no key share can be computed here for " +
                        ", ".join(registry.group_name(g) for g in blind))
    return spoken


async def _share_offer(run: TargetRunner, config: ClientConfig, phase: str,
                       answered: ClientConfig | None, *, negative: bool) -> Outcome:
    """One key-share offer; a refusal that is a `negative` is confirmed
    (confirm.refusal_stands) against `answered`, the last offer the server answered (none
    yet: the last hello it answered in the audit; none at all: asked twice)."""
    plain = answered or (run.answered_hello[0] if run.answered_hello is not None else None)
    out = await run.run(config, phase, confirm=negative and plain is None)
    if not (negative and out.refused and plain is not None):
        return out
    return await refusal_stands(run, out, config, plain, phase, STOP_HELLO, names_only=False)


# -- TLS 1.2 and older ---------------------------------------------------------------------
def _suites(kx: str, version: int) -> tuple[int, ...]:
    return tuple(c for c in registry.suites_for_version(version)
                 if (s := registry.cipher_suite(c)) is not None and s.kx == kx)


async def ske_groups(run: TargetRunner, candidates: list[int], *, version: int = TLS12,
                     dhe: bool = True, control: bool = False) -> GroupAudit:
    """ECDHE curves (ServerKeyExchange named_curve) and DHE groups in one elimination, in
    `version` (TLS 1.2, 1.1 or 1.0: the same extension and messages; only the suites differ).

    Each hello offers the ECDHE suites with the remaining curves and, while DHE is still
    open, the DHE suites with the remaining ffdhe groups; whichever kind the server picks,
    its group is removed. A DHE answer with a prime that was not offered (or offered and
    picked before) means fixed parameters: DHE is closed and the curves go on alone.
    One refusal ends both, so both kinds share the final connection; with `control` (see
    tls13_groups) it holds only while the first offer is still answered.
    """
    phase = f"groups {registry.version_name(version)}"
    st = _Tls12State(version,
        ec=Elimination([g for g in candidates if _kind(g) != "ffdhe"]),
        # ffdhe largest first: a server preferring small groups then shows its own order
        # in the first pick, and no extra connection is needed to tell it.
        ff=Elimination(sorted((g for g in candidates if _kind(g) == "ffdhe"), reverse=True)),
        dhe_open=dhe, control=control)
    ecdhe, dhe_suites = _suites("ECDHE", version), _suites("DHE", version)
    while st.ec.remaining or (st.dhe_open and st.ff.remaining):
        ec_offer = st.ec.offer() if st.ec.remaining else []
        ff_offer = st.ff.offer() if st.dhe_open and st.ff.remaining else []
        suites = (ecdhe if ec_offer else ()) + (dhe_suites if ff_offer else ())
        config = run.config((version,), groups=tuple(ec_offer + ff_offer),
                            cipher_suites_12=suites)
        # as in TLS 1.3: the ending refusal holds by confirm_refusal's rule
        out = await run.run(config, phase, STOP_FLIGHT, confirm=st.last is None,
                            names_only=True)
        if out.refused and st.last is not None:
            out = await refusal_stands(run, out, config, st.last, phase, STOP_FLIGHT)
        if not _tls12_step(st, out, ec_offer, ff_offer):
            if control and out.refused and st.first is not None:
                await _refusal_holds(run, [st.ec, st.ff], st.first, phase, out, STOP_FLIGHT)
            break
        st.first = st.first or config
        st.last = config
    plain_build = _builder(run, version, cipher_suites_12=ecdhe)
    cert = st.cert_curve if st.cert_curve in st.ec.found else None

    def ec_build(groups: list[int]) -> ClientConfig:
        # An ECDSA certificate's curve must stay listed (last) or no ECDHE suite is left.
        return plain_build(groups + [cert] if cert is not None and cert not in groups
                           else groups)

    if cert is not None and st.cert_blocked:
        await _behind_certificate_curve(run, st.ec, ec_build, phase, cert, version)
    order, note = await _order(run, st.ec, phase, ec_build, STOP_FLIGHT, _sh_pick)
    if note:
        st.ec.notes.append(note)
    if st.ec.remaining:   # the server took the certificate's curve rather than any of these
        if order == ORDER_CLIENT:
            st.ec.refuse_rest()
        else:
            st.ec.give_up("the server prefers its certificate's curve to all of them, so "
                          "whether it supports them cannot be told")
    dhe_audit = None
    if dhe:
        dhe_audit = await _dhe_audit(run, st, _builder(run, version, cipher_suites_12=dhe_suites),
                                     phase)
    return GroupAudit(version=Codepoint.version(version), spoken=st.spoken,
                      method=GroupMethod.SERVER_KEY_EXCHANGE,
                      supported=_cp(st.ec.listed(order, candidates)),
                      not_supported=_cp(st.ec.not_supported),
                      inconclusive=_cp(st.ec.inconclusive), order=order, dhe=dhe_audit,
                      connections=run.connections(phase), notes=tuple(st.ec.notes),
                      certificate_curve=(Codepoint.group(st.cert_curve)
                                         if st.cert_curve is not None else None))


async def _behind_certificate_curve(run: TargetRunner, el: Elimination, build: Builder,
                                    phase: str, cert: int, version: int) -> None:
    """ECDSA certificate: in TLS 1.2 and older its curve must be in the client's list (RFC
    4492 and RFC 8422 section 5.1), so once it was eliminated the rest was refused for that
    reason alone. Offer the rest again with the curve listed last (`build` appends it); the
    picks continue until the server takes the certificate's curve, and the caller decides
    what that says about the rest."""
    el.remaining, el.inconclusive = list(el.inconclusive), []
    el.notes = [n for n in el.notes if "ECDSA certificate" not in n]
    el.notes.append(f"the server's ECDSA certificate is on {registry.group_name(cert)}, which "
                    f"{registry.version_name(version)} requires in the client's list: later offers "
                    "kept it, last")
    while el.remaining:
        offered = list(el.remaining)
        out = await run.run(build(offered), phase, STOP_FLIGHT, names_only=True)
        if out.status == SERVER_HELLO and out.group in el.remaining:
            el.pick(out.group, offered + [cert])
        elif not (out.status == SERVER_HELLO and out.group == cert):
            el.give_up(out.describe())
        else:
            return


def _kind(group: int) -> str:
    info = registry.group(group)
    return info.kind if info is not None else "other"


@dataclass
class _Tls12State:
    version: int
    ec: Elimination
    ff: Elimination
    dhe_open: bool = True
    fixed: DhParameters | None = None
    spoken: bool | None = None
    cert_curve: int | None = None
    cert_blocked: bool = False
    dhe_answers: int = 0
    #: no reference hello repeated after the phase (ske_groups' `control`), and the first
    #: offer that was answered: what a refusal is checked against (`_refusal_holds`)
    control: bool = False
    first: ClientConfig | None = None
    #: the last offer answered: the plain hello of an ending refusal (refusal_stands)
    last: ClientConfig | None = None


def _tls12_step(st: _Tls12State, out: Outcome, ec_offer: list[int], ff_offer: list[int]) -> bool:
    """Apply one answer; False when the elimination is over."""
    if out.status == SERVER_HELLO:
        st.spoken = True
        st.cert_curve = st.cert_curve or _cert_curve(out)
        if out.dh_bits:                                   # a DHE answer
            st.dhe_answers += 1
            if out.group in st.ff.remaining:
                st.ff.pick(out.group, ff_offer)
                return True
            st.fixed = dh_parameters(out)
            if st.ff.remaining:
                # The offered list was ignored: these parameters are fixed, and a group
                # "picked" earlier was only this same fixed group.
                if out.group in st.ff.found:
                    st.ff.found.remove(out.group)
                st.ff.notes.append("the server ignores the client's ffdhe groups and sends "
                                   f"fixed DH parameters ({st.fixed.label()})")
            else:
                st.ff.notes.append("when the client lists no ffdhe group, the server sends "
                                   f"DH parameters {st.fixed.label()}")
            st.ff.remaining, st.dhe_open = [], False
            return True
        if out.group in st.ec.remaining:
            st.ec.pick(out.group, ec_offer)
            return True
        why = "explicit curve parameters" if out.explicit_curve else \
            f"no group read after the ServerHello ({out.reason or 'no ServerKeyExchange'})" \
            if out.group is None else \
            f"the server chose {registry.group_label(out.group)}, not offered"
        st.ec.give_up(why)
        st.ff.give_up(why)
        return False
    if out.refused:
        if out.alert == PROTOCOL_VERSION_ALERT and not (st.ec.found or st.ff.found):
            st.spoken = False
            st.ec.notes.append(f"the server refused {registry.version_name(st.version)} "
                               "(protocol_version alert)")
        if st.cert_curve is not None and st.cert_curve in st.ec.found:
            st.cert_blocked = True
            st.ec.give_up(f"the server's ECDSA certificate is on "
                          f"{registry.group_name(st.cert_curve)}, which "
                          f"{registry.version_name(st.version)} requires in the client's list; "
                          "once it was removed no ECDHE suite was left")
        st.ec.refuse_rest()
        st.ff.refuse_rest()
        return False
    st.ec.give_up(out.describe())
    st.ff.give_up(out.describe())
    return False


#: the named curves (RFC 5480 2.1.1.1) an ECDSA certificate of TLS 1.2 (and older) can be on
_CERT_CURVES = {"1.2.840.10045.3.1.7": 0x17, "1.3.132.0.34": 0x18, "1.3.132.0.35": 0x19}


def _cert_curve(out: Outcome) -> int | None:
    """The group of the leaf's EC key (secp256r1, secp384r1, secp521r1), None for another
    key or a leaf that cannot be read: from the DER's subjectPublicKeyInfo alone
    (wire/spki.py), so that the audit needs no `cryptography`."""
    if not out.certificates:
        return None
    try:
        curve = ec_named_curve(out.certificates[0])
    except ValueError:  # garbage DER
        return None
    return _CERT_CURVES.get(curve) if curve is not None else None


def dh_parameters(out: Outcome) -> DhParameters:
    check = out.dh_check
    name = out.dh_name or f"unknown {out.dh_bits}-bit " + (
        "prime" if check is None or check.is_prime else
        "modulus, NOT PRIME" if check.is_prime is False else "modulus")
    standard = None
    if out.dh_name:
        standard = "RFC 7919" if out.dh_name.startswith("ffdhe") else \
            "RFC 3526" if out.dh_name.startswith("modp") else "RFC 5114"
    return DhParameters(name=name, bits=out.dh_bits or 0,
                        group=Codepoint.group(out.group) if out.group is not None else None,
                        standard=standard, prime=check.verdict if check else None,
                        prime_detail=check.detail if check else "")


async def _dhe_audit(run: TargetRunner, st: _Tls12State, build: Builder,
                     phase: str) -> DheAudit:
    ff = st.ff
    if ff.found:
        status = DheStatus.RFC7919
    elif st.fixed is not None:
        status = DheStatus.FIXED
    elif ff.inconclusive:
        status = DheStatus.INCONCLUSIVE
    else:
        status = DheStatus.NONE
    order, note = ORDER_UNKNOWN, None
    before = run.connections(phase)
    legacy_refused = False
    if status == DheStatus.RFC7919:
        order, note = await _order(run, ff, phase, build, STOP_FLIGHT, _sh_pick)
        if st.fixed is None:
            legacy_refused = await _no_ffdhe_client(run, st, build, phase)
    if note:
        ff.notes.append(note)
    return DheAudit(status=status, negotiated=_cp(ff.listed(order, sorted(ff.found))),
                    fixed=st.fixed, order=order,
                    not_supported=_cp(ff.not_supported), inconclusive=_cp(ff.inconclusive),
                    connections=st.dhe_answers + run.connections(phase) - before,
                    notes=tuple(ff.notes), legacy_refused=legacy_refused)


async def _no_ffdhe_client(run: TargetRunner, st: _Tls12State, build: Builder,
                           phase: str) -> bool:
    """A server that negotiates RFC 7919 groups: what does a client that lists none get (a
    DHE-only hello without supported_groups, as clients before RFC 7919 sent)? Its DH
    parameters go to `st.fixed`; True when it gets no DHE at all: a refusal (a "not
    vulnerable" of the dh check rests on it) asked twice, and, with `st.control`, held only
    while the first offer is still answered (confirm.still_answered), as an elimination's
    end; the family's reference repeat may still undo it (consistency.unconfirmed)."""
    hello = build([])
    out = await run.run(hello, phase, STOP_FLIGHT, confirm=st.last is None, names_only=True)
    if out.refused and st.last is not None:
        out = await refusal_stands(run, out, hello, st.last, phase, STOP_FLIGHT)
    if out.status == SERVER_HELLO and out.dh_bits:
        st.fixed = dh_parameters(out)
        st.ff.notes.append("when the client lists no ffdhe group, the server sends DH "
                           f"parameters {st.fixed.label()}")
        return False
    if not out.refused:
        if out.status != SERVER_HELLO:
            st.ff.notes.append("what a client that lists no ffdhe group gets is not "
                               f"established: {out.describe()}")
        return False
    if st.control and st.first is not None:
        why = await still_answered(run, st.first, STOP_FLIGHT, phase,
                                   "the elimination's first offer")
        if why is not None:
            st.ff.notes.append("what a client that lists no ffdhe group gets is not "
                               f"established: its hello was refused ({out.describe()}), {why}")
            return False
    st.ff.notes.append(f"a client that lists no ffdhe group gets no DHE ({out.describe()})")
    return True


__all__ = ["ALERT", "candidate_groups", "dh_parameters", "ske_groups", "tls13_groups"]
