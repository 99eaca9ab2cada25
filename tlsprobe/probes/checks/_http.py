"""What the HTTP checks read: the headers of the server's answer to one HTTP/1.1 request over
a completed handshake, from ONE connection shared by the HTTP checks of a target.

The connection offers ALPN http/1.1 and the versions the audit found spoken, completes the
handshake with the engine, sends `GET / HTTP/1.1` with Host, `Accept-Encoding: gzip,
deflate, br` (so that a compressing server says so: BREACH) and `Connection: close`, and
reads until the end of the headers, at most MAX_HEAD bytes (16 KiB) and by the connection's
deadline. The answer is a `Response` (status line and headers as every network value is,
escaping.wire_text: a byte outside ASCII as \\xNN, each output escaping controls its own
way), or why there is none: `NotHttp` when the server answered with bytes that are not
HTTP (the checks are then not applicable), a str when nothing conclusive came back.

Redirects within the target are followed (_location.py): an answer 301, 302, 303, 307 or 308
whose Location (relative or absolute) stays on the same scheme (https), host and port is
asked again with GET, each hop one more connection of the same kind (through the target's
scheduler, counted under the same check, label "redirect"), at most MAX_REDIRECTS
hops, a path asked twice being a loop. The checks read the final answer; `Response.earlier`
keeps the redirects that led to it (each with its status and Location) so that every check
states the chain, and hsts reads the first answer (RFC 6797 8.1: a redirect's
Strict-Transport-Security header counts). A Location off the target (another scheme, host
or port), a loop, the hop limit, a Location that cannot be a URL, or a hop that got no HTTP
answer: not followed, and the checks read that redirect answer itself, saying why
(`Response.unfollowed`) and where it pointed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from tlsprobe._version import __version__
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import NetworkError
from tlsprobe.escaping import quoted_bytes, wire_text
from tlsprobe.model.check_details import RedirectHop
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.driver import Progress, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks._location import REDIRECTS, authority, cut, follow
from tlsprobe.probes.checks._shared import once
from tlsprobe.probes.checks._tolerance import top_versions
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.probes.facts import negotiated_alpn

__all__ = ["MAX_HEAD", "MAX_REDIRECTS", "NotHttp", "Response", "cut", "http_response",
           "response"]

MAX_HEAD = 16 * 1024
#: redirects followed at most (as curl's and testssl's users expect a handful; browsers
#: allow 20, but a target's "/" that needs more than 5 is itself worth a look)
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class Response:
    """The status line and the headers (names lower-cased, in order, repeated ones kept) of
    the answer to `GET path`, our clock (Unix time) when its headers had come, and the
    redirect answers followed to reach it (`earlier`, oldest first); `unfollowed` says why
    this answer, a redirect, was not followed (None: it is not a redirect, or it was)."""

    status: str
    headers: tuple[tuple[str, str], ...]
    alpn: str | None = None
    path: str = "/"
    received: float | None = None
    earlier: tuple[Response, ...] = ()
    unfollowed: str | None = None

    def get(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name.lower()]

    @property
    def code(self) -> int | None:
        """The status code, None when the status line has none."""
        parts = self.status.split()
        code = parts[1] if len(parts) > 1 else ""
        return int(code) if len(code) == 3 and code.isascii() and code.isdigit() else None

    def unusual(self) -> str | None:
        """Why this answer says nothing of what the site sends (its headers, cookies, body
        encoding): a 429 or a 5xx, what a rate limiter or an overloaded server answers, often
        without the site's usual headers (nginx adds add_header ones to 2xx and 3xx only);
        None for any other answer."""
        code = self.code
        if code != 429 and (code is None or not 500 <= code <= 599):
            return None
        return (f"GET {cut(self.path)} answered {self.status}: a rate limiter's or an "
                "overloaded server's answer, often sent without the site's usual headers, "
                "so what it lacks is not established")

    @property
    def location(self) -> str | None:
        """The first Location of a redirect answer (None: not a redirect, or none)."""
        values = self.get("location")
        return values[0] if self.code in REDIRECTS and values else None

    @property
    def chain(self) -> tuple[Response, ...]:
        """Every answer, from the first (GET /) to this one."""
        return (*self.earlier, self)

    def asked(self) -> str:
        """"GET /a answered HTTP/1.1 200 OK"."""
        return f"GET {cut(self.path)} answered {self.status}"

    def hop(self) -> str:
        """This answer as evidence: what was asked, the status, and a redirect's Location."""
        loc = self.location
        return self.asked() + (f", Location: {cut(loc)}" if loc is not None else "")

    def trail(self) -> tuple[str, ...]:
        """The chain as evidence, one item per answer."""
        return tuple(r.hop() for r in self.chain)

    def read(self) -> str:
        """What a check read, for its reason: "GET / answered ...", with the redirects
        followed to it or why a redirect was not followed."""
        text = self.asked()
        if self.earlier:
            n = len(self.earlier)
            text += f", after {n} redirect{'' if n == 1 else 's'} from GET /"
        if self.unfollowed is not None:
            text += f", a redirect to {cut(self.location or '')} not followed: " \
                f"{self.unfollowed}"
        return text

    def redirects(self) -> tuple[RedirectHop, ...]:
        """The redirect answers of the chain, for the checks' details."""
        return tuple(RedirectHop(r.path, r.status, r.location or "", r is not self)
                     for r in self.chain if r.location is not None)


