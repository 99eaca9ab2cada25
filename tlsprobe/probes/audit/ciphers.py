"""Cipher suites per protocol version, in the server's order, by elimination.

Each hello offers every remaining suite of the version (hundreds fit in one hello); the
server's choice is noted and removed until it refuses (probes/audit/elimination.py, which also
tells whether the server enforces its own order). Groups and signature
schemes are offered broadly so that they never decide which suite is picked.

Each pick's connection also says how that suite's key is exchanged (probes/audit/suite_kx.py:
the suites table's "ECDH 253", "DH 1024", "RSA 2048"): below TLS 1.3 it reads the server's
first flight up to the ServerHelloDone (its Certificate and ServerKeyExchange, which come in
the same flight as the ServerHello: no extra connection, no extra round trip), in TLS 1.3
the ServerHello's key share (or the HelloRetryRequest's group) is enough.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import (
    DEFAULT_SUITES_12,
    DEFAULT_SUITES_13,
    TLS12,
    TLS13,
    ClientConfig,
)
from tlsprobe.model.audit import ORDER_UNKNOWN, SuiteAudit
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.probes.audit.confirm import refusal_stands
from tlsprobe.probes.audit.elimination import Elimination
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.outcome import Stop
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_HELLO,
    Outcome,
    TargetRunner,
)
from tlsprobe.probes.audit.suite_kx import suite_row

COMMON_SHARES = (0x001D, 0x0017)
#: OpenSSL's default groups, in its order (testssl.sh and sslscan offer them so): listed
#: first, so that a server that follows the client's group order picks for each suite the
#: key exchange an ordinary client gets (the "Kx" column), never an odd curve that the
#: registry happens to list first; every other group follows, so none decides the suite
CLIENT_GROUPS = (0x001D, 0x0017, 0x001E, 0x0019, 0x0018, 0x0100, 0x0101, 0x0102, 0x0103,
                 0x0104)


def suite_groups(version: int) -> tuple[int, ...]:
    """The groups a suites hello offers: CLIENT_GROUPS first, then the rest."""
    groups = candidate_groups(TLS13 if version == TLS13 else TLS12)
    first = [g for g in CLIENT_GROUPS if g in groups]
    return tuple(first + [g for g in groups if g not in first])


def candidate_suites(version: int) -> list[int]:
    return registry.suites_for_version(version)


def _config(run: TargetRunner, version: int, suites: list[int]) -> ClientConfig:
    if version == TLS13:
        return run.config((TLS13,), groups=suite_groups(TLS13),
                          key_share_groups=COMMON_SHARES, cipher_suites_13=tuple(suites))
    return run.config((version,), groups=suite_groups(version),
                      cipher_suites_12=tuple(suites))


def _pick(out: Outcome, version: int) -> int | None:
    return out.cipher_suite if out.answered and out.version == version else None


def _flight_cut(el: Elimination, choice: int, out: Outcome) -> Stop:
    """A pick whose first flight did not come whole (a server that trickles it until the
    deadline, resets or refuses after its ServerHello: `reason` says which): the rest of the
    version's picks stop at the ServerHello, so that such a server costs one slow connection,
    not one per suite; their key exchange is then unknown, and a note says why."""
    el.notes.append(f"key exchange of the suites after {registry.suite_name(choice)} not "
                    f"read: that connection's first flight was not read whole ({out.reason})")
    return STOP_HELLO


def _kx(suite: int) -> str:
    info = registry.cipher_suite(suite)
    return info.kx if info is not None else "?"


def ordinary_first(version: int, suites: list[int]) -> list[int]:
    """`suites` in the order an ordinary client prefers: ECDHE (the key exchange such clients
    use) before the others, each key exchange's suites together, and within each the
    versions check's minimal hello's suites first, in its order, then the rest in the order
    of `suites`."""
    ordinary = DEFAULT_SUITES_13 if version == TLS13 else DEFAULT_SUITES_12 + (0x000A,)
    ranked = [c for c in ordinary if c in suites] + [c for c in suites if c not in ordinary]
    kinds = list(dict.fromkeys(["ECDHE"] + [_kx(c) for c in ranked]))
    return sorted(ranked, key=lambda c: kinds.index(_kx(c)))   # stable: ranks kept


def _refused_all(el: Elimination, version: int, out: Outcome) -> Elimination:
    """The first offer of a version the server speaks (the audit enumerates no other) was
    refused: no proof that it accepts none, but a server that picks a suite it cannot serve
    (Dovecot offering DHE without DH parameters closes the connection). The elimination
    starts again one key exchange at a time (`_one_kx`), in an ordinary client's order."""
    el.notes.append(f"the offer of all {len(el.remaining)} suites was refused "
                    f"({out.describe()}), although the server speaks "
                    f"{registry.version_name(version)}: asked again one key exchange at a "
                    "time, in an ordinary client's order")
    return Elimination(ordinary_first(version, el.remaining), notes=el.notes)


