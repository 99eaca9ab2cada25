"""`ScanRequest`: audits as asked (`tlsprobe scan ...` or the API's `scan(...)`), checked
once, and what runs them: `probes.audit.run.AuditOptions` and, from `ConnectionSettings`,
the one place a `probes.audit.scheduler.Scheduler` is made (the scan, its --compare-tcp
audit, the API and the survey's shards all ask `ConnectionSettings.scheduler`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.hello import Items, codes
from tlsprobe.requests.names import API, CLI, LIMIT_OPTIONS, Names
from tlsprobe.requests.processes import PROCESSES_PER_CPU, check_process_count

if TYPE_CHECKING:
    from tlsprobe.engine.client import Limits
    from tlsprobe.model.clients import ClientProfile
    from tlsprobe.net.targets import BadLine
    from tlsprobe.net.tcp import Target
    from tlsprobe.net.transport import AsyncConnector
    from tlsprobe.policy.load import Policy
    from tlsprobe.probes.audit.run import AuditOptions
    from tlsprobe.probes.audit.scheduler import ConnectionHook, Scheduler

#: the most connections at once to one host (politeness: a server sees them all) and the
#: most targets audited at once (each holds its connections and its results meanwhile)
MAX_PER_HOST = 64
MAX_CONCURRENCY = 1024


@dataclass(frozen=True)
class ConnectionSettings:
    """How politely an audit connects: connections at once per host, targets at once, the
    pause between connection starts to one host, retries after a reset or timeout (with
    backoff), and the connect and read timeout per connection."""

    per_host: int = 3
    concurrency: int = 4
    delay: float = 0.0
    retries: int = 2
    timeout: float = 5.0
    #: the engine's bounds on each connection (--max-message, --max-chain, --max-records,
    #: --max-bytes, as the probe's); None: the engine's defaults
    limits: Limits | None = None

    @classmethod
    def build(cls, *, per_host: int = 3, concurrency: int = 4, delay: float = 0.0,
              retries: int = 2, timeout: float = 5.0, names: Names = API,
              limits: Limits | None = None) -> ConnectionSettings:
        """The settings, or a UsageError naming the input at fault."""
        for name, value, most in (("per_host", per_host, MAX_PER_HOST),
                                  ("concurrency", concurrency, MAX_CONCURRENCY)):
            if isinstance(value, bool) or not 1 <= value <= most:
                raise UsageError(f"{names(name)} must be from 1 to {most}, not {value}")
        if not (math.isfinite(timeout) and 0 < timeout <= 3600):
            raise UsageError(f"{names('timeout')} must be a number of seconds above 0 and at "
                             f"most 3600, not {timeout}")
        if not (math.isfinite(delay) and 0 <= delay <= 3600):
            raise UsageError(f"{names('delay')} must be a number of seconds from 0 to 3600, "
                             f"not {delay}")
        if not 0 <= retries <= 10:
            raise UsageError(f"{names('retries')} must be from 0 to 10, not {retries}")
        return cls(per_host=per_host, concurrency=concurrency, delay=delay, retries=retries,
                   timeout=timeout, limits=limits)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ConnectionSettings:
        """--per-host, --concurrency, --delay, --retries, --timeout (scan and survey), and
        scan's --max-message, --max-chain, --max-records, --max-bytes."""
        limits = None
        if any(getattr(args, name, None) is not None for name in LIMIT_OPTIONS):
            from tlsprobe.requests.probe import limits_from_args
            limits = limits_from_args(args)
        return cls.build(per_host=args.per_host, concurrency=args.concurrency,
                         delay=args.delay, retries=args.retries, timeout=args.timeout,
                         names=CLI, limits=limits)

    def scheduler(self, connector: AsyncConnector | None = None,
                  on_connection: ConnectionHook | None = None) -> Scheduler:
        """The audit's scheduler with these settings (`connector` None: plain TCP)."""
        from tlsprobe.probes.audit.scheduler import Scheduler
        return Scheduler(per_host=self.per_host, delay=self.delay, retries=self.retries,
                         timeout=self.timeout, on_connection=on_connection,
                         connector=connector, limits=self.limits)


def checked_server_name(name: str | None, send_sni: bool, names: Names) -> str | None:
    """The audit's server_name as given, checked as the probe's is (None: the host name)."""
    if name is None:
        return None
    if not send_sni:
        raise UsageError(f"{names('sni')} and {names('no_sni')} cannot be combined")
    from tlsprobe.engine.config import parse_server_name
    return parse_server_name(name, names("sni"))


def checks_of(given: Sequence[str] | str | None, names: Names) -> tuple[str, ...]:
    """Check names as `--checks` takes them (None: its default, the audit and every check)
    -> the audit's checks in their order (probes/checks/catalog.py resolve)."""
    from tlsprobe.probes.checks.catalog import DEFAULT, resolve
    if given is None:
        return resolve(DEFAULT, names("checks"))
    return resolve(given.split(",") if isinstance(given, str) else list(given),
                   names("checks"))