@dataclass(frozen=True)
class NotHttp:
    """The server answered, but not with HTTP: its first bytes, quoted and escaped as every
    message quotes network bytes (escaping.quoted_bytes)."""

    first: str


def parse_head(data: bytes) -> Response | NotHttp | str:
    """The status line and headers of `data` (the start of an answer)."""
    head = data.split(b"\r\n\r\n", 1)[0] if b"\r\n\r\n" in data else data.split(b"\n\n", 1)[0]
    text = head.decode("latin-1")
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines[0].startswith("HTTP/"):
        return NotHttp(quoted_bytes(head, 120))
    if b"\r\n\r\n" not in data and b"\n\n" not in data:
        cut_at = "cut at 16 KiB" if len(data) >= MAX_HEAD else "cut by the server"
        return f"the headers did not end ({cut_at}): {_value(lines[0][:120])}"
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((_value(name.strip().lower()), _value(value.strip())))
    return Response(_value(lines[0][:200]), tuple(headers))


def _value(text: str) -> str:
    """Latin-1 text of the server's bytes as a value's text, as every network value is
    (escaping.wire_text: ASCII as is, a backslash doubled, another byte as \\xNN;
    controls kept, for each output to escape its own way)."""
    return wire_text(text.encode("latin-1"))


def _latin(text: str) -> str:
    """The latin-1 text of the bytes a `_value` stands for (a Location to follow)."""
    return re.sub(r"\\(\\|x[0-9a-f]{2})",
                  lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), text)


def _want_more(data: bytes) -> bool:
    """Read on: the headers have not ended, the 16 KiB bound is not reached, and the answer
    can still be HTTP (a greeting that is not stops the read at once)."""
    return b"\r\n\r\n" not in data and len(data) < MAX_HEAD and \
        (data[:5] == b"HTTP/" or b"HTTP/".startswith(data[:5]))


def request(host: str, port: int, path: str = "/") -> bytes:
    """GET `path` (already in request-target form: printable ASCII, no space)."""
    return (f"GET {path} HTTP/1.1\r\nHost: {authority(host, port)}\r\n"
            f"User-Agent: tlsprobe/{__version__}\r\nAccept: */*\r\n"
            "Accept-Encoding: gzip, deflate, br\r\nConnection: close\r\n\r\n"
            ).encode("latin-1")


