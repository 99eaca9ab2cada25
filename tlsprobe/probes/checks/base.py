"""How a check is written and what it gets: the one shape of every check, its context (the
target's runner, what the audit established) and its own connections.

The one shape (tlsprobe/probes/checks/_template.py is a check written out in it):

  - one module per check under tlsprobe/probes/checks/, named by the check; its docstring
    says what it sends, how many connections, and the verdict rule (every verdict and what
    it rests on);
  - `async def run(ctx: CheckContext) -> CheckResult`, written out in the module (never a
    decorator that changes its signature, never a factory's product). What several checks
    share is a helper `run` calls: a precondition or a shared connection returns what it
    got or the `CheckResult` to return as it is (`if isinstance(got, CheckResult): return
    got`): `_handshake.legacy_versions`/`echo`, `_tolerance.plain_hello`/`judge`,
    `_cert_chain.leaf`, `_http.http_response`, `_legacy.legacy_hello`, ...;
  - every result through `ctx.result(verdict, reason, evidence, details=...)` (or
    `ctx.inconclusive`, `ctx.unless_unknown`): a finding's severity is a `Severity`, its code
    always `check.NAME`; `details` an instance of the check's details type
    (model/check_details.py) when the check established something it can state;
  - at the end, `CHECK = ActiveCheck(NAME, TITLE, run, DETAILS_TYPE)`, and one line for it in
    active.py (the static catalog: explicit imports, so that nothing here imports its
    callers) and in model/check_catalog.py (its name, section, the audit phases it reads,
    whether it can hurt a server: data that `scan --help` reads without importing a check).

The derived checks (derived.py: POODLE, FREAK, ... read off the AuditReport, no connection)
have the same shape with the audit report for a context: `DerivedCheck(NAME, TITLE, judge,
DETAILS_TYPE)`, `judge(report) -> CheckResult`.

`run(ctx)` never raises for anything the server or the network did: a connection that could
not be made or answered makes the verdict inconclusive, with the reason. Two ways to talk
to the server, both through the target's scheduler (per-host cap, pacing, connection counts
under the check's own phase, the connector: TCP or TCP after a STARTTLS preamble):
  - `ctx.hello(config)`: one ordinary ClientHello from the engine and its answer (an
    `Outcome`), as the audit phases ask theirs;
  - `ctx.converse(talk)`: a connection the check drives itself, `talk(transport, deadline)`
    sending and reading what it wants (a heartbeat after the hello, an early
    ChangeCipherSpec, a renegotiation), every wait bounded by `deadline`.
An unexpected exception in a check is a bug: that check is inconclusive ("internal error"),
the target's report says so, and every other check and target goes on (active.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tlsprobe.engine.config import TLS13, ClientConfig
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_details import CheckDetails
from tlsprobe.model.checks import Category, CheckResult, Method, Severity, Verdict
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import STOP_HELLO, Outcome, Stop
from tlsprobe.probes.audit.scheduler import TargetRunner

__all__ = ["ActiveCheck", "CheckContext", "Run", "Talk"]

T = TypeVar("T")
#: a conversation a check drives itself: (transport, deadline) -> its own value
Talk = Callable[[AsyncTransport, float], Awaitable[T]]
#: a check's `run`
Run = Callable[["CheckContext"], Awaitable[CheckResult]]


@dataclass(frozen=True)
class ActiveCheck:
    """An active check: `name` as in model/check_catalog.py, `title` for people, `run` the
    probe, `details` the type of its results' details (model/check_details.py)."""

    name: str
    title: str
    run: Run
    details: type[CheckDetails]


