"""The --quic options of the probe (and scan): parsed without importing the QUIC code, so
that `tlsprobe --help` stays light."""

from __future__ import annotations

import argparse

from tlsprobe.errors import UsageError

QUIC_V1, QUIC_V2 = 0x00000001, 0x6B3343CF     # wire.quic's (checked by tests/quic)
VERSIONS = {"1": QUIC_V1, "v1": QUIC_V1, "2": QUIC_V2, "v2": QUIC_V2}


def add_quic_arguments(group: argparse._ActionsContainer, what: str = "probe",
                       compare: bool = False) -> None:
    """--quic and --quic-version (and scan's --compare-tcp with `compare`), on an
    ArgumentParser or an argument group; `what` names the command's action in the help."""
    group.add_argument("--quic", action="store_true", help=f"{what} over QUIC (UDP, default "
                       "port 443; TLS 1.3, ALPN h3 by default)")
    group.add_argument("--quic-version", metavar="V[,V]", help="with --quic: the QUIC "
                       "version of our Initial packets, 1 (default) or 2 (RFC 9369); '1,2' "
                       "starts in v1 and offers v2 for compatible version negotiation "
                       "(RFC 9368), which the server may take")
    if compare:
        group.add_argument("--compare-tcp", action="store_true", help="with --quic: audit "
                           "each target over TCP too and compare the TLS 1.3 answers side "
                           "by side")
        group.add_argument("--tcp-port", type=int, metavar="PORT", help="with "
                           "--compare-tcp: the TCP port (default: the target's port)")
        group.add_argument("--alpn", metavar="LIST", help="with --quic: the ALPN protocols "
                           "every hello offers (default h3; e.g. doq for DNS over QUIC)")


def quic_versions(args: argparse.Namespace) -> tuple[int, ...]:
    """The versions of --quic-version: our Initial's first, then those offered besides."""
    text = getattr(args, "quic_version", None)
    if text is None:
        return (QUIC_V1,)
    out: list[int] = []
    for item in text.split(","):
        version = VERSIONS.get(item.strip().lower())
        if version is None:
            raise UsageError(f"--quic-version: {item.strip()!r} is not 1 or 2")
        if version in out:
            number = 1 if version == QUIC_V1 else 2
            raise UsageError(f"--quic-version: version {number} is given twice; give each "
                             "once ('1,2': v1, offering v2)")
        out.append(version)
    return tuple(out)
