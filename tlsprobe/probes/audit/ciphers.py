"""Cipher suites per protocol version, in the server's order, by elimination.

Each hello offers every remaining suite of the version (hundreds fit in one hello); the
server's choice is noted and removed until it refuses (probes/audit/elimination.py, which also
tells whether the server enforces its own order). Groups and signature
schemes are offered broadly so that they never decide which suite is picked.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.model.audit import ORDER_UNKNOWN, SuiteAudit
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.probes.audit.elimination import Elimination
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.scheduler import STOP_HELLO, Outcome, TargetRunner

COMMON_SHARES = (0x001D, 0x0017)


def candidate_suites(version: int) -> list[int]:
    return registry.suites_for_version(version)


def _config(run: TargetRunner, version: int, suites: list[int]) -> ClientConfig:
    if version == TLS13:
        return run.config((TLS13,), groups=tuple(candidate_groups(TLS13)),
                          key_share_groups=COMMON_SHARES, cipher_suites_13=tuple(suites))
    return run.config((version,), groups=tuple(candidate_groups(TLS12)),
                      cipher_suites_12=tuple(suites))


def _pick(out: Outcome, version: int) -> int | None:
    return out.cipher_suite if out.answered and out.version == version else None


async def enumerate_suites(run: TargetRunner, version: int) -> SuiteAudit:
    phase = f"suites {registry.version_name(version)}"
    candidates = candidate_suites(version)
    el = Elimination(list(candidates))
    complete = True
    while el.remaining:
        offered = el.offer()
        out = await run.run(_config(run, version, offered), phase, STOP_HELLO)
        choice = _pick(out, version)
        if choice in el.remaining:
            el.pick(choice, offered)
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
    order = el.order_from_steps() if complete else ORDER_UNKNOWN
    if order is None:
        out = await run.run(_config(run, version, el.reverse_pair()), phase, STOP_HELLO)
        order = el.decide(_pick(out, version))
        if order == ORDER_UNKNOWN:
            el.notes.append(f"order check inconclusive: {out.describe()}")
    listed = el.listed(order, candidates)
    return SuiteAudit(version=Codepoint.version(version),
                      supported=tuple(Cipher.of(c) for c in listed), order=order,
                      complete=complete, connections=run.connections(phase),
                      notes=tuple(el.notes))
