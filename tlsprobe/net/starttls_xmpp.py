"""XMPP STARTTLS (RFC 6120 5.4): stream header with `to=`, stream features, `<starttls/>`,
`<proceed/>`; client-to-server (jabber:client) and server-to-server (jabber:server).

The server's side is read one tag at a time (the driver hands over raw tags, see `Xml`); a
small tag parser is enough because XMPP forbids DTDs, comments and entity declarations
before TLS (RFC 6120 11.1), which the driver refuses outright ("<!"). A stream error whose
condition says the refusal is for now (RFC 6120 4.9.3: resource-constraint, system-shutdown,
reset) is `busy`, retried by net/starttls_connect.py. Any stream error quotes what the server
said: its condition, the condition's content and its <text> (escaped, bounded), with what to
change where the condition points at our `to=` domain (host-unknown: --xmpp-host).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass

from tlsprobe.errors import spelt
from tlsprobe.net.starttls_base import (
    Context,
    Dialogue,
    Note,
    PreambleFailure,
    Problem,
    Request,
    Send,
    Xml,
    not_speaking,
    quote,
)

STREAMS_NS = "http://etherx.jabber.org/streams"
TLS_NS = "urn:ietf:params:xml:ns:xmpp-tls"
_TAG = re.compile(rb"<(/?)([A-Za-z_][\w.:-]*)((?:\s+[\w.:-]+\s*=\s*(?:'[^']*'|\"[^\"]*\"))*)"
                  rb"\s*(/?)>", re.DOTALL)
_ATTR = re.compile(rb"([\w.:-]+)\s*=\s*(?:'([^']*)'|\"([^\"]*)\")")
TEMPORARY_CONDITIONS = ("resource-constraint", "system-shutdown", "reset")
_DECL = re.compile(rb"<\?xml\s[^>]*\?>", re.DOTALL)


@dataclass(frozen=True)
class Tag:
    """One tag: `closing` (</x>), `empty` (<x/>), its prefix, local name and attributes."""

    raw: bytes
    closing: bool
    empty: bool
    prefix: str
    local: str
    attrs: dict[str, str]


def parse_tag(raw: bytes) -> Tag | None:
    """The tag in `raw` (from '<' to '>'), or None when it is not a well-formed tag."""
    found = _TAG.fullmatch(raw)
    if found is None:
        return None
    name = found.group(2).decode("ascii", "replace")
    prefix, _, local = name.rpartition(":")
    attrs = {m.group(1).decode("ascii", "replace"):
             (m.group(2) if m.group(2) is not None else m.group(3) or b"")
             .decode("utf-8", "replace") for m in _ATTR.finditer(found.group(3))}
    return Tag(raw, bool(found.group(1)), bool(found.group(4)), prefix, local, attrs)


def stream_header(ctx: Context, server: bool) -> bytes:
    """Our stream header: XML declaration, `to=` the server's domain, version 1.0."""
    domain = (ctx.server_name or "localhost").replace("'", "").replace("<", "")
    ns = "jabber:server' xmlns:db='jabber:server:dialback" if server else "jabber:client"
    return (f"<?xml version='1.0'?><stream:stream to='{domain}' xmlns='{ns}' "
            f"xmlns:stream='{STREAMS_NS}' version='1.0'>").encode()


def _next(proto: str, waiting: str, text: bool = False
          ) -> Generator[Request, bytes, tuple[Tag, bytes]]:
    """The next tag, and with `text` the character data before it."""
    raw = yield Xml(waiting, text)
    before, _, rest = raw.partition(b"<")
    tag = parse_tag(b"<" + rest)
    if tag is None:
        raise PreambleFailure(Problem.MALFORMED, f"{proto}: not a well-formed tag: {quote(raw)}")
    return tag, before


#: what to do about a stream error that names our side (RFC 6120 4.9.3): the `to=` domain
_DOMAIN_HINT = "the server does not serve that domain: name one it serves with {}"
STREAM_ERROR_HINTS = {
    "host-unknown": _DOMAIN_HINT, "host-gone": _DOMAIN_HINT,
    "improper-addressing": _DOMAIN_HINT,
    "see-other-host": "the server sends its clients to the host it names",
}
#: how much of a stream error's <text> and of a condition's content a message quotes
TEXT_SHOWN = 200


