"""Probe one TLS server: send tlsprobe's own ClientHello and report what the server chose.

Lists take names (IANA or OpenSSL spelling) or hex codepoints, separated by ',' or ':'.
Every option is checked before connecting: a bad value is one `tlsprobe: error:` line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from tlsprobe.commands.common import (
    add_limit_arguments,
    add_sni_arguments,
    add_trust_arguments,
    seconds,
)
from tlsprobe.errors import EXIT_OK, UsageError, exit_code_for, os_error_text

if TYPE_CHECKING:
    from tlsprobe.commands.probe_quic import QuicProbe
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.engine.keylog import KeyLogAppender
    from tlsprobe.probes.probe import ProbeRun

# The parser is built without importing the engine, the registry or `cryptography` (that
# keeps `tlsprobe --help` and `--version` fast; tests/project/test_startup.py checks it): what the
# options need from those packages is imported when the command runs. The version codes
# (engine.config.TLS13 ...) are therefore written out here, the limits' defaults
# (engine.guards.Limits) in commands/common.py (scan takes them too); tests/project/
# test_startup.py checks that they match.
VERSION_FLAGS = (("tls1_3", 0x0304, "TLS 1.3"), ("tls1_2", 0x0303, "TLS 1.2"),
                 ("tls1_1", 0x0302, "TLS 1.1"), ("tls1", 0x0301, "TLS 1.0"),
                 ("ssl3", 0x0300, "SSL 3.0"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="HOST[:PORT]", help="server to probe (default port 443; "
                   "IPv6 as [::1]:4433)")
    g = p.add_argument_group("what the ClientHello offers")
    for flag, _, label in VERSION_FLAGS:
        g.add_argument(f"--{flag}", action="store_true", help=f"offer {label} (repeatable; "
                       "default TLS 1.3 and 1.2)")
    g.add_argument("--groups", metavar="LIST", help="supported groups in order, e.g. "
                   "X25519MLKEM768:x25519:P-256 or 0x001d,0x11ec (default "
                   "X25519MLKEM768,x25519,secp256r1,secp384r1)")
    g.add_argument("--key-shares", metavar="LIST", help="groups that get a TLS 1.3 key share "
                   "(default: the first group, plus the second when the first is post-quantum); "
                   "'none' sends an empty key_share. A group tlsprobe cannot compute (e.g. "
                   "sect163k1, an unknown hex id) gets a random placeholder share, useful to "
                   "test a server; a note on stderr says so")
    g.add_argument("--ciphers", metavar="LIST", help="TLS 1.2 and older cipher suites: IANA "
                   "names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), OpenSSL suite names "
                   "(ECDHE-RSA-AES128-GCM-SHA256) or hex ids (0xc02f); not OpenSSL "
                   "cipher-string keywords such as HIGH or !aNULL. Hex ids are sent as given")
    g.add_argument("--ciphersuites", metavar="LIST", help="TLS 1.3 cipher suites, spelt as "
                   "for --ciphers (e.g. TLS_AES_128_GCM_SHA256 or 0x1301)")
    g.add_argument("--sigalgs", metavar="LIST", help="signature_algorithms, e.g. "
                   "rsa_pss_rsae_sha256:ecdsa_secp256r1_sha256")
    add_sni_arguments(g)
    g.add_argument("--alpn", metavar="LIST", default=None, help="ALPN protocols (default "
                   "h2,http/1.1; '' for none); each 1 to 255 ASCII bytes")
    g.add_argument("--grease", action="store_true", help="add GREASE values as browsers do")
    h = p.add_argument_group("handshake and verification")
    h.add_argument("--first-flight-only", action="store_true", help="stop after the server's "
                   "first flight (TLS 1.2: ServerHelloDone; TLS 1.3: its Finished, decrypted "
                   "and verified) instead of completing the handshake")
    h.add_argument("--http-get", metavar="PATH", help="after the handshake send "
                   "'GET PATH HTTP/1.1' and report the response's status line (ALPN offers "
                   "http/1.1 unless --alpn is given)")
    from tlsprobe.commands.quic_option import add_quic_arguments
    add_quic_arguments(h)
    add_trust_arguments(h)
    from tlsprobe.commands.starttls_option import add_starttls_arguments
    add_starttls_arguments(h)
    o = p.add_argument_group("output and limits")
    o.add_argument("--msg", action="store_true", help="print every record in both directions "
                   "as `openssl s_client -msg` does, with decoded fields and their offsets "
                   "(on stderr with --json, so that stdout stays pure JSON)")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    from tlsprobe.commands.common import add_json_out_argument
    add_json_out_argument(o, "the result (with --timing: the timing report)")
    o.add_argument("--full", action="store_true", help="list every certificate and "
                   "subjectAltName (a terminal shows the first ones; piped output is whole)")
    o.add_argument("--keylog", metavar="FILE", help="append the session's secrets to FILE "
                   "in SSLKEYLOGFILE format (for Wireshark)")
    o.add_argument("--pcap-out", metavar="FILE", help="write the exchange as a pcap file "
                   "(synthesised TCP/IP packets around the real bytes)")
    o.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="connect and per-read timeout, > 0 (default 10; the whole probe is "
                   "limited to three times this)")
    o.add_argument("--total-timeout", type=seconds, metavar="SECONDS", help="limit for the "
                   "whole probe, from connect to verdict (default: 3 x --timeout)")
    add_limit_arguments(o, "past it the probe stops, exit 8")
    t = p.add_argument_group("handshake timing (tlsprobe HOST --timing)")
    t.add_argument("--timing", action="store_true", help="time N full handshakes per group "
                   "the server accepts and rank the groups by handshake cost. --tls1_3/--tls1_2 "
                   "and --groups choose what is timed (as --timing-versions/--timing-groups); "
                   "options that shape a single probe (--msg, --http-get, --ciphers, ...) "
                   "are refused with it")
    from tlsprobe.commands.timing import add_timing_arguments
    add_timing_arguments(t)


LIMIT_OPTIONS = ("max_message", "max_chain", "max_records", "max_bytes")


def placeholder_note(config: ClientConfig) -> str | None:
    """The note for key shares tlsprobe cannot compute (a random placeholder is sent)."""
    from tlsprobe import kex, registry
    groups = [g for g in config.share_groups()
              if not kex.is_computable(g) and not registry.is_grease(g)]
    names = ", ".join(registry.group_label(g) for g in groups)
    return (f"tlsprobe: note: no key can be computed here for {names}; a placeholder key "
            "share is sent (a server that selects it cannot complete the handshake)") \
        if groups else None


_NOT_WITH_TIMING = (("msg", "--msg"), ("http_get", "--http-get"),
                    ("first_flight_only", "--first-flight-only"), ("pcap_out", "--pcap-out"),
                    ("keylog", "--keylog"), ("cafile", "--cafile"), ("sigalgs", "--sigalgs"),
                    ("key_shares", "--key-shares"), ("alpn", "--alpn"), ("grease", "--grease"),
                    ("total_timeout", "--total-timeout"), ("tls1_1", "--tls1_1"),
                    ("tls1", "--tls1"), ("ssl3", "--ssl3")) + \
    tuple((name, "--" + name.replace("_", "-")) for name in LIMIT_OPTIONS)
_TIMING_ONLY = ("timing_runs", "timing_warmup", "timing_groups", "timing_versions",
                "timing_suites", "timing_timeout", "timing_confidence", "plot")


def timing_args(args: argparse.Namespace) -> argparse.Namespace:
    """`tlsprobe HOST --timing`: refuse what timing cannot honour, and map --tls1_3/--tls1_2
    and --groups onto --timing-versions/--timing-groups. Without --timing, refuse --timing-*."""
    if not args.timing:
        given = [n for n in _TIMING_ONLY if getattr(args, n, None) is not None]
        if given:
            option = "--" + given[0].replace("_", "-")
            raise UsageError(f"{option} only applies to handshake timing; add --timing")
        return args
    for name, option in _NOT_WITH_TIMING:
        if getattr(args, name, None) not in (None, False):
            raise UsageError(f"{option} cannot be used with --timing (timing completes plain "
                             "handshakes; probe without --timing for this)")
    for name, option in (("ciphers", "--ciphers"), ("ciphersuites", "--ciphersuites")):
        if getattr(args, name) is not None:
            raise UsageError(f"{option} cannot be used with --timing; use --timing-suites "
                             "LIST to time each suite in turn")
    flags = [label for flag, _, label in VERSION_FLAGS if getattr(args, flag, False)]
    if flags:
        if args.timing_versions is not None:
            raise UsageError("--tls1_3/--tls1_2 and --timing-versions both choose the versions "
                             "to time; give one of them")
        args.timing_versions = ",".join(label.split()[1] for label in flags)
    if args.groups is not None:
        if args.timing_groups is not None:
            raise UsageError("--groups and --timing-groups both choose the groups to time; "
                             "give one of them")
        args.timing_groups = args.groups
    return args


def _check_files(args: argparse.Namespace) -> None:
    """Fail before connecting when an output file cannot be written."""
    from tlsprobe.commands.common import check_json_out
    check_json_out(args)
    for option, path in (("--keylog", args.keylog), ("--pcap-out", args.pcap_out)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: directory {folder} does not exist")
        if os.path.isdir(path):
            raise UsageError(f"{option} {path}: is a directory")


def _write_outputs(args: argparse.Namespace, run_: ProbeRun, quic: QuicProbe | None,
                   keylog: KeyLogAppender | None = None) -> None:
    if args.json_out:
        from tlsprobe.commands.common import write_json_out
        write_json_out(args.json_out, [run_.result.to_json()])
    if args.keylog and not run_.keylog_lines and not run_.result.error:
        from tlsprobe.report.escape import shown
        print(f"tlsprobe: note: --keylog {shown(args.keylog)}: nothing written: the handshake "
              "stopped before any secret was derived (TLS 1.2 and older with "
              "--first-flight-only stop before the ClientKeyExchange)", file=sys.stderr)
    if args.keylog and run_.keylog_lines:
        from tlsprobe.engine.keylog import KeyLogAppender
        if keylog is None:
            keylog = KeyLogAppender(args.keylog)
        keylog(run_.keylog_lines)   # those not written as the handshake ended
        keylog.close()
        if keylog.error is not None:
            raise UsageError(f"--keylog {args.keylog}: {os_error_text(keylog.error)}")
    if args.pcap_out and quic is not None:   # the UDP datagrams (commands/probe_quic.py)
        try:
            quic.write_pcap(args.pcap_out)
        except OSError as exc:
            raise UsageError(f"--pcap-out {args.pcap_out}: {os_error_text(exc)}") from None
    elif args.pcap_out and run_.client_address and run_.server_address:
        from tlsprobe.capture.writer import write_connection_pcap
        try:
            write_connection_pcap(args.pcap_out, run_.client_address, run_.server_address,
                                  run_.segments, start=run_.started, end=run_.ended)
        except OSError as exc:
            raise UsageError(f"--pcap-out {args.pcap_out}: {os_error_text(exc)}") from None


def run(args: argparse.Namespace) -> int:
    # The total limit counts from the command line's start (cli sets `started`): imports,
    # the checks below, name resolution, the handshake and the checks of the server's
    # parameters are all inside it.
    from tlsprobe.requests.probe import ProbeRequest
    quic = None
    if getattr(args, "quic", False):   # issue 15: over QUIC (commands/probe_quic.py)
        from tlsprobe.commands.probe_quic import QuicProbe
        quic = QuicProbe(args)         # refuses what QUIC cannot honour
    elif getattr(args, "quic_version", None) is not None:
        raise UsageError("--quic-version needs --quic")
    args = timing_args(args)
    if args.timing:
        from tlsprobe.commands.timing import run_timing
        return run_timing(args.target, args)
    request = ProbeRequest.from_args(args)
    connect = None
    if quic is not None:
        from dataclasses import replace

        from tlsprobe.probes.quic import engine_limits
        limits = request.options().limits
        config, connect = quic.setup(request.config, request.timeout, limits)
        request = replace(request, config=config, limits=engine_limits(limits))
    _check_files(args)
    _hello_notes(request.config)
    if request.starttls_note is not None:
        print(request.starttls_note, file=sys.stderr)
    from tlsprobe.probes.probe import run_probe
    keylog = None
    if args.keylog:   # written as the handshake ends, before the close (QUIC too):
        from tlsprobe.engine.keylog import (
            KeyLogAppender,  # a capture beside us decrypts
        )
        from tlsprobe.net.recording import SECRETS
        keylog = KeyLogAppender(args.keylog)
        token = SECRETS.set(keylog)
    try:
        run_ = run_probe(request.target, request.options(annotate=args.msg), connect=connect)
    finally:
        if keylog is not None:
            SECRETS.reset(token)
    if quic is not None:
        run_ = quic.adjust(run_)
    return _report(args, run_, quic, keylog)


def _hello_notes(config: ClientConfig) -> None:
    """What the user's hello does that a server may not expect, said on stderr."""
    from tlsprobe.engine import config as cfg
    note = placeholder_note(config)
    if note:
        print(note, file=sys.stderr)
    bad_order = cfg.share_order_problem(config)
    if bad_order:   # the user's --key-shares: sent as asked, but said so
        print(f"tlsprobe: warning: --key-shares: {bad_order} (RFC 8446 section 4.2.8); sent "
              "as asked, a server may refuse it with illegal_parameter", file=sys.stderr)


