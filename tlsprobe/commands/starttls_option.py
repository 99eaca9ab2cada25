"""`--starttls PROTO` and `--xmpp-host NAME`, shared by the probe, `--timing` and `scan`:
the options, their checks (a usage error before connecting) and the `StartTlsSpec` of one
target, with the stderr note that says which protocol `--starttls auto` chose."""

from __future__ import annotations

import argparse
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from tlsprobe.net.starttls_connect import StartTlsSpec
    from tlsprobe.net.tcp import Target

#: the protocols of --starttls (tlsprobe.net.starttls.PROTOCOLS, spelt here so that --help
#: imports nothing)
NAMES = ("smtp", "lmtp", "imap", "pop3", "ftp", "xmpp", "xmpp-server", "ldap", "postgres",
         "mysql", "nntp", "sieve", "irc")


def add_starttls_arguments(group: argparse._ActionsContainer) -> None:
    """The two options, on an ArgumentParser or an argument group."""
    group.add_argument("--starttls", metavar="PROTO", help="upgrade a plain-text connection "
                       f"to TLS first: {', '.join(NAMES)}, or auto (chosen by the well-known "
                       "port: 25/587 smtp, 143 imap, 110 pop3, 21 ftp, 389 ldap, 5432 "
                       "postgres, 3306 mysql, 5222 xmpp, ...); implicit-TLS ports (465, 993, "
                       "...) need none")
    group.add_argument("--xmpp-host", metavar="NAME", help="the domain in the XMPP stream "
                       "header's to= (default: the server_name, else the host)")


def spec_for(args: argparse.Namespace, target: Target, *, note: IO[str] | None = None
             ) -> StartTlsSpec | None:
    """The preamble to hold before TLS on `target`, or None without --starttls; the
    `--starttls auto` choice is told on `note` (default stderr) as one note line
    (requests/starttls.py, the check the API makes too)."""
    from tlsprobe.requests import CLI
    from tlsprobe.requests.starttls import starttls_spec
    sni = None if getattr(args, "no_sni", False) else getattr(args, "sni", None)
    return starttls_spec(getattr(args, "starttls", None), target,
                         xmpp_host=getattr(args, "xmpp_host", None), server_name=sni,
                         names=CLI, note=note)


__all__ = ["NAMES", "add_starttls_arguments", "spec_for"]
