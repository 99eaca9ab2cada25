"""Simulate real clients: send each client profile's ClientHello and report what it negotiates.

Each profile (tlsprobe/data/clients/, docs/CLIENTS.md) is the ClientHello a real client sent;
it is sent with only what must be fresh made fresh (random, session id, key shares, GREASE,
server_name), one connection per client, and the server's answer read as that client reads
it: version, cipher suite, group (via HelloRetryRequest or not), ALPN, signature scheme,
and whether the client's trust store accepts the chain (where tlsprobe can check that store).
A refusal is "refused" with the server's alert; `tlsprobe scan --clients` runs the audit
too and names the reason (no shared version, suite or group, version intolerance, hello too
large). Exit codes: 0 done (whatever the clients got); 2 usage; 3 a target could not be
reached at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TextIO

from tlsprobe.commands.common import (
    add_connection_arguments,
    add_sni_arguments,
    add_trust_arguments,
)
from tlsprobe.errors import EXIT_OK, exit_code_for

if TYPE_CHECKING:
    from tlsprobe.model.clients import ClientsReport


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="HOST[:PORT]",
                   help="servers to simulate clients against (default port 443; IPv6 as "
                   "[::1]:4433)")
    w = p.add_argument_group("which clients, and how")
    w.add_argument("--profiles", metavar="LIST", default=None, help="comma list of profile "
                   "ids or parts of them, any case (chromium,firefox,openssl-3.0); default: "
                   "every packaged profile")
    w.add_argument("--profiles-dir", metavar="DIR", default=None, help="read the profiles "
                   "from DIR (JSON files in the packaged format) instead")
    w.add_argument("--list", action="store_true", help="list the profiles (those --profiles "
                   "and --profiles-dir choose: id, client, platform, source, JA4) and exit")
    add_sni_arguments(w)
    add_trust_arguments(w)
    from tlsprobe.commands.starttls_option import add_starttls_arguments
    add_starttls_arguments(w)
    o = p.add_argument_group("output and politeness")
    o.add_argument("--json", action="store_true", help="JSON lines: one object per target")
    from tlsprobe.commands.common import add_json_out_argument
    add_json_out_argument(o, "the JSON lines (one object per target)")
    o.add_argument("--csv", metavar="FILE", help="also write a row per target and client")
    o.add_argument("--html", metavar="FILE", help="also write the tables as one HTML page")
    add_connection_arguments(o, concurrency=4, concurrency_help="targets at once")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from tlsprobe.requests.clients import ClientsRequest
    if args.list:   # before any file is checked: none is written
        from tlsprobe.commands.common import listing_alone
        listing_alone(args, "--list", "the profiles", ("sni", "no_sni", "cafile",
                                                       "no_verify", "starttls", "xmpp_host"))
        return _list(args, out)
    for option, path in (("--html", args.html), ("--csv", args.csv)):
        if path:
            from tlsprobe.report.csv_out import check_writable
            check_writable(path, option)
    from tlsprobe.commands.common import check_json_out, write_json_out
    check_json_out(args)
    request = ClientsRequest.from_args(args)
    ended: list[ClientsReport] = []     # the targets done, as they end (Ctrl-C: shown)
    try:
        reports = request.run(ended.append)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the targets done before it, in the input's order, then the
        # interruption goes on ("tlsprobe: interrupted", exit 130: cli.py)
        place = {(t.host, t.port): n for n, t in enumerate(request.scan.good_targets)}
        done = sorted(ended, key=lambda r: place.get((r.host, r.port), 0))
        _show(args, out, done)
        _errors_on_stderr(args, out, done)
        raise
    _show(args, out, reports)
    from tlsprobe.commands.common import written_to
    if args.csv:
        from tlsprobe.report.csv_out import write_clients_csv
        with written_to("--csv", args.csv):
            write_clients_csv(args.csv, reports)
    if args.html:
        from tlsprobe.report.client_cells import clients_page
        with written_to("--html", args.html), open(args.html, "w", encoding="utf-8") as fh:
            fh.write(clients_page(reports))
    if args.json_out:
        write_json_out(args.json_out, [r.to_json() for r in reports])
    codes = [exit_code_for(r.error_kind) for r in reports if r.error]
    _errors_on_stderr(args, out, reports)
    return max(codes) if codes else EXIT_OK


def _show(args: argparse.Namespace, out: TextIO, reports: list[ClientsReport]) -> None:
    """The reports on stdout (JSON lines with --json, else the tables)."""
    from tlsprobe.report.clients import render_clients
    for report in reports:
        if args.json:
            print(report.to_json(), file=out, flush=True)
        else:
            render_clients(report, out)
    out.flush()


def _errors_on_stderr(args: argparse.Namespace, out: TextIO,
                      reports: list[ClientsReport]) -> None:
    """Each report's error on stderr (the text report says "Error: ..." already: on a
    terminal that is also stderr, once)."""
    from tlsprobe.report.escape import shown
    said = not args.json and _one_terminal(out, sys.stderr)
    for report in reports:
        if report.error and not said:
            print(f"tlsprobe: {shown(report.error)}", file=sys.stderr)


def _one_terminal(out: TextIO, err: TextIO) -> bool:
    """Whether `out` and `err` are one terminal (as `scan` decides it)."""
    try:
        if not (out.isatty() and err.isatty()):
            return False
        a, b = os.fstat(out.fileno()), os.fstat(err.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_rdev, a.st_ino, a.st_dev) == (b.st_rdev, b.st_ino, b.st_dev)


def _list(args: argparse.Namespace, out: TextIO) -> int:
    """--list: one line per profile chosen (JSON lines with --json: the profile files)."""
    import json
    from pathlib import Path

    from tlsprobe.probes.clients.profiles import profile_to_json
    from tlsprobe.probes.clients.run import choose_profiles
    from tlsprobe.report.escape import shown
    folder = Path(args.profiles_dir) if args.profiles_dir else None
    for p in choose_profiles(args.profiles, "--profiles", folder):
        if args.json:
            print(json.dumps(profile_to_json(p)), file=out)
        else:
            print(shown(f"{p.id:32} {p.label}; {p.source.kind.value}, {p.source.when}; "
                        f"{p.ja4}"), file=out)
    return EXIT_OK
