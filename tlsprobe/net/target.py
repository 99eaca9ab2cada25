"""The address of a server: `Target` (host and port) and the HOST[:PORT] syntax that names it.

Its own module (no sockets) so that the transport interface (net/transport.py) and every
channel can name a target without importing TCP.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from tlsprobe.errors import UsageError
from tlsprobe.model.units import host_key, host_port


@dataclass(frozen=True)
class Target:
    host: str
    port: int

    @property
    def display(self) -> str:
        return host_port(self.host, self.port)

    @property
    def key(self) -> tuple[str, int]:
        """(host_key(host), port): one for every spelling of the same host and port."""
        return host_key(self.host), self.port


def quoted_text(text: str) -> str:
    """tlsprobe/escaping.py `quoted_text` (imported when an error needs it: `--help` of a command
    that names targets imports no wire package)."""
    from tlsprobe.escaping import quoted_text as quote
    return quote(text)


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


def parse_target(text: str, default_port: int = 443) -> Target:
    """HOST, HOST:PORT, [v6]:PORT, or a bare IPv6 address (port `default_port`).

    A present but empty port ("host:") is an error, not the default; an IPv6 address with a
    port but no brackets ("::1:4433") is refused with the bracketed spelling as a hint."""
    original = text
    text = text.strip()
    if not text:
        raise UsageError("empty target: give HOST[:PORT]")
    if "://" in text:
        text = text.split("://", 1)[1].split("/", 1)[0]
    host, port_text = text, None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise UsageError(f"bad target {quoted_text(text)}: missing ']' (use [::1]:443)")
        host, rest = text[1:end], text[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise UsageError(f"bad target {quoted_text(text)}: expected ':PORT' after ']'")
            port_text = rest[1:]
        if not _is_ipv6(host):
            raise UsageError(f"bad target {quoted_text(text)}: {quoted_text(host)} in "
                             "brackets is not an IPv6 address")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text and not _is_ipv6(text):
        head, _, tail = text.rpartition(":")
        if _is_ipv6(head) and tail.isdigit():
            raise UsageError(f"bad target {quoted_text(original.strip())}: IPv6 addresses need "
                             f"brackets: [{head}]:{tail}")
        raise UsageError(f"bad target {quoted_text(original.strip())}: expected HOST[:PORT] "
                         "(IPv6 as [::1]:443)")
    if not host:
        raise UsageError(f"bad target {quoted_text(text)}: no host")
    if any(c.isspace() or not c.isprintable() for c in host):
        raise UsageError(f"bad target {quoted_text(text)}: a host name has no spaces or control "
                         "characters")
    problem = host_name_problem(host)
    if problem:
        raise UsageError(f"bad target {quoted_text(text)}: not a valid host name: {problem}")
    port = default_port
    if port_text is not None:
        if not port_text:
            raise UsageError(f"bad target {quoted_text(text)}: empty port after ':' (give "
                             f"HOST:PORT, or HOST alone for port {default_port})")
        if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
            raise UsageError(f"bad port {quoted_text(port_text)} in {quoted_text(text)}: "
                             "expected 1-65535")
        port = int(port_text)
    return Target(host, port)


def host_name_problem(host: str) -> str | None:
    """Why `host` (not an IP address) cannot be looked up: what the IDNA encoding that name
    resolution applies refuses (an empty label as in 'a..b', a label over 63 characters,
    characters IDNA forbids) or a name over 253 characters; None when it can."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    try:
        encoded = host.encode("idna")
    except UnicodeError as exc:
        inner = re.search(r"\(UnicodeError: (.*)\)$", str(exc))
        return inner.group(1) if inner else str(exc)
    if len(encoded.rstrip(b".")) > 253:
        return f"{len(encoded)} characters (at most 253)"
    return None


__all__ = ["Target", "host_name_problem", "parse_target"]