def _report(args: argparse.Namespace, run_: ProbeRun, quic: QuicProbe | None,
            keylog: KeyLogAppender | None = None) -> int:
    """The trace (--msg), the result (table or JSON), the output files; the exit code."""
    from tlsprobe.report.escape import shown
    from tlsprobe.report.trace import TraceFormatter
    result = run_.result
    out = sys.stdout
    if args.msg and run_.preamble is not None:   # the plain text before the first record
        from tlsprobe.report.starttls import preamble_lines
        for line in preamble_lines(run_.preamble):
            print(line, file=sys.stderr if args.json else out)
    if args.msg and run_.events:  # nothing was exchanged (e.g. connection refused): no trace
        trace = sys.stderr if args.json else out   # stdout stays pure JSON
        if quic is not None:
            quic.print_packets(trace)
        for line in TraceFormatter().lines(run_.events):
            print(line, file=trace)
        print("---", file=trace)
    if args.json:
        print(result.to_json(), file=out)
    elif result.version is not None or not result.error:
        from tlsprobe.report.tables import render_probe
        render_probe(result, out, full=args.full or not out.isatty())
        if quic is not None:
            quic.print_summary(out)
    try:
        _write_outputs(args, run_, quic, keylog)
    except UsageError as exc:
        print(f"tlsprobe: error: {shown(str(exc))}", file=sys.stderr)
        if not result.error:
            return exc.exit_code
    if result.error:
        print(f"tlsprobe: {shown(result.error)}", file=sys.stderr)
        return exit_code_for(result.error_kind)
    return EXIT_OK
