"""The public Python API: probe, audit, read captures and measure speed from Python.

Every function returns the model types the command line prints as JSON
(`tlsprobe.model`: `ProbeResult`, `AuditReport`, `ConnectionReport`, `SpeedReport`), and
computes them with exactly the calls the commands make (one path, no second
implementation): `probe` runs `probes.probe.run_probe` as `tlsprobe HOST` does, `scan` and
`ascan` run `probes.audit.audit_many` on a `probes.scheduler.Scheduler` as `tlsprobe scan`
does (its `run_audit` is `asyncio.run(audit_many(...))`), `read_capture` iterates an
`offline.analyzer.CaptureAnalysis` as `tlsprobe pcap --json` does, and `speed` runs
`speed.run_speed` as `tlsprobe speed --json` does. What differs is only the argument side:
Python values here instead of option strings (names or codepoints for lists).

Errors: every exception raised here is a `tlsprobe.errors.TlsprobeError` whose
`failure_kind` (a `FailureKind`) says why and whose `exit_code` is the command line's code
for it: a bad argument is a `UsageError` (kind "usage"); a probe that did not reach its
answer raises `ProbeError` (kind network, not_tls, alert, closed, refused or protocol) with
the partial `result`; a capture that cannot be read at all raises a `TlsprobeError` of kind
"bad_input". An audit never raises for a target: each `AuditReport` carries `error` and
`error_kind` (a scan of many servers keeps going), as `scan --json` does.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from tlsprobe.apiargs import checked
from tlsprobe.errors import (EXIT_BY_KIND, FailureKind, TlsprobeError, UnreadableInput,
                             UsageError, exit_code_for)
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.capture import CaptureSummary, ConnectionReport
from tlsprobe.model.probe import ProbeResult
from tlsprobe.model.speed import SpeedReport

if TYPE_CHECKING:
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.net.tcp import Target
    from tlsprobe.offline.analyzer import CaptureAnalysis

__all__ = ["AuditReport", "CaptureReader", "CaptureSummary", "ConnectionReport", "FailureKind",
           "ProbeError", "ProbeResult", "SpeedReport", "TlsprobeError", "UsageError", "aprobe",
           "ascan", "failure_kind", "probe", "read_capture", "scan", "speed"]

#: a list entry: a name (IANA or OpenSSL spelling, as on the command line) or a codepoint
Code = str | int


def failure_kind(exc: BaseException) -> FailureKind:
    """The `FailureKind` of an exception raised by tlsprobe: its own `kind` when it has one
    (`ProbeError`, `NetworkError`), else the kind of its exit code ("usage" for a
    `UsageError`, "bad_input" for an unreadable capture); "internal" for anything else."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, FailureKind):
        return kind
    if isinstance(exc, TlsprobeError):
        for candidate, code in EXIT_BY_KIND.items():
            if code == exc.exit_code:
                return candidate
    return FailureKind.INTERNAL


class ProbeError(TlsprobeError):
    """A probe that did not reach its answer. `kind` says why (network, not_tls, alert,
    closed, refused, protocol); `exit_code` is what `tlsprobe HOST` exits with; `result` is
    the `ProbeResult` with what was established before the failure (its `error` is this
    message)."""

    def __init__(self, result: ProbeResult) -> None:
        try:
            self.kind = FailureKind(result.error_kind or "")
        except ValueError:
            self.kind = FailureKind.PROTOCOL
        super().__init__(result.error or "the probe failed", exit_code_for(self.kind))
        self.result = result


def _codes(items: Sequence[Code], parse: Callable[[str], int], what: str) -> tuple[int, ...]:
    """Names or codepoints -> codepoints, a bad one a UsageError naming the argument."""
    if isinstance(items, str):
        items = [items]
    out = []
    for item in items:
        if isinstance(item, int):
            if not 0 <= item <= 0xFFFF:
                raise UsageError(f"{what}: {item} is not a 16-bit codepoint")
            out.append(item)
            continue
        try:
            out.append(parse(item))
        except ValueError as exc:
            raise UsageError(f"{what}: {exc}") from None
    return tuple(out)


