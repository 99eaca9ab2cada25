"""Probe one TLS server: send tlsprobe's own ClientHello and report what the server chose.

Lists take names (IANA or OpenSSL spelling) or hex codepoints, separated by ',' or ':'.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from tlsprobe import registry
from tlsprobe.engine import config as cfg
from tlsprobe.engine.client import Limits
from tlsprobe.errors import (
    EXIT_ALERT,
    EXIT_NETWORK,
    EXIT_NOT_TLS,
    EXIT_OK,
    EXIT_PROTOCOL,
    UsageError,
)
from tlsprobe.net.tcp import parse_target

if TYPE_CHECKING:
    from tlsprobe.probes.probe import ProbeRun

EXIT_BY_KIND = {"network": EXIT_NETWORK, "not_tls": EXIT_NOT_TLS, "alert": EXIT_ALERT,
                "closed": EXIT_ALERT, "protocol": EXIT_PROTOCOL}

VERSION_FLAGS = (("tls1_3", cfg.TLS13, "TLS 1.3"), ("tls1_2", cfg.TLS12, "TLS 1.2"),
                 ("tls1_1", cfg.TLS11, "TLS 1.1"), ("tls1", cfg.TLS10, "TLS 1.0"),
                 ("ssl3", cfg.SSL30, "SSL 3.0"))


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
                   "'none' sends an empty key_share")
    g.add_argument("--ciphers", metavar="LIST", help="TLS 1.2 and older cipher suites "
                   "(OpenSSL or IANA names, or hex)")
    g.add_argument("--ciphersuites", metavar="LIST", help="TLS 1.3 cipher suites")
    g.add_argument("--sigalgs", metavar="LIST", help="signature_algorithms, e.g. "
                   "rsa_pss_rsae_sha256:ecdsa_secp256r1_sha256")
    g.add_argument("--sni", metavar="NAME", help="server_name to send (default: the host "
                   "name; none for IP addresses)")
    g.add_argument("--no-sni", action="store_true", help="send no server_name")
    g.add_argument("--alpn", metavar="LIST", default=None, help="ALPN protocols (default "
                   "h2,http/1.1; '' for none)")
    g.add_argument("--grease", action="store_true", help="add GREASE values as browsers do")
    h = p.add_argument_group("handshake and verification")
    h.add_argument("--first-flight-only", action="store_true", help="stop after the server's "
                   "first flight (TLS 1.2: ServerHelloDone; TLS 1.3: its Finished, decrypted "
                   "and verified) instead of completing the handshake")
    h.add_argument("--http-get", metavar="PATH", help="after the handshake send "
                   "'GET PATH HTTP/1.1' and report the response's status line (ALPN offers "
                   "http/1.1 unless --alpn is given)")
    h.add_argument("--cafile", metavar="FILE", help="trust anchors (PEM) for the certificate "
                   "check (default: the system bundle)")
    h.add_argument("--no-verify", action="store_true", help="do not check the certificate "
                   "chain and hostname")
    o = p.add_argument_group("output and limits")
    o.add_argument("--msg", action="store_true", help="print every record in both directions "
                   "as `openssl s_client -msg` does, with decoded fields and their offsets")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument("--keylog", metavar="FILE", help="append the session's secrets to FILE "
                   "in SSLKEYLOGFILE format (for Wireshark)")
    o.add_argument("--pcap-out", metavar="FILE", help="write the exchange as a pcap file "
                   "(synthesised TCP/IP packets around the real bytes)")
    o.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="connect and per-read timeout (default 10; the whole probe is limited "
                   "to three times this)")
    o.add_argument("--total-timeout", type=float, metavar="SECONDS", help="limit for the "
                   "whole probe, from connect to verdict (default: 3 x --timeout)")
    o.add_argument("--max-message", type=int, default=Limits.max_message, metavar="BYTES",
                   help=f"largest handshake message accepted (default {Limits.max_message})")
    o.add_argument("--max-chain", type=int, default=Limits.max_chain, metavar="N",
                   help=f"most certificates accepted in the server's chain (default "
                   f"{Limits.max_chain})")
    o.add_argument("--max-records", type=int, default=Limits.max_records, metavar="N",
                   help=f"most records read from the server (default {Limits.max_records})")
    o.add_argument("--max-bytes", type=int, default=Limits.max_bytes, metavar="BYTES",
                   help=f"most bytes read from the server (default {Limits.max_bytes})")
    t = p.add_argument_group("handshake timing (tlsprobe HOST --timing)")
    t.add_argument("--timing", action="store_true", help="time N full handshakes per group "
                   "the server accepts and rank the groups by handshake cost")
    from tlsprobe.commands.timing import add_timing_arguments
    add_timing_arguments(t)


def limits_from_args(args: argparse.Namespace) -> Limits:
    values = {"max_message": args.max_message, "max_chain": args.max_chain,
              "max_records": args.max_records, "max_bytes": args.max_bytes}
    for name, value in values.items():
        if value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.total_timeout is not None and args.total_timeout <= 0:
        raise UsageError("--total-timeout must be positive")
    return Limits(**values)


def _split(text: str) -> list[str]:
    return [t for t in text.replace(",", ":").split(":") if t.strip()]


def _parse_list(text: str, parse: Callable[[str], int], what: str) -> tuple[int, ...]:
    out = []
    for item in _split(text):
        try:
            out.append(parse(item.strip()))
        except ValueError as exc:
            raise UsageError(f"--{what}: {exc}") from None
    return tuple(out)


def config_from_args(args: argparse.Namespace, host: str) -> cfg.ClientConfig:
    kw: dict = {}
    versions = tuple(code for flag, code, _ in VERSION_FLAGS if getattr(args, flag, False))
    if versions:
        kw["versions"] = versions
    if args.groups is not None:
        kw["groups"] = _parse_list(args.groups, registry.parse_group, "groups")
    if args.key_shares is not None:
        kw["key_share_groups"] = () if args.key_shares.strip().lower() == "none" else \
            _parse_list(args.key_shares, registry.parse_group, "key-shares")
    if args.ciphers is not None:
        kw["cipher_suites_12"] = _parse_list(args.ciphers, registry.parse_suite, "ciphers")
    if args.ciphersuites is not None:
        kw["cipher_suites_13"] = _parse_list(args.ciphersuites, registry.parse_suite,
                                             "ciphersuites")
    if args.sigalgs is not None:
        kw["signature_algorithms"] = _parse_list(args.sigalgs, registry.parse_sigscheme,
                                                 "sigalgs")
    if args.alpn is not None:
        kw["alpn"] = tuple(_split(args.alpn))
    elif getattr(args, "http_get", None) is not None:
        kw["alpn"] = ("http/1.1",)  # the request is HTTP/1.1, so do not invite h2
    if args.grease:
        kw["grease"] = True
    if args.no_sni:
        sni = None
    elif args.sni is not None:
        sni = args.sni
    else:
        try:
            ipaddress.ip_address(host)
            sni = None
        except ValueError:
            sni = host
    config = cfg.ClientConfig(server_name=sni, **kw)
    if not config.cipher_suites():
        raise UsageError("no cipher suites to offer for the chosen versions")
    if config.key_share_groups:
        missing = [g for g in config.key_share_groups if g not in config.offered_groups()]
        if missing:
            raise UsageError(f"--key-shares: {registry.group_label(missing[0])} is not in "
                             "--groups")
    return config


def _check_files(args: argparse.Namespace) -> None:
    """Fail before connecting when an input or output file cannot be used."""
    if args.cafile is not None and not os.path.isfile(args.cafile):
        raise UsageError(f"--cafile {args.cafile}: no such file")
    for option, path in (("--keylog", args.keylog), ("--pcap-out", args.pcap_out)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: directory {folder} does not exist")
        if os.path.isdir(path):
            raise UsageError(f"{option} {path}: is a directory")
    if args.http_get is not None and args.first_flight_only:
        raise UsageError("--http-get needs a completed handshake (drop --first-flight-only)")


def _write_outputs(args: argparse.Namespace, run_: ProbeRun) -> None:
    if args.keylog and run_.keylog_lines:
        from tlsprobe.engine.keylog import KeyLogWriter
        try:
            with KeyLogWriter(args.keylog) as writer:
                writer.write_lines(run_.keylog_lines)
        except OSError as exc:
            raise UsageError(f"--keylog {args.keylog}: {exc.strerror or exc}") from None
    if args.pcap_out and run_.client_address and run_.server_address:
        from tlsprobe.capture.writer import write_connection_pcap
        try:
            write_connection_pcap(args.pcap_out, run_.client_address, run_.server_address,
                                  run_.segments, start=run_.started, end=run_.ended)
        except OSError as exc:
            raise UsageError(f"--pcap-out {args.pcap_out}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from tlsprobe.probes.probe import ProbeOptions, run_probe
    from tlsprobe.report.trace import TraceFormatter
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.timing:
        from tlsprobe.commands.timing import run_timing
        return run_timing(args.target, args)
    target = parse_target(args.target)
    config = config_from_args(args, target.host)
    _check_files(args)
    run_ = run_probe(target, ProbeOptions(
        config=config, timeout=args.timeout, annotate=args.msg,
        stop_after_first_flight=args.first_flight_only, http_get=args.http_get,
        verify=not args.no_verify, cafile=args.cafile, total_timeout=args.total_timeout,
        limits=limits_from_args(args)))
    result = run_.result
    out = sys.stdout
    if args.msg:
        for line in TraceFormatter().lines(run_.events):
            print(line, file=out)
        print("---", file=out)
    if args.json:
        print(result.to_json(), file=out)
    elif result.version is not None or not result.error:
        from tlsprobe.report.tables import render_probe
        render_probe(result, out)
    try:
        _write_outputs(args, run_)
    except UsageError as exc:
        print(f"tlsprobe: {exc}", file=sys.stderr)
        if not result.error:
            return exc.exit_code
    if result.error:
        print(f"tlsprobe: {result.error}", file=sys.stderr)
        return EXIT_BY_KIND.get(result.error_kind or "", EXIT_PROTOCOL)
    return EXIT_OK
