"""`ProbeRequest`: one server's probe as asked (`tlsprobe HOST[:PORT] ...` or the API's
`probe(...)`), checked once, and the `probes.probe.ProbeOptions` that run it."""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.hello import HelloSpec, client_config
from tlsprobe.requests.names import API, CLI, LIMIT_OPTIONS, Names

if TYPE_CHECKING:
    from tlsprobe.engine.client import Limits
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.net.starttls_connect import StartTlsSpec
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.probe import ProbeOptions

#: the probe's connect and per-read timeout when none is given, in seconds
DEFAULT_TIMEOUT = 10.0
#: the longest timeout accepted (one day): larger values overflow socket timeouts
MAX_SECONDS = 86400.0
#: the command line's protocol-version flags (argparse names), strongest first
VERSION_FLAGS = ("tls1_3", "tls1_2", "tls1_1", "tls1", "ssl3")
#: the command line's bounds on what the server sends (engine.client.Limits fields)
#: the command line's default hello
DEFAULT_HELLO = HelloSpec()


@dataclass(frozen=True)
class ProbeRequest:
    """A checked probe: the target, the ClientHello's configuration and how to run it."""

    target: Target
    config: ClientConfig
    timeout: float = DEFAULT_TIMEOUT
    total_timeout: float | None = None     # the whole probe; None: 3 x timeout
    verify: bool = True
    cafile: str | None = None
    first_flight_only: bool = False
    http_get: str | None = None
    limits: Limits | None = None           # None: the engine's defaults
    starttls: StartTlsSpec | None = None
    #: time.monotonic() the request was made at (the command line's start): the total
    #: limit counts from it
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def build(cls, target: str, hello: HelloSpec = DEFAULT_HELLO, *, names: Names = API,
              timeout: float = DEFAULT_TIMEOUT, total_timeout: float | None = None,
              verify: bool = True, cafile: str | None = None,
              first_flight_only: bool = False, http_get: str | None = None,
              limits: Limits | None = None, starttls: str | None = None,
              xmpp_host: str | None = None, started: float | None = None) -> ProbeRequest:
        """The request, or a UsageError naming the input at fault (in `names`' spelling)."""
        from tlsprobe.net.tcp import parse_target
        from tlsprobe.requests.starttls import starttls_spec
        for value in (timeout, total_timeout):
            if value is not None and not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
                raise UsageError(f"{names('timeout')} and {names('total_timeout')} must be "
                                 f"above 0 and at most a day ({MAX_SECONDS:g} seconds)")
        if http_get is not None and first_flight_only:
            raise UsageError(f"{names('http_get')} needs a completed handshake (drop "
                             f"{names('first_flight_only')})")
        if http_get is not None and starttls is not None:
            raise UsageError(f"{names('http_get')} cannot be used with {names('starttls')}: "
                             "after STARTTLS the connection carries that protocol (smtp, imap, "
                             "...), not HTTP")
        if http_get is not None:
            http_get = http_path(http_get, names)
        parsed = parse_target(target)
        if hello.alpn is None and http_get is not None:   # the request is HTTP/1.1: no h2
            hello = _with_alpn(hello, ("http/1.1",))
        config = client_config(hello, parsed.host, names)
        check_trust(verify, cafile, names)
        spec = starttls_spec(starttls, parsed, xmpp_host=xmpp_host,
                             server_name=hello.server_name if hello.send_sni else None,
                             names=names, quiet=True)   # the note: `starttls_note`
        return cls(target=parsed, config=config, timeout=timeout, total_timeout=total_timeout,
                   verify=verify, cafile=cafile, first_flight_only=first_flight_only,
                   http_get=http_get, limits=limits, starttls=spec,
                   started=time.monotonic() if started is None else started)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProbeRequest:
        """`tlsprobe HOST[:PORT] [options]` (the probe command's Namespace)."""
        from tlsprobe.engine import config as cfg
        codes = dict(zip(VERSION_FLAGS, (cfg.TLS13, cfg.TLS12, cfg.TLS11, cfg.TLS10, cfg.SSL30)))
        versions = tuple(code for flag, code in codes.items() if getattr(args, flag, False))
        hello = HelloSpec(versions=versions or None, groups=args.groups,
                          key_shares=args.key_shares, ciphers=args.ciphers,
                          ciphersuites=args.ciphersuites, sigalgs=args.sigalgs,
                          alpn=args.alpn, server_name=args.sni, send_sni=not args.no_sni,
                          grease=bool(args.grease))
        return cls.build(args.target, hello, names=CLI,
                         timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
                         total_timeout=args.total_timeout, verify=not args.no_verify,
                         cafile=args.cafile, first_flight_only=args.first_flight_only,
                         http_get=args.http_get, limits=limits_from_args(args),
                         starttls=getattr(args, "starttls", None),
                         xmpp_host=getattr(args, "xmpp_host", None),
                         started=getattr(args, "started", None))

    @property
    def starttls_note(self) -> str | None:
        """The note saying which protocol `starttls="auto"` chose by the port (None when
        there is nothing to say): the command line prints it on stderr."""
        return None if self.starttls is None else self.starttls.note(self.target.port)

    def options(self, annotate: bool = False) -> ProbeOptions:
        """The probe's options; its deadline counts from `started` (`total_timeout`, else
        three times the timeout)."""
        from tlsprobe.engine.client import Limits
        from tlsprobe.probes.probe import ProbeOptions
        return ProbeOptions(
            config=self.config, timeout=self.timeout, annotate=annotate,
            stop_after_first_flight=self.first_flight_only, http_get=self.http_get,
            verify=self.verify, cafile=self.cafile, total_timeout=self.total_timeout,
            limits=self.limits or Limits(), starttls=self.starttls,
            deadline=self.started + (self.total_timeout or 3 * self.timeout))


def check_trust(verify: bool, cafile: str | None, names: Names) -> None:
    """The trust store `cafile` (None: the system's) when the chain is checked; with the
    check off (--no-verify) a --cafile would go unused in silence: a UsageError, as every
    command that has both options says it."""
    if cafile is None:
        return
    if not verify:
        raise UsageError(f"{names('cafile')} and {names('no_verify')} contradict each other: "
                         f"{names('no_verify')} skips the chain check that {names('cafile')} "
                         "is for; give one of them")
    from tlsprobe.engine.truststore import check_cafile
    check_cafile(cafile, name=names('cafile'))


def http_path(path: str, names: Names) -> str:
    """The request-target of `--http-get PATH` as the request line carries it: a space or a
    control character would break that line (RFC 9112 3.2: a usage error, before any
    connection), other characters beyond ASCII are percent-encoded as UTF-8, as browsers
    send them."""
    from urllib.parse import quote
    bad = next((c for c in path if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise UsageError(f"{names('http_get')}: {path!a} has a space or control "
                         f"character ({bad!a}); percent-encode it, e.g. %20 for a space")
    return "".join(c if c.isascii() else quote(c, safe="") for c in path)


def _with_alpn(hello: HelloSpec, protocols: tuple[str, ...]) -> HelloSpec:
    from dataclasses import replace
    return replace(hello, alpn=protocols)


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The engine's bounds from --max-message, --max-chain, --max-records, --max-bytes."""
    from tlsprobe.engine.client import Limits
    values = {name: getattr(args, name, None) for name in LIMIT_OPTIONS}
    for name, value in values.items():
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    return Limits(**{k: v for k, v in values.items() if v is not None})


__all__ = ["DEFAULT_TIMEOUT", "ProbeRequest", "check_trust", "http_path", "limits_from_args"]
