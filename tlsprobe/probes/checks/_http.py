"""What the HTTP checks read: the headers of the server's answer to one HTTP/1.1 request over
a completed handshake, from ONE connection shared by the HTTP checks of a target.

The connection offers ALPN http/1.1 and the versions the audit found spoken, completes the
handshake with the engine, sends `GET / HTTP/1.1` with Host, `Accept-Encoding: gzip,
deflate, br` (so that a compressing server says so: BREACH) and `Connection: close`, and
reads until the end of the headers, at most MAX_HEAD bytes (16 KiB) and by the connection's
deadline. The answer is a `Response` (status line and headers, as latin-1 text; the checks
show them escaped), or why there is none: `NotHttp` when the server answered with bytes that
are not HTTP (the checks are then not applicable), a str when nothing conclusive came back.
"""

from __future__ import annotations

from dataclasses import dataclass

from tlsprobe._version import __version__
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.errors import NetworkError
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.driver import Progress, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._shared import once
from tlsprobe.probes.checks._tolerance import top_versions
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.probes.facts import negotiated_alpn

__all__ = ["MAX_HEAD", "NotHttp", "Response", "http_response", "response"]

MAX_HEAD = 16 * 1024


@dataclass(frozen=True)
class Response:
    """The status line and the headers (names lower-cased, in order, repeated ones kept)."""

    status: str
    headers: tuple[tuple[str, str], ...]
    alpn: str | None = None

    def get(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name.lower()]


@dataclass(frozen=True)
class NotHttp:
    """The server answered, but not with HTTP: its first bytes (raw, for escaping)."""

    first: str


def parse_head(data: bytes) -> Response | NotHttp | str:
    """The status line and headers of `data` (the start of an answer)."""
    head = data.split(b"\r\n\r\n", 1)[0] if b"\r\n\r\n" in data else data.split(b"\n\n", 1)[0]
    text = head.decode("latin-1")
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines[0].startswith("HTTP/"):
        return NotHttp(text[:120])
    if b"\r\n\r\n" not in data and b"\n\n" not in data:
        cut = "cut at 16 KiB" if len(data) >= MAX_HEAD else "cut by the server"
        return f"the headers did not end ({cut}): {lines[0][:120]}"
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip().lower(), value.strip()))
    return Response(lines[0][:200], tuple(headers))


def _want_more(data: bytes) -> bool:
    """Read on: the headers have not ended, the 16 KiB bound is not reached, and the answer
    can still be HTTP (a greeting that is not stops the read at once)."""
    return b"\r\n\r\n" not in data and len(data) < MAX_HEAD and \
        (data[:5] == b"HTTP/" or b"HTTP/".startswith(data[:5]))


def request(host: str, port: int) -> bytes:
    authority = f"[{host}]" if ":" in host else host
    if port != 443:
        authority += f":{port}"
    return (f"GET / HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: tlsprobe/{__version__}\r\n"
            "Accept: */*\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: close\r\n\r\n"
            ).encode("latin-1")


async def _exchange(ctx: CheckContext) -> Response | NotHttp | str:
    versions = top_versions(ctx)
    if not versions:
        return "no TLS version is known to be spoken (the versions phase established none)"
    config = ctx.config(tuple(versions), alpn=("http/1.1",))
    target = ctx.runner.target

    async def talk(transport: AsyncTransport, deadline: float) -> Response | NotHttp | str:
        hs = ClientHandshake(config, annotate=False, stop_after_first_flight=False)
        try:
            await adrive(hs, transport, deadline, progress=Progress())
        except (HandshakeFailure, NetworkError) as exc:
            return f"the handshake did not complete: {exc}"
        if not hs.handshake_complete:
            return f"the handshake did not complete: {hs.incomplete_reason or 'stopped'}"
        hs.send_application_data(request(config.server_name or target.host, target.port))
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
        data = bytes(hs.application_data[:MAX_HEAD])
        if not data:
            return "no answer to an HTTP request (the server closed the connection)"
        got = parse_head(data)
        if isinstance(got, Response):
            return Response(got.status, got.headers, negotiated_alpn(hs))
        return got

    got = await ctx.converse(talk, "request")
    if isinstance(got, Outcome):
        return f"no connection: {got.describe()}"
    return got


async def response(ctx: CheckContext) -> Response | NotHttp | str:
    """The server's answer to GET / (one connection per target, whichever HTTP check asks
    first), NotHttp, or why there is none."""
    return await once(ctx, "http", _exchange)


async def http_response(ctx: CheckContext) -> Response | CheckResult:
    """What an HTTP check judges: the shared answer to GET /; or the result to return: not
    applicable when the server does not speak HTTP, inconclusive when there is no answer."""
    got = await response(ctx)
    if isinstance(got, NotHttp):
        return ctx.result(Verdict.not_applicable, "the server does not speak HTTP: it "
                          f"answered \"{got.first}\"")
    if isinstance(got, str):
        return ctx.inconclusive(got)
    return got
