"""The public Python API: probe, audit, read captures and measure speed from Python.

Every function returns the model types the command line prints as JSON
(`tlsprobe.model`: `ProbeResult`, `AuditReport`, `ConnectionReport`, `SpeedReport`), and
computes them with exactly the calls the commands make (one path, no second
implementation): `probe` runs `probes.probe.run_probe` as `tlsprobe HOST` does, `scan` and
`ascan` run `probes.audit.audit_many` on a `probes.scheduler.Scheduler` as `tlsprobe scan`
does (its `run_audit` is `asyncio.run(audit_many(...))`), `timing` runs
`probes.timing.run.measure_timing` as `tlsprobe HOST --timing --json` does (its options
checked by `requests.timing`, as the command's are), `read_capture` iterates an
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
from collections.abc import Awaitable, Callable, Sequence
from typing import ParamSpec, TypeVar

from tlsprobe.api_capture import (
    CaptureReader,
    LiveCaptureReader,
    capture_live,
    read_capture,
)
from tlsprobe.apiargs import checked
from tlsprobe.errors import (
    EXIT_BY_KIND,
    EXIT_INTERNAL,
    FailureKind,
    TlsprobeError,
    UnreadableInput,
    UsageError,
    exit_code_for,
)
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.capture import CaptureSummary, ConnectionReport
from tlsprobe.model.clients import ClientSimulation, ClientsReport
from tlsprobe.model.probe import ProbeResult
from tlsprobe.model.speed import SpeedReport
from tlsprobe.model.timing import TimingReport

__all__ = ["AuditReport", "CaptureReader", "CaptureSummary", "ClientSimulation",
           "ClientsReport", "ConnectionReport", "FailureKind", "LiveCaptureReader",
           "ProbeError", "ProbeResult", "SpeedReport", "TimingReport", "TlsprobeError",
           "UnreadableInput", "UsageError", "aprobe", "ascan", "capture_live", "failure_kind",
           "probe", "read_capture", "scan", "simulate_clients", "speed", "timing"]

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
    closed, refused, protocol, limit); `exit_code` is what `tlsprobe HOST` exits with; `result` is
    the `ProbeResult` with what was established before the failure (its `error` is this
    message)."""

    def __init__(self, result: ProbeResult) -> None:
        try:
            self.kind = FailureKind(result.error_kind or "")
        except ValueError:
            self.kind = FailureKind.PROTOCOL
        super().__init__(result.error or "the probe failed", exit_code_for(self.kind))
        self.result = result


