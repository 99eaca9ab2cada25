"""`--starttls PROTO` / `starttls=`: the plain-text preamble one target's connections hold
before TLS (`net.starttls_connect.StartTlsSpec`), checked once for the probe, `--timing` and
the audit, from the command line or the API."""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.names import Names

if TYPE_CHECKING:
    from tlsprobe.net.starttls_connect import StartTlsSpec
    from tlsprobe.net.tcp import Target


def check_xmpp_host(protocol: str | None, xmpp_host: str | None, names: Names) -> None:
    """The XMPP domain only with STARTTLS xmpp, xmpp-server or auto (`protocol` as given:
    `auto` uses it for the targets whose port it takes for XMPP), and only a domain name."""
    if xmpp_host is None:
        return
    if protocol is None or protocol.strip().lower() not in ("xmpp", "xmpp-server", "auto"):
        given = "" if protocol is None else f", not {protocol}"
        raise UsageError(f"{names('xmpp_host')} only applies with {names('starttls')} xmpp "
                         f"or xmpp-server (or auto){given}")
    name = xmpp_host.strip()
    if not name or any(c.isspace() or not c.isprintable() or c in "<>'\"&" for c in name):
        raise UsageError(f"{names('xmpp_host')}: {xmpp_host[:40]!r} is not a domain name")


def starttls_spec(protocol: str | None, target: Target, *, xmpp_host: str | None = None,
                  server_name: str | None = None, names: Names, note: IO[str] | None = None,
                  quiet: bool = False) -> StartTlsSpec | None:
    """The preamble to hold before TLS on `target` (None without STARTTLS); which protocol
    `auto` chose is told on `note` (default stderr) as one note line, unless `quiet` (the
    caller says `spec.note(port)` itself, where its output wants it)."""
    if protocol is None:
        check_xmpp_host(protocol, xmpp_host, names)
        return None
    from tlsprobe.net.starttls_connect import StartTlsSpec, choose_protocol
    chosen, by_port = choose_protocol(protocol, target.port, names("starttls"))
    check_xmpp_host(protocol, xmpp_host, names)
    spec = StartTlsSpec(chosen, xmpp_host or server_name or target.host, by_port)
    said = spec.note(target.port)
    if said is not None and not quiet:
        print(said, file=note or sys.stderr)
    return spec


__all__ = ["check_xmpp_host", "starttls_spec"]