def _server_name(name: str | None, send_sni: bool) -> str | None:
    """`server_name` checked as the command line checks --sni (and --sni with --no-sni)."""
    if name is None:
        return None
    if not send_sni:
        raise UsageError("server_name and send_sni=False contradict each other; give one "
                         "of them")
    from tlsprobe.engine.config import parse_server_name
    return parse_server_name(name, "server_name")


def _version(item: str) -> int:
    from tlsprobe.offline.filters import parse_version
    return parse_version(item)


@dataclass(frozen=True)
class _Hello:
    """What `probe` offers, as given by the caller (None: the command line's default)."""

    versions: Sequence[Code] | None = None
    groups: Sequence[Code] | None = None
    key_shares: Sequence[Code] | None = None
    ciphers: Sequence[Code] | None = None
    ciphersuites: Sequence[Code] | None = None
    sigalgs: Sequence[Code] | None = None
    alpn: Sequence[str] | None = None
    server_name: str | None = None
    send_sni: bool = True
    grease: bool = False


def _config(hello: _Hello, host: str) -> ClientConfig:
    """The ClientConfig for `hello`, with the probe's defaults and checks (SNI: the host name,
    none for an address; a key share must be for an offered group)."""
    from tlsprobe import registry
    from tlsprobe.engine.config import ClientConfig, build_client_hello
    kw: dict[str, object] = {"grease": hello.grease}
    lists = (("versions", hello.versions, _version, "versions"),
             ("groups", hello.groups, registry.parse_group, "groups"),
             ("key_share_groups", hello.key_shares, registry.parse_group, "key_shares"),
             ("cipher_suites_12", hello.ciphers, registry.parse_suite, "ciphers"),
             ("cipher_suites_13", hello.ciphersuites, registry.parse_suite, "ciphersuites"),
             ("signature_algorithms", hello.sigalgs, registry.parse_sigscheme, "sigalgs"))
    for field, items, parse, what in lists:
        if items is not None:
            kw[field] = _codes(items, parse, what)
    if hello.alpn is not None:
        kw["alpn"] = (hello.alpn,) if isinstance(hello.alpn, str) else tuple(hello.alpn)
    sni = _server_name(hello.server_name, hello.send_sni)
    if sni is None and hello.send_sni:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            sni = host
    config = ClientConfig(server_name=sni if hello.send_sni else None, **kw)  # type: ignore[arg-type]
    if not config.cipher_suites():
        raise UsageError("no cipher suites to offer for the chosen versions")
    missing = [g for g in config.key_share_groups or () if g not in config.offered_groups()]
    if missing:
        raise UsageError(f"key_shares: {registry.group_label(missing[0])} is not in groups")
    try:
        build_client_hello(config).hello.serialize()
    except ValueError as exc:   # DecodeError is a ValueError too
        raise UsageError(f"the ClientHello cannot be encoded ({exc})") from None
    return config