def _one_kx(el: Elimination) -> list[int]:
    """The next offer after `_refused_all`: the remaining suites of the first remaining
    one's key exchange (a refusal then refuses that key exchange's suites only)."""
    kind = _kx(el.remaining[0])
    return [c for c in el.remaining if _kx(c) == kind]


def _refuse_kx(el: Elimination, offered: list[int], out: Outcome, closed: list[str]) -> None:
    """The rest of one key exchange's suites refused; `closed` collects the key exchanges
    refused without an alert, for one note."""
    if not out.alert:
        closed.append(_kx(offered[0]))
    el.not_supported += offered
    el.remaining = [c for c in el.remaining if c not in offered]


async def enumerate_suites(run: TargetRunner, version: int) -> SuiteAudit:
    phase = f"suites {registry.version_name(version)}"
    candidates = candidate_suites(version)
    el = Elimination(list(candidates))
    complete, again, closed = True, False, list[str]()
    stop = STOP_HELLO if version == TLS13 else STOP_FLIGHT
    accepted: dict[int, Outcome] = {}   # each pick's connection: its key exchange
    answered: ClientConfig | None = None   # the hello of the last pick
    while el.remaining:
        offered = _one_kx(el) if again else el.offer()
        config = _config(run, version, offered)
        # a refusal after a pick makes the rest "not supported" (the list complete): it
        # holds by confirm_refusal's rule, the hello of the last pick the plain hello
        # (confirm.refusal_stands); before any pick, one key exchange's is asked twice
        out = await run.run(config, phase, stop, confirm=again and answered is None)
        if out.refused and answered is not None:
            out = await refusal_stands(run, out, config, answered, phase, stop,
                                       names_only=False, named="the hello of the last pick")
        choice = _pick(out, version)
        if choice in el.remaining:
            el.pick(choice, offered)
            accepted[choice] = out
            answered = config
            if stop == STOP_FLIGHT and out.reason and el.remaining:
                stop = _flight_cut(el, choice, out)
            continue
        if out.refused and not accepted and not again:
            el, again = _refused_all(el, version, out), True
            continue
        if out.refused and again:
            _refuse_kx(el, offered, out, closed)
            continue
        if out.answered:
            el.notes.append(f"stopped: {out.describe()} with cipher suite "
                            f"{registry.suite_label(out.cipher_suite or 0)}")
            complete = False
        elif not out.refused and out.attempts:   # 0: the channel cannot offer the rest
            # (QUIC: suites it does not allow, net/quic_hello.py): none was sent, so none is
            # supported over it
            el.notes.append(f"stopped, not established: {out.describe()}")
            complete = False
        break
    if closed:
        el.notes.append("closed the connection without an answer (no alert) when no suite "
                        f"of its key exchange was left to pick: {', '.join(closed)}")
    if again and not accepted:   # still none, although the version is spoken
        el.notes.append("no key exchange's suites were accepted either: not established")
        complete = False
    # offered one key exchange at a time (again), the picks tell no order across them
    order = el.order_from_steps() if complete and not again else ORDER_UNKNOWN
    if order is None:
        out = await run.run(_config(run, version, el.reverse_pair()), phase, STOP_HELLO)
        order = el.decide(_pick(out, version))
        if order == ORDER_UNKNOWN:
            el.notes.append(f"order check inconclusive: {out.describe()}")
    listed = el.listed(order, candidates)
    return SuiteAudit(version=Codepoint.version(version),
                      supported=tuple(Cipher.of(c) for c in listed), order=order,
                      complete=complete, connections=run.connections(phase),
                      notes=tuple(el.notes),
                      rows=tuple(suite_row(c, accepted.get(c)) for c in listed))
