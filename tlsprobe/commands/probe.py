"""Probe one TLS server: send tlsprobe's own ClientHello and report what the server chose.

Lists take names (IANA or OpenSSL spelling) or hex codepoints, separated by ',' or ':'.
Every option is checked before connecting: a bad value is one `tlsprobe: error:` line, exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tlsprobe.commands.common import positive_int, seconds
from tlsprobe.errors import EXIT_OK, UsageError, exit_code_for

if TYPE_CHECKING:
    from tlsprobe.commands.probe_quic import QuicProbe
    from tlsprobe.engine.client import Limits
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.probes.probe import ProbeRun

# The parser is built without importing the engine, the registry or `cryptography` (that
# keeps `tlsprobe --help` and `--version` fast; tests/test_startup.py checks it): what the
# options need from those packages is imported when the command runs. The version codes
# (engine.config.TLS13 ...) and the limits' defaults (engine.guards.Limits) are therefore
# written out here; tests/test_startup.py checks that they match.
VERSION_FLAGS = (("tls1_3", 0x0304, "TLS 1.3"), ("tls1_2", 0x0303, "TLS 1.2"),
                 ("tls1_1", 0x0302, "TLS 1.1"), ("tls1", 0x0301, "TLS 1.0"),
                 ("ssl3", 0x0300, "SSL 3.0"))
LIMIT_DEFAULTS = {"max_message": 262144, "max_chain": 16, "max_records": 4096,
                  "max_bytes": 16 * 2 ** 20}


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
    g.add_argument("--sni", metavar="NAME", help="server_name to send (default: the host "
                   "name; none for IP addresses); 1 to 65535 bytes, no spaces")
    g.add_argument("--no-sni", action="store_true", help="send no server_name")
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
    h.add_argument("--cafile", metavar="FILE", help="trust anchors (PEM) for the certificate "
                   "check (default: the system bundle)")
    h.add_argument("--no-verify", action="store_true", help="do not check the certificate "
                   "chain and hostname")
    from tlsprobe.commands.starttls_option import add_starttls_arguments
    add_starttls_arguments(h)
    o = p.add_argument_group("output and limits")
    o.add_argument("--msg", action="store_true", help="print every record in both directions "
                   "as `openssl s_client -msg` does, with decoded fields and their offsets "
                   "(on stderr with --json, so that stdout stays pure JSON)")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
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
    o.add_argument("--max-message", type=positive_int, metavar="BYTES",
                   help="largest handshake message accepted (default "
                   f"{LIMIT_DEFAULTS['max_message']})")
    o.add_argument("--max-chain", type=positive_int, metavar="N",
                   help=f"most certificates accepted in the server's chain (default "
                   f"{LIMIT_DEFAULTS['max_chain']})")
    o.add_argument("--max-records", type=positive_int, metavar="N",
                   help="most records read from the server (default "
                   f"{LIMIT_DEFAULTS['max_records']})")
    o.add_argument("--max-bytes", type=positive_int, metavar="BYTES",
                   help="most bytes read from the server (default "
                   f"{LIMIT_DEFAULTS['max_bytes']})")
    t = p.add_argument_group("handshake timing (tlsprobe HOST --timing)")
    t.add_argument("--timing", action="store_true", help="time N full handshakes per group "
                   "the server accepts and rank the groups by handshake cost. --tls1_3/--tls1_2 "
                   "and --groups choose what is timed (as --timing-versions/--timing-groups); "
                   "options that shape a single probe (--msg, --http-get, --ciphers, ...) "
                   "are refused with it")
    from tlsprobe.commands.timing import add_timing_arguments
    add_timing_arguments(t)


DEFAULT_TIMEOUT = 10.0
LIMIT_OPTIONS = ("max_message", "max_chain", "max_records", "max_bytes")
#: OpenSSL cipher-string keywords (and operators) that are not suite names
_CIPHER_KEYWORDS = frozenset(re.split(r"\s+", (
    "ALL COMPLEMENTOFALL COMPLEMENTOFDEFAULT DEFAULT HIGH MEDIUM LOW EXPORT EXPORT40 EXPORT56 "
    "NULL ENULL ANULL KRSA ARSA RSA KDHE KEDH DH DHE EDH ADH KEECDH KECDHE ECDH EECDH ECDHE "
    "AECDH ADSS DSS ADH AECDSA ECDSA TLSV1.2 TLSV1.0 TLSV1 SSLV3 AES128 AES256 AES AESGCM AESCCM "
    "AESCCM8 ARIA128 ARIA256 ARIA ARIAGCM CAMELLIA128 CAMELLIA256 CAMELLIA CHACHA20 3DES DES RC4 "
    "RC2 IDEA SEED MD5 SHA1 SHA SHA256 SHA384 KGOST AGOST GOST94 GOST89MAC PSK KPSK KECDHEPSK "
    "KDHEPSK KRSAPSK APSK SRP KSRP ASRP SUITEB128 SUITEB128ONLY SUITEB192 CBC FIPS")))


def limits_from_args(args: argparse.Namespace) -> Limits:
    from tlsprobe.engine.client import Limits
    values = {name: getattr(args, name, None) for name in LIMIT_OPTIONS}
    for name, value in values.items():
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.total_timeout is not None and args.total_timeout <= 0:
        raise UsageError("--total-timeout must be positive")
    return Limits(**{k: v for k, v in values.items() if v is not None})


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.replace(",", ":").split(":") if t.strip()]


def _parse_list(text: str, parse: Callable[[str], int], what: str,
                example: str) -> tuple[int, ...]:
    out = []
    for item in _split(text):
        try:
            out.append(parse(item))
        except ValueError as exc:
            raise UsageError(f"--{what}: {exc}") from None
    if not out:
        raise UsageError(f"--{what}: empty list; give at least one, e.g. --{what} {example}")
    return tuple(out)


def _is_keyword(item: str) -> bool:
    return (item[:1] in "!+-@" or "+" in item
            or item.upper() in _CIPHER_KEYWORDS or item.upper().startswith("@SECLEVEL"))


def _parse_suites(text: str, option: str, tls13: bool) -> tuple[int, ...]:
    """--ciphers (TLS 1.2 and older) or --ciphersuites (TLS 1.3): suite names or hex ids.

    A suite named in the wrong list is refused (hex ids are sent as given, to test servers)."""
    from tlsprobe import registry
    other = "--ciphers" if tls13 else "--ciphersuites"
    example = "TLS_AES_128_GCM_SHA256" if tls13 else "ECDHE-RSA-AES128-GCM-SHA256"
    out = []
    for item in _split(text):
        try:
            code = registry.parse_suite(item)
        except ValueError as exc:
            if _is_keyword(item):
                raise UsageError(f"{option}: {item!r} is an OpenSSL cipher-string keyword; "
                                 "tlsprobe takes suite names only (IANA or OpenSSL, e.g. "
                                 f"{example}) or hex ids, separated by ':'") from None
            raise UsageError(f"{option}: {exc}") from None
        info = registry.cipher_suite(code)
        if info is not None and not item.lower().startswith("0x") and \
                info.is_tls13 != tls13 and not (info.is_scsv and not tls13):
            kind = "a TLS 1.3" if info.is_tls13 else "a TLS 1.2"
            raise UsageError(f"{option}: {info.name} is {kind} cipher suite; give it with "
                             f"{other} (or as hex {code:#06x} to send it here anyway)")
        out.append(code)
    if not out:
        raise UsageError(f"{option}: empty list; give at least one suite, e.g. "
                         f"{option} {example}")
    return tuple(out)


def _alpn(text: str) -> tuple[str, ...]:
    """ALPN protocol ids: printable ASCII, 1 to 255 bytes each; '' offers none."""
    protocols = tuple(_split(text))
    for proto in protocols:
        if not proto.isascii() or not proto.isprintable() or " " in proto:
            raise UsageError(f"--alpn: {proto[:40]!r} is not a printable ASCII protocol id "
                             "(e.g. h2, http/1.1)")
        if len(proto) > 255:
            raise UsageError(f"--alpn: a protocol id is at most 255 bytes; one has "
                             f"{len(proto)}")
    if sum(1 + len(p) for p in protocols) > 0xFFFF - 2:
        raise UsageError("--alpn: the list is longer than an ALPN extension can hold "
                         "(65533 bytes)")
    return protocols


def config_from_args(args: argparse.Namespace, host: str) -> ClientConfig:
    from tlsprobe import registry
    from tlsprobe.engine import config as cfg
    from tlsprobe.wire.buffer import DecodeError
    kw: dict[str, Any] = {}   # ClientConfig keyword arguments
    versions = tuple(code for flag, code, _ in VERSION_FLAGS if getattr(args, flag, False))
    if versions:
        kw["versions"] = versions
    if args.groups is not None:
        kw["groups"] = _parse_list(args.groups, registry.parse_group, "groups", "x25519:P-256")
    if args.key_shares is not None:
        kw["key_share_groups"] = () if args.key_shares.strip().lower() == "none" else \
            _parse_list(args.key_shares, registry.parse_group, "key-shares", "x25519 (or none)")
    if args.ciphers is not None:
        kw["cipher_suites_12"] = _parse_suites(args.ciphers, "--ciphers", tls13=False)
    if args.ciphersuites is not None:
        kw["cipher_suites_13"] = _parse_suites(args.ciphersuites, "--ciphersuites", tls13=True)
    if args.sigalgs is not None:
        kw["signature_algorithms"] = _parse_list(args.sigalgs, registry.parse_sigscheme,
                                                 "sigalgs", "rsa_pss_rsae_sha256")
    if args.alpn is not None:
        kw["alpn"] = _alpn(args.alpn)
    elif getattr(args, "http_get", None) is not None:
        kw["alpn"] = ("http/1.1",)  # the request is HTTP/1.1, so do not invite h2
    kw["grease"] = bool(args.grease)
    if args.no_sni and args.sni is not None:
        raise UsageError("--sni and --no-sni contradict each other; give one of them")
    if args.no_sni:
        sni = None
    elif args.sni is not None:
        sni = cfg.parse_server_name(args.sni)
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
    try:
        cfg.build_client_hello(config).hello.serialize()
    except (ValueError, OverflowError, DecodeError) as exc:
        raise UsageError(f"the ClientHello cannot be encoded ({exc}); shorten --sni, --alpn "
                         "or the lists") from None
    return config


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
    """Fail before connecting when an input or output file cannot be used."""
    if args.cafile is not None:   # its contents matter only when the chain is checked
        from tlsprobe.engine.chain import check_cafile
        check_cafile(args.cafile, contents=not args.no_verify)
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


def _write_outputs(args: argparse.Namespace, run_: ProbeRun, quic: QuicProbe | None) -> None:
    if args.keylog and run_.keylog_lines:
        from tlsprobe.engine.keylog import KeyLogWriter
        try:
            with KeyLogWriter(args.keylog) as writer:
                writer.write_lines(run_.keylog_lines)
        except OSError as exc:
            raise UsageError(f"--keylog {args.keylog}: {exc.strerror or exc}") from None
    if args.pcap_out and quic is not None:   # the UDP datagrams (commands/probe_quic.py)
        try:
            quic.write_pcap(args.pcap_out)
        except OSError as exc:
            raise UsageError(f"--pcap-out {args.pcap_out}: {exc.strerror or exc}") from None
    elif args.pcap_out and run_.client_address and run_.server_address:
        from tlsprobe.capture.writer import write_connection_pcap
        try:
            write_connection_pcap(args.pcap_out, run_.client_address, run_.server_address,
                                  run_.segments, start=run_.started, end=run_.ended)
        except OSError as exc:
            raise UsageError(f"--pcap-out {args.pcap_out}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    # The total limit counts from the command line's start (cli sets `started`): imports,
    # the checks below, name resolution, the handshake and the checks of the server's
    # parameters are all inside it.
    started = getattr(args, "started", None) or time.monotonic()
    from tlsprobe.engine import config as cfg
    from tlsprobe.net.tcp import parse_target
    from tlsprobe.probes.probe import ProbeOptions, run_probe
    from tlsprobe.report.escape import shown
    from tlsprobe.report.trace import TraceFormatter
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
    timeout = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT
    target = parse_target(args.target)
    config = config_from_args(args, target.host)
    limits = limits_from_args(args)
    connect = None
    if quic is not None:
        config, connect = quic.setup(config, timeout)
    _check_files(args)
    note = placeholder_note(config)
    if note:
        print(note, file=sys.stderr)
    bad_order = cfg.share_order_problem(config)
    if bad_order:   # the user's --key-shares: sent as asked, but said so
        print(f"tlsprobe: warning: --key-shares: {bad_order} (RFC 8446 section 4.2.8); sent "
              "as asked, a server may refuse it with illegal_parameter", file=sys.stderr)
    from tlsprobe.commands.starttls_option import spec_for
    starttls = spec_for(args, target)
    run_ = run_probe(target, ProbeOptions(
        config=config, timeout=timeout, annotate=args.msg,
        stop_after_first_flight=args.first_flight_only, http_get=args.http_get,
        verify=not args.no_verify, cafile=args.cafile, total_timeout=args.total_timeout,
        limits=limits, deadline=started + (args.total_timeout or 3 * timeout),
        starttls=starttls), connect=connect)
    if quic is not None:
        run_ = quic.adjust(run_)
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
        _write_outputs(args, run_, quic)
    except UsageError as exc:
        print(f"tlsprobe: error: {shown(str(exc))}", file=sys.stderr)
        if not result.error:
            return exc.exit_code
    if result.error:
        print(f"tlsprobe: {shown(result.error)}", file=sys.stderr)
        return exit_code_for(result.error_kind)
    return EXIT_OK