@checked
def probe(target: str, *, versions: Sequence[Code] | None = None,
          groups: Sequence[Code] | None = None, key_shares: Sequence[Code] | None = None,
          ciphers: Sequence[Code] | None = None, ciphersuites: Sequence[Code] | None = None,
          sigalgs: Sequence[Code] | None = None, alpn: Sequence[str] | None = None,
          server_name: str | None = None, send_sni: bool = True, grease: bool = False,
          verify: bool = True, cafile: str | None = None, timeout: float = 10.0,
          total_timeout: float | None = None, first_flight_only: bool = False,
          http_get: str | None = None, raise_on_error: bool = True,
          quic: bool = False) -> ProbeResult:
    """Probe one server as `tlsprobe HOST[:PORT]` does and return its `ProbeResult`.

    `target` is "HOST[:PORT]" (default port 443; IPv6 as "[::1]:4433"). The lists take names
    or codepoints as the options of the same name do (`versions=["1.3"]`,
    `groups=["x25519", 0x0017]`); None offers the command line's defaults. `verify` checks the
    chain and host name against `cafile` (default: the system bundle); `timeout` is per
    connect and read, `total_timeout` (default 3 x timeout) for the whole probe. `quic`
    probes over QUIC v1 (UDP) as `--quic` does: TLS 1.3 only, ALPN h3 unless `alpn` is
    given; the result's `quic` says what QUIC did.

    Raises `UsageError` for a bad argument, and `ProbeError` (with `.kind` and the partial
    `.result`) when the probe did not reach its answer, unless `raise_on_error` is False:
    the result then carries `error` and `error_kind`. A certificate that does not verify
    is no error: `result.verification` says so."""
    from tlsprobe.net.tcp import parse_target
    from tlsprobe.probes.probe import ProbeOptions, run_probe
    if not all(0 < t <= 86400 for t in (timeout, timeout if total_timeout is None
                                         else total_timeout)):
        raise UsageError("timeout and total_timeout must be above 0 and at most a day "
                         "(86400 seconds)")
    if http_get is not None and first_flight_only:
        raise UsageError("http_get needs a completed handshake (drop first_flight_only)")
    if quic and (http_get is not None or ciphers is not None):
        raise UsageError("http_get and ciphers (TLS 1.2 suites) cannot be used with quic")
    parsed = parse_target(target)
    hello = _Hello(versions, groups, key_shares, ciphers, ciphersuites, sigalgs,
                   ("http/1.1",) if alpn is None and http_get is not None else alpn,
                   server_name, send_sni, grease)
    if cafile is not None:
        from tlsprobe.engine.chain import check_cafile
        check_cafile(cafile, contents=verify)
    options = ProbeOptions(config=_config(hello, parsed.host), timeout=timeout,
                           annotate=False, stop_after_first_flight=first_flight_only,
                           http_get=http_get, verify=verify, cafile=cafile,
                           total_timeout=total_timeout)
    if quic:   # probes/quic.py: the QUIC form of the hello, as `tlsprobe HOST --quic`
        from tlsprobe.engine.config import TLS13
        from tlsprobe.probes.quic import run_quic_probe
        if versions is not None and set(options.config.versions) != {TLS13}:
            raise UsageError("versions: QUIC carries TLS 1.3 only (RFC 9001 4.2)")
        result = run_quic_probe(parsed, options, alpn_given=alpn is not None)[0].result
    else:
        result = run_probe(parsed, options).result
    if result.error and raise_on_error:
        raise ProbeError(result)
    return result


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_thread(func: Callable[_P, _R], name: str, doc: str) -> Callable[_P, Awaitable[_R]]:
    """`func` as a coroutine function that runs it in a worker thread."""
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await asyncio.to_thread(func, *args, **kwargs)
    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


aprobe = _in_thread(probe, "aprobe", """`probe` for asyncio code: the same probe (same
    arguments, result and errors) in a worker thread, so that the event loop keeps running
    while it waits for the server (`await aprobe("HOST:PORT", groups=["x25519"])`).""")


def _checks(checks: Sequence[str] | None) -> tuple[str, ...]:
    """Check names (as `scan --checks` takes them; None: its default, the audit and every
    check) -> the audit's checks, in their order (the one resolver `scan` uses)."""
    from tlsprobe.probes.checks.catalog import DEFAULT, resolve
    if checks is None:
        return resolve(DEFAULT, "checks")
    return resolve([checks] if isinstance(checks, str) else list(checks), "checks")