def _stream_error(proto: str, opening: Tag) -> Generator[Request, bytes, PreambleFailure]:
    """Read a <stream:error> (`opening`) to its end; the failure names its condition
    element (an empty <stream:error/> has none) and the content of the condition (the
    other host of see-other-host) and of <text>, escaped and bounded, with a hint where
    the condition points at our side."""
    conditions: list[str] = []
    said: dict[str, bytes] = {}
    while not opening.empty:
        # a close before its end still names what it said (the driver's "while we waited")
        waiting = f"the end of the stream error {quote(' '.join(conditions).encode())}" \
            if conditions else "the stream error"
        tag, before = yield from _next(proto, waiting, text=True)
        if tag.local == "error" and tag.closing:
            break
        if tag.closing and before.strip():
            said.setdefault(tag.local, before.strip())
        elif not tag.closing and tag.local != "text":
            conditions.append(tag.local)
    temporary = any(c in TEMPORARY_CONDITIONS for c in conditions)
    named = quote(" ".join(conditions).encode()) if conditions else "(none)"
    shown = [quote(said[c], TEXT_SHOWN) for c in conditions[:1] if c in said]
    if "text" in said:
        shown.append(quote(said["text"], TEXT_SHOWN))
    hint = next((STREAM_ERROR_HINTS[c] for c in conditions if c in STREAM_ERROR_HINTS), "")
    hint = hint.format(spelt("--xmpp-host", "xmpp_host"))   # as the caller names it
    return PreambleFailure(Problem.BUSY if temporary else Problem.REFUSED,
                           f"{proto}: stream error {named}"
                           f"{' (temporary)' if temporary else ''}"
                           f"{''.join(f': {s}' for s in shown)}{f' ({hint})' if hint else ''}")


def xmpp(ctx: Context, server: bool = False) -> Dialogue:
    proto = "xmpp-server" if server else "xmpp"
    yield Send(stream_header(ctx, server))
    raw = yield Xml("the stream header")
    if _DECL.fullmatch(raw):
        raw = yield Xml("the stream header")
    tag = parse_tag(raw)
    if tag is None or tag.local != "stream" or tag.closing or \
            tag.attrs.get(f"xmlns:{tag.prefix}" if tag.prefix else "xmlns") != STREAMS_NS:
        raise not_speaking(proto, raw)
    yield Note(banner=raw)
    if tag.attrs.get("version", "") < "1.0":
        raise PreambleFailure(Problem.NOT_OFFERED, f"{proto}: a stream without version='1.0' "
                              f"has no features, so no STARTTLS: {quote(raw)}")
    tag, _ = yield from _next(proto, "the stream features")
    if tag.local == "error":
        raise (yield from _stream_error(proto, tag))
    if tag.local != "features" or tag.closing:
        raise PreambleFailure(Problem.MALFORMED, f"{proto}: expected <stream:features>, got "
                              f"{quote(tag.raw)}")
    features: list[str] = []
    offered: Tag | None = None
    depth = 0 if tag.empty else 1
    while depth:
        tag, _ = yield from _next(proto, "the stream features")
        if tag.closing:
            depth -= 1
            continue
        if depth == 1:
            features.append(tag.local)
            if tag.local == "starttls" and tag.attrs.get("xmlns") == TLS_NS:
                offered = tag
        depth += 0 if tag.empty else 1
    if offered is None:
        raise PreambleFailure(Problem.NOT_OFFERED, f"{proto}: STARTTLS not offered; the "
                              f"stream features: {quote(' '.join(features).encode(), 300)}")
    yield Note(capability=offered.raw)
    yield Send(f"<starttls xmlns='{TLS_NS}'/>".encode())
    tag, _ = yield from _next(proto, "the STARTTLS answer")
    if tag.local == "error" and tag.prefix == "stream":
        raise (yield from _stream_error(proto, tag))
    if tag.local != "proceed" or tag.closing:
        raise PreambleFailure(Problem.REFUSED, f"{proto}: the server refused STARTTLS: "
                              f"{quote(tag.raw)}")
    if not tag.empty:
        end, _ = yield from _next(proto, "the end of <proceed>")
        if end.local != "proceed" or not end.closing:
            raise PreambleFailure(Problem.MALFORMED, f"{proto}: <proceed> not closed: "
                                  f"{quote(end.raw)}")


def xmpp_server(ctx: Context) -> Dialogue:
    return (yield from xmpp(ctx, server=True))


XMPP_DIALOGUES: dict[str, Callable[[Context], Dialogue]] = {
    "xmpp": xmpp, "xmpp-server": xmpp_server,
}