def read_only_of(given: Sequence[str] | str | None, names: Names) -> tuple[str, ...]:
    """The audit phases `checks_of(given)` runs only because the checks named read them
    (probes/checks/catalog.py read_only): their findings are not reported."""
    from tlsprobe.probes.checks.catalog import DEFAULT, read_only
    if given is None:
        return read_only(DEFAULT, names("checks"))
    return read_only(given.split(",") if isinstance(given, str) else list(given),
                     names("checks"))


def policies_of(given: Sequence[str] | str | None, names: Names = API) -> tuple[Policy, ...]:
    """Policies by name or file (None: the default one; a str: one policy); one that cannot
    be loaded is a usage error with the policy's own one-line message. A policy given twice
    is a usage error (as any repeated item), and so are two different policies of one name are a usage error (findings name
    their policy, and a policy's tables apply to its own findings: they would mix)."""
    from tlsprobe.policy.load import DEFAULT_POLICY, PolicyError, load_policy
    specs = [DEFAULT_POLICY] if given is None else [given] if isinstance(given, str) else given
    try:
        loaded = tuple(load_policy(spec) for spec in specs)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    seen: dict[str, tuple[str, Policy]] = {}
    for spec, policy in zip(specs, loaded):   # the report would list it twice
        if policy.name in seen:
            first, other = seen[policy.name]
            if first == spec or other == policy:
                raise UsageError(f"{names('policies')} {spec!r} is given twice ({policy.name}); "
                                 "give each once")
            # their findings and tables would mix (a policy's tables apply to the
            # findings named after it)
            raise UsageError(f"{names('policies')} {spec}: another policy is named {policy.name!r} too "
                             "(give a policy file its own 'name')")
        seen[policy.name] = (spec, policy)
    return loaded


def audit_options(*, checks: tuple[str, ...], read_only: tuple[str, ...] = (),
                  extra_groups: Items = (),
                  server_name_: str | None = None, send_sni: bool = True,
                  policies: tuple[Policy, ...] = (), verify: bool = True,
                  cafile: str | None = None, names: Names = API,
                  clients: tuple[ClientProfile, ...] = ()) -> AuditOptions:
    """The audit's options; the extra groups parsed, the trust store checked."""
    from tlsprobe import registry
    from tlsprobe.probes.audit.run import AuditOptions
    extra = codes(extra_groups, registry.parse_group, "extra_groups", names, empty_ok=True)
    if cafile is not None:   # (the import only then: a group audit loads no more modules)
        from tlsprobe.requests.probe import check_trust
        check_trust(verify, cafile, names)
    return AuditOptions(checks=checks, read_only=read_only, extra_groups=extra,
                        server_name=server_name_,
                        send_sni=send_sni, policies=policies, cafile=cafile, verify=verify,
                        clients=clients)


def clients_of(clients: bool, profiles: Sequence[str] | str | None,
               profiles_dir: str | None, names: Names) -> tuple[ClientProfile, ...]:
    """The client profiles to simulate (none unless `clients`, `profiles` or `profiles_dir`
    asks for the simulation): those `profiles` names among the packaged ones or those of
    `profiles_dir` (probes/clients/run.py choose_profiles)."""
    if not (clients or profiles is not None or profiles_dir is not None):
        return ()
    from pathlib import Path

    from tlsprobe.probes.clients.run import choose_profiles
    folder = Path(profiles_dir) if profiles_dir is not None else None
    if folder is not None and not folder.is_dir():
        raise UsageError(f"{names('profiles_dir')}: {profiles_dir}: not a folder")
    return choose_profiles(profiles, names("profiles"), folder)


def _checks_text(args: argparse.Namespace) -> str | None:
    if args.groups_only:
        if args.checks is not None and args.checks.strip().lower() != "groups":
            raise UsageError(f"--groups-only runs the group audit only: it cannot be combined "
                             f"with --checks {args.checks}")
        return "groups"
    return str(args.checks) if args.checks is not None else None


def checks_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """scan's --checks LIST and --groups-only -> the audit's checks, in their order."""
    return checks_of(_checks_text(args), CLI)