@checked
async def ascan(targets: str | Sequence[str], *, checks: Sequence[str] | None = None,
                policies: Sequence[str] | None = None, extra_groups: Sequence[Code] = (),
                server_name: str | None = None, send_sni: bool = True, verify: bool = True,
                cafile: str | None = None, per_host: int = 3, concurrency: int = 4,
                delay: float = 0.0, retries: int = 2, timeout: float = 5.0,
                on_report: Callable[[AuditReport], None] | None = None,
                starttls: str | None = None) -> list[AuditReport]:
    """`scan` for asyncio code: audits on the running event loop."""
    from tlsprobe import registry
    from tlsprobe.policy.load import DEFAULT_POLICY, PolicyError, load_policy
    from tlsprobe.probes.audit.run import AuditOptions, audit_many
    from tlsprobe.probes.audit.scheduler import Scheduler
    from tlsprobe.net.tcp import parse_target
    names = [targets] if isinstance(targets, str) else list(targets)
    parsed: list[Target] = list(dict.fromkeys(parse_target(t) for t in names))
    if per_host < 1 or concurrency < 1 or not 0 <= retries <= 10:
        raise UsageError("per_host and concurrency must be at least 1, retries 0 to 10")
    if not 0 < timeout <= 3600 or not 0 <= delay <= 3600:
        raise UsageError("timeout must be above 0 and delay at least 0 (at most 3600 s)")
    if cafile is not None:
        from tlsprobe.engine.chain import check_cafile
        check_cafile(cafile, contents=verify)
    try:
        loaded = tuple(load_policy(p) for p in ([DEFAULT_POLICY] if policies is None else
                                                [policies] if isinstance(policies, str)
                                                else policies))
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    server_name = _server_name(server_name, send_sni)
    options = AuditOptions(checks=_checks(checks),
                           extra_groups=_codes(extra_groups, registry.parse_group,
                                               "extra_groups"),
                           server_name=server_name, send_sni=send_sni, policies=loaded,
                           cafile=cafile, verify=verify)
    connector = None
    if starttls is not None:   # every connection holds the preamble first (--starttls)
        from tlsprobe.net.starttls_connect import starttls_connector
        from tlsprobe.net.tcp_async import TcpConnector
        connector = starttls_connector(starttls, parsed, TcpConnector(timeout),
                                       server_name=server_name, what="starttls")
    scheduler = Scheduler(per_host=per_host, delay=delay, retries=retries, timeout=timeout,
                          connector=connector)
    return await audit_many(parsed, options, scheduler, concurrency=concurrency,
                            on_report=on_report)


@checked
def scan(targets: str | Sequence[str], *, checks: Sequence[str] | None = None,
         policies: Sequence[str] | None = None, extra_groups: Sequence[Code] = (),
         server_name: str | None = None, send_sni: bool = True, verify: bool = True,
         cafile: str | None = None, per_host: int = 3, concurrency: int = 4,
         delay: float = 0.0, retries: int = 2, timeout: float = 5.0,
         on_report: Callable[[AuditReport], None] | None = None,
         starttls: str | None = None) -> list[AuditReport]:
    """Audit servers as `tlsprobe scan` does; one `AuditReport` per distinct target, in order.

    `checks` names what to check as `--checks` does (default: versions, groups, pq, suites,
    sigalgs, cert; vulnerability checks and aliases such as "all" too); `policies` are
    built-in names or policy files (default ["intermediate"]; [] for the built-in checks
    only; one name may be given as a str). The connection arguments are `scan`'s options
    of the same name; `on_report` is called with each report as soon as its target is
    done. `starttls` ("smtp", "imap", ..., or "auto": by the port) holds that plain-text
    preamble before TLS on every connection, as `--starttls` does; the report's
    `starttls` says what the server answered.

    A target that fails does not raise: its report has `error` and `error_kind` (a
    `FailureKind` value) and the other targets are still audited. Raises `UsageError` for
    a bad argument (a target that is no HOST[:PORT], an unknown check or policy)."""
    return asyncio.run(ascan(targets, checks=checks, policies=policies,
                             extra_groups=extra_groups, server_name=server_name,
                             send_sni=send_sni, verify=verify, cafile=cafile,
                             per_host=per_host, concurrency=concurrency, delay=delay,
                             retries=retries, timeout=timeout, on_report=on_report,
                             starttls=starttls))


class CaptureReader:
    """The TLS and QUIC connections of one capture, as `ConnectionReport`s in the order
    they end (as `tlsprobe pcap --jsonl` streams them). `summary` (a `CaptureSummary`:
    packets, warnings about damage, notes) is set once the iteration has ended. Use it as a
    context manager, or iterate to the end, so that the file is closed."""

    def __init__(self, analysis: CaptureAnalysis) -> None:
        self._analysis = analysis
        self._reported = 0

    def __iter__(self) -> Iterator[ConnectionReport]:
        for analyzed in self._analysis:
            if isinstance(analyzed.report, ConnectionReport):
                self._reported += 1
                yield analyzed.report

    @property
    def summary(self) -> CaptureSummary | None:
        """What was read from the capture (`reported`: the connections yielded); None until
        the iteration has ended."""
        summary = self._analysis.summary
        return None if summary is None else replace(summary, reported=self._reported)

    def close(self) -> None:
        """Release the file and whatever the analysis still holds."""
        self._analysis.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@checked