@dataclass
class CheckContext:
    """What a check gets: the target's runner, the audit so far (`report`: the versions the
    server speaks, its suites when asked for), and its own phase label for counting."""

    runner: TargetRunner
    report: AuditReport
    name: str
    category: Category
    title: str = ""
    details: type[CheckDetails] = CheckDetails

    @property
    def phase(self) -> str:
        """The label its connections are counted under ("check heartbleed")."""
        return f"check {self.name}"

    @property
    def spoken(self) -> list[int]:
        """The protocol versions the audit established the server speaks."""
        return self.report.spoken_versions()

    def version_hello(self, version: int) -> tuple[ClientConfig, Stop]:
        """The hello that established `version` in the audit (the versions check's full
        offer, or its minimal hello where the server refused the full one) and where its
        connection stops: a check's hello of that version starts from it."""
        from tlsprobe.probes.audit.versions import established_hello
        support = next((v for v in self.report.versions if v.version.id == version), None)
        return established_hello(self.runner, version, support)

    def config(self, versions: tuple[int, ...], **kw: object) -> ClientConfig:
        """A ClientConfig for this target (SNI, every signature scheme, no ALPN). When it
        offers TLS 1.3 and the audit reached TLS 1.3 only with its minimal hello (the full
        offer reset or refused: a path with a size limit), the groups and key share are the
        minimal hello's unless `kw` names them: a browser's X25519MLKEM768 share would make
        the hello as large as the one that failed."""
        if TLS13 in versions and self.established_small(TLS13):
            from tlsprobe.probes.audit.versions import MINIMAL_GROUPS, MINIMAL_SHARES
            kw.setdefault("groups", MINIMAL_GROUPS)
            kw.setdefault("key_share_groups", MINIMAL_SHARES)
        if "groups" not in kw:
            found = self.server_groups(versions)
            if found:
                from tlsprobe.engine.config import DEFAULT_GROUPS
                kw["groups"] = DEFAULT_GROUPS + found
                if TLS13 in versions:
                    kw.setdefault("key_share_groups", found[:1])
        return self.runner.config(versions, **kw)

    def server_groups(self, versions: tuple[int, ...]) -> tuple[int, ...]:
        """The groups the group audit found the server accepts in a version of `versions`
        that accepts none of the default offer's (those tlsprobe can compute): a server
        restricted to, say, secp521r1 and x448 refuses a hello of the default groups, so a
        check's hello adds them; () when each version accepts a default group, or its
        groups were not audited."""
        from tlsprobe.engine.config import DEFAULT_GROUPS
        from tlsprobe.kex import is_computable
        found: list[int] = []
        for version in versions:
            audit = self.report.group_audit(version)
            accepted = [c.id for c in audit.supported] if audit is not None else []
            if not set(accepted) & set(DEFAULT_GROUPS):
                found += [g for g in accepted if is_computable(g)]
        return tuple(dict.fromkeys(found))

    def undetermined(self, low: int, high: int) -> str | None:
        """Why a verdict resting on "no version in [low, high] is spoken" cannot be given:
        the versions there whose support the audit could not establish (model Spoken
        UNKNOWN: inconclusive, or not checked); None when each is known."""
        from tlsprobe.registry import version_name
        names = [version_name(v) for v in self.report.unknown_versions(low, high)]
        if not names:
            return None
        return f"the audit could not establish whether {', '.join(names)} is spoken"

    def unless_unknown(self, low: int, high: int, reason: str) -> CheckResult:
        """The result of a check that has nothing to test because no version in
        [low, high] is spoken: not applicable (`reason`) when each of them was refused,
        inconclusive when one of them is unknown (never "not spoken" from a missing
        answer)."""
        why = self.undetermined(low, high)
        if why is not None:
            return self.inconclusive(f"{why} ({reason} if it is not)")
        return self.result(Verdict.not_applicable, reason)

    def established_small(self, version: int) -> bool:
        """Whether the audit established `version` with its minimal hello only."""
        return any(v.version.id == version and v.status == "supported" and v.minimal
                   for v in self.report.versions)

    async def hello(self, config: ClientConfig, stop: Stop = STOP_HELLO, *,
                    confirm: bool | None = None, label: str = "") -> Outcome:
        """One ordinary hello's answer (see TargetRunner.run: a refusal is asked again when
        `confirm` says so)."""
        return await self.runner.run(config, self.phase + (f" {label}" if label else ""),
                                     stop, confirm=confirm)

    async def still_answered(self, version: int, label: str = "control") -> str | None:
        """Right after a refusal the check reads as a fact about what it sent: does the
        server still answer the hello that established `version` (see `version_hello`)?
        None when it does; else why not, for an inconclusive result (the one rule of
        probes/audit/confirm.py still_answered, counted under this check's phase)."""
        from tlsprobe.probes.audit.confirm import still_answered
        from tlsprobe.probes.audit.versions import established_name
        config, stop = self.version_hello(version)
        return await still_answered(self.runner, config, stop, f"{self.phase} {label}",
                                    established_name(version))

    async def converse(self, talk: Talk[T], label: str = "") -> T | Outcome:
        """One connection the check drives itself; an `Outcome` (inconclusive, with the
        reason) when no connection could be opened or it failed on the network."""
        return await self.runner.scheduler.converse(
            self.runner.target, self.phase + (f" {label}" if label else ""), talk)

    def connections(self) -> int:
        """Connections this check made so far (every label under its phase)."""
        target = self.runner.target.display
        return sum(n for (t, phase), n in self.runner.scheduler.connections.items()
                   if t == target and (phase == self.phase or
                                       phase.startswith(self.phase + " ")))

    def result(self, verdict: Verdict, reason: str, evidence: tuple[str, ...] = (), *,
               code: str | None = None, severity: Severity | None = None,
               details: CheckDetails | None = None) -> CheckResult:
        """This check's result, with its connection count so far. A `severity` makes it a
        finding, whose code is always `check.` + the check's name (policy/codes.py
        registers every code so: a policy can re-rate or waive it); another `code` is a
        bug, and so are `details` of another type than the check declares."""
        if code is not None and code != f"check.{self.name}":
            raise ValueError(f"finding code {code!r} of check {self.name!r} is not "
                             f"'check.{self.name}'")
        if details is not None and not isinstance(details, self.details):
            raise TypeError(f"check {self.name!r} declares {self.details.__name__} details, "
                            f"not {type(details).__name__}")
        code = f"check.{self.name}" if severity is not None else None
        return CheckResult(self.name, self.title, verdict, reason, evidence,
                           method=Method.active, connections=self.connections(),
                           category=self.category, code=code, severity=severity,
                           details=details)

    def inconclusive(self, reason: str, evidence: tuple[str, ...] = (),
                     details: CheckDetails | None = None) -> CheckResult:
        return self.result(Verdict.inconclusive, reason, evidence, details=details)