@checked
def probe(target: str, *, versions: Sequence[Code] | None = None,
          groups: Sequence[Code] | None = None, key_shares: Sequence[Code] | None = None,
          ciphers: Sequence[Code] | None = None, ciphersuites: Sequence[Code] | None = None,
          sigalgs: Sequence[Code] | None = None, alpn: Sequence[str] | None = None,
          server_name: str | None = None, send_sni: bool = True, grease: bool = False,
          verify: bool = True, cafile: str | None = None, timeout: float = 10.0,
          total_timeout: float | None = None, first_flight_only: bool = False,
          http_get: str | None = None, raise_on_error: bool = True,
          quic: bool = False, starttls: str | None = None,
          xmpp_host: str | None = None) -> ProbeResult:
    """Probe one server as `tlsprobe HOST[:PORT]` does and return its `ProbeResult`.

    `target` is "HOST[:PORT]" (default port 443; IPv6 as "[::1]:4433"). The lists take names
    or codepoints as the options of the same name do (`versions=["1.3"]`,
    `groups=["x25519", 0x0017]`); None offers the command line's defaults. `verify` checks the
    chain and host name against `cafile` (default: the system bundle); `timeout` is per
    connect and read, `total_timeout` (default 3 x timeout) for the whole probe. `quic`
    probes over QUIC v1 (UDP) as `--quic` does: TLS 1.3 only, ALPN h3 unless `alpn` is
    given; the result's `quic` says what QUIC did. `starttls` ("smtp", "imap", ..., or
    "auto": by the port) holds that plain-text preamble before TLS as `--starttls` does (the
    XMPP `to=` domain is `xmpp_host`, as `--xmpp-host`, else `server_name`, else the host);
    the result's `starttls` says what the server answered.

    Raises `UsageError` for a bad argument, and `ProbeError` (with `.kind` and the partial
    `.result`) when the probe did not reach its answer, unless `raise_on_error` is False:
    the result then carries `error` and `error_kind`. A certificate that does not verify
    is no error: `result.verification` says so."""
    from tlsprobe.probes.probe import run_probe
    from tlsprobe.requests.hello import HelloSpec
    from tlsprobe.requests.probe import ProbeRequest
    if quic and (http_get is not None or ciphers is not None or starttls is not None
                 or xmpp_host is not None):
        raise UsageError("http_get, ciphers (TLS 1.2 suites), xmpp_host and starttls cannot "
                         "be used with quic")
    hello = HelloSpec(versions=versions, groups=groups, key_shares=key_shares,
                      ciphers=ciphers, ciphersuites=ciphersuites, sigalgs=sigalgs, alpn=alpn,
                      server_name=server_name, send_sni=send_sni, grease=grease)
    request = ProbeRequest.build(target, hello, timeout=timeout, total_timeout=total_timeout,
                                 verify=verify, cafile=cafile,
                                 first_flight_only=first_flight_only, http_get=http_get,
                                 starttls=starttls, xmpp_host=xmpp_host)
    options = request.options()
    if quic:   # probes/quic.py: the QUIC form of the hello, as `tlsprobe HOST --quic`
        from tlsprobe.engine.config import TLS13
        from tlsprobe.probes.quic import run_quic_probe
        if versions is not None and set(options.config.versions) != {TLS13}:
            raise UsageError("versions: QUIC carries TLS 1.3 only (RFC 9001 4.2)")
        result = run_quic_probe(request.target, options, alpn_given=alpn is not None)[0].result
    else:
        result = run_probe(request.target, options).result
    if result.error and raise_on_error:
        raise ProbeError(result)
    return result


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _off_the_loop(call: Callable[[], _R]) -> _R:
    """`call()` (which runs its own event loop), here; or, when this thread already runs
    one (a Jupyter notebook, an async application), in a worker thread, since asyncio
    loops do not nest: `scan` and `simulate_clients` work in both (the caller waits), in
    the caller's context (the API's spelling of inputs: errors.spelt)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    import contextvars
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1, thread_name_prefix="tlsprobe") as pool:
        return pool.submit(contextvars.copy_context().run, call).result()


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


@checked
async def ascan(targets: str | Sequence[str], *, checks: Sequence[str] | None = None,
                policies: Sequence[str] | None = None, extra_groups: Sequence[Code] = (),
                server_name: str | None = None, send_sni: bool = True, verify: bool = True,
                cafile: str | None = None, per_host: int = 3, concurrency: int = 4,
                delay: float = 0.0, retries: int = 2, timeout: float = 5.0,
                on_report: Callable[[AuditReport], None] | None = None,
                starttls: str | None = None, clients: bool = False,
                profiles: Sequence[str] | None = None, profiles_dir: str | None = None,
                xmpp_host: str | None = None) -> list[AuditReport]:
    """`scan` for asyncio code: audits on the running event loop."""
    from tlsprobe.probes.audit.run import audit_many
    from tlsprobe.requests.scan import ConnectionSettings, ScanRequest
    settings = ConnectionSettings.build(per_host=per_host, concurrency=concurrency,
                                        delay=delay, retries=retries, timeout=timeout)
    request = ScanRequest.build(targets, checks=checks, policies=policies,
                                extra_groups=extra_groups, server_name=server_name,
                                send_sni=send_sni, verify=verify, cafile=cafile,
                                settings=settings, starttls=starttls, clients=clients,
                                profiles=profiles, profiles_dir=profiles_dir,
                                xmpp_host=xmpp_host)
    return await audit_many(request.good_targets, request.options,
                            settings.scheduler(connector=request.connector()),
                            concurrency=settings.concurrency, on_report=on_report)


@checked
def scan(targets: str | Sequence[str], *, checks: Sequence[str] | None = None,
         policies: Sequence[str] | None = None, extra_groups: Sequence[Code] = (),
         server_name: str | None = None, send_sni: bool = True, verify: bool = True,
         cafile: str | None = None, per_host: int = 3, concurrency: int = 4,
         delay: float = 0.0, retries: int = 2, timeout: float = 5.0,
         on_report: Callable[[AuditReport], None] | None = None,
         starttls: str | None = None, clients: bool = False,
         profiles: Sequence[str] | None = None, profiles_dir: str | None = None,
         xmpp_host: str | None = None) -> list[AuditReport]:
    """Audit servers as `tlsprobe scan` does; one `AuditReport` per distinct target, in order
    (one host in two spellings, `[::1]` and `[0:0::1]`, is one target).

    `checks` names what to check as `--checks` does (default: versions, groups, pq, suites,
    sigalgs, cert; vulnerability checks and aliases such as "all" too); `policies` are
    built-in names or policy files (default ["intermediate"]; [] for the built-in checks
    only; one name may be given as a str). The connection arguments are `scan`'s options
    of the same name; `on_report` is called with each report as soon as its target is
    done. `starttls` ("smtp", "imap", ..., or "auto": by the port) holds that plain-text
    preamble before TLS on every connection, as `--starttls` does (`xmpp_host`: the XMPP
    `to=` domain, as `--xmpp-host`); the report's `starttls` says what the server answered. `clients=True` (or `profiles`, ids or parts
    of them, as `--profiles`, or `profiles_dir`, a folder of profiles instead of the
    packaged ones) simulates the client profiles after the checks as
    `scan --clients` does: the report's `clients` (`ClientSimulation`s).

    A target that fails does not raise: its report has `error` and `error_kind` (a
    `FailureKind` value) and the other targets are still audited. Raises `UsageError` for
    a bad argument (a target that is no HOST[:PORT], an unknown check or policy)."""
    return _off_the_loop(lambda: asyncio.run(ascan(
        targets, checks=checks, policies=policies, extra_groups=extra_groups,
        server_name=server_name, send_sni=send_sni, verify=verify, cafile=cafile,
        per_host=per_host, concurrency=concurrency, delay=delay, retries=retries,
        timeout=timeout, on_report=on_report, starttls=starttls, clients=clients,
        profiles=profiles, profiles_dir=profiles_dir, xmpp_host=xmpp_host)))


@checked
def simulate_clients(targets: str | Sequence[str], *, profiles: Sequence[str] | None = None,
                     profiles_dir: str | None = None, server_name: str | None = None,
                     send_sni: bool = True, verify: bool = True, cafile: str | None = None,
                     per_host: int = 3, concurrency: int = 4, delay: float = 0.0,
                     retries: int = 2, timeout: float = 5.0,
                     starttls: str | None = None,
                     xmpp_host: str | None = None) -> list[ClientsReport]:
    """Simulate real clients as `tlsprobe clients` does: each client profile's ClientHello
    (the packaged ones, or those of `profiles_dir`; `profiles`: ids or parts of them) sent to
    each target with what must be fresh made fresh; one `ClientsReport` per target with a
    `ClientSimulation` per profile (version, suite, group, HRR, ALPN, signature scheme,
    trust, or why it failed). Without the audit, a refusal's reason is "refused"; `scan(...,
    clients=True)` names it. A target that cannot be reached does not raise: its report has
    `error` and `error_kind`. `starttls` and `xmpp_host` are `scan`'s. Raises `UsageError`
    for a bad argument."""
    from tlsprobe.requests.clients import ClientsRequest
    from tlsprobe.requests.scan import ConnectionSettings
    settings = ConnectionSettings.build(per_host=per_host, concurrency=concurrency,
                                        delay=delay, retries=retries, timeout=timeout)
    request = ClientsRequest.build(targets, profiles=profiles, profiles_dir=profiles_dir,
                                   server_name=server_name, send_sni=send_sni, verify=verify,
                                   cafile=cafile, settings=settings, starttls=starttls,
                                   xmpp_host=xmpp_host)
    return _off_the_loop(request.run)


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
    from tlsprobe.speed import (
        DEFAULT_BLOCK_SIZES,
        SpeedError,
        UnknownAlgorithm,
        catalog,
        run_speed,
    )
    from tlsprobe.speed import openssl as openssl_compare
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
        raise TlsprobeError(str(exc), exit_code=EXIT_INTERNAL) from None


@checked
def timing(target: str, *, groups: Sequence[Code] | None = None,
           versions: Sequence[Code] | None = None, suites: Sequence[Code] | str | None = None,
           runs: int = 20, warmup: int = 2, timeout: float = 5.0, confidence: float = 0.95,
           server_name: str | None = None, send_sni: bool = True,
           starttls: str | None = None, xmpp_host: str | None = None) -> TimingReport:
    """Time full handshakes per key exchange group as `tlsprobe HOST --timing` does and
    return its `TimingReport` (`entries`: one `EntryTiming` per version and group, with the
    median, p90 and confidence interval of the handshake time, our CPU time and every run's
    raw figures; `rankings`: per version, the order and a verdict that calls a group the
    cheapest only where the intervals establish it).

    `groups` (names or codepoints) are timed instead of the groups the server is found to
    accept; `versions` "1.3" and/or "1.2" (default both); `suites` pins each suite in turn,
    or "all" for every suite the server accepts (default: the server chooses); `runs`
    measured handshakes per entry (1 to 10000) after `warmup` rounds (0 to 1000); `timeout`
    per handshake; `confidence` of the median's interval, in [0.5, 1). `starttls` and
    `xmpp_host` as in `probe`.

    A server that cannot be reached raises `TlsprobeError` (kind "network"); what happened
    after that is in the report (`error`, `stopped`, each entry's `status`). Raises
    `UsageError` for a bad argument, or for `groups` none of which can be timed."""
    from tlsprobe.net.tcp import parse_target
    from tlsprobe.probes.timing.run import measure_timing
    from tlsprobe.requests.names import API
    from tlsprobe.requests.starttls import starttls_spec
    from tlsprobe.requests.timing import check_explicit_groups, timing_options
    parsed = parse_target(target)   # (a UsageError for a target that is no HOST[:PORT])
    spec = starttls_spec(starttls, parsed, xmpp_host=xmpp_host, server_name=server_name,
                         names=API, quiet=True)
    options = timing_options(parsed.host, names=API, runs=runs, warmup=warmup,
                             timeout=timeout, versions=versions, groups=groups, suites=suites,
                             server_name=server_name, send_sni=send_sni,
                             confidence=confidence, starttls=spec)
    check_explicit_groups(options)
    return _off_the_loop(lambda: measure_timing(parsed, options))