def read_capture(path: str | os.PathLike[str], keylog: str | os.PathLike[str] | None = None,
                 *, embedded_keys: bool = True, quic: bool = True) -> CaptureReader:
    """Read a pcap or pcapng capture (gzip too; `path` a str or a `pathlib.Path`) as
    `tlsprobe pcap` does: a `CaptureReader` yielding one `ConnectionReport` per TLS or QUIC
    connection.

    `keylog` is an SSLKEYLOGFILE to decrypt TLS 1.3 handshakes and TLS 1.2 records with
    (keys embedded in a pcapng are used too unless `embedded_keys` is False); `quic` reads
    QUIC Initial packets. Raises a `TlsprobeError` of kind "usage" for a key log that cannot
    be read and an `UnreadableInput` (kind "bad_input", exit 2 as the command line's) when
    nothing can be read from the capture (missing, not a capture); damage later on ends the iteration and is said in `summary.warnings`."""
    from tlsprobe.capture import CaptureError
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    path = os.fspath(path)
    keys = None
    if keylog is not None:
        keylog = os.fspath(keylog)
        from tlsprobe.engine.keylog import load_keylog
        try:
            keys = load_keylog(keylog)
        except OSError as exc:
            raise UsageError(f"keylog {keylog}: {exc.strerror or exc}") from None
    options = AnalyzerOptions(keylog=keys, embedded_keys=embedded_keys, quic=quic)
    try:
        return CaptureReader(CaptureAnalysis(path, options))
    except (CaptureError, OSError) as exc:
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableInput(f"{path}: {text}".replace(f"{path}: {path}: ", f"{path}: ")
                              ) from None


@checked
def speed(algorithms: str | Sequence[str] = (), *, seconds: float = 3.0,
          processes: int = 1, block_sizes: Sequence[int] | None = None,
          compare_openssl: bool = False, openssl_binary: str | None = None) -> SpeedReport:
    """Measure key exchange groups, signatures and AEADs as `tlsprobe speed` does and return
    its `SpeedReport` (`results`: one `AlgorithmResult` per algorithm with its `Figure`s of
    operations per second; `comparison`: the `openssl speed` figures when asked).

    `algorithms` are names or group words as `tlsprobe speed --list` shows them (empty:
    every algorithm); `seconds` per figure (0.01 to 3600); `processes` measured at once
    (1 to 256, their figures summed); `block_sizes` for the AEADs (default 16 to 16384).
    Raises `UsageError` for a bad argument; Ctrl-C raises `speed.SpeedInterrupted`, whose
    `report` holds the figures completed."""
    from tlsprobe.speed import DEFAULT_BLOCK_SIZES, SpeedError, UnknownAlgorithm, catalog
    from tlsprobe.speed import openssl as openssl_compare
    from tlsprobe.speed import run_speed
    try:
        chosen = catalog.resolve([algorithms] if isinstance(algorithms, str) else algorithms)
    except UnknownAlgorithm as exc:
        raise UsageError(str(exc)) from None
    if not 0.01 <= seconds <= 3600:
        raise UsageError(f"seconds must be at least 0.01 and at most 3600, not {seconds}")
    if not 1 <= processes <= 256:
        raise UsageError(f"processes must be between 1 and 256, not {processes}")
    sizes = tuple(dict.fromkeys(block_sizes)) if block_sizes is not None else \
        DEFAULT_BLOCK_SIZES
    if not sizes or any(not 1 <= size <= 1 << 20 for size in sizes):
        raise UsageError("block_sizes must be between 1 and 1048576 bytes")
    if openssl_binary is not None:
        try:
            openssl_compare.check_binary(openssl_binary)
        except openssl_compare.OpensslUnusable as exc:
            raise UsageError(str(exc)) from None
    try:
        return run_speed(chosen, seconds, processes=processes, block_sizes=sizes,
                         compare_openssl=compare_openssl or openssl_binary is not None,
                         openssl_binary=openssl_binary)
    except SpeedError as exc:
        raise TlsprobeError(str(exc), exit_code=1) from None
