#!/usr/bin/env python3
"""tlslite-ng (pure Python) TLS test server; ML-KEM hybrids need kyber-py.

Groups map to HandshakeSettings.eccCurves / dhGroups. --ciphers is a comma list of tlslite
cipherNames (aes128gcm,aes256gcm,chacha20-poly1305,...); --ciphersuites may carry key
exchange names as "kx:ecdhe_rsa,dhe_rsa,rsa". --dhparam sets the TLS 1.2 DHE group used when
the client lists no RFC 7919 group (those are negotiated from --groups).
The server-side group is only known for TLS 1.3 (tlslite does not record it for 1.2).
"""
import warnings

from _common import ConnLog, http_reply, parse_args, serve_forever  # runs as a script: its folder is on the path

warnings.simplefilter("ignore", DeprecationWarning)  # tlslite imports asyncore
from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey  # noqa: E402
from tlslite.constants import GroupName  # noqa: E402

args = parse_args(__doc__ or "")
VERSION = {"tls1_0": (3, 1), "tls1_1": (3, 2), "tls1_2": (3, 3), "tls1_3": (3, 4)}
chain = X509CertChain()
with open(args.chain_file) as fh:
    chain.parsePemList(fh.read())
with open(args.key_file) as fh:
    key = parsePEMKey(fh.read(), private=True)
settings = HandshakeSettings()
settings.minVersion = VERSION[args.min_version]
settings.maxVersion = VERSION[args.max_version]
# tlslite picks from `versions` when the client sends supported_versions; maxVersion alone
# only removes TLS 1.3 from it, so a TLS 1.0-only server would still answer TLS 1.2.
settings.versions = [v for v in sorted(VERSION.values(), reverse=True)
                     if settings.minVersion <= v <= settings.maxVersion]
if (3, 3) not in settings.versions:  # TLS 1.3 only: drop default curves 1.3 forbids
    from tlslite.handshakesettings import TLS13_PERMITTED_GROUPS

    settings.eccCurves = [g for g in settings.eccCurves if g in TLS13_PERMITTED_GROUPS]
if args.groups:
    names = args.groups.split(":")
    settings.eccCurves = [g for g in names if not g.startswith("ffdhe")]
    settings.dhGroups = [g for g in names if g.startswith("ffdhe")]
    settings.keyShares = []
    if settings.eccCurves:
        settings.defaultCurve = settings.eccCurves[0]
if args.ciphers:
    settings.cipherNames = args.ciphers.split(",")
if args.ciphersuites and args.ciphersuites.startswith("kx:"):
    settings.keyExchangeNames = args.ciphersuites[3:].split(",")
if args.dhparam:
    from cryptography.hazmat.primitives.serialization import load_pem_parameters

    with open(args.dhparam, "rb") as fh:
        numbers = load_pem_parameters(fh.read()).parameter_numbers()  # type: ignore[union-attr]
    settings.dhParams = (numbers.g, numbers.p)
settings.ticketKeys = []
settings = settings.validate()
log = ConnLog(args.log)
log.write(f"start tlslite eccCurves={settings.eccCurves} dhGroups={settings.dhGroups}")


def handler(sock, addr):
    conn = TLSConnection(sock)
    try:
        # alpn: tlslite-ng's TLS 1.3 server without a protocol list fails on any client that
        # offers ALPN (TypeError on `i in None`, tlsconnection.py _serverTLS13Handshake)
        conn.handshakeServer(certChain=chain, privateKey=key, settings=settings,
                             alpn=[b"http/1.1"])
    except Exception as exc:
        log.write(f"{addr[0]} handshake-fail {exc!r}")
        return
    group = GroupName.toRepr(conn.ecdhCurve) if conn.ecdhCurve is not None else "?"
    info = f"tlslite {conn.version} {conn.getCipherName()} group={group}"
    log.write(f"{addr[0]} ok {info}")
    try:
        conn.read(max=4096)
        conn.write(http_reply(info))
        conn.close()
    except Exception:
        pass


serve_forever(args.host, args.port, handler)