@dataclass(frozen=True)
class ScanRequest:
    """Checked audits: the targets in order (a line of `-f FILE` that is no target stays,
    as a BadLine, to be reported), the audit's options, the connection settings, and
    STARTTLS (the protocol, `auto`, or None; the connector is made per run)."""

    targets: tuple[Target | BadLine, ...]
    options: AuditOptions
    settings: ConnectionSettings
    starttls: str | None = None        # a protocol, "auto", or None: plain TLS
    xmpp_host: str | None = None
    names: Names = field(default=API, compare=False)

    @property
    def good_targets(self) -> list[Target]:
        from tlsprobe.net.tcp import Target
        return [t for t in self.targets if isinstance(t, Target)]

    @classmethod
    def build(cls, targets: str | Sequence[str], *, checks: Sequence[str] | str | None = None,
              policies: Sequence[str] | str | None = None, extra_groups: Items = (),
              server_name: str | None = None, send_sni: bool = True, verify: bool = True,
              cafile: str | None = None, settings: ConnectionSettings | None = None,
              starttls: str | None = None, xmpp_host: str | None = None,
              target_file: str | None = None, names: Names = API, clients: bool = False,
              profiles: Sequence[str] | str | None = None,
              profiles_dir: str | None = None) -> ScanRequest:
        """The request, or a UsageError naming the input at fault (in `names`' spelling).
        `target_file` ('-': stdin) adds its lines after `targets`; duplicates go. `clients`
        (or `profiles`/`profiles_dir` given): the client simulation after the checks."""
        from tlsprobe.net.tcp import parse_target
        settings = settings or ConnectionSettings()
        name = checked_server_name(server_name, send_sni, names)
        items: list[Target | BadLine] = [
            parse_target(t) for t in ([targets] if isinstance(targets, str) else targets)]
        if target_file:
            from tlsprobe.net.targets import read_target_file
            items.extend(read_target_file(target_file))
        if not items and not names.options:    # the command line says it with its options
            raise UsageError("targets: empty list; give at least one HOST[:PORT]")
        loaded = policies_of(policies, names)
        options = audit_options(checks=checks_of(checks, names),
                                read_only=read_only_of(checks, names), extra_groups=extra_groups,
                                server_name_=name, send_sni=send_sni, policies=loaded,
                                verify=verify, cafile=cafile, names=names,
                                clients=clients_of(clients, profiles, profiles_dir, names))
        from tlsprobe.requests.starttls import check_xmpp_host
        check_xmpp_host(starttls, xmpp_host, names)
        from tlsprobe.net.target import Target as Named
        unique: dict[object, Target | BadLine] = {}     # a target once, whatever its spelling
        for item in items:
            unique.setdefault(item.key if isinstance(item, Named) else item, item)
        return cls(targets=tuple(unique.values()), options=options, settings=settings,
                   starttls=starttls, xmpp_host=xmpp_host, names=names)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ScanRequest:
        """`tlsprobe scan ...` (its Namespace): -f FILE's lines after the command line's
        targets, --groups-only, --no-policy."""
        settings = ConnectionSettings.from_args(args)
        if args.no_policy and args.policy:     # else --policy would be dropped in silence
            raise UsageError("--policy and --no-policy cannot be combined (--no-policy: "
                             "the built-in checks only)")
        request = cls.build(args.targets, checks=_checks_text(args),
                            policies=() if args.no_policy else args.policy,
                            extra_groups=args.extra_groups, server_name=args.sni,
                            send_sni=not args.no_sni, verify=not args.no_verify,
                            cafile=args.cafile, settings=settings,
                            starttls=getattr(args, "starttls", None),
                            xmpp_host=getattr(args, "xmpp_host", None),
                            target_file=args.targets_file, names=CLI,
                            clients=getattr(args, "clients", False),
                            profiles=getattr(args, "profiles", None),
                            profiles_dir=getattr(args, "profiles_dir", None))
        if not request.targets:
            if args.targets_file is None:
                raise UsageError("no target: give HOST[:PORT] or -f FILE")
            name = "stdin" if args.targets_file == "-" else args.targets_file
            raise UsageError(f"no target in {name} (-f): give one HOST[:PORT] per line "
                             "('#' starts a comment)")
        return request

    def connector(self, note: IO[str] | None = None) -> AsyncConnector | None:
        """STARTTLS: the connector under which every connection of the audit holds its
        target's preamble first (the `auto` choices told on `note`, default stderr); None
        for plain TLS over TCP (the scheduler's own)."""
        if self.starttls is None:
            return None
        from tlsprobe.net.starttls_connect import AsyncStartTlsConnector
        from tlsprobe.net.tcp_async import TcpConnector
        from tlsprobe.requests.starttls import starttls_spec
        specs = {t.display: spec for t in self.good_targets
                 if (spec := starttls_spec(self.starttls, t, xmpp_host=self.xmpp_host,
                                           server_name=self.options.server_name,
                                           names=self.names, note=note)) is not None}
        return AsyncStartTlsConnector(TcpConnector(self.settings.timeout), specs)


__all__ = [
    "PROCESSES_PER_CPU",
    "ConnectionSettings",
    "ScanRequest",
    "audit_options",
    "check_process_count",
    "checked_server_name",
    "checks_from_args",
    "checks_of",
    "clients_of",
    "policies_of",
    "read_only_of",
]