async def _ask(ctx: CheckContext, config: ClientConfig, path: str,
               label: str) -> Response | NotHttp | str:
    """One connection: the handshake, `GET path`, the answer's head."""
    target = ctx.runner.target

    async def talk(transport: AsyncTransport, deadline: float) -> Response | NotHttp | str:
        hs = ClientHandshake(config, annotate=False, stop_after_first_flight=False,
                             limits=check_limits())
        try:
            await adrive(hs, transport, deadline, progress=Progress())
        except (HandshakeFailure, NetworkError) as exc:
            return f"the handshake did not complete: {exc}"
        if not hs.handshake_complete:
            return f"the handshake did not complete: {hs.incomplete_reason or 'stopped'}"
        hs.send_application_data(request(config.server_name or target.host, target.port,
                                          path))
        await transport.send(hs.take_output())
        try:
            while _want_more(bytes(hs.application_data)) and not hs.peer_closed:
                data = await transport.receive(deadline)
                if not data:
                    break
                await transport.send(hs.receive(data))
        except NetworkError as exc:
            if not hs.application_data:
                return f"no answer to an HTTP request ({exc.reason})"
        except HandshakeFailure as exc:
            if not hs.application_data:
                return f"no answer to an HTTP request ({exc})"
        received = time.time()
        data = bytes(hs.application_data[:MAX_HEAD])
        if not data:
            return "no answer to an HTTP request (the server closed the connection)"
        got = parse_head(data)
        if isinstance(got, Response):
            return Response(got.status, got.headers, negotiated_alpn(hs), path, received)
        return got

    got = await ctx.converse(talk, label)
    if isinstance(got, Outcome):
        return f"no connection: {got.describe()}"
    return got


def _unfollowed(got: Response, why: str) -> Response:
    return Response(got.status, got.headers, got.alpn, got.path, got.received, got.earlier,
                    why)


async def _exchange(ctx: CheckContext) -> Response | NotHttp | str:
    versions = top_versions(ctx)
    if not versions:
        return "no TLS version is known to be spoken (the versions phase established none)"
    config = ctx.config(tuple(versions), alpn=("http/1.1",))
    host = config.server_name or ctx.runner.target.host
    got = await _ask(ctx, config, "/", "request")
    if not isinstance(got, Response):
        return got
    asked = {"/"}
    while got.location is not None:
        path = follow(got.path, _latin(got.location), host, ctx.runner.target.port)
        if path.why is not None:
            return _unfollowed(got, path.why)
        if path.path in asked:
            return _unfollowed(got, f"a loop (GET {cut(path.path)} was asked before)")
        if len(got.earlier) >= MAX_REDIRECTS:
            return _unfollowed(got, f"{MAX_REDIRECTS} redirects followed already")
        asked.add(path.path)
        after = await _ask(ctx, config, path.path, "redirect")
        if isinstance(after, NotHttp):
            return _unfollowed(got, f"GET {cut(path.path)} was not answered with HTTP")
        if isinstance(after, str):
            return _unfollowed(got, f"GET {cut(path.path)}: {after}")
        got = Response(after.status, after.headers, after.alpn, after.path, after.received,
                       got.chain)
    return got


async def response(ctx: CheckContext) -> Response | NotHttp | str:
    """The server's answer to GET / (one connection per target and redirect followed,
    whichever HTTP check asks first), NotHttp, or why there is none."""
    return await once(ctx, "http", _exchange)


async def http_response(ctx: CheckContext) -> Response | CheckResult:
    """What an HTTP check judges: the shared answer to GET / (after the redirects followed
    within the target); or the result to return: not applicable when the server does not
    speak HTTP (or the connection carries another protocol after STARTTLS: nothing is
    asked), inconclusive when there is no answer."""
    preamble = ctx.runner.scheduler.channel.preamble(ctx.runner.target)
    if preamble is not None:
        return ctx.result(Verdict.not_applicable, "not HTTP: after STARTTLS the connection "
                          f"carries {preamble.protocol} (--starttls {preamble.protocol})")
    got = await response(ctx)
    if isinstance(got, NotHttp):
        return ctx.result(Verdict.not_applicable, "the server does not speak HTTP: it "
                          f"answered {got.first}")
    if isinstance(got, str):
        return ctx.inconclusive(got)
    return got
