"""What a probe's ClientHello offers, as its caller gave it, and the one check that turns it
into an `engine.config.ClientConfig` (names or codepoints -> codepoints, the suites of the
right list, ALPN ids, the server_name, a key share for an offered group, a hello that can be
encoded). The command line's `tlsprobe HOST` and the API's `probe()` both end here."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.names import Names

if TYPE_CHECKING:
    from tlsprobe.engine.config import ClientConfig

#: a list as given: names or codepoints, or (the command line's text, or one name) a str
#: whose items are separated by ',' or ':'
Items = Sequence[str | int] | str

#: OpenSSL cipher-string keywords (and operators) that are not suite names
_CIPHER_KEYWORDS = frozenset(re.split(r"\s+", (
    "ALL COMPLEMENTOFALL COMPLEMENTOFDEFAULT DEFAULT HIGH MEDIUM LOW EXPORT EXPORT40 EXPORT56 "
    "NULL ENULL ANULL KRSA ARSA RSA KDHE KEDH DH DHE EDH ADH KEECDH KECDHE ECDH EECDH ECDHE "
    "AECDH ADSS DSS ADH AECDSA ECDSA TLSV1.2 TLSV1.0 TLSV1 SSLV3 AES128 AES256 AES AESGCM AESCCM "
    "AESCCM8 ARIA128 ARIA256 ARIA ARIAGCM CAMELLIA128 CAMELLIA256 CAMELLIA CHACHA20 3DES DES RC4 "
    "RC2 IDEA SEED MD5 SHA1 SHA SHA256 SHA384 KGOST AGOST GOST94 GOST89MAC PSK KPSK KECDHEPSK "
    "KDHEPSK KRSAPSK APSK SRP KSRP ASRP SUITEB128 SUITEB128ONLY SUITEB192 CBC FIPS")))


@dataclass(frozen=True)
class HelloSpec:
    """What the ClientHello offers, as given (None: the command line's default)."""

    versions: Items | None = None
    groups: Items | None = None
    key_shares: Items | None = None      # the word "none" or an empty list: no key share
    ciphers: Items | None = None
    ciphersuites: Items | None = None
    sigalgs: Items | None = None
    alpn: Sequence[str] | str | None = None   # '' or []: no ALPN
    server_name: str | None = None
    send_sni: bool = True
    grease: bool = False


def split(text: str) -> list[str]:
    """The items of a list written as text: separated by ',' or ':', blanks dropped."""
    return [t.strip() for t in text.replace(",", ":").split(":") if t.strip()]


#: IANA's spelling of a cipher suite, its two bytes: "0x13,0x01"
_SUITE_PAIR = re.compile(r"(?<!\w)0x([0-9a-f]{2})\s*,\s*0x([0-9a-f]{2})(?!\w)", re.IGNORECASE)


def split_suites(text: str) -> list[str]:
    """The items of a cipher suite list written as text: as `split`, but IANA's two-byte
    spelling "0x13,0x01" is the one suite 0x1301, not the suites 0x0013 and 0x0001."""
    return split(_SUITE_PAIR.sub(r"0x\1\2", text))


def _items(given: Items) -> list[str | int]:
    return list(split(given)) if isinstance(given, str) else list(given)


def once(items: Sequence[tuple[str | int, object]], field: str, names: Names) -> None:
    """Each value of a list once: a value given twice (`x25519,x25519`, or `x25519,0x001d`,
    one group in two spellings) is a UsageError naming it. RFC 8446 4.2.8 forbids two key
    shares for one group; in the other lists a repeat offers nothing more, and servers may
    refuse it or pick it twice: most likely a slip."""
    seen: dict[object, str | int] = {}
    for item, value in items:
        if value in seen:
            first = seen[value]
            same = f"{item!r} is given twice" if first == item else \
                f"{item!r} repeats {first!r}"
            code = f" ({value:#06x})" if isinstance(value, int) else ""
            raise UsageError(f"{names(field)}: {same}{code}; give each once")
        seen[value] = item


def codes(given: Items, parse: Callable[[str], int], field: str, names: Names,
          empty_ok: bool = False) -> tuple[int, ...]:
    """Names (parsed by `parse`) or 16-bit codepoints -> codepoints, each once; a bad one, a
    repeated one, or an empty list, is a UsageError naming the input."""
    out: list[tuple[str | int, int]] = []
    for item in _items(given):
        if isinstance(item, int):
            if not 0 <= item <= 0xFFFF:
                raise UsageError(f"{names(field)}: {item} is not a 16-bit codepoint")
            out.append((item, item))
            continue
        try:
            out.append((item, parse(item)))
        except ValueError as exc:
            raise UsageError(f"{names(field)}: {exc}") from None
    once(out, field, names)
    if not out and not empty_ok:
        raise UsageError(f"{names(field)}: empty list; give at least one, e.g. "
                         f"{names.example(field)}")
    return tuple(code for _, code in out)


def _is_keyword(item: str) -> bool:
    return (item[:1] in "!+-@" or "+" in item
            or item.upper() in _CIPHER_KEYWORDS or item.upper().startswith("@SECLEVEL"))


def suites(given: Items, field: str, names: Names) -> tuple[int, ...]:
    """`ciphers` (TLS 1.2 and older) or `ciphersuites` (TLS 1.3): suite names or codepoints.
    A suite named in the wrong list is refused (hex ids and ints are sent as given, to test
    servers); an OpenSSL cipher-string keyword is told apart from an unknown name."""
    from tlsprobe import registry
    tls13 = field == "ciphersuites"
    option, other = names(field), names("ciphers" if tls13 else "ciphersuites")
    example = "TLS_AES_128_GCM_SHA256" if tls13 else "ECDHE-RSA-AES128-GCM-SHA256"
    out: list[tuple[str | int, int]] = []
    for item in split_suites(given) if isinstance(given, str) else list(given):
        if isinstance(item, int):
            out.extend((item, c) for c in codes([item], registry.parse_suite, field, names))
            continue
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
        out.append((item, code))
    once(out, field, names)
    if not out:
        raise UsageError(f"{option}: empty list; give at least one suite, e.g. "
                         f"{names.example(field)}")
    return tuple(code for _, code in out)


def alpn(given: Sequence[str] | str, names: Names) -> tuple[str, ...]:
    """ALPN protocol ids: printable ASCII, 1 to 255 bytes each, each once; '' or []
    offers none."""
    protocols = tuple(split(given)) if isinstance(given, str) else tuple(given)
    option = names("alpn")
    if isinstance(given, str) and given.strip() and not protocols:   # ',' or ':': a slip
        raise UsageError(f"{option}: empty list {given!r}; give at least one protocol id, "
                         "e.g. h2,http/1.1 (or '' to offer none)")
    for proto in protocols:
        if not proto or not proto.isascii() or not proto.isprintable() or " " in proto:
            raise UsageError(f"{option}: {proto[:40]!r} is not a printable ASCII protocol id "
                             "(e.g. h2, http/1.1)")
        if len(proto) > 255:
            raise UsageError(f"{option}: a protocol id is at most 255 bytes; one has "
                             f"{len(proto)}")
    once([(p, p) for p in protocols], "alpn", names)
    if sum(1 + len(p) for p in protocols) > 0xFFFF - 2:
        raise UsageError(f"{option}: the list is longer than an ALPN extension can hold "
                         "(65533 bytes)")
    return protocols


def server_name(hello: HelloSpec, host: str, names: Names) -> str | None:
    """The server_name to send: the one given (checked), else the host name (none for an
    address); None when SNI is off."""
    from tlsprobe.engine.config import parse_server_name
    if not hello.send_sni:
        if hello.server_name is not None:
            raise UsageError(f"{names('sni')} and {names('no_sni')} contradict each other; "
                             "give one of them")
        return None
    if hello.server_name is not None:
        return parse_server_name(hello.server_name, names("sni"))
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host


def _version(item: str) -> int:
    from tlsprobe.offline.filters import parse_version
    return parse_version(item)


def _key_shares(given: Items, names: Names) -> tuple[int, ...]:
    from tlsprobe import registry
    if isinstance(given, str) and given.strip().lower() == "none":
        return ()
    return codes(given, registry.parse_group, "key_shares", names,
                 empty_ok=not isinstance(given, str))


def client_config(hello: HelloSpec, host: str, names: Names) -> ClientConfig:
    """The ClientConfig for `hello` to `host`, with the probe's defaults, or a UsageError
    naming the input at fault."""
    from tlsprobe import registry
    from tlsprobe.engine.config import ClientConfig
    d = ClientConfig()   # the defaults of what is not given
    h = hello

    def listed(given: Items | None, field: str, parse: Callable[[str], int]
               ) -> tuple[int, ...] | None:
        return None if given is None else codes(given, parse, field, names)

    versions = listed(h.versions, "versions", _version)
    groups = listed(h.groups, "groups", registry.parse_group)
    shares = None if h.key_shares is None else _key_shares(h.key_shares, names)
    suites12 = None if h.ciphers is None else suites(h.ciphers, "ciphers", names)
    suites13 = None if h.ciphersuites is None else suites(h.ciphersuites, "ciphersuites", names)
    sigalgs = listed(h.sigalgs, "sigalgs", registry.parse_sigscheme)
    protocols = None if h.alpn is None else alpn(h.alpn, names)
    config = ClientConfig(
        server_name=server_name(h, host, names), versions=versions or d.versions,
        groups=d.groups if groups is None else groups, key_share_groups=shares,
        cipher_suites_12=d.cipher_suites_12 if suites12 is None else suites12,
        cipher_suites_13=d.cipher_suites_13 if suites13 is None else suites13,
        signature_algorithms=d.signature_algorithms if sigalgs is None else sigalgs,
        alpn=d.alpn if protocols is None else protocols, grease=h.grease)
    _without_effect(h, config, names)
    return checked_config(config, names)


def _without_effect(hello: HelloSpec, config: ClientConfig, names: Names) -> None:
    """A list given for protocol versions the hello does not offer would be left out of it
    without a word (TLS 1.2 suites in a TLS 1.3-only hello, a key share in a TLS 1.2 one,
    only TLS 1.3 groups in a TLS 1.2 one): a UsageError names it."""
    from tlsprobe import registry
    from tlsprobe.engine.config import TLS12
    offered = ", ".join(registry.version_name(v) for v in config.versions)
    tls13, legacy = config.offers_tls13, any(v <= TLS12 for v in config.versions)
    unused = [field for field, given, needs in (
        ("ciphers", hello.ciphers, legacy), ("ciphersuites", hello.ciphersuites, tls13),
        ("key_shares", config.key_share_groups or None, tls13),   # 'none' drops nothing
        ("sigalgs", hello.sigalgs, tls13 or config.max_legacy >= TLS12)) if given is not None
        and not needs]
    needed = {"ciphers": "TLS 1.2 and older", "ciphersuites": "TLS 1.3",
              "key_shares": "TLS 1.3", "sigalgs": "TLS 1.2 and 1.3"}
    if unused:
        field = unused[0]
        raise UsageError(f"{names(field)} is for {needed[field]}, which the hello does not "
                         f"offer (it offers {offered}): offer it ({names('versions')}) or "
                         f"leave {names(field)} out")
    if hello.groups is not None and config.groups and not config.offered_groups():
        first = registry.group_label(config.groups[0])
        raise UsageError(f"{names('groups')}: only TLS 1.3 groups ({first}"
                         f"{', ...' if len(config.groups) > 1 else ''}), which the hello does "
                         f"not offer (it offers {offered}): offer TLS 1.3 "
                         f"({names('versions')}) or give a group {offered} can use")


def checked_config(config: ClientConfig, names: Names) -> ClientConfig:
    """`config` when a hello can be made of it: suites for its versions, key shares for
    offered groups, a hello that fits its length fields."""
    from tlsprobe import registry
    from tlsprobe.engine import config as cfg
    from tlsprobe.wire.buffer import DecodeError
    if not config.cipher_suites():
        raise UsageError("no cipher suites to offer for the chosen versions")
    if config.key_share_groups:
        missing = [g for g in config.key_share_groups if g not in config.offered_groups()]
        if missing:
            raise UsageError(f"{names('key_shares')}: {registry.group_label(missing[0])} is "
                             f"not in {names('groups')}")
    try:
        cfg.build_client_hello(config).hello.serialize()
    except (ValueError, OverflowError, DecodeError) as exc:
        raise UsageError(f"the ClientHello cannot be encoded ({exc}); shorten "
                         f"{names('sni')}, {names('alpn')} or the lists") from None
    return config


__all__ = [
    "HelloSpec",
    "Items",
    "alpn",
    "checked_config",
    "client_config",
    "codes",
    "once",
    "server_name",
    "split",
    "split_suites",
    "suites",
]
